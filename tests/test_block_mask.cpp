// Block masks (step 06): the defining property of every pattern, the lists the kernels walk
// (and causal's drop rule), the --pattern specs, and .npy masks with one clear error each.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "common/block_mask.hpp"
#include "common/errors.hpp"
#include "common/npy.hpp"

namespace {

std::string temp_path(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "flashsteps_test_block_mask";
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

// A .npy file by hand: header dict text (padded as NumPy does) followed by `data`.
void write_raw(const std::string& path, const std::string& dict, const std::string& data) {
  std::string header = dict;
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  out.put(static_cast<char>(header.size() & 0xFF));
  out.put(static_cast<char>((header.size() >> 8) & 0xFF));
  out << header << data;
}

// The bytes of `values` as type T (little-endian, as the host).
template <typename T>
std::string bytes_of(const std::vector<double>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  for (std::size_t i = 0; i < values.size(); ++i) {
    const T v = static_cast<T>(values[i]);
    std::memcpy(&out[i * sizeof(T)], &v, sizeof(T));
  }
  return out;
}

std::string dict_for(const std::string& dtype, const std::string& shape) {
  return "{'descr': '" + dtype + "', 'fortran_order': False, 'shape': " + shape + ", }";
}

bool power_of_two(int x) { return x > 0 && (x & (x - 1)) == 0; }

}  // namespace

TEST_CASE("the grid covers N with ceil(N / block) blocks, the tails included", "[block_mask]") {
  const fs::BlockMask m = fs::empty_mask(1000, 128, 64);
  REQUIRE(m.Tr == 8);   // 7·128 = 896 < 1000 ≤ 1024
  REQUIRE(m.Tc == 16);  // 15·64 = 960 < 1000 ≤ 1024
  REQUIRE(m.dense.size() == 8 * 16);
  REQUIRE(m.nonzero() == 0);
  REQUIRE(fs::empty_mask(1, 128, 128).Tr == 1);
  REQUIRE(fs::empty_mask(256, 128, 128).Tr == 2);
  REQUIRE(fs::empty_mask(257, 128, 128).Tr == 3);
  REQUIRE_THROWS_WITH(fs::empty_mask(0, 128, 128), Catch::Contains("N must be at least 1"));
  REQUIRE_THROWS_WITH(fs::empty_mask(64, 0, 128), Catch::Contains("block sizes must be at least 1"));
  REQUIRE_THROWS_WITH(fs::empty_mask(64, 128, -1), Catch::Contains("block sizes must be at least 1"));
  REQUIRE_THROWS_WITH(fs::empty_mask(1 << 20, 1, 1), Catch::Contains("more than 2^30 blocks"));
}

TEST_CASE("a query sees a key exactly when their blocks are set", "[block_mask]") {
  fs::BlockMask m = fs::empty_mask(300, 128, 64);  // 3 × 5 blocks, tails of 44 queries and 44 keys
  m.set(2, 4, true);
  m.set(0, 1, true);
  for (std::int64_t q = 0; q < 300; ++q)
    for (std::int64_t k = 0; k < 300; ++k) {
      const bool want = (q >= 256 && k >= 256) || (q < 128 && k >= 64 && k < 128);
      if (m.visible(q, k) != want) FAIL("query " << q << ", key " << k);
    }
  REQUIRE(m.nonzero() == 2);
  REQUIRE(m.density() == Approx(2.0 / 15));
}

TEST_CASE("local: exactly the band |i - j| <= window", "[block_mask][pattern]") {
  for (int window : {0, 1, 3, 40}) {
    const fs::BlockMask m = fs::pattern_local(4096, 128, window);
    REQUIRE(m.Tr == 32);
    std::int64_t want_nonzero = 0;
    for (int i = 0; i < 32; ++i)
      for (int j = 0; j < 32; ++j) {
        const bool in_band = std::abs(i - j) <= window;
        want_nonzero += in_band;
        if (m.at(i, j) != in_band) FAIL("window " << window << ": block (" << i << ", " << j << ")");
      }
    REQUIRE(m.nonzero() == want_nonzero);
  }
  REQUIRE(fs::pattern_local(4096, 128, 0).nonzero() == 32);  // the diagonal alone
  REQUIRE_THROWS_WITH(fs::pattern_local(4096, 128, -1), Catch::Contains("window must be at least 0"));
}

TEST_CASE("global + local: the first G block rows and columns are full, the rest is the band", "[block_mask][pattern]") {
  const int G = 2, W = 1;
  const fs::BlockMask m = fs::pattern_global_local(2000, 128, W, G);  // T = 16, tail of 80
  REQUIRE(m.Tr == 16);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      const bool want = i < G || j < G || std::abs(i - j) <= W;
      if (m.at(i, j) != want) FAIL("block (" << i << ", " << j << ")");
    }
  // 2 full rows, 2 full columns below them, and the band of the 14 × 14 blocks left.
  REQUIRE(m.nonzero() == 2 * 16 + 2 * 14 + (14 + 2 * 13));
  REQUIRE(fs::pattern_global_local(2000, 128, W, 0) == fs::pattern_local(2000, 128, W));
  REQUIRE(fs::pattern_global_local(2000, 128, 0, 16) == fs::pattern_dense(2000, 128));
  REQUIRE_THROWS_WITH(fs::pattern_global_local(2000, 128, W, 17), Catch::Contains("17 global blocks"));
  REQUIRE_THROWS_WITH(fs::pattern_global_local(2000, 128, W, -1), Catch::Contains("-1 global blocks"));
}

