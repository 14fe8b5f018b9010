// Block masks from the outside: a .npy mask file for a grid the first bytes choose, and the
// --pattern specs of step 06 (common/block_mask.hpp). A mask or one InputError, never a crash.
#include <cstdlib>
#include <string>

#include "common/block_mask.hpp"
#include "common/errors.hpp"
#include "tests/fuzz/fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using fs::fuzz::take_byte;
  const std::uint8_t mode = take_byte(data, size);
  // N up to 1024 and blocks of 1 to 256: grids of 1 to 2^20 blocks. (Up to 4096, a 2^24-block
  // grid took over 20 s under the sanitizers: a timeout of the harness, not of the code.)
  const int N = 1 + (take_byte(data, size) | (take_byte(data, size) << 8)) % 1024;
  const int block_r = 1 + take_byte(data, size), block_c = mode & 1 ? block_r : 1 + take_byte(data, size);
  try {
    if (mode & 2) {
      const std::string spec(reinterpret_cast<const char*>(data), size);
      const fs::BlockMask m = fs::make_pattern(spec, N, block_r, 1234);
      if (m.dense.size() != std::size_t(m.Tr) * m.Tc) std::abort();
      (void)fs::to_lists(m, mode & 4);
    } else {
      const fs::BlockMask m = fs::read_block_mask(fs::fuzz::as_file(data, size, ".mask.npy"), N, block_r, block_c);
      const fs::BlockLists l = fs::to_lists(m, mode & 4);
      if (!(mode & 4) && fs::from_lists(l, m.block_r, m.block_c) != m) std::abort();  // lists round-trip
    }
  } catch (const fs::InputError&) {
  }
  return 0;
}
