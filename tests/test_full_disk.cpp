// Writes on a full disk and a read-only folder: every writer fails in one line and leaves
// nothing at its final path (issue 14: write_npy and write_block_mask left a 0-byte file and
// reported success for small files, append_csv dropped rows silently). The disk is a 64 KiB
// tmpfs in this process's own mount namespace, so it needs root (CI and the build machines
// run as root); elsewhere the executable exits 77, which CTest shows as skipped.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/block_mask.hpp"
#include "common/errors.hpp"
#include "common/files.hpp"
#include "common/npy.hpp"
#include "common/results.hpp"
#include "common/trace/trace_io.hpp"
#include "tests/trace_fixtures.hpp"

namespace stdfs = std::filesystem;

namespace {

std::string g_full;       // a 64 KiB tmpfs, filled up by fill()
std::string g_read_only;  // a read-only tmpfs

// Fills the disk to the last byte, so that any write fails with ENOSPC.
void fill() {
  std::ofstream out(g_full + "/filler", std::ios::binary | std::ios::app);
  const std::string block(4096, 'x');
  for (int i = 0; i < 64 && out; ++i) out.write(block.data(), block.size());
}
void empty() { stdfs::remove(g_full + "/filler"); }

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : stdfs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  return names;
}

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("write_npy on a full disk fails and leaves nothing, small file or large", "[files][full-disk]") {
  for (std::size_t n : {std::size_t(4), std::size_t(40000)}) {  // 16 bytes of data, and 160 KB > the disk
    fill();
    const std::vector<float> x(n, 1.f);
    const std::string path = g_full + "/o.npy";
    REQUIRE_THROWS_WITH(fs::write_npy(path, x.data(), {std::int64_t(n)}), path + ": cannot write (No space left on device)");
    REQUIRE(files_in(g_full) == std::vector<std::string>{"filler"});
    empty();
  }
  // With room it works, so the failures above were the disk's.
  const float y[3] = {1, 2, 3};
  fs::write_npy(g_full + "/o.npy", y, {3});
  REQUIRE(fs::read_npy(g_full + "/o.npy").data == std::vector<float>{1, 2, 3});
  stdfs::remove(g_full + "/o.npy");
}

TEST_CASE("write_block_mask and write_trace on a full disk fail and leave nothing", "[files][full-disk]") {
  fill();
  const std::string mask = g_full + "/mask.npy", trace = g_full + "/t.json";
  REQUIRE_THROWS_WITH(fs::write_block_mask(mask, fs::pattern_dense(256, 128)), mask + ": cannot write (No space left on device)");
  REQUIRE_THROWS_AS(fs::trace::write_trace(fs::test::good_trace(), trace), fs::trace::TraceError);
  REQUIRE_THROWS_WITH(fs::trace::write_trace(fs::test::good_trace(), trace), trace + ": cannot write (No space left on device)");
  REQUIRE(files_in(g_full) == std::vector<std::string>{"filler"});
  empty();
}

TEST_CASE("append_csv on a full disk fails and leaves the file as it was", "[files][full-disk]") {
  const std::string path = g_full + "/results.csv";
  fs::ResultRow row;
  row.gpu = "NVIDIA H200";
  row.step = "04_online_softmax/fa2";
  row.pass = "fwd";
  fs::append_csv(path, row);
  // Rows up to a page's end: the next one needs a new page of the disk (a row that still fits
  // in the file's last page would be written, full disk or not).
  while (slurp(path).size() + fs::csv_line(row).size() + 1 <= 4096) fs::append_csv(path, row);
  const std::string before = slurp(path);
  REQUIRE(before.rfind(fs::csv_header() + "\n", 0) == 0);
  fill();
  REQUIRE_THROWS_WITH(fs::append_csv(path, row), path + ": cannot append (No space left on device)");
  REQUIRE(slurp(path) == before);  // no partial row
  empty();
  fs::append_csv(path, row);
  REQUIRE(slurp(path).size() > before.size());
  stdfs::remove(path);
}

TEST_CASE("a read-only folder is reported before any work, and writes into it fail", "[files][full-disk]") {
  REQUIRE_THAT(fs::output_dir_problem(g_read_only), Catch::Contains("is not writable (Read-only file system)"));
  REQUIRE_THAT(fs::output_dir_problem(g_read_only + "/new"), Catch::Contains("is not writable"));
  REQUIRE_THAT(fs::output_file_problem(g_read_only + "/r.csv"), Catch::Contains("is not writable"));
  const float x[1] = {1};
  REQUIRE_THROWS_WITH(fs::write_npy(g_read_only + "/o.npy", x, {1}),
                      g_read_only + "/o.npy: cannot write (Read-only file system)");
}

int main(int argc, char** argv) {
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing = listing || std::string(argv[i]).rfind("--list", 0) == 0;
  if (listing) return Catch::Session().run(argc, argv);
  char full[] = "/tmp/flashsteps_full_disk_XXXXXX", ro[] = "/tmp/flashsteps_read_only_XXXXXX";
  // A private mount namespace: the mounts vanish with this process, whatever happens to it.
  if (!::mkdtemp(full) || !::mkdtemp(ro) || ::unshare(CLONE_NEWNS) != 0 ||
      ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
      ::mount("tmpfs", full, "tmpfs", 0, "size=64k") != 0 || ::mount("tmpfs", ro, "tmpfs", MS_RDONLY, "size=4k") != 0) {
    std::printf("SKIPPED (needs root for a tmpfs in a private mount namespace): %s\n", std::strerror(errno));
    ::rmdir(full);
    ::rmdir(ro);
    return 77;
  }
  g_full = full;
  g_read_only = ro;
  const int status = Catch::Session().run(argc, argv);
  ::umount(full);
  ::umount(ro);
  ::rmdir(full);
  ::rmdir(ro);
  return status;
}