TEST_CASE("causal blocks: the lower triangle with the diagonal", "[block_mask][pattern]") {
  const fs::BlockMask m = fs::pattern_causal_block(1025, 64);  // T = 17
  REQUIRE(m.Tr == 17);
  for (int i = 0; i < 17; ++i)
    for (int j = 0; j < 17; ++j)
      if (m.at(i, j) != (j <= i)) FAIL("block (" << i << ", " << j << ")");
  REQUIRE(m.nonzero() == 17 * 18 / 2);
}

TEST_CASE("dense: every block", "[block_mask][pattern]") {
  const fs::BlockMask m = fs::pattern_dense(1000, 100);
  REQUIRE(m.Tr == 10);
  REQUIRE(m.nonzero() == 100);
  REQUIRE(m.density() == 1.0);
}

TEST_CASE("random: every block row gets exactly round(density * T) blocks, reproducibly", "[block_mask][pattern]") {
  const int N = 4096, block = 128;  // T = 32
  for (double density : {0.0, 0.01, 0.1, 0.25, 0.5, 0.77, 1.0}) {
    const fs::BlockMask m = fs::pattern_random(N, block, density, 7);
    const int want = density > 0 ? std::max(1, int(std::llround(density * 32))) : 0;
    for (int i = 0; i < m.Tr; ++i) {
      int row = 0;
      for (int j = 0; j < m.Tc; ++j) row += m.at(i, j);
      if (row != want) FAIL("density " << density << ": row " << i << " has " << row << " blocks, not " << want);
    }
  }
  REQUIRE(fs::pattern_random(N, block, 0.01, 7).nonzero() == 32);  // at least one per row
  REQUIRE(fs::pattern_random(N, block, 1.0, 7) == fs::pattern_dense(N, block));

  const fs::BlockMask a = fs::pattern_random(N, block, 0.25, 1);
  REQUIRE(a == fs::pattern_random(N, block, 0.25, 1));
  REQUIRE(a != fs::pattern_random(N, block, 0.25, 2));
  // Rows differ from one another too (one stream through the rows, not one draw repeated).
  int rows_like_first = 0;
  for (int i = 1; i < a.Tr; ++i)
    rows_like_first += std::equal(a.dense.begin() + i * 32, a.dense.begin() + (i + 1) * 32, a.dense.begin());
  REQUIRE(rows_like_first < 3);

  REQUIRE_THROWS_WITH(fs::pattern_random(N, block, 1.5, 1), Catch::Contains("density must be in [0, 1]"));
  REQUIRE_THROWS_WITH(fs::pattern_random(N, block, -0.1, 1), Catch::Contains("density must be in [0, 1]"));
  REQUIRE_THROWS_WITH(fs::pattern_random(N, block, std::nan(""), 1), Catch::Contains("density must be in [0, 1]"));
}

