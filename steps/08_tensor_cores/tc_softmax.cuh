// The online softmax of step 08's forward, on one warp's accumulator tiles of S (mma.cuh: element e
// of 8-key tile nt of 16-row tile mt is row g + 8(e / 2), key 8nt + 2·t4 + e mod 2). The same code
// serves every product flavour — bf16 and fp16 (m16n8k16) and fp32 as 3×TF32 (m16n8k8) leave S in
// that one layout — so the 16-bit forward (flash_tc_forward.cuh) and the fp32 one
// (flash_tc_forward_f32.cuh) differ only in how their tiles reach the tensor cores.
#pragma once

#include <cmath>

#include "steps/08_tensor_cores/mma.cuh"
#include "steps/08_tensor_cores/tc_dropout.cuh"

namespace fs::tc {

// f(mt, nt, x) over a lane's part of a warp's accumulator tiles (mma.cuh), 16-row tile mt, 8-column
// tile nt: by element (kPer = 4: x = e, row 16mt + g + 8(e / 2) of the warp's, column 8nt + 2·t4 +
// e mod 2), or by pair (kPer = 2: x = h, elements 2h and 2h + 1, row 16mt + g + 8h, columns 8nt +
// 2·t4 and one more).
template <int MT, int NT, int kPer, typename F>
__device__ __forceinline__ void tc_for_each(F&& f) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int x = 0; x < kPer; ++x) f(mt, nt, x);
}

// Keys past Nk, and (causal) keys after the query's diagonal key row + δ, get -inf: only in the
// tiles that need it (the CTA's rows row0.., the warp's from row0 + wrow0, keys j0 .. j0 + BN).
template <bool kCausal, int BN, int MT, int NT>
__device__ __forceinline__ void tc_mask_tile(float (&s)[MT][NT][4], int row0, int wrow0, int j0, int Nk, int shift) {
  if (j0 + BN > Nk || (kCausal && j0 + BN - 1 > row0 + shift)) {
    const int lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = row0 + wrow0 + 16 * mt + g + 8 * (e >> 1), col = j0 + 8 * nt + 2 * t4 + (e & 1);
          if (col >= Nk || (kCausal && col > row + shift)) s[mt][nt][e] = -INFINITY;
        }
  }
}

// Before the first key tile: every row's running max m = −∞ and its part of ℓ 0.
template <int MT>
__device__ __forceinline__ void tc_softmax_start(float (&m)[MT][2], float (&l)[MT][2]) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      m[mt][h] = -INFINITY;
      l[mt][h] = 0.f;
    }
}

// One key tile of the online softmax (h: row g or g + 8 of the row tile): m and ℓ updated, O
// rescaled by α, and S replaced by P̃ = e^{τ s − τ m}. First every row's max, over this lane's
// columns and then over the row's 4 lanes — all of the lane's rows at each step, so that their
// shuffles are in flight together rather than one row's after another's.
// kLazy: O rescaled by α only in the tiles where some row of the warp has a new max (below).
template <bool kLazy, int MT, int NT, int DT>
__device__ __forceinline__ void tc_online_softmax(float (&s)[MT][NT][4], float (&m)[MT][2], float (&l)[MT][2],
                                                  float (&o)[MT][DT][4], float scale_log2) {
  float mxs[MT][2];
  [[maybe_unused]] float alphas[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = m[mt][h];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * h], s[mt][nt][2 * h + 1]));
      mxs[mt][h] = mx;
    }
