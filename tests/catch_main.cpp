// main() of every test executable. A GPU test executable (built with FS_GPU_TESTS) that
// finds no usable GPU prints why and exits with 77, which CTest reports as "Skipped" —
// never as passed. Listing tests (what catch_discover_tests does at build time) needs no GPU.
// Catch2 itself is compiled once, in catch_session.cpp.
#include <cstdio>
#include <string>

#ifdef FS_GPU_TESTS
#include "common/device.hpp"
#endif

int run_catch_session(int argc, char** argv);

int main(int argc, char** argv) {
#ifdef FS_GPU_TESTS
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing = listing || std::string(argv[i]).rfind("--list", 0) == 0;
  if (!listing) {
    if (const std::string why = fs::gpu_unavailable_reason(); !why.empty()) {
      std::printf("SKIPPED (GPU test): %s\n", why.c_str());
      return 77;
    }
  }
#endif
  return run_catch_session(argc, argv);
}