TEST_CASE("random: the same seed gives the same mask on every machine", "[block_mask][pattern]") {
  // The first three rows for seed 42, as a 15-line Python model of the same algorithm gives
  // them (splitmix64 from state 42, rejection below 2^64 mod n, partial Fisher–Yates, one
  // stream through the rows): a change of generator, or a std:: distribution, shows here.
  const fs::BlockLists l = fs::to_lists(fs::pattern_random(1024, 128, 0.25, 42));
  const std::vector<int> first_rows(l.col_idx.begin(), l.col_idx.begin() + l.row_ptr[3]);
  REQUIRE(first_rows == std::vector<int>{5, 6, 2, 3, 2, 5});
}

TEST_CASE("random: each key block is picked about equally often", "[block_mask][pattern]") {
  // 4096 rows of 16 blocks, 4 per row: every column expects 1024 picks; a biased choice (always
  // the first blocks, modulo bias, a short shuffle) is far outside ±10%.
  std::vector<int> picks(16, 0);
  for (std::uint64_t seed = 0; seed < 256; ++seed) {
    const fs::BlockMask r = fs::pattern_random(16 * 8, 8, 0.25, seed);  // 16 × 16
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 16; ++j) picks[j] += r.at(i, j);
  }
  for (int j = 0; j < 16; ++j) {
    INFO("key block " << j << " picked " << picks[j] << " times");
    REQUIRE(std::abs(picks[j] - 1024) < 103);
  }
}

TEST_CASE("butterfly: symmetric, diagonal set, (i/w) XOR (j/w) zero or a power of two below 2^k", "[block_mask][pattern]") {
  for (auto [N, block, group, factors] : {std::tuple{4096, 128, 1, 5}, std::tuple{4096, 128, 1, 2},
                                          std::tuple{4096, 128, 4, 3}, std::tuple{16384, 128, 2, 4},
                                          std::tuple{4096, 128, 32, 0}, std::tuple{1000, 64, 3, 2}}) {
    const fs::BlockMask m = fs::pattern_butterfly(N, block, group, factors);
    const int T = m.Tr;
    INFO("N " << N << ", block " << block << ", group " << group << ", factors " << factors);
    for (int i = 0; i < T; ++i) {
      REQUIRE(m.at(i, i));
      for (int j = 0; j < T; ++j) {
        REQUIRE(m.at(i, j) == m.at(j, i));
        const int g = (i / group) ^ (j / group);
        bool want = g == 0;
        for (int t = 0; t < factors; ++t) want = want || g == (1 << t);
        if (m.at(i, j) != want) FAIL("block (" << i << ", " << j << "), g = " << g);
      }
    }
    if (power_of_two(T) && power_of_two(group))
      REQUIRE(m.density() == double(group) * (factors + 1) / T);
  }
  // The classic flat butterfly at T = 128: log2(128) = 7 factors, (7 + 1)/128 = 1/16.
  REQUIRE(fs::pattern_butterfly(16384, 128, 1, 7).density() == 1.0 / 16);
  // No factors: the group-diagonal blocks alone.
  REQUIRE(fs::pattern_butterfly(4096, 128, 1, 0) == fs::pattern_local(4096, 128, 0));
}

TEST_CASE("butterfly: groups and factors out of range are refused", "[block_mask][pattern]") {
  REQUIRE_NOTHROW(fs::pattern_butterfly(4096, 128, 1, 5));   // T = 32: log2(32) = 5
  REQUIRE_NOTHROW(fs::pattern_butterfly(4096, 128, 4, 3));   // log2(32/4) = 3
  REQUIRE_NOTHROW(fs::pattern_butterfly(4096, 128, 32, 0));  // one group: all ones
  REQUIRE(fs::pattern_butterfly(4096, 128, 32, 0) == fs::pattern_dense(4096, 128));
  REQUIRE_THROWS_WITH(fs::pattern_butterfly(4096, 128, 1, 6), Catch::Contains("6 factors") && Catch::Contains("use 0..5"));
  REQUIRE_THROWS_WITH(fs::pattern_butterfly(4096, 128, 4, 4), Catch::Contains("4 factors") && Catch::Contains("use 0..3"));
  REQUIRE_THROWS_WITH(fs::pattern_butterfly(4096, 128, 1, -1), Catch::Contains("-1 factors"));
  REQUIRE_THROWS_WITH(fs::pattern_butterfly(4096, 128, 0, 1), Catch::Contains("group of 0 blocks"));
  REQUIRE_THROWS_WITH(fs::pattern_butterfly(4096, 128, 33, 0), Catch::Contains("group of 33 blocks"));
}

