// Input files must be regular files; output files are written whole or not at all, and output
// paths can be checked before any work (common/files.hpp). The full-disk cases are in
// tests/test_full_disk.cpp.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "common/errors.hpp"
#include "common/files.hpp"
#include "common/host_memory.hpp"
#include "common/npy.hpp"
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
