// Step 01: standard attention (Algorithm 0), forward and backward, every N×N matrix in HBM.
#pragma once

#include "common/problem.hpp"

namespace fs {

void naive_forward(const FwdParams& p);   // S, P to the forward workspace; O, LSE
void naive_backward(const BwdParams& p);  // reads P from the forward workspace

// The phases later steps keep unchanged (step 02 fuses the others). All (B, H, N, ·).
// `trace`: the pass's trace sink (FwdParams::trace), null when not tracing.
void naive_pv(const float* P, const float* v, float* o, const Shape& s, cudaStream_t stream,
              trace::DeviceSink* trace = nullptr);  // O = P V
void naive_dv(const float* P, const float* dout, float* dv, const Shape& s, cudaStream_t stream,
              trace::DeviceSink* trace = nullptr);  // dV = Pᵀ dO
void naive_dq_dk(const float* dS, const float* q, const float* k, float* dq, float* dk,
                 const Shape& s, float scale, cudaStream_t stream,
                 trace::DeviceSink* trace = nullptr);  // dQ = τ dS K, dK = τ dSᵀ Q

StepInfo step01_info();

}  // namespace fs
