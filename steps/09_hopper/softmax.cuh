// The forward's online softmax on a consumer warp's accumulators of S (hopper.cuh: wgmma leaves
// them in mma.sync's C layout per 8 keys, element e of chunk nt being row g + 8(e / 2), key
// 8nt + 2t + e mod 2): step 08's, with O's rescale left to the caller. With the intra-warpgroup
// overlap, α of tile t is known while O += P̃_{t−1}V_{t−1} is still being written by the tensor
// cores: the consumer multiplies O by α only once that product has landed.
//
// ForwardSoftmax is the consumer's softmax of a 16-bit forward, one object per consumer thread,
// over its two rows' m and ℓ (arrays of the kernel's, which it refers to); the fp8 forward's is
// Fp8Softmax (fp8_softmax.cuh), with the same members:
//   begin(wk)                 a work tile's first: m = −∞, ℓ = 0
//   tile_scales(wk, t)        what tile t's softmax reads from global memory (the 16-bit: nothing)
//   step(s, t, scales, α)     S_t → P̃_t, m and ℓ updated, α returned (Alg. 1 l.9-10)
//   rescale(o, α)             O *= α
//   pack(s, pf)               P̃ rounded to E as P̃V's A operand
//   finish(o, lse_scale)      before the epilogue's O / ℓ and LSE
#pragma once

#include <cmath>
#include <cstdint>

#include "common/flash_tile.cuh"
#include "steps/08_tensor_cores/mma.cuh"
#include "common/problem.hpp"
#include "steps/09_hopper/tile_scheduler.cuh"
#include "steps/09_hopper/traits.cuh"

namespace fs::hopper {

// The max of each of a lane's two rows (g, g + 8) of S and `from`, over the row's 4 lanes.
template <int NT>
__device__ __forceinline__ void row_max(const float (&s)[NT][4], const float (&from)[2], float (&mx)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float p[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) p[nt] = fmaxf(s[nt][2 * h], s[nt][2 * h + 1]);
#pragma unroll
    for (int w = 1; w < NT; w *= 2)
#pragma unroll
      for (int nt = 0; nt + w < NT; nt += 2 * w) p[nt] = fmaxf(p[nt], p[nt + w]);
    mx[h] = fmaxf(from[h], p[0]);
  }
#pragma unroll
  for (int x = 1; x <= 2; x *= 2)
#pragma unroll
    for (int h = 0; h < 2; ++h) mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], x));
}

// The online softmax of one tile as step 08's tc_online_softmax computes it (tc_softmax.cuh: the
// same roundings, so that a one-hot row gets ℓ = 1 and LSE = fl(τ m)), but O's rescale left to
// the caller: with kOverlap, O is still being written by the tensor cores when α is known.
template <int NT>
__device__ __forceinline__ void softmax_tile(float (&s)[NT][4], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                             float scale_log2) {
  float mx[2];
  row_max(s, m, mx);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float m_use = __fmul_rn(mx[h] == -INFINITY ? 0.f : mx[h], scale_log2);
    alpha[h] = tc::exp2_fast(__fsub_rn(__fmul_rn(m[h], scale_log2), m_use));
    m[h] = mx[h];
    l[h] *= alpha[h];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 2 * h; e < 2 * h + 2; ++e) {
        s[nt][e] = tc::exp2_fast(__fsub_rn(__fmul_rn(s[nt][e], scale_log2), m_use));
        l[h] += s[nt][e];
      }
  }
}

template <int DT>
__device__ __forceinline__ void rescale_o(float (&o)[DT][4], const float (&alpha)[2]) {
#pragma unroll
  for (int dt = 0; dt < DT; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[dt][e] *= alpha[e >> 1];
}

// P̃ rounded to E as wgmma's A operand: keys [16kk, 16kk + 16) are S's 8-column chunks 2kk, 2kk + 1.
template <typename E, int NT>
__device__ __forceinline__ void pack_p(const float (&s)[NT][4], std::uint32_t (&pf)[NT / 2][4]) {
#pragma unroll
  for (int kk = 0; kk < NT / 2; ++kk) {
    pf[kk][0] = tc::Element<E>::pack(s[2 * kk][0], s[2 * kk][1]);
    pf[kk][1] = tc::Element<E>::pack(s[2 * kk][2], s[2 * kk][3]);
    pf[kk][2] = tc::Element<E>::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    pf[kk][3] = tc::Element<E>::pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
  }
}

// The 16-bit forward's softmax: S in the units of Q·Kᵀ, τ · log2 e turning them into base 2.
template <typename E>
struct ForwardSoftmax {
  struct TileScales {};  // S_t is τ QK_tᵀ whatever the tile
  float (&m)[1][2];  // the kernel's registers ([1]: one 16-row tile per warp, tc_finish_rows' shape)
  float (&l)[1][2];
  const float scale_log2;

  __device__ __forceinline__ ForwardSoftmax(float (&m_)[1][2], float (&l_)[1][2], const TmaMaps&, const FwdParams& p,
                                            const ConsumerThread&)
      : m(m_), l(l_), scale_log2(p.scale * kLog2e) {}
  __device__ __forceinline__ void begin(const Work&) {
    m[0][0] = m[0][1] = -INFINITY;
    l[0][0] = l[0][1] = 0.f;
  }
  __device__ __forceinline__ TileScales tile_scales(const Work&, int) const { return {}; }
  template <int NT>
  __device__ __forceinline__ void step(float (&s)[NT][4], int, const TileScales&, float (&alpha)[2]) {
    softmax_tile(s, m[0], l[0], alpha, scale_log2);
  }
  template <int DT>
  __device__ __forceinline__ void rescale(float (&o)[DT][4], const float (&alpha)[2]) const {
    rescale_o(o, alpha);
  }
  template <int NT>
  __device__ __forceinline__ void pack(const float (&s)[NT][4], std::uint32_t (&pf)[NT / 2][4]) const {
    pack_p<E>(s, pf);
  }
  template <int DT>
  __device__ __forceinline__ void finish(float (&)[1][DT][4], float&) const {}  // LSE = τ m + ln ℓ as it is
};

}  // namespace fs::hopper
