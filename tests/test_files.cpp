// Input files must be regular files; output files are written whole or not at all, and output
// paths can be checked before any work (common/files.hpp). The full-disk cases are in
// tests/test_full_disk.cpp.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "common/files.hpp"
#include "common/host_memory.hpp"
#include "common/npy.hpp"
#include "common/plan.hpp"
#include "common/results.hpp"

namespace stdfs = std::filesystem;

namespace {

stdfs::path fresh_dir(const std::string& name) {
  const auto dir = stdfs::temp_directory_path() / ("flashsteps_test_files_" + name);
  stdfs::remove_all(dir);
  stdfs::create_directories(dir);
  return dir;
}

std::string slurp(const stdfs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::size_t files_in(const stdfs::path& dir) {
  std::size_t n = 0;
  for (auto it = stdfs::directory_iterator(dir); it != stdfs::directory_iterator(); ++it) ++n;
  return n;
}

}  // namespace

TEST_CASE("an output file is written whole, replaces the old one, and leaves nothing else", "[files]") {
  const auto dir = fresh_dir("atomic");
  const auto path = (dir / "out.bin").string();
  fs::write_file_atomic(path, "first version");
  fs::write_file_atomic(path, {{"second", 6}, {" version", 8}});
  REQUIRE(slurp(path) == "second version");
  REQUIRE(files_in(dir) == 1);  // no temporary file left beside it
}

TEST_CASE("an output file into a missing folder fails in one line and creates nothing", "[files]") {
  const auto dir = fresh_dir("missing");
  const auto path = (dir / "no-such-folder" / "o.npy").string();
  const float x[2] = {1, 2};
  REQUIRE_THROWS_WITH(fs::write_npy(path, x, {2}), path + ": cannot write (No such file or directory)");
  REQUIRE(files_in(dir) == 0);
  REQUIRE_THROWS_WITH(fs::append_file(path, "row\n"), path + ": cannot append (No such file or directory)");
}

TEST_CASE("output paths are checked without creating anything", "[files]") {
  const auto dir = fresh_dir("check");
  std::ofstream(dir / "a-file") << "x";
  REQUIRE(fs::output_dir_problem(dir.string()).empty());
  REQUIRE(fs::output_dir_problem((dir / "new" / "deeper").string()).empty());  // would be created
  REQUIRE(fs::output_dir_problem((dir / "a-file").string()) == (dir / "a-file").string() + " is not a folder");
  REQUIRE(fs::output_dir_problem((dir / "a-file" / "sub").string()) == (dir / "a-file").string() + " is not a folder");
  REQUIRE(fs::output_file_problem((dir / "t.json").string()).empty());
  REQUIRE(fs::output_file_problem((dir / "nope" / "t.json").string()) ==
          "the folder " + (dir / "nope").string() + " does not exist");
  REQUIRE(fs::output_file_problem(dir.string()) == dir.string() + " is a folder, not a file");
  REQUIRE(fs::output_file_problem("relative-name.csv").empty());  // the working folder
  REQUIRE(files_in(dir) == 1);
}

// Issue 52: `--save` to a dangling symbolic link passed the check and create_directories threw
// after the GPU had run (abort, exit 134); a FIFO as `--trace` or `--csv` was taken, and the
// append blocked. Both are refused before any work.
TEST_CASE("outputs that are dangling links or FIFOs are refused with what they are", "[files]") {
  const auto dir = fresh_dir("odd_outputs");
  const auto link = dir / "dangling", fifo = dir / "fifo";
  stdfs::create_symlink(dir / "no-such-target", link);
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  const std::string dangling = link.string() + " is a symbolic link to " + (dir / "no-such-target").string() +
                               ", which does not exist";
  REQUIRE(fs::output_dir_problem(link.string()) == dangling);
  REQUIRE(fs::output_dir_problem((link / "sub").string()) == dangling);
  REQUIRE(fs::output_file_problem(link.string()) == dangling);
  REQUIRE(fs::output_file_problem((link / "t.json").string()) == dangling);
  REQUIRE(fs::output_file_problem(fifo.string()) ==
          fifo.string() + " is a pipe or FIFO, not a regular file: name a file to write");
  REQUIRE(fs::output_dir_problem(fifo.string()) == fifo.string() + " is not a folder");
  REQUIRE(fs::output_file_problem("/dev/null").find("is not a regular file") != std::string::npos);
  // A link to a folder that exists is a folder to write in.
  stdfs::create_directories(dir / "real");
  stdfs::create_directory_symlink(dir / "real", dir / "to-real");
  REQUIRE(fs::output_dir_problem((dir / "to-real").string()).empty());
  REQUIRE(fs::output_file_problem((dir / "to-real" / "t.json").string()).empty());
  REQUIRE(files_in(dir) == 4);
}

// Issue 14: a FIFO as q.npy hung the program in open(); `--mask <(...)` said "bad magic".
TEST_CASE("inputs that are not regular files are refused with what they are", "[files]") {
  const auto dir = fresh_dir("inputs");
  const auto fifo = (dir / "q.npy").string();
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  REQUIRE(fs::input_file_problem(fifo).rfind("is a pipe or FIFO, not a regular file", 0) == 0);
  REQUIRE_THROWS_WITH(fs::read_npy(fifo), Catch::StartsWith(fifo + ": is a pipe or FIFO, not a regular file"));
  REQUIRE(fs::input_file_problem(dir.string()) == "is a folder, not a file");
  REQUIRE(fs::input_file_problem("/dev/null") == "is not a regular file");
  REQUIRE(fs::input_file_problem((dir / "missing.npy").string()) == "cannot open (No such file or directory)");
}

TEST_CASE("appends add whole rows", "[files]") {
  const auto dir = fresh_dir("append");
  const auto path = (dir / "r.csv").string();
  fs::append_file(path, "a,b\n");
  fs::append_file(path, "1,2\n");
  REQUIRE(slurp(path) == "a,b\n1,2\n");
}

TEST_CASE("a need beyond the memory available is refused with how much", "[files]") {
  REQUIRE(fs::available_host_memory() > 0);
  REQUIRE_NOTHROW(fs::require_host_memory(1024, "a small thing"));
  REQUIRE_THROWS_WITH(fs::require_host_memory(std::uint64_t(1) << 62, "this"),
                      Catch::Matches("this needs 4294967296\\.00 GiB of memory, but [0-9.]+ GiB are available"));
}

TEST_CASE("a result row's text fields are quoted where they hold a comma or a quote, so the columns stay put",
          "[files]") {
  fs::ResultRow row;
  row.gpu = "NVIDIA H200";
  row.step = "06_block_sparse/atomic";
  row.mask = "my,mask \"v2\".npy";
  const std::string line = fs::csv_line(row);
  REQUIRE(line.rfind("NVIDIA H200,06_block_sparse/atomic,", 0) == 0);
  REQUIRE(line.find(",\"my,mask \"\"v2\"\".npy\",") != std::string::npos);
  row.mask = "window:256:0+alibi";
  REQUIRE(fs::csv_line(row).find(",window:256:0+alibi,") != std::string::npos);
}

// --alibi FILE (RunPlan reads it with read_alibi_slopes): float32 slopes of shape (H), one per head,
// or (B, H), a row per batch (per sequence with --varlen), as flash_attn_func takes them; every
// other shape refused in one line naming the shape it got and the two it takes.
TEST_CASE("ALiBi slope files (--alibi FILE) hold (H) or (B, H), and any other shape is refused naming both",
          "[files][features]") {
  using Catch::Contains;
  const auto dir = fresh_dir("alibi");
  const auto at = [&](const char* name) { return (dir / name).string(); };
  const std::vector<float> six{0.5f, 0.25f, 0.125f, 1.f, 2.f, 4.f};
  fs::write_npy(at("heads.npy"), six.data(), {3});
  fs::write_npy(at("rows.npy"), six.data(), {2, 3});
  fs::write_npy(at("one_row.npy"), six.data(), {1, 3});
  fs::write_npy(at("transposed.npy"), six.data(), {3, 2});
  fs::write_npy(at("flat.npy"), six.data(), {6});
  fs::write_npy(at("cube.npy"), six.data(), {1, 2, 3});
  fs::ScoreFeatures f;
  fs::read_alibi_slopes(at("heads.npy"), 2, 3, false, f);
  REQUIRE(f.alibi_slopes == std::vector<float>{0.5f, 0.25f, 0.125f});
  REQUIRE(f.alibi_batch_stride == 0);
  fs::read_alibi_slopes(at("rows.npy"), 2, 3, false, f);
  REQUIRE(f.alibi_slopes == six);  // row by row: batch 1's slopes are 1, 2, 4
  REQUIRE(f.alibi_batch_stride == 3);
  fs::read_alibi_slopes(at("one_row.npy"), 1, 3, false, f);  // (1, H): a batch of one
  REQUIRE(f.alibi_slopes == std::vector<float>{0.5f, 0.25f, 0.125f});
  REQUIRE(f.alibi_batch_stride == 3);
  // The form back to (H) when a file holds it.
  fs::read_alibi_slopes(at("heads.npy"), 2, 3, false, f);
  REQUIRE((f.alibi_slopes.size() == 3 && f.alibi_batch_stride == 0));

  REQUIRE_THROWS_WITH(fs::read_alibi_slopes(at("transposed.npy"), 2, 3, false, f),
                      Contains("transposed.npy: shape (3, 2), but ALiBi takes one slope per head, (3,), or a row of "
                               "them per batch, (2, 3)"));
  REQUIRE_THROWS_WITH(fs::read_alibi_slopes(at("flat.npy"), 2, 3, false, f), Contains("shape (6,)") && Contains("(3,)"));
  REQUIRE_THROWS_WITH(fs::read_alibi_slopes(at("cube.npy"), 2, 3, false, f), Contains("shape (1, 2, 3)"));
  REQUIRE_THROWS_WITH(fs::read_alibi_slopes(at("rows.npy"), 3, 3, false, f), Contains("shape (2, 3)") && Contains("(3, 3)"));
  REQUIRE_THROWS_WITH(fs::read_alibi_slopes(at("rows.npy"), 2, 2, false, f), Contains("(2,), or a row of them per batch, (2, 2)"));
  // Packed sequences: a row per sequence.
  REQUIRE_THROWS_WITH(fs::read_alibi_slopes(at("rows.npy"), 4, 3, true, f),
                      Contains("a row of them per packed sequence, (4, 3)"));
  fs::read_alibi_slopes(at("rows.npy"), 2, 3, true, f);
  REQUIRE((f.alibi_slopes == six && f.alibi_batch_stride == 3));

  // Each slope finite, named by its place.
  std::vector<float> bad = six;
  bad[5] = std::numeric_limits<float>::quiet_NaN();
  fs::write_npy(at("nan_rows.npy"), bad.data(), {2, 3});
  bad[1] = std::numeric_limits<float>::infinity();
  fs::write_npy(at("inf_heads.npy"), bad.data(), {3});
  REQUIRE_THROWS_WITH(fs::read_alibi_slopes(at("nan_rows.npy"), 2, 3, false, f), Contains("slope (1, 2) is not finite"));
  REQUIRE_THROWS_WITH(fs::read_alibi_slopes(at("inf_heads.npy"), 2, 3, false, f), Contains("slope 1 is not finite"));
  REQUIRE_THROWS_WITH(fs::read_alibi_slopes(at("missing.npy"), 2, 3, false, f), Contains("missing.npy"));
  stdfs::remove_all(dir);
}
