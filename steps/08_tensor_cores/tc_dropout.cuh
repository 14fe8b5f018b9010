// Step 05's dropout mask in the tensor cores' register layouts. The mask is the same function of
// (seed, head, query, key) as everywhere else (common/philox.hpp: one Philox call gives the four
// words of an aligned 2 × 2 block of scores, word 2·(query parity) + key parity), so an fp32 run
// of step 05 and a bf16 run of step 08 with one seed drop the same entries.
//
// What differs is which scores a lane holds (mma.cuh): two consecutive columns of a row. In the
// forward and the dQ kernel the rows are queries, so a lane's pair is (q, k), (q, k + 1); in the
// dK/dV kernel, which computes Sᵀ = K Qᵀ, the rows are keys and the pair is (q, k), (q + 1, k).
// Either way the pair lies in one 2 × 2 block: one Philox call, two of its four words used (the
// lane holding the block's other row uses the other two).
#pragma once

#include <cstdint>

#include "common/philox.hpp"
#include "common/problem.hpp"

namespace fs::tc {

// Z of two scores: 1/(1 − p) where kept, 0 where dropped.
struct Z2 {
  float z0, z1;
};

// q and k are the kernel's indices within its span (SeqSpan, common/tile_policies.cuh); the mask is
// indexed by token, q0 + q and k0 + k, where q0 and k0 are the span's first query and key (0 but
// for packed sequences). The parity of a token picks the word, so a sequence starting at an odd
// token still reads one Philox call per pair: the pair (q, k), (q, k + 1) of a lane is two tokens
// k0 + k, k0 + k + 1 that may straddle two 2 × 2 blocks, and then the second word comes from a
// call of its own.
struct TcDropout {
  std::uint64_t seed, bh;
  std::uint32_t threshold;
  float scale;
  int q0, k0;

  __device__ TcDropout(const Dropout& d, long long head, int q0_ = 0, int k0_ = 0)
      : seed(d.seed),
        bh(static_cast<std::uint64_t>(head)),
        threshold(dropout_threshold(d.p)),
        scale(1.f / (1.f - d.p)),
        q0(q0_),
        k0(k0_) {}

  // Z of the one score (q, k), q and k tokens.
  __device__ __forceinline__ float one(int q, int k) const {
    const Philox4x32 r = dropout_bits(seed, bh, static_cast<std::uint32_t>(q), static_cast<std::uint32_t>(k));
    return r.v[2 * (q & 1) + (k & 1)] >= threshold ? scale : 0.f;
  }
  // Scores (q, k) and (q, k + 1); k even.
  __device__ __forceinline__ Z2 along_keys(int q, int k) const {
    q += q0;
    k += k0;
    if (k0 & 1) return {one(q, k), one(q, k + 1)};  // a span starting at an odd key token (k0 = 0 folds this away)
    const Philox4x32 r = dropout_bits(seed, bh, static_cast<std::uint32_t>(q), static_cast<std::uint32_t>(k));
    const int w = 2 * (q & 1);
    return {r.v[w] >= threshold ? scale : 0.f, r.v[w + 1] >= threshold ? scale : 0.f};
  }
  // Scores (q, k) and (q + 1, k); q even.
  __device__ __forceinline__ Z2 along_queries(int q, int k) const {
    q += q0;
    k += k0;
    if (q0 & 1) return {one(q, k), one(q + 1, k)};  // a span starting at an odd query token
    const Philox4x32 r = dropout_bits(seed, bh, static_cast<std::uint32_t>(q), static_cast<std::uint32_t>(k));
    const int w = k & 1;
    return {r.v[w] >= threshold ? scale : 0.f, r.v[2 + w] >= threshold ? scale : 0.f};
  }
};

}  // namespace fs::tc
