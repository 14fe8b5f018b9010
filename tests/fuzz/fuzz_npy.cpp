// The .npy reader (common/npy.hpp) on any bytes: a tensor, a raw array of every dtype it reads,
// or one InputError naming the file — never a crash, a sanitizer report or another exception.
#include <cstdlib>

#include "common/errors.hpp"
#include "common/npy.hpp"
#include "tests/fuzz/fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = fs::fuzz::as_file(data, size, ".npy");
  try {
    const fs::NpyArray a = fs::read_npy(path);
    std::int64_t n = 1;
    for (auto d : a.shape) n *= d;
    if (n != std::int64_t(a.data.size())) std::abort();  // the shape promises what the data holds
  } catch (const fs::InputError&) {
  }
  try {
    const fs::NpyRaw r = fs::read_npy_raw(path, {"|b1", "|u1", "<i4", "<i8", "<f4", "<f8"}, "is not one of ours");
    for (std::int64_t i = 0; i < r.elements() && i < 64; ++i) (void)r.value(i);
  } catch (const fs::InputError&) {
  }
  return 0;
}
