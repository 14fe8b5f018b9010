// The attention probabilities' launch (common/attn_probs.cuh has the kernel and says what P is),
// in terms a host compiler reads: the Python module's checks (common/python/flashsteps_probs.cpp)
// fill ProbsParams, and launch_attn_probs (common/attn_probs.cu, compiled into the module) runs it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/problem.hpp"

namespace fs {

// The most entries a call returns: 2^28 floats, 1 GiB. The probabilities are for tests and small
// problems (B·H·N·Nk of them); past this the module refuses the call rather than allocate it.
constexpr std::int64_t kMaxAttnProbs = std::int64_t(1) << 28;

struct ProbsParams {
  const void* q = nullptr;     // the forward's queries, (batch, N, H, d) in q_strides (of dtype)
  const void* k = nullptr;     // its keys, (batch, Nk, Hkv, d) in k_strides
  const float* lse = nullptr;  // its LSE: (B, H, N), or (H, N) with packed sequences, contiguous
  float* p = nullptr;          // out: (batches(), H, rows, cols), contiguous
  DType dtype = DType::fp32;
  Shape shape;  // B, H, N, d, Nk, Hkv; with packed sequences B = 1 and N, Nk the tokens
  Strides q_strides, k_strides;  // explicit (not the dense default)
  float scale = 0.f;
  bool causal = false;
  Dropout dropout;
  ScoreMods mods;  // device slopes; window reaches clamped (clamp_reach)
  Packed packed;   // sequences packed along the tokens (device offsets); off: shape.B batches
  int rows = 0, cols = 0;  // P's query and key dimensions: N and Nk, or packed the longest sequence's (or more)

  __host__ __device__ int batches() const { return packed.on() ? packed.count : shape.B; }
  __host__ __device__ std::int64_t elements() const {
    return std::int64_t(batches()) * shape.H * std::int64_t(rows) * cols;
  }
};

// P of the call `p` on `stream` (asynchronous; a launch error throws fs::CudaError).
void launch_attn_probs(const ProbsParams& p, cudaStream_t stream);

}  // namespace fs