TEST_CASE("butterfly@density hits 1, 1/2, 1/4, 1/8 and 1/16 exactly", "[block_mask][pattern]") {
  for (int N : {4096, 16384}) {  // T = 32 and 128 blocks of 128
    for (double density : {1.0, 0.5, 0.25, 0.125, 0.0625}) {
      const fs::BlockMask m = fs::pattern_butterfly_density(N, 128, density);
      INFO("N " << N << ", density " << density);
      REQUIRE(m.density() == density);
      for (int i = 0; i < m.Tr; ++i) {
        REQUIRE(m.at(i, i));
        for (int j = 0; j < i; ++j) REQUIRE(m.at(i, j) == m.at(j, i));
      }
    }
  }
  // The smallest group: at T = 128, 1/16 is the classic flat butterfly (group 1, 7 factors).
  REQUIRE(fs::pattern_butterfly_density(16384, 128, 1.0 / 16) == fs::pattern_butterfly(16384, 128, 1, 7));
  // At T = 32, 1/2 needs groups of 4 (3 factors): groups of 1 and 2 would need 15 and 7.
  REQUIRE(fs::pattern_butterfly_density(4096, 128, 0.5) == fs::pattern_butterfly(4096, 128, 4, 3));
}

TEST_CASE("butterfly@density explains what it cannot do", "[block_mask][pattern]") {
  REQUIRE_THROWS_WITH(fs::pattern_butterfly_density(4096, 128, 0.3),
                      Catch::Contains("no butterfly on 32 blocks has density 0.3") &&
                          Catch::Contains("n/32 for n in {1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32}"));
  REQUIRE_THROWS_WITH(fs::pattern_butterfly_density(3000, 128, 0.5), Catch::Contains("power-of-two number of blocks") &&
                                                                        Catch::Contains("gives 24"));
  REQUIRE_THROWS_WITH(fs::pattern_butterfly_density(4096, 128, 0.0), Catch::Contains("density must be in (0, 1]"));
  REQUIRE_THROWS_WITH(fs::pattern_butterfly_density(4096, 128, 2.0), Catch::Contains("density must be in (0, 1]"));
}

TEST_CASE("the lists are the mask: ascending rows and columns, and back again", "[block_mask][lists]") {
  for (auto [N, block_r, block_c] : {std::tuple{4096, 128, 128}, std::tuple{1000, 128, 64}, std::tuple{97, 16, 32},
                                     std::tuple{1, 64, 64}, std::tuple{257, 64, 128}}) {
    for (std::uint64_t seed : {1u, 2u, 3u}) {
      fs::BlockMask m = fs::empty_mask(N, block_r, block_c);
      std::uint64_t x = seed * 0x9E3779B97F4A7C15ull;
      for (auto& v : m.dense) v = ((x = x * 6364136223846793005ull + 1442695040888963407ull) >> 62) == 0;
      m.set(m.Tr - 1, m.Tc - 1, true);  // the tail block, always
      INFO("N " << N << ", blocks " << block_r << " × " << block_c << ", seed " << seed);
      const fs::BlockLists l = fs::to_lists(m);
      REQUIRE(l.Tr == m.Tr);
      REQUIRE(l.Tc == m.Tc);
      REQUIRE(l.row_ptr.size() == std::size_t(m.Tr) + 1);
      REQUIRE(l.col_ptr.size() == std::size_t(m.Tc) + 1);
      REQUIRE(l.nonzero() == m.nonzero());
      REQUIRE(l.row_idx.size() == l.col_idx.size());
      for (int i = 0; i < m.Tr; ++i) {
        std::vector<int> want;
        for (int j = 0; j < m.Tc; ++j)
          if (m.at(i, j)) want.push_back(j);
        REQUIRE(std::vector<int>(l.col_idx.begin() + l.row_ptr[i], l.col_idx.begin() + l.row_ptr[i + 1]) == want);
      }
      for (int j = 0; j < m.Tc; ++j) {
        std::vector<int> want;
        for (int i = 0; i < m.Tr; ++i)
          if (m.at(i, j)) want.push_back(i);
        REQUIRE(std::vector<int>(l.row_idx.begin() + l.col_ptr[j], l.row_idx.begin() + l.col_ptr[j + 1]) == want);
      }
      REQUIRE(fs::from_lists(l, block_r, block_c) == m);
    }
  }
}

