// The fp8 forward's online softmax (flash_hopper_fp8.cuh): Fp8Softmax, the consumer's Softmax
// object with ForwardSoftmax's members (softmax.cuh), on the products of e4m3 Q and K.
//
// S (the products of e4m3 Q and K) times c = its two blocks' scales · τ · log2 e is the score in
// base-2 units, different for each tile, so m is kept in those units (not S's, as softmax_tile
// does). P̃ = 2^(x − m + 8), at most 2⁸ = 256: e4m3 holds up to 448, and its smallest values
// (subnormal below 2⁻⁶) sit 8 binades further from P̃'s largest than they would with P̃ ≤ 1
// (FlashAttention-3's max offset). ℓ sums the same P̃, so the offset cancels in O / ℓ; LSE takes
// it out (fp8_lse_m). P̃ is rounded to e4m3 where it lies, as P̃V's 8-bit A operand (pack_p_fp8),
// and O is kept in units of a V block's scale.
#pragma once

#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>

#include "common/flash_tile.cuh"
#include "common/problem.hpp"
#include "steps/08_tensor_cores/mma.cuh"
#include "steps/09_hopper/fp8.cuh"
#include "steps/09_hopper/softmax.cuh"
#include "steps/09_hopper/tile_scheduler.cuh"
#include "steps/09_hopper/traits.cuh"

namespace fs::hopper {

constexpr float kFp8Offset = 8.f;
#ifndef FS_EMULATION
__device__ __forceinline__ float fast_div(float a, float b) { return __fdividef(a, b); }
__device__ __forceinline__ float fast_log2(float a) { return __log2f(a); }
#else
inline float fast_div(float a, float b) { return a / b; }
inline float fast_log2(float a) { return std::log2(a); }
#endif
// The lazy fp8 softmax (Fp8Config's kLazy), in three parts that each keep P̃ below e4m3's 448.
//  - V's scale moves into P̃. Without it, O is kept in the units of the latest tile's V block and
//    α carries sv_{t−1} / sv_t, which is never 1. With it, O is kept in the units of sv_h, the
//    largest V scale of the head, and P̃ of tile t is 2^(x − m + off + log2 r) with r = sv_t /
//    sv_h ≤ 1 (one lg2 a tile); ℓ adds that tile's sum times 1 / r, so it still sums P̃.
//  - The max is lazy: m moves only where the tile's max exceeds it by more than kSlack, else P̃
//    is taken against the old m (the softmax is the same whatever m is, as long as P̃ fits), and
//    α is exactly 1. Where no row of a warp moved, the warp skips O's rescale (as step 08's
//    kLazy does). FlashAttention-4's conditional rescaling, with e4m3's ceiling as its bound.
//  - The offset is off = min(8, 8.8 − kSlack): P̃ ≤ 2^(off + kSlack) ≤ 2^8.8 < 448.
struct Fp8Lazy {
  float lg_r = 0.f, inv_r = 1.f;  // log2 r and 1 / r of the tile's V scale against the head's
  float slack = 0.f, off = kFp8Offset;
};
template <typename Cfg>
__host__ __device__ constexpr float fp8_offset() {
  return Cfg::kLazy && Cfg::kSlack > 0.8f ? 8.8f - Cfg::kSlack : kFp8Offset;
}
// kSumParts: ℓ's sum of the tile in that many partial sums, so that its adds do not wait on each
// other.
template <int NT, int kSumParts, bool kLazy = false>
__device__ __forceinline__ void softmax_tile_fp8(float (&s)[NT][4], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                                 float c, const Fp8Lazy& lz = {}) {
  float mx[2];
  const float none[2] = {-INFINITY, -INFINITY};
  row_max(s, none, mx);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float m_new = fmaxf(m[h], mx[h] * c);  // c > 0: the max of the scaled scores
    bool moved = true;
    if constexpr (kLazy) {
      moved = m_new > m[h] + lz.slack;  // false for a row that has seen only −inf, and stays there
      m_new = moved ? m_new : m[h];
    }
    const float m_use = m_new == -INFINITY ? 0.f : m_new;
    alpha[h] = moved ? tc::exp2_fast(m[h] - m_use) : 1.f;
    m[h] = m_new;
    const float bias = kLazy ? lz.off - m_use + lz.lg_r : kFp8Offset - m_use;
    float part[kSumParts];
    part[0] = kLazy ? 0.f : l[h] * alpha[h];
#pragma unroll
    for (int i = 1; i < kSumParts; ++i) part[i] = 0.f;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 2 * h; e < 2 * h + 2; ++e) {
        const float x = fmaf(s[nt][e], c, bias);
        s[nt][e] = tc::exp2_fast(x);
        part[nt % kSumParts] += s[nt][e];
      }
#pragma unroll
    for (int i = 1; i < kSumParts; ++i) part[0] += part[i];
    l[h] = kLazy ? fmaf(part[0], lz.inv_r, l[h] * alpha[h]) : part[0];
  }
}
// tc_finish_rows's m for LSE = m · 1 + ln ℓ: (m − off) ln 2, from the base-2 max and P̃'s offset.
__device__ __forceinline__ float fp8_lse_m(float m, float off = kFp8Offset) { return (m - off) * 0.69314718f; }

