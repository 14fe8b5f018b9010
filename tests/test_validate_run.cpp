// Issue 14: every mistake a person can make on a step program's command line — numbers, shapes,
// features a step lacks, masks, inputs, output paths — is one line and exit code 2 before any GPU
// is looked for, so that it shows on a machine without one. These run the programs' main
// (fs::step_main) in-process: on a machine with a GPU, a case that passes validation would run,
// so every case here is one that must fail first.
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "common/block_mask.hpp"
#include "common/cli.hpp"
#include "common/driver.hpp"
#include "common/errors.hpp"
#include "common/npy.hpp"
#include "common/plan.hpp"
#include "steps/registry.hpp"

namespace stdfs = std::filesystem;

namespace {

struct Run {
  int code;
  std::string err;
};

// The program of step `id` with `args`; its exit code and what it wrote to stderr.
Run run(const std::string& id, std::vector<std::string> args) {
  args.insert(args.begin(), "step" + id);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  std::ostringstream err;
  auto* old = std::cerr.rdbuf(err.rdbuf());
  const int code = fs::step_main(*fs::find_step(id), int(argv.size()), argv.data());
  std::cerr.rdbuf(old);
  return {code, err.str()};
}

std::optional<fs::Options> parse(const std::string& id, std::vector<const char*> args) {
  args.insert(args.begin(), "step");
  return fs::parse_options(*fs::find_step(id), int(args.size()), args.data());
}

stdfs::path fresh_dir(const std::string& name) {
  const auto dir = stdfs::temp_directory_path() / ("flashsteps_test_validate_" + name);
  stdfs::remove_all(dir);
  stdfs::create_directories(dir);
  return dir;
}

// q, k, v (B=1, H=1, N=8, d=64) in `dir`, with `bad` at v's element (0, 0, 3, 5).
void write_inputs(const stdfs::path& dir, float bad) {
  std::vector<float> x(8 * 64, 0.5f);
  fs::write_npy((dir / "q.npy").string(), x.data(), {1, 1, 8, 64});
  fs::write_npy((dir / "k.npy").string(), x.data(), {1, 1, 8, 64});
  x[3 * 64 + 5] = bad;
  fs::write_npy((dir / "v.npy").string(), x.data(), {1, 1, 8, 64});
}

}  // namespace

TEST_CASE("numbers on the command line are decimal and in range", "[cli][validate]") {
  using Catch::Contains;
  REQUIRE(parse("01", {"--seq", "010"})->shape.N == 10);  // not octal 8
  REQUIRE(parse("01", {"--seed", "18446744073709551615"})->seed == std::numeric_limits<std::uint64_t>::max());
  REQUIRE(parse("01", {"--scale", "1e-1"})->effective_scale() == 0.1f);
  REQUIRE_THROWS_WITH(parse("01", {"--seq", "0x10"}), Contains("'0x10' is not a decimal integer"));
  REQUIRE_THROWS_WITH(parse("01", {"--seq", "1e3"}), Contains("'1e3' is not a decimal integer"));
  REQUIRE_THROWS_WITH(parse("01", {"--seq", "+5"}), Contains("is not a decimal integer"));
  REQUIRE_THROWS_WITH(parse("01", {"--seed", "-1"}), Contains("'-1' is negative"));
  REQUIRE_THROWS_WITH(parse("01", {"--seed", "18446744073709551616"}), Contains("is out of range"));
  REQUIRE_THROWS_WITH(parse("01", {"--seq", "99999999999999999999"}), Contains("is out of range"));
  REQUIRE_THROWS_WITH(parse("01", {"--scale", "0x1p3"}), Contains("'0x1p3' is not a decimal number"));
  REQUIRE_THROWS_WITH(parse("05", {"--dropout", "0x1p-2"}), Contains("is not a decimal number"));
  REQUIRE_THROWS_WITH(parse("01", {"--reps", "3000000000"}), Contains("is out of range"));
}

TEST_CASE("features a step lacks and shapes no GPU runs are refused before the GPU", "[cli][validate]") {
  Run r = run("03", {"--backward"});
  REQUIRE(r.code == fs::kExitBadInput);
  REQUIRE_THAT(r.err, Catch::Contains("--backward"));
  r = run("04", {"--backward"});
  REQUIRE(r.code == fs::kExitBadInput);
  r = run("04", {"--dim", "3"});
  REQUIRE(r.code == fs::kExitBadInput);
  REQUIRE_THAT(r.err, Catch::Contains("d must be 16, 32, 64 or 128"));
  r = run("06", {"--dim", "3"});
  REQUIRE(r.code == fs::kExitBadInput);
  REQUIRE_THAT(r.err, Catch::Contains("d must be 16, 32, 64 or 128"));
  r = run("04", {"--batch", "65536", "--heads", "1", "--seq", "1", "--dim", "64"});
  REQUIRE(r.code == fs::kExitBadInput);
  REQUIRE_THAT(r.err, Catch::Contains("B·H must be at most 65535"));
  // 2^31 − 1 queries of d = 64: 2 TiB of inputs on the host, refused with how much before any allocation.
  r = run("03", {"--batch", "1", "--heads", "1", "--seq", "2147483647", "--dim", "64"});
  REQUIRE(r.code == fs::kExitBadInput);
  REQUIRE_THAT(r.err, Catch::Contains("on the host needs") && Catch::Contains("GiB of memory, but"));
}

