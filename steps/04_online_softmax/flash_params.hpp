// What the launchers of the fp32 kernels fill in in FwdParams and BwdParams before a launch,
// shared by step 04's forward (flash2_forward.cuh, and alg1's in flash.cu) and step 05's backward
// (backward.cuh): the tensors' layouts (Strides); and, from common/packed_check.hpp, the check of
// packed sequences (require_packable) that step 08's launchers make too.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/check.hpp"
#include "common/packed_check.hpp"
#include "common/problem.hpp"
#include "common/strides_check.hpp"

namespace fs {

// Where a CTA's rows of a tensor start: row `first` of head bh (of `heads`) in the tensor's layout
// `st` (the span's first query or key, SeqSpan). Row i of the span is then i · st.row further.
template <typename T>
__host__ __device__ __forceinline__ T* span_rows(T* t, const Strides& st, std::int64_t bh, int heads, int first) {
  return t + st.of_head(bh, heads) + first * st.row;
}

// A tensor's strides as the kernels read them (row_aligned_strides): they move rows in 16-byte
// pieces (float4 loads and stores, cp.async), so every row starts on a 16-byte boundary.
inline Strides fp32_strides(const char* who, const char* name, const void* t, const Strides& st, int heads, int rows,
                            int d) {
  return row_aligned_strides(who, name, t, st, heads, rows, d, sizeof(float));
}

// The params with every tensor's strides filled in (fp32_strides): Q and O (H, N), K and V
// (Hkv, Nk); the backward's dO and dQ like Q, dK and dV like K.
template <class Params>
void fill_forward_strides(Params& p, const char* who) {
  const Shape& s = p.shape;
  p.q_strides = fp32_strides(who, "q", p.q, p.q_strides, s.H, s.N, s.d);
  p.k_strides = fp32_strides(who, "k", p.k, p.k_strides, s.kv_heads(), s.keys(), s.d);
  p.v_strides = fp32_strides(who, "v", p.v, p.v_strides, s.kv_heads(), s.keys(), s.d);
  p.o_strides = fp32_strides(who, "o", p.o, p.o_strides, s.H, s.N, s.d);
}
inline FwdParams with_strides(FwdParams p, const char* who) {
  fill_forward_strides(p, who);
  return p;
}
inline BwdParams with_strides(BwdParams p, const char* who) {
  fill_forward_strides(p, who);
  const Shape& s = p.shape;
  p.dout_strides = fp32_strides(who, "dout", p.dout, p.dout_strides, s.H, s.N, s.d);
  p.dq_strides = fp32_strides(who, "dq", p.dq, p.dq_strides, s.H, s.N, s.d);
  p.dk_strides = fp32_strides(who, "dk", p.dk, p.dk_strides, s.kv_heads(), s.keys(), s.d);
  p.dv_strides = fp32_strides(who, "dv", p.dv, p.dv_strides, s.kv_heads(), s.keys(), s.d);
  return p;
}

}  // namespace fs
