// Step 10's kernels compiled for the CPU emulation (common/emulator), at one element type and head
// dimension: tests/CMakeLists.txt compiles this file once for each the emulated tests run,
// FS_DECODE_EMULATED_E and FS_DECODE_EMULATED_D naming them, so that no unit takes long.
#include "common/emulator/emulator.hpp"  // first: it defines threadIdx, __syncthreads, ... for the kernels

#include "steps/10_decode/decode_launch.cuh"
#include "tests/decode_emulated.hpp"

namespace fs::testing {

template <typename E, int D>
void decode_emulated(const decoding::DecodeParams& p) {
  decoding::launch_decode<E, D>(p);
}
template <typename E, int D>
void decode_combine_emulated(const decoding::DecodeParams& p) {
  const dim3 grid(static_cast<unsigned>((p.shape.rows() + decoding::kCombineWarps - 1) / decoding::kCombineWarps));
  emu::launch(decoding::decode_combine_kernel<E, D>, grid, 32 * decoding::kCombineWarps, 0, p, trace::Slices{});
}
template void decode_emulated<FS_DECODE_EMULATED_E, FS_DECODE_EMULATED_D>(const decoding::DecodeParams&);
template void decode_combine_emulated<FS_DECODE_EMULATED_E, FS_DECODE_EMULATED_D>(const decoding::DecodeParams&);

}  // namespace fs::testing
