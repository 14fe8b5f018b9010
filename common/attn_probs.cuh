// The attention probabilities of a forward call, as flash_attn_func(..., return_attn_probs=True)
// returns them (its S_dmask): P_ij = exp(S_ij − LSE_i) for every query i and key j, S the scores
// of the call — softcapped, ALiBi-biased, windowed, causal (bottom-right aligned when Nk ≠ N),
// grouped K/V heads, packed sequences — and LSE the forward's own, so that P is the softmax the
// kernel meant. Entries the dropout mask dropped are negated: the sign bit says which the forward
// dropped, and |P| is the probability before dropout (not scaled by 1/(1 − p)). Masked entries
// are 0 (−0 where dropped); a row that sees no key (LSE = −∞) is 0.
//
// A check, not a pass of the algorithm: one thread per score, a dot product of d products each
// (q·k from the call's own tensors, in their strides), nothing shared. Its parts are the kernels':
// the features are FlashFeatures' (common/flash_features.cuh), in step 08's units (s = q·k τ-less,
// the policy made with unit 1/τ, then P = exp(τ s − LSE)), and the dropout mask is dropout_keep
// (common/philox.hpp), indexed as everywhere else by (b·H + h, query token, key token) — with
// packed sequences by head h and the tokens of the packed tensors. The fp64 reference's twin is
// reference_probs_row (common/reference.hpp); the Python module launches this one
// (common/attn_probs.cu) and tests/test_attn_probs_emulated.cpp runs it on the CPU.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "common/attn_probs.hpp"
#include "common/flash_features.cuh"
#include "common/philox.hpp"
#include "common/problem.hpp"

namespace fs {

__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ float widen(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float widen(__half x) { return __half2float(x); }

// Entry (b, h, i, j) of P: query i and key j of batch b (packed: of sequence b), head h.
template <typename E>
__device__ float attn_prob(const ProbsParams& p, int b, int h, int i, int j, std::uint32_t threshold) {
  const Shape& s = p.shape;
  SeqSpan seq{0, s.N, 0, s.keys(), 0};
  long long bh = static_cast<long long>(b) * s.H + h;  // the head as the LSE, ALiBi and dropout index it
  if (p.packed.on()) {
    const int q0 = p.packed.cu_q[b], k0 = p.packed.cu_k[b];
    seq = SeqSpan{q0, p.packed.cu_q[b + 1] - q0, k0, p.packed.cu_k[b + 1] - k0, b};
    bh = h;  // one batch of packed tokens
  }
  if (i >= seq.n || j >= seq.nk) return 0.f;  // past this sequence's lengths
  const int qt = seq.q0 + i, kt = seq.k0 + j;  // the tokens
  const E* q = as<E>(p.q) + p.q_strides.of_head(bh, s.H) + qt * p.q_strides.row;
  const E* k = as<E>(p.k) + p.k_strides.of_head(FlashFeatures::kv_head(s, bh), s.kv_heads()) + kt * p.k_strides.row;
  float x = 0.f;
  for (int c = 0; c < s.d; ++c) x = fmaf(widen(q[c]), widen(k[c]), x);
  // The scores as step 08 modifies them, τ-less (tc_features.cuh): softcap, then ALiBi and the window.
  const FlashFeatures f(p.mods, s, seq, bh, 1.f / p.scale);
  if (f.cap > 0.f) {
    float slope_unused;
    x = f.capped(x, slope_unused);
  }
  x = f.biased(x, i, j);
  const float lse = p.lse[bh * s.N + qt];
  const bool seen = !(p.causal && j > i + seq.shift()) && x != -INFINITY && lse != -INFINITY;
  float prob = seen ? expf(p.scale * x - lse) : 0.f;
  if (p.dropout.p > 0.f && !dropout_keep(p.dropout.seed, threshold, static_cast<std::uint64_t>(bh),
                                      static_cast<std::uint32_t>(qt), static_cast<std::uint32_t>(kt)))
    prob = -prob;  // dropped: the sign says so (−0 where P is 0)
  return prob;
}

// P, one thread per entry, over a grid of any size (a grid-stride loop).
template <typename E>
__global__ void attn_probs_kernel(const ProbsParams p) {
  const std::int64_t total = p.elements();
  const std::uint32_t threshold = dropout_threshold(p.dropout.p);
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t e = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    const int j = int(e % p.cols), i = int(e / p.cols % p.rows);
    const std::int64_t bh = e / p.cols / p.rows;  // b·H + h of P
    p.p[e] = attn_prob<E>(p, int(bh / p.shape.H), int(bh % p.shape.H), i, j, threshold);
  }
}

// The launch: 256 threads a CTA, at most 65536 CTAs (the loop takes the rest).
constexpr int kProbsThreads = 256;
inline dim3 attn_probs_grid(const ProbsParams& p) {
  const std::int64_t ctas = (p.elements() + kProbsThreads - 1) / kProbsThreads;
  return dim3(static_cast<unsigned>(ctas < 1 ? 1 : ctas > 65536 ? 65536 : ctas));
}

}  // namespace fs
