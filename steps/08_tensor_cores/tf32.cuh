// fp32 on the tensor cores (variant 3xtf32): the pieces its kernels share — fp32 tiles in padded
// rows, and each product as 3×TF32 (mma.cuh, Tf32) summed from zero. The forward is
// flash_tc_forward_f32.cuh, the backward flash_tc_backward_f32.cuh; the backward's preprocess
// (preprocess_convert.cuh) sums D_i by mma_3x too.
#pragma once

#include <cstdint>

#include "common/cuda_utils.cuh"
#include "steps/08_tensor_cores/mma.cuh"

namespace fs::tc {

// Shared memory holds fp32 rows of d + 4 floats (Cfg::kStride): the 16 bytes of padding turn every
// row 4 banks further, which spreads the kernels' reads over all 32 banks (no swizzle needed).
//
// Rows [row0, row0 + kRows) of an (n_rows, D) fp32 matrix whose rows are `ld` floats apart into a
// padded tile, 16 bytes per cp.async; rows past n_rows zero-filled. Commit and wait before use.
template <typename Cfg, int kRows>
__device__ __forceinline__ void load_f32_tile(float* s, const float* g, std::int64_t ld, int row0, int n_rows) {
  constexpr int kChunks = Cfg::D / 4, kPerThread = kRows * kChunks / Cfg::kThreads;
  static_assert(kRows * kChunks % Cfg::kThreads == 0, "every thread copies the same number of chunks");
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int i = threadIdx.x + k * Cfg::kThreads, r = i / kChunks, c = i % kChunks;
    const bool valid = row0 + r < n_rows;
    cp_async_16(s + r * Cfg::kStride + 4 * c, g + (valid ? row0 + r : 0) * ld + 4 * c, valid);
  }
}

// d += a·b in Cfg::kPasses TF32 products, from a's and b's heads and rests (the small ones first),
// summed by the tensor cores from zero and added to d by an fp32 add. The tensor cores round each
// result toward zero, always the same way: accumulated in d itself, every one of the d/8 · 3
// products of S = QKᵀ would cut d by up to an ulp of its running sum. Summed from zero, the
// truncation is an ulp of 8 columns' sum, and the add rounds to nearest.
template <int kPasses>
__device__ __forceinline__ void mma_3x(float (&d)[4], const std::uint32_t (&a_hi)[4], const std::uint32_t (&a_lo)[4],
                                      std::uint32_t b0_hi, std::uint32_t b1_hi, std::uint32_t b0_lo,
                                      std::uint32_t b1_lo) {
  float t[4] = {0.f, 0.f, 0.f, 0.f};
  if constexpr (kPasses == 3) {
    Tf32::mma(t, a_lo, b0_hi, b1_hi);
    Tf32::mma(t, a_hi, b0_lo, b1_lo);
  }
  Tf32::mma(t, a_hi, b0_hi, b1_hi);
#pragma unroll
  for (int i = 0; i < 4; ++i) d[i] += t[i];
}

// d += a·b in place, Cfg::kPasses TF32 products (the small ones first): for a sum that starts from
// zero nearby. P̃V: each key tile's products are summed in accumulators of their own, pv, and
// added to O once per tile. Accumulated in O itself, every one of the N/8 · 3 products would
// truncate O's running sum, and the drift reached 3.1e-6 at d = 64, N = 1025 on the H200, over the
// fp32 rule's 2.0e-6; summed from zero per tile, the truncations are ulps of one tile's share, and
// the add to O rounds to nearest. (mma_3x's sum per 8 keys is as accurate, and took 1.07-1.28× the
// time of the tile sum: an fp32 add per mma triple, waiting on the third product.)
template <int kPasses>
__device__ __forceinline__ void mma_3x_in_place(float (&d)[4], const std::uint32_t (&a_hi)[4],
                                                const std::uint32_t (&a_lo)[4], std::uint32_t b0_hi,
                                                std::uint32_t b1_hi, std::uint32_t b0_lo, std::uint32_t b1_lo) {
  if constexpr (kPasses == 3) {
    Tf32::mma(d, a_lo, b0_hi, b1_hi);
    Tf32::mma(d, a_hi, b0_lo, b1_lo);
  }
  Tf32::mma(d, a_hi, b0_hi, b1_hi);
}

}  // namespace fs::tc
