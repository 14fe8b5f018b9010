// main() of every test executable. A GPU test executable (built with FS_GPU_TESTS) that
// finds no usable GPU prints why and exits with 77, which CTest reports as "Skipped" —
// never as passed. Listing tests (what catch_discover_tests does at build time) needs no GPU.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#ifdef FS_GPU_TESTS
#include "common/device.hpp"
#endif

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
  return Catch::Session().run(argc, argv);
}
