// .npy reading and writing: round trip, and every malformed file gets one clear error.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/errors.hpp"
#include "common/harness.hpp"
#include "common/npy.hpp"

namespace {

std::string temp_path(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "flashsteps_test_npy";
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

// A .npy file by hand: header dict text (padded as NumPy does) followed by `data`.
void write_raw(const std::string& path, const std::string& dict, const std::string& data,
               int major = 1) {
  std::string header = dict;
  const std::size_t prefix = major == 1 ? 10 : 12;
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY", 6);
  out.put(static_cast<char>(major));
  out.put(0);
  const std::size_t n = header.size();
  out.put(static_cast<char>(n & 0xFF));
  out.put(static_cast<char>((n >> 8) & 0xFF));
  if (major != 1) {
    out.put(0);
    out.put(0);
  }
  out << header << data;
}

std::string floats(std::size_t n) { return std::string(n * sizeof(float), '\0'); }

}  // namespace

TEST_CASE("write then read gives back the same shape and values", "[npy]") {
  const std::string path = temp_path("roundtrip.npy");
  const std::vector<std::int64_t> shape{2, 3, 5, 4};
  std::vector<float> data(120);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = 0.5f * float(i) - 7.25f;
  fs::write_npy(path, data.data(), shape);
  const fs::NpyArray back = fs::read_npy(path);
  REQUIRE(back.shape == shape);
  REQUIRE(back.data == data);
  REQUIRE_FALSE(std::filesystem::exists(path + ".partial"));
}

TEST_CASE("the header we write is the one NumPy writes", "[npy]") {
  const std::string path = temp_path("header.npy");
  const float x[3] = {1, 2, 3};
  fs::write_npy(path, x, {3});
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  REQUIRE(bytes.size() == 128 + 12);  // header padded to 64-byte alignment
  REQUIRE(bytes.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
  REQUIRE(bytes.substr(10, 57) == "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }");
  REQUIRE(bytes[127] == '\n');
}

TEST_CASE("version 2.0 headers are read too", "[npy]") {
  const std::string path = temp_path("v2.npy");
  write_raw(path, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", floats(4), 2);
  REQUIRE(fs::read_npy(path).shape == std::vector<std::int64_t>{2, 2});
}

TEST_CASE("malformed files are rejected with a message naming the problem", "[npy]") {
  const std::string path = temp_path("bad.npy");
  struct Case {
    const char* what;
    std::string dict, data, message;
  };
  const Case cases[] = {
      {"float64", "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", floats(4), "is not float32"},
      {"int32", "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", floats(2), "is not float32"},
      {"big-endian", "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", floats(2), "is not float32"},
      {"Fortran order", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", floats(4), "Fortran order"},
      {"truncated data", "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 4), }", floats(15), "truncated"},
      {"extra data", "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", floats(3), "bytes more than"},
      {"no shape", "{'descr': '<f4', 'fortran_order': False, }", floats(1), "no 'shape'"},
      {"bad shape", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", floats(2), "malformed shape"},
      {"negative dim", "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", "", "malformed shape"},
      {"absurd shape", "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000, 1000000), }", "", "absurd shape"},
  };
  for (const auto& c : cases) {
    SECTION(c.what) {
      write_raw(path, c.dict, c.data);
      REQUIRE_THROWS_WITH(fs::read_npy(path), Catch::Contains(c.message) && Catch::Contains(path));
    }
  }
  SECTION("not a .npy file at all") {
    std::ofstream(path) << "hello, world";
    REQUIRE_THROWS_WITH(fs::read_npy(path), Catch::Contains("bad magic"));
  }
  SECTION("empty file") {
    std::ofstream(path).close();
    REQUIRE_THROWS_WITH(fs::read_npy(path), Catch::Contains("bad magic"));
  }
  SECTION("truncated header") {
    std::ofstream out(path, std::ios::binary);
    out.write("\x93NUMPY\x01\x00\x76\x00{'descr'", 17);
    out.close();
    REQUIRE_THROWS_WITH(fs::read_npy(path), Catch::Contains("truncated header"));
  }
  SECTION("missing file") {
    REQUIRE_THROWS_WITH(fs::read_npy(temp_path("missing.npy")), Catch::Contains("cannot open"));
  }
}

TEST_CASE("loading a problem checks q, k, v, dO against each other", "[npy]") {
  const auto dir = std::filesystem::temp_directory_path() / "flashsteps_test_load";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::vector<float> t(2 * 3 * 4 * 5, 1.0f);
  for (const char* name : {"q.npy", "k.npy", "v.npy", "do.npy"})
    fs::write_npy((dir / name).string(), t.data(), {2, 3, 4, 5});

  const fs::HostProblem p = fs::load_problem(dir.string(), true);
  REQUIRE(p.shape.B == 2);
  REQUIRE(p.shape.H == 3);
  REQUIRE(p.shape.N == 4);
  REQUIRE(p.shape.d == 5);

  SECTION("k and v of their own length and heads (Nk, Hkv), but not of another batch or head dimension") {
    const std::vector<float> kv(2 * 1 * 6 * 5, 1.0f);
    fs::write_npy((dir / "k.npy").string(), kv.data(), {2, 1, 6, 5});
    fs::write_npy((dir / "v.npy").string(), kv.data(), {2, 1, 6, 5});
    const fs::HostProblem g = fs::load_problem(dir.string(), false);
    REQUIRE((g.shape.keys() == 6 && g.shape.kv_heads() == 1 && g.k.size() == kv.size()));
    fs::write_npy((dir / "v.npy").string(), kv.data(), {2, 1, 5, 6});
    REQUIRE_THROWS_WITH(fs::load_problem(dir.string(), false), Catch::Contains("differs from k.npy"));
    fs::write_npy((dir / "k.npy").string(), t.data(), {2, 3, 5, 4});
    fs::write_npy((dir / "v.npy").string(), t.data(), {2, 3, 5, 4});
    REQUIRE_THROWS_WITH(fs::load_problem(dir.string(), false), Catch::Contains("another batch or head dimension"));
    fs::write_npy((dir / "k.npy").string(), kv.data(), {2, 2, 3, 5});  // 3 query heads, 2 K/V heads
    fs::write_npy((dir / "v.npy").string(), kv.data(), {2, 2, 3, 5});
    REQUIRE_THROWS_WITH(fs::load_problem(dir.string(), false), Catch::Contains("multiple of the K/V heads"));
  }
  SECTION("do.npy of another shape than q.npy") {
    fs::write_npy((dir / "do.npy").string(), t.data(), {2, 3, 5, 4});
    REQUIRE_THROWS_WITH(fs::load_problem(dir.string(), true), Catch::Contains("differs from q.npy"));
  }
  SECTION("a 3-D tensor") {
    fs::write_npy((dir / "v.npy").string(), t.data(), {6, 4, 5});
    REQUIRE_THROWS_WITH(fs::load_problem(dir.string(), false), Catch::Contains("not 4-D"));
  }
  SECTION("a zero-length sequence") {
    fs::write_npy((dir / "q.npy").string(), t.data(), {2, 3, 0, 5});
    REQUIRE_THROWS_WITH(fs::load_problem(dir.string(), false), Catch::Contains("outside 1..2^31-1"));
  }
  SECTION("the backward needs do.npy") {
    std::filesystem::remove(dir / "do.npy");
    REQUIRE_NOTHROW(fs::load_problem(dir.string(), false));
    REQUIRE_THROWS_WITH(fs::load_problem(dir.string(), true), Catch::Contains("do.npy"));
  }
}
