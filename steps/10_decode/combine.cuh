// Step 10's second kernel: the splits of every query row merged by their log-sum-exp, the rule
// step 07 merges SMYRF's rounds with (cluster_forward.cuh). Split s of a row computed its softmax
// over its own keys: O_s = Σ_{j∈s} e^{x_j − LSE_s} v_j, with LSE_s = log Σ_{j∈s} e^{x_j} (x = τ q·k).
// Over all keys,
//   LSE = log Σ_s e^{LSE_s}                       (computed from the largest: max_s LSE_s + log Σ_s e^{LSE_s − max})
//   O   = Σ_s e^{LSE_s − LSE} O_s                 (the weights are each split's share of the row's ℓ)
// A split that saw no key of the row has LSE_s = −inf and weighs 0; a row no split saw a key of
// gets O = 0 and LSE = −inf.
//
// One warp per row (its splits are few: split_rule.hpp caps them), reading the row's block of the
// workspace, (splits, d) floats and (splits) LSEs, contiguous; lane i holds columns 2(i + 32k), +1.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/cuda_utils.cuh"
#include "common/problem.hpp"
#include "steps/08_tensor_cores/mma.cuh"
#include "steps/10_decode/decode.hpp"
#include "steps/10_decode/decode_trace.cuh"

namespace fs::decoding {

inline constexpr int kCombineWarps = 4;  // rows per CTA of the combine

// kTrace: the traced twin, whose recording thread (warp 0's, whose row always exists) describes
// the CTA's rows once its own is merged (decode_trace.cuh).
template <typename E, int D, bool kTrace = false>
__global__ void __launch_bounds__(32 * kCombineWarps) decode_combine_kernel(const DecodeParams p, trace::Slices slices) {
  static_assert(D % 64 == 0, "a warp's lanes take column pairs, 64 columns a round");
  constexpr int kPairs = D / 64;  // column pairs per lane
  grid_dependency_wait();  // launched as the split kernel's dependent: its partials are written and visible
  trace::CtaTracer<kTrace> tr(slices);
  const DecodeShape& s = p.shape;
  const std::int64_t row = std::int64_t(blockIdx.x) * kCombineWarps + threadIdx.x / 32;  // (b, h, t), LSE's order
  if (row >= s.rows()) return;  // the whole warp: no barrier below but the warp's own shuffles
  const int lane = threadIdx.x % 32, splits = p.num_splits;
  const float* o_part = p.workspace + row * splits * D;                       // (splits, D)
  const float* lse_part = p.workspace + s.rows() * splits * D + row * splits;  // (splits)

  float top = -INFINITY;  // max_s LSE_s
  for (int i = lane; i < splits; i += 32) top = fmaxf(top, lse_part[i]);
  top = warp_max(top);
  float sum = 0.f;  // Σ_s e^{LSE_s − top}; 0 where no split saw a key (top = −inf: no −inf − (−inf))
  if (top != -INFINITY)
    for (int i = lane; i < splits; i += 32) sum += expf(lse_part[i] - top);
  sum = warp_sum(sum);
  const float lse = top != -INFINITY ? top + logf(sum) : -INFINITY;

  float acc[kPairs][2] = {};
  if (lse != -INFINITY)
    for (int i = 0; i < splits; ++i) {
      const float w = expf(lse_part[i] - lse);  // split i's share; 0 for a split that saw no key
#pragma unroll
      for (int k = 0; k < kPairs; ++k) {
        const float2 x = *reinterpret_cast<const float2*>(o_part + i * D + 2 * (lane + 32 * k));
        acc[k][0] += w * x.x;
        acc[k][1] += w * x.y;
      }
    }

  // Row (b, h, t) of O is at ((b·n + t)·H + h)·d in (batch, new_tokens, heads, d).
  const int t = static_cast<int>(row % s.new_tokens);
  const std::int64_t bh = row / s.new_tokens;
  const int h = static_cast<int>(bh % s.heads);
  const std::int64_t b = bh / s.heads;
  E* o = as<E>(p.o) + ((b * s.new_tokens + t) * s.heads + h) * D;
#pragma unroll
  for (int k = 0; k < kPairs; ++k)
    *reinterpret_cast<std::uint32_t*>(o + 2 * (lane + 32 * k)) = tc::Element<E>::pack(acc[k][0], acc[k][1]);
  if (lane == 0) p.lse[row] = lse;
  trace_combine(tr, p, std::int64_t(blockIdx.x) * kCombineWarps, kCombineWarps, sizeof(E));
}

}  // namespace fs::decoding
