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

struct TcDropout {
  std::uint64_t seed, bh;
  std::uint32_t threshold;
  float scale;

  __device__ TcDropout(const Dropout& d, long long head)
      : seed(d.seed), bh(static_cast<std::uint64_t>(head)), threshold(dropout_threshold(d.p)), scale(1.f / (1.f - d.p)) {}

  // Scores (q, k) and (q, k + 1); k even.
  __device__ __forceinline__ Z2 along_keys(int q, int k) const {
    const Philox4x32 r = dropout_bits(seed, bh, static_cast<std::uint32_t>(q), static_cast<std::uint32_t>(k));
    const int w = 2 * (q & 1);
    return {r.v[w] >= threshold ? scale : 0.f, r.v[w + 1] >= threshold ? scale : 0.f};
  }
  // Scores (q, k) and (q + 1, k); q even.
  __device__ __forceinline__ Z2 along_queries(int q, int k) const {
    const Philox4x32 r = dropout_bits(seed, bh, static_cast<std::uint32_t>(q), static_cast<std::uint32_t>(k));
    const int w = k & 1;
    return {r.v[w] >= threshold ? scale : 0.f, r.v[2 + w] >= threshold ? scale : 0.f};
  }
};

}  // namespace fs::tc