// P̃ rounded to e4m3 as wgmma's 8-bit A operand (hopper.cuh): k-step kk covers keys
// [32kk, 32kk + 32), S's chunks 4kk .. 4kk + 3. Register 0 gets row g's keys 2t, 2t + 1 of
// chunks 4kk and 4kk + 1, register 1 row g + 8's, registers 2 and 3 the same of chunks 4kk + 2
// and 4kk + 3: the slots fp8_slot gave those keys in Vᵀ (fp8.cuh).
template <int NT>
__device__ __forceinline__ void pack_p_fp8(const float (&s)[NT][4], std::uint32_t (&pf)[NT / 4][4]) {
  auto pack = [](float a, float b, float c, float d) {
    const std::uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
    const std::uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(c, d), __NV_SATFINITE, __NV_E4M3);
    return lo | hi << 16;
  };
#pragma unroll
  for (int kk = 0; kk < NT / 4; ++kk) {
    const int c = 4 * kk;
    pf[kk][0] = pack(s[c][0], s[c][1], s[c + 1][0], s[c + 1][1]);
    pf[kk][1] = pack(s[c][2], s[c][3], s[c + 1][2], s[c + 1][3]);
    pf[kk][2] = pack(s[c + 2][0], s[c + 2][1], s[c + 3][0], s[c + 3][1]);
    pf[kk][3] = pack(s[c + 2][2], s[c + 2][3], s[c + 3][2], s[c + 3][3]);
  }
}

// The consumer's softmax of the fp8 forward. Cfg's knobs: kSumParts (ℓ's partial sums), kLazy and
// kSlack (Fp8Lazy). sq is the work tile's Q scale, and O is kept in units of sv: O holds
// O_true / sv, each tile's α also carrying sv_{t−1} / sv_t and the end multiplying by sv; with
// kLazy, sv is the head's largest V scale, and α carries none.
template <typename Cfg>
struct Fp8Softmax {
  static_assert(!Cfg::kLazy || (Cfg::kSlack >= 0.f && Cfg::kSlack < 8.8f),
                "kLazy: P̃ ≤ 2^(off + kSlack) ≤ 2^8.8 (fp8_offset)");
  // Tile t's K and V scales, read before its wait for K so that the load's latency passes during
  // the wait and S's product, not at the softmax that needs them.
  struct TileScales {
    float k = 1.f, v = 1.f;
  };
  float (&m)[1][2];  // the kernel's registers; m in base-2 units
  float (&l)[1][2];
  const TmaMaps& maps;
  const Shape& shape;
  const int lane;
  const float scale_log2;
  float sq = 1.f, sv = 1.f;

