// Step 05's dropout, as the policy object the forward and backward kernels take
// (common/tile_policies.cuh): each probability P_ij is kept with probability 1 − p and then
// scaled by 1/(1 − p), else zeroed (Algorithm 2, line 14; Algorithm 4, lines 16 and 18). The mask
// Z is never stored: it is a function of (seed, head, i, j) through Philox (common/philox.hpp),
// recomputed wherever it is needed, so that the backward drops exactly what the forward did.
//
//   const PhiloxDropout dropout(p.dropout, bh);
//   dropout.keep<false, R, BC>(row, j0).apply(s);   // s (R, BC): rows row.., keys j0..
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

  __device__ PhiloxDropout(const Dropout& d, long long head)
      : dp(d), bh(static_cast<unsigned long long>(head)), threshold(dropout_threshold(d.p)), scale(1.f / (1.f - d.p)) {}

  // The keep bits of the R × BC scores (query row + r, key col0 + c), or with kKeyRows (the
  // backward's dK/dV kernel, whose threads own keys) (query col0 + c, key row + r). row and col0
  // must be even: one Philox call covers an aligned 2 × 2 block of scores, all four of its words
  // used.
  template <bool kKeyRows, int R, int BC>
  __device__ __forceinline__ KeepBits<R, BC> keep(int row, int col0) const {
    static_assert(R % 2 == 0 && BC % 2 == 0 && R * BC <= 32, "2 × 2 blocks, one bit per score");
    unsigned bits = 0;
#pragma unroll
    for (int r = 0; r < R; r += 2)
#pragma unroll
      for (int c = 0; c < BC; c += 2) {
        const int q = kKeyRows ? col0 + c : row + r, k = kKeyRows ? row + r : col0 + c;
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
};

}  // namespace fs