TEST_CASE("causal lists drop exactly the blocks where every key is after every query", "[block_mask][lists]") {
  // Checked element by element: a block stays when some query of it may see some key of it.
  for (auto [N, block_r, block_c] : {std::tuple{512, 64, 64}, std::tuple{1000, 128, 64}, std::tuple{1000, 64, 128},
                                     std::tuple{97, 16, 48}, std::tuple{130, 32, 96}}) {
    fs::BlockMask m = fs::empty_mask(N, block_r, block_c);
    std::fill(m.dense.begin(), m.dense.end(), 1);
    const fs::BlockLists l = fs::to_lists(m, true);
    const fs::BlockMask kept = fs::from_lists(l, block_r, block_c);
    INFO("N " << N << ", blocks " << block_r << " × " << block_c);
    for (int i = 0; i < m.Tr; ++i)
      for (int j = 0; j < m.Tc; ++j) {
        bool some_visible = false;
        for (int q = i * block_r; q < std::min(N, (i + 1) * block_r); ++q)
          some_visible = some_visible || j * block_c <= q;  // the first key of the block
        if (kept.at(i, j) != some_visible) FAIL("block (" << i << ", " << j << ")");
      }
  }
  // Causal composes with the mask: blocks the mask drops stay dropped.
  const fs::BlockMask local = fs::pattern_local(2048, 128, 2);
  const fs::BlockMask both = fs::from_lists(fs::to_lists(local, true), 128, 128);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) REQUIRE(both.at(i, j) == (j <= i && i - j <= 2));
}

TEST_CASE("inconsistent lists are refused", "[block_mask][lists]") {
  const fs::BlockLists good = fs::to_lists(fs::pattern_local(512, 128, 1));  // 4 × 4
  REQUIRE_NOTHROW(fs::from_lists(good, 128, 128));
  SECTION("row_ptr of the wrong size") {
    fs::BlockLists l = good;
    l.row_ptr.pop_back();
    REQUIRE_THROWS_WITH(fs::from_lists(l, 128, 128), Catch::Contains("row_ptr has 4 entries"));
  }
  SECTION("row_ptr decreasing") {
    fs::BlockLists l = good;
    std::swap(l.row_ptr[1], l.row_ptr[2]);
    REQUIRE_THROWS_WITH(fs::from_lists(l, 128, 128), Catch::Contains("row_ptr decreases"));
  }
  SECTION("a key block out of range") {
    fs::BlockLists l = good;
    l.col_idx.back() = 4;
    REQUIRE_THROWS_WITH(fs::from_lists(l, 128, 128), Catch::Contains("key block 4 outside 0..3"));
  }
  SECTION("a row not ascending") {
    fs::BlockLists l = good;
    std::swap(l.col_idx[0], l.col_idx[1]);
    REQUIRE_THROWS_WITH(fs::from_lists(l, 128, 128), Catch::Contains("not strictly ascending"));
  }
  SECTION("columns naming other blocks") {
    fs::BlockLists l = good;
    l.row_idx[0] = 3;
    REQUIRE_THROWS_WITH(fs::from_lists(l, 128, 128), Catch::Contains("column lists"));
  }
}

TEST_CASE("the --pattern specs name the generators", "[block_mask][spec]") {
  const int N = 4096, B = 128;
  REQUIRE(fs::make_pattern("dense", N, B, 0) == fs::pattern_dense(N, B));
  REQUIRE(fs::make_pattern("causal", N, B, 0) == fs::pattern_causal_block(N, B));
  REQUIRE(fs::make_pattern("local:3", N, B, 0) == fs::pattern_local(N, B, 3));
  REQUIRE(fs::make_pattern("global:2,1", N, B, 0) == fs::pattern_global_local(N, B, 1, 2));
  REQUIRE(fs::make_pattern("global:2,1", N, B, 0) != fs::pattern_global_local(N, B, 2, 1));
  REQUIRE(fs::make_pattern("random:0.25", N, B, 9) == fs::pattern_random(N, B, 0.25, 9));
  REQUIRE(fs::make_pattern("random:0.25", N, B, 9) != fs::make_pattern("random:0.25", N, B, 10));
  REQUIRE(fs::make_pattern("butterfly", N, B, 0) == fs::pattern_butterfly(N, B, 1, 5));
  REQUIRE(fs::make_pattern("butterfly", 16384, B, 0).density() == 1.0 / 16);
  REQUIRE(fs::make_pattern("butterfly:3", N, B, 0) == fs::pattern_butterfly(N, B, 1, 3));
  REQUIRE(fs::make_pattern("butterfly:2,4", N, B, 0) == fs::pattern_butterfly(N, B, 4, 2));
  REQUIRE(fs::make_pattern("butterfly@0.25", N, B, 0) == fs::pattern_butterfly_density(N, B, 0.25));
  REQUIRE(fs::make_pattern("butterfly@0.25", N, B, 0).density() == 0.25);
}

