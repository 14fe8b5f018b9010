// Step 05's dropout, as the policy object the forward and backward kernels take
// (common/tile_policies.cuh): each probability P_ij is kept with probability 1 − p and then
// scaled by 1/(1 − p), else zeroed (Algorithm 2, line 14; Algorithm 4, lines 16 and 18). The mask
// Z is never stored: it is a function of (seed, head, i, j) through Philox (common/philox.hpp),
// recomputed wherever it is needed, so that the backward drops exactly what the forward did.
//
//   const PhiloxDropout dropout(p.dropout, bh, seq.q0, seq.k0);  // the CTA's span's first tokens
//   dropout.keep<false, R, BC>(row, j0).apply(s);   // s (R, BC): rows row.., keys j0.. of the span
#pragma once

#include <cuda_runtime.h>

#include "common/philox.hpp"
#include "common/problem.hpp"

namespace fs {

// Which of a thread's R × BC probabilities survive, as bits r·BC + c, and the scale of those
// that do.
template <int R, int BC>
struct KeepBits {
  unsigned bits;
  float scale;  // 1/(1 − p)
  // p[r][c] ← p[r][c] · Z_rc: Z is the scale where kept, 0 where dropped. A product (not a
  // select), so that the compiler may fuse it into the subtraction that follows in the backward
  // (dS = P ∘ (dP ∘ Z − D)): one rounding, as the kernels of steps 05 and 06 always had.
  __device__ __forceinline__ void apply(float (&p)[R][BC]) const {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int c = 0; c < BC; ++c) p[r][c] *= (bits >> (r * BC + c)) & 1u ? scale : 0.f;
  }
};

struct PhiloxDropout {
  Dropout dp;
  unsigned long long bh;
  unsigned threshold;  // a score is kept when its 32 random bits are ≥ threshold ≈ p·2³²
  float scale;
  // The CTA's first query and key token (SeqSpan, common/tile_policies.cuh): the kernels count
  // rows and keys within their span, the mask is indexed by token, (q0 + i, k0 + j). 0 but for
  // packed sequences.
  int q0, k0;

  __device__ PhiloxDropout(const Dropout& d, long long head, int q0_ = 0, int k0_ = 0)
      : dp(d),
        bh(static_cast<unsigned long long>(head)),
        threshold(dropout_threshold(d.p)),
        scale(1.f / (1.f - d.p)),
        q0(q0_),
        k0(k0_) {}

  // The keep bits of the R × BC scores (query row + r, key col0 + c), or with kKeyRows (the
  // backward's dK/dV kernel, whose threads own keys) (query col0 + c, key row + r), counted within
  // the span. row and col0 are even: one Philox call covers an aligned 2 × 2 block of scores, all
  // four of its words used — aligned in tokens, so this holds while the span starts at even tokens.
  template <bool kKeyRows, int R, int BC>
  __device__ __forceinline__ KeepBits<R, BC> keep(int row, int col0) const {
    static_assert(R % 2 == 0 && BC % 2 == 0 && R * BC <= 32, "2 × 2 blocks, one bit per score");
    // A packed sequence starting at an odd token (a constant 0 without packed sequences folds this away).
    if ((q0 | k0) & 1) return keep_straddling<kKeyRows, R, BC>(row, col0);
    unsigned bits = 0;
#pragma unroll
    for (int r = 0; r < R; r += 2)
#pragma unroll
      for (int c = 0; c < BC; c += 2) {
        const int q = q0 + (kKeyRows ? col0 + c : row + r), k = k0 + (kKeyRows ? row + r : col0 + c);
        const Philox4x32 x = dropout_bits(dp.seed, bh, q, k);
#pragma unroll
        for (int a = 0; a < 2; ++a)      // row offset
#pragma unroll
          for (int b = 0; b < 2; ++b) {  // column offset
            const int word = kKeyRows ? 2 * b + a : 2 * a + b;  // 2·(query parity) + key parity
            if (x.v[word] >= threshold) bits |= 1u << ((r + a) * BC + c + b);
          }
      }
    return {bits, scale};
  }

 private:
  // The same bits where the span starts at an odd query or key token: the tile's 2 × 2 blocks then
  // straddle the generator's, which are aligned in tokens. The tile's NQ queries from token q and
  // NK keys from token k meet (NQ/2 + q mod 2) × (NK/2 + k mod 2) of them; each call's four words
  // go to the scores of the tile its block covers. More calls than the aligned path's, for the
  // CTAs of such sequences only.
  template <bool kKeyRows, int R, int BC>
  __device__ KeepBits<R, BC> keep_straddling(int row, int col0) const {
    constexpr int NQ = kKeyRows ? BC : R, NK = kKeyRows ? R : BC;  // the tile's queries and keys
    const int q = q0 + (kKeyRows ? col0 : row), k = k0 + (kKeyRows ? row : col0);
    const int pq = q & 1, pk = k & 1;  // the tile's offset into its first blocks
    unsigned bits = 0;
#pragma unroll
    for (int u = 0; u <= NQ; u += 2)
#pragma unroll
      for (int w = 0; w <= NK; w += 2) {
        if ((u == NQ && !pq) || (w == NK && !pk)) continue;  // a block past the tile
        const Philox4x32 x = dropout_bits(dp.seed, bh, q - pq + u, k - pk + w);
#pragma unroll
        for (int a = 0; a < 2; ++a)      // query parity
#pragma unroll
          for (int b = 0; b < 2; ++b) {  // key parity
            const int i = u + a - pq, j = w + b - pk;  // the score's query and key in the tile
            if (i < 0 || i >= NQ || j < 0 || j >= NK) continue;
            if (x.v[2 * a + b] >= threshold) bits |= 1u << (kKeyRows ? j * BC + i : i * BC + j);
          }
      }
    return {bits, scale};
  }
};

}  // namespace fs