#pragma unroll
  for (int x = 1; x <= 2; x *= 2)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) mxs[mt][h] = fmaxf(mxs[mt][h], __shfl_xor_sync(0xffffffffu, mxs[mt][h], x));
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float mx = mxs[mt][h];
      // Still -inf: every key so far is masked for this row, and exp2(-inf - (-inf)) would be
      // NaN. Subtracting 0 instead gives P = 0: O and ℓ stay 0.
      // Every rounding below is spelled out (__fmul_rn, __fsub_rn): left to itself the compiler
      // fuses a multiply into the subtraction that uses it — m_use's into each of its uses,
      // too — and the differences that must be exactly 0 become rounding errors instead.
      const float m_use = __fmul_rn(mx == -INFINITY ? 0.f : mx, scale_log2);
      // α = e^{τ(m − m_new)}, 0 at first; its exponent rounded as P̃'s, fl(τ log2(e) m) − m_use,
      // so that α is exactly 1 when the max has not moved. Fused into one FMA it would be the
      // rounding error of τ log2(e) m instead, ℓ and O would drift by it on every tile, and at
      // scores of 1e5 a one-hot row's ℓ would miss 1 by a percent: O / ℓ does not see it, but
      // LSE does, and the backward's P of that row with it.
      const float alpha = exp2_fast(__fsub_rn(__fmul_rn(m[mt][h], scale_log2), m_use));
      m[mt][h] = mx;
      l[mt][h] *= alpha;
      if constexpr (kLazy) {
        alphas[mt][h] = alpha;
      } else {
#pragma unroll
        for (int dt = 0; dt < DT; ++dt) {
          o[mt][dt][2 * h] *= alpha;
          o[mt][dt][2 * h + 1] *= alpha;
        }
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 2 * h; e < 2 * h + 2; ++e) {
          // P̃_ij = e^{τ s − τ m}. Rounded as τ log2(e)·s, then the difference, not fused: the
          // top score's exponent is then exactly 0 (P̃ = 1), so that a one-hot row has ℓ = 1,
          // LSE = fl(τ m) and the backward recomputes exactly this P (flash_tc_backward.cuh).
          s[mt][nt][e] = exp2_fast(__fsub_rn(__fmul_rn(s[mt][nt][e], scale_log2), m_use));
          l[mt][h] += s[mt][nt][e];
        }
    }
  // Lazy: α is exactly 1 where a row's max did not move (above), and O·1 is O. Once the max of a
  // row has settled, most tiles move no max of the warp's 32 rows, and the warp votes to skip
  // the 4·MT·DT multiplies; the result is bit for bit the same.
  if constexpr (kLazy) {
    bool moved = false;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) moved |= alphas[mt][0] != 1.f || alphas[mt][1] != 1.f;
    if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int dt = 0; dt < DT; ++dt)
#pragma unroll
          for (int e = 0; e < 4; ++e) o[mt][dt][e] *= alphas[mt][e >> 1];
    }
  }
}

// P̃ ∘ Z for P̃V; ℓ has summed P̃ before it (Algorithm 2, line 14). row_base: the warp's first row.
template <int MT, int NT>
__device__ __forceinline__ void tc_dropout_tile(float (&s)[MT][NT][4], const TcDropout& dropout, int row_base, int j0) {
  const int lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
  tc_for_each<MT, NT, 2>([&](int mt, int nt, int h) {
    const Z2 z = dropout.along_keys(row_base + 16 * mt + g + 8 * h, j0 + 8 * nt + 2 * t4);
    s[mt][nt][2 * h] *= z.z0;
    s[mt][nt][2 * h + 1] *= z.z1;
  });
}

// The end of the forward: O = O / ℓ (ℓ summed over the row's 4 lanes) and LSE = fl(τ m) + ln ℓ,
// rounded as the backward recomputes P from it (flash_tc_backward.cuh, tc_prob), for the warp's
// rows from row_base below N. store(row, dt, x0, x1) writes columns 8dt + 2·t4, +1 of O's row.
template <int MT, int DT, typename Store>
__device__ __forceinline__ void tc_finish_rows(const float (&o)[MT][DT][4], const float (&m)[MT][2],
                                               const float (&l)[MT][2], int row_base, int N, float scale,
                                               float* gLse, Store&& store) {
  const int lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float lr = l[mt][h];
      lr += __shfl_xor_sync(0xffffffffu, lr, 1);
      lr += __shfl_xor_sync(0xffffffffu, lr, 2);
      const int row = row_base + 16 * mt + g + 8 * h;
      if (row >= N) continue;
      // A row that saw no key (ℓ = 0) gets O = 0 and LSE = -inf, never 0/0.
      const float inv = lr > 0.f ? 1.f / lr : 0.f;
#pragma unroll
      for (int dt = 0; dt < DT; ++dt) store(row, dt, o[mt][dt][2 * h] * inv, o[mt][dt][2 * h + 1] * inv);
      if (t4 == 0) gLse[row] = lr > 0.f ? __fadd_rn(__fmul_rn(m[mt][h], scale), logf(lr)) : -INFINITY;
    }
}

}  // namespace fs::tc