TEST_CASE("bad --pattern specs say what is wrong", "[block_mask][spec]") {
  struct Case {
    const char* spec;
    const char* message;
    bool lists_forms;
  };
  const Case cases[] = {
      {"", "unknown pattern", true},
      {"sparse", "unknown pattern", true},
      {"Dense", "unknown pattern", true},
      {"dense:2", "dense takes no ':'", true},
      {"butterfly#2", "unknown pattern", true},
      {"local", "local needs parameters", true},
      {"local:", "'' is not an integer", true},
      {"local:x", "'x' is not an integer", true},
      {"local:1.5", "'1.5' is not an integer", true},
      {"local: 1", "' 1' is not an integer", true},
      {"local:1,2", "2 numbers where local takes 1", true},
      {"local@1", "local takes no '@'", true},
      {"global:3", "1 numbers where global takes 2", true},
      {"global:3,", "'' is not an integer", true},
      {"random", "random needs parameters", true},
      {"random:lots", "'lots' is not a number", true},
      {"random:0.5x", "'0.5x' is not a number", true},
      {"random:inf", "'inf' is not a number", true},
      {"butterfly:1,2,3", "3 numbers where butterfly takes 1 or 2", true},
      {"butterfly@", "'' is not a number", true},
      // Well formed, but the pattern refuses the parameters: its own message, after the spec.
      {"local:-2", "pattern 'local:-2': local pattern: window must be at least 0", false},
      {"random:1.5", "pattern 'random:1.5': random pattern: density must be in [0, 1]", false},
      {"global:40,1", "40 global blocks", false},
      {"butterfly:6", "6 factors", false},
      {"butterfly:2,64", "group of 64 blocks", false},
      {"butterfly@0.3", "no butterfly on 32 blocks has density 0.3", false},
  };
  for (const auto& c : cases) {
    INFO("spec '" << c.spec << "'");
    try {
      fs::make_pattern(c.spec, 4096, 128, 0);
      FAIL("accepted");
    } catch (const fs::InputError& e) {
      const std::string what = e.what();
      CHECK_THAT(what, Catch::Contains(c.message) && Catch::StartsWith("pattern '" + std::string(c.spec) + "'"));
      CHECK((what.find("valid forms: dense | local:W | global:G,W") != std::string::npos) == c.lists_forms);
      CHECK(what.find('\n') == std::string::npos);
    }
  }
}

TEST_CASE("describe: one line with the grid, the blocks and the density", "[block_mask]") {
  REQUIRE(fs::describe(fs::pattern_butterfly(4096, 128, 1, 5)) ==
          "32 × 32 blocks of 128 × 128, 192 nonzero (density 0.1875)");
  REQUIRE(fs::describe(fs::empty_mask(1000, 128, 64)) == "8 × 16 blocks of 128 × 64, 0 nonzero (density 0)");
}

TEST_CASE(".npy masks: write then read gives back the mask", "[block_mask][npy]") {
  const std::string path = temp_path("roundtrip.npy");
  for (auto [N, br, bc] : {std::tuple{4096, 128, 128}, std::tuple{1000, 128, 64}, std::tuple{97, 16, 32}}) {
    fs::BlockMask m = fs::empty_mask(N, br, bc);
    for (std::size_t k = 0; k < m.dense.size(); ++k) m.dense[k] = (k * 7 + k / 3) % 5 == 0;
    fs::write_block_mask(path, m);
    REQUIRE_FALSE(std::filesystem::exists(path + ".partial"));
    REQUIRE(fs::read_block_mask(path, N, br, bc) == m);
  }
  // What NumPy sees: uint8 of shape (Tr, Tc).
  const fs::NpyRaw raw = fs::read_npy_raw(path, {"|u1"}, "is not uint8");
  REQUIRE(raw.dtype == "|u1");
  REQUIRE(raw.shape == std::vector<std::int64_t>{7, 4});
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  REQUIRE(bytes.size() == 128 + 7 * 4);  // header padded to 64-byte alignment, as NumPy does
  REQUIRE(bytes[127] == '\n');
  REQUIRE(bytes.substr(10, 59) == "{'descr': '|u1', 'fortran_order': False, 'shape': (7, 4), }");
}