  __device__ __forceinline__ Fp8Softmax(float (&m_)[1][2], float (&l_)[1][2], const TmaMaps& tma, const FwdParams& p,
                                        const ConsumerThread& th)
      : m(m_), l(l_), maps(tma), shape(p.shape), lane(th.lane), scale_log2(p.scale * kLog2e) {}

  __device__ __forceinline__ void begin(const Work& work) {
    m[0][0] = m[0][1] = -INFINITY;
    l[0][0] = l[0][1] = 0.f;
    sq = block_scale(maps.scale_q, maps.blocks_q, work.bh, work.row0 / kFp8BlockQ);
    if constexpr (Cfg::kLazy) {  // sv_h: the largest of the head's V scales, a max over the warp
      const float* vs = maps.scale_v + kv_head(work, shape) * maps.blocks_kv;
      float mv = 0.f;
      for (int j = lane; j < maps.blocks_kv; j += 32) mv = fmaxf(mv, vs[j]);
#pragma unroll
      for (int x = 16; x >= 1; x /= 2) mv = fmaxf(mv, __shfl_xor_sync(0xffffffffu, mv, x));
      sv = mv;
    }
  }
  __device__ __forceinline__ TileScales tile_scales(const Work& wk, int t) const {
    TileScales ts;
    ts = {block_scale(maps.scale_k, maps.blocks_kv, kv_head(wk, shape), t),
          block_scale(maps.scale_v, maps.blocks_kv, kv_head(wk, shape), t)};
    return ts;
  }
  template <int NT>
  __device__ __forceinline__ void step(float (&s)[NT][4], int t, const TileScales& ts, float (&alpha)[2]) {
    if constexpr (Cfg::kLazy) {
      // r ≤ 1; a V block of zeros (scale 0) adds nothing to O, and its P̃ is taken as it is.
      const bool zero = !(ts.v > 0.f);
      const float r = zero ? 1.f : fast_div(ts.v, sv), inv_r = zero ? 1.f : fast_div(sv, ts.v);
      const Fp8Lazy lz{fast_log2(r), inv_r, Cfg::kSlack, fp8_offset<Cfg>()};
      softmax_tile_fp8<NT, Cfg::kSumParts, Cfg::kLazy>(s, m[0], l[0], alpha, sq * ts.k * scale_log2, lz);
    } else {
      const float sv_t = ts.v > 0.f ? ts.v : sv;  // a V block of zeros (scale 0): O keeps its units
      softmax_tile_fp8<NT, Cfg::kSumParts>(s, m[0], l[0], alpha, sq * ts.k * scale_log2);
      const float ratio = t > 0 ? fast_div(sv, sv_t) : 1.f;
      alpha[0] *= ratio;
      alpha[1] *= ratio;
      sv = sv_t;
    }
  }
  // kLazy: skipped where α is 1 for every row of the warp (the same O, bit for bit).
  template <int DT>
  __device__ __forceinline__ void rescale(float (&o)[DT][4], const float (&alpha)[2]) const {
    if constexpr (Cfg::kLazy)
      if (!__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) return;
    rescale_o(o, alpha);
  }
  template <int NT>
  __device__ __forceinline__ void pack(const float (&s)[NT][4], std::uint32_t (&pf)[NT / 4][4]) const {
    pack_p_fp8(s, pf);
  }
  // O back from V's units, and m from base 2 with P̃'s offset out (LSE = m · 1 + ln ℓ).
  template <int DT>
  __device__ __forceinline__ void finish(float (&o)[1][DT][4], float& lse_scale) {
    const float unit[2] = {sv, sv};
    rescale_o(o[0], unit);
    m[0][0] = fp8_lse_m(m[0][0], fp8_offset<Cfg>());
    m[0][1] = fp8_lse_m(m[0][1], fp8_offset<Cfg>());
    lse_scale = 1.f;
  }

 private:
  __device__ __forceinline__ static float block_scale(const float* scales, int blocks, std::int64_t head, int block) {
    return scales[head * blocks + block];
  }
};

}  // namespace fs::hopper