TEST_CASE("output paths that cannot be written are refused before the GPU", "[cli][validate]") {
  const auto dir = fresh_dir("outputs");
  const std::string file = (dir / "a-file").string();
  std::ofstream(file) << "x";
  Run r = run("01", {"--save", file + "/out"});
  REQUIRE(r.code == fs::kExitBadInput);
  REQUIRE_THAT(r.err, Catch::Contains("--save " + file + "/out: " + file + " is not a folder"));
  r = run("01", {"--trace", (dir / "missing" / "t.json").string()});
  REQUIRE(r.code == fs::kExitBadInput);
  REQUIRE_THAT(r.err, Catch::Contains("does not exist"));
  r = run("05", {"--trace", (dir / "t.json").string(), "--backward", "--save", file});
  REQUIRE(r.code == fs::kExitBadInput);
  r = run("01", {"--bench", "--csv", (dir / "missing" / "r.csv").string()});
  REQUIRE(r.code == fs::kExitBadInput);
  REQUIRE_THAT(r.err, Catch::Contains("--csv"));
  REQUIRE(stdfs::directory_iterator(dir) != stdfs::directory_iterator());  // nothing was created...
  REQUIRE(!stdfs::exists(dir / "missing"));                                 // ...least of all the folders
}

TEST_CASE("NaN or infinite values in --load inputs are refused, naming the element", "[cli][validate]") {
  const auto dir = fresh_dir("nan");
  write_inputs(dir, std::nanf(""));
  Run r = run("01", {"--load", dir.string()});
  REQUIRE(r.code == fs::kExitBadInput);
  REQUIRE_THAT(r.err, Catch::Contains(dir.string() + "/v.npy: element (0, 0, 3, 5) is NaN; the inputs must be finite"));
  write_inputs(dir, -std::numeric_limits<float>::infinity());
  r = run("01", {"--load", dir.string()});
  REQUIRE(r.code == fs::kExitBadInput);
  REQUIRE_THAT(r.err, Catch::Contains("is -inf"));
}

TEST_CASE("a FIFO or a pipe as an input is refused at once, not waited on", "[cli][validate]") {
  const auto dir = fresh_dir("fifo");
  REQUIRE(mkfifo((dir / "q.npy").c_str(), 0600) == 0);  // opening it would block until a writer came
  Run r = run("01", {"--load", dir.string()});
  REQUIRE(r.code == fs::kExitBadInput);
  REQUIRE_THAT(r.err, Catch::Contains("q.npy: is a pipe or FIFO, not a regular file"));
  int fds[2];  // what `--mask <(...)` passes: /dev/fd/N of a pipe (it said "bad magic")
  REQUIRE(::pipe(fds) == 0);
  r = run("06", {"--seq", "256", "--mask", "/dev/fd/" + std::to_string(fds[0])});
  ::close(fds[0]);
  ::close(fds[1]);
  REQUIRE(r.code == fs::kExitBadInput);
  REQUIRE_THAT(r.err, Catch::Contains("is a pipe or FIFO, not a regular file"));
}

TEST_CASE("a block mask that keeps no block is refused", "[cli][validate]") {
  const auto dir = fresh_dir("mask");
  Run r = run("06", {"--seq", "256", "--pattern", "random:0"});
  REQUIRE(r.code == fs::kExitBadInput);
  REQUIRE_THAT(r.err, Catch::Contains("the block mask keeps no block"));
  fs::write_block_mask((dir / "zero.npy").string(), fs::empty_mask(256, 128, 128));
  r = run("06", {"--seq", "256", "--mask", (dir / "zero.npy").string()});
  REQUIRE(r.code == fs::kExitBadInput);
  REQUIRE_THAT(r.err, Catch::Contains("the block mask keeps no block"));
  fs::BlockMask upper = fs::empty_mask(256, 128, 128);
  upper.set(0, 1, true);  // only a block above the diagonal: nothing left with --causal
  fs::write_block_mask((dir / "upper.npy").string(), upper);
  r = run("06", {"--seq", "256", "--causal", "--mask", (dir / "upper.npy").string()});
  REQUIRE(r.code == fs::kExitBadInput);
  REQUIRE_THAT(r.err, Catch::Contains("keeps no block on or below the diagonal"));
}

// Issue 14: at N = 4194304, step 06 built its 1 GiB mask (32768² blocks) before it could refuse
// to run without a GPU. The checks before the GPU now look at the pattern, not the mask.
TEST_CASE("checking a large block-sparse run allocates no mask", "[cli][validate]") {
  fs::Options opt = *parse("06", {"--seq", "4194304", "--batch", "1", "--heads", "1"});
  struct rusage before {}, after {};
  getrusage(RUSAGE_SELF, &before);
  for (const char* pattern : {"butterfly", "local:1", "random:0.01", "dense"}) {
    opt.pattern = pattern;
    const fs::RunPlan plan(*fs::find_step("06"), opt);  // checked, the mask not built
  }
  getrusage(RUSAGE_SELF, &after);
  REQUIRE(after.ru_maxrss - before.ru_maxrss < 64 * 1024);  // KiB: well under the mask's 1 GiB
  opt.pattern = "global:40000,1";  // and a bad spec is still found, on the grid alone
  REQUIRE_THROWS_WITH(fs::RunPlan(*fs::find_step("06"), opt), Catch::Contains("40000 global blocks"));
}