TEST_CASE(".npy masks: bool, uint8, int32, int64 and float32 are all read", "[block_mask][npy]") {
  const std::string path = temp_path("dtypes.npy");
  const std::vector<double> values{1, 0, 0, 1, 1, 1, 0, 0, 0, 1, 0, 1};  // (3, 4): N = 512, blocks 192 × 128
  fs::BlockMask want = fs::empty_mask(512, 192, 128);
  REQUIRE(want.Tr == 3);
  REQUIRE(want.Tc == 4);
  for (std::size_t k = 0; k < values.size(); ++k) want.dense[k] = std::uint8_t(values[k]);
  const std::pair<const char*, std::string> files[] = {
      {"|b1", bytes_of<std::uint8_t>(values)}, {"|u1", bytes_of<std::uint8_t>(values)},
      {"<i4", bytes_of<std::int32_t>(values)}, {"<i8", bytes_of<std::int64_t>(values)},
      {"<f4", bytes_of<float>(values)}};
  for (const auto& [dtype, data] : files) {
    INFO("dtype " << dtype);
    write_raw(path, dict_for(dtype, "(3, 4)"), data);
    REQUIRE(fs::read_block_mask(path, 512, 192, 128) == want);
  }
}

TEST_CASE("the generic .npy reader gives each dtype's values", "[block_mask][npy]") {
  const std::string path = temp_path("values.npy");
  const std::vector<double> values{-3, 0, 2.5, 1e10};
  write_raw(path, dict_for("<i8", "(4,)"), bytes_of<std::int64_t>(values));
  fs::NpyRaw raw = fs::read_npy_raw(path, {"<i8"}, "is not int64");
  REQUIRE(raw.item_size == 8);
  REQUIRE(raw.elements() == 4);
  REQUIRE(raw.value(0) == -3);
  REQUIRE(raw.value(2) == 2);  // 2.5 stored as int64
  REQUIRE(raw.value(3) == 1e10);
  write_raw(path, dict_for("<f4", "(2, 2)"), bytes_of<float>(values));
  raw = fs::read_npy_raw(path, {"<i8", "<f4"}, "is not int64 or float32");
  REQUIRE(raw.value(2) == 2.5);
  write_raw(path, dict_for("<i4", "(4,)"), bytes_of<std::int32_t>(values));
  REQUIRE(fs::read_npy_raw(path, {"<i4"}, "").value(0) == -3);
  REQUIRE_THROWS_WITH(fs::read_npy_raw(path, {"<f4"}, "is not float32"),
                      Catch::Contains(path + ": dtype '<i4' is not float32"));
  REQUIRE_THROWS_WITH(fs::read_npy(path), Catch::Contains("is not float32; save it with arr.astype(np.float32)"));
}

TEST_CASE("malformed .npy masks are rejected with a message naming the problem", "[block_mask][npy]") {
  const std::string path = temp_path("blocks.npy");
  const std::string ok16 = bytes_of<std::uint8_t>(std::vector<double>(16, 1));
  struct Case {
    const char* what;
    std::string dict, data, message;
  };
  std::vector<double> two(16, 0);
  two[1 * 4 + 3] = 2;
  std::vector<double> half(16, 1);
  half[2 * 4 + 0] = 0.5;
  std::vector<double> minus(16, 0);
  minus[3 * 4 + 3] = -1;
  std::vector<double> nan(16, 0);
  nan[5] = std::nan("");
  const Case cases[] = {
      {"wrong grid", dict_for("|u1", "(3, 4)"), bytes_of<std::uint8_t>(std::vector<double>(12, 1)),
       ": shape (3, 4) but N=512 with 128 × 128 blocks needs (4, 4)"},
      {"transposed grid", dict_for("|u1", "(4, 2)"), bytes_of<std::uint8_t>(std::vector<double>(8, 1)),
       "shape (4, 2) but"},
      {"1-D", dict_for("|u1", "(16,)"), ok16, "shape (16,) is not 2-D: N=512 with 128 × 128 blocks needs (4, 4)"},
      {"3-D", dict_for("|u1", "(1, 4, 4)"), ok16, "shape (1, 4, 4) is not 2-D"},
      {"value 2", dict_for("|u1", "(4, 4)"), bytes_of<std::uint8_t>(two), ": value 2 at (1, 3) is not 0 or 1"},
      {"bool byte 2", dict_for("|b1", "(4, 4)"), bytes_of<std::uint8_t>(two), "value 2 at (1, 3) is not 0 or 1"},
      {"value 0.5", dict_for("<f4", "(4, 4)"), bytes_of<float>(half), "value 0.5 at (2, 0) is not 0 or 1"},
      {"value -1", dict_for("<i8", "(4, 4)"), bytes_of<std::int64_t>(minus), "value -1 at (3, 3) is not 0 or 1"},
      {"NaN", dict_for("<f4", "(4, 4)"), bytes_of<float>(nan), "value nan at (1, 1) is not 0 or 1"},
      {"float64", dict_for("<f8", "(4, 4)"), bytes_of<double>(std::vector<double>(16, 1)),
       "dtype '<f8' is not a block mask dtype (bool, uint8, int32, int64 or float32); save it with mask.astype(np.uint8)"},
      {"int16", dict_for("<i2", "(4, 4)"), std::string(32, '\0'), "dtype '<i2' is not a block mask dtype"},
      {"int8", dict_for("|i1", "(4, 4)"), ok16, "dtype '|i1' is not a block mask dtype"},
      {"big-endian int32", dict_for(">i4", "(4, 4)"), std::string(64, '\0'), "dtype '>i4' is not a block mask dtype"},
      {"truncated", dict_for("<i4", "(4, 4)"), std::string(63, '\0'), "truncated: shape (4, 4) needs 64 bytes of data, the file has 63"},
      {"extra data", dict_for("|u1", "(4, 4)"), ok16 + "x", "has 1 bytes more than its shape (4, 4) needs"},
      {"Fortran order", "{'descr': '|u1', 'fortran_order': True, 'shape': (4, 4), }", ok16, "Fortran order"},
  };
  for (const auto& c : cases) {
    SECTION(c.what) {
      write_raw(path, c.dict, c.data);
      REQUIRE_THROWS_MATCHES(fs::read_block_mask(path, 512, 128, 128), fs::InputError,
                             Catch::Matchers::Predicate<fs::InputError>(
                                 [&](const fs::InputError& e) {
                                   const std::string what = e.what();
                                   return what.rfind(path + ": ", 0) == 0 && what.find(c.message) != std::string::npos &&
                                          what.find('\n') == std::string::npos;
                                 },
                                 "an InputError on one line starting with the path and containing '" + c.message + "'"));
    }
  }
  SECTION("not a .npy file") {
    std::ofstream(path) << "0 1 1 0";
    REQUIRE_THROWS_AS(fs::read_block_mask(path, 512, 128, 128), fs::InputError);
    REQUIRE_THROWS_WITH(fs::read_block_mask(path, 512, 128, 128), Catch::Contains("bad magic"));
  }
  SECTION("missing file") {
    REQUIRE_THROWS_WITH(fs::read_block_mask(temp_path("no-such.npy"), 512, 128, 128), Catch::Contains("cannot open"));
  }
  SECTION("a mask that cannot be written") {
    fs::BlockMask m = fs::empty_mask(512, 128, 128);
    m.dense.pop_back();
    REQUIRE_THROWS_WITH(fs::write_block_mask(path, m), Catch::Contains("15 entries as a (4, 4) grid"));
    m = fs::empty_mask(512, 128, 128);
    m.dense[3] = 7;
    REQUIRE_THROWS_WITH(fs::write_block_mask(path, m), Catch::Contains("entry 7"));
    REQUIRE_THROWS_WITH(fs::write_block_mask(temp_path("no-such-dir/x.npy"), fs::empty_mask(512, 128, 128)),
                        Catch::Contains("cannot write"));
  }
}
