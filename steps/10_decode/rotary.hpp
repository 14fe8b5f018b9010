// Step 10's rotary embedding (RoPE), as flash_attn_with_kvcache applies it: column c of a query or
// key at position pos is turned with its partner column by the angle θ_{pos,i}, whose cosine and
// sine are row pos, column i of the caller's tables (rotary_cos, rotary_sin: (rotary_len,
// rotary_dim / 2)):
//   x_first'  = x_first · cos θ − x_second · sin θ
//   x_second' = x_second · cos θ + x_first · sin θ
// The pairs (first, second) are (i, i + rotary_dim / 2) (GPT-NeoX's layout) or, interleaved,
// (2i, 2i + 1) (GPT-J's); columns from rotary_dim on are left alone. One function for the append
// kernel, its CPU emulation and the reference, so that all three round alike: the product with
// sin rounded to float, then one fused multiply-add, then (by the caller) rounding to the dtype.
#pragma once

#include <cuda_runtime.h>

#include <cmath>

namespace fs::decoding {

struct RotaryPair {
  int angle;    // i: the tables' column
  int partner;  // the other column of the pair
  bool first;   // this column is the pair's first (its sine term is subtracted)
};

// The pair column c (< rotary_dim) belongs to.
__host__ __device__ inline RotaryPair rotary_pair(int c, int rotary_dim, bool interleaved) {
  if (interleaved) return RotaryPair{c / 2, c ^ 1, (c & 1) == 0};
  const int half = rotary_dim / 2;
  return c < half ? RotaryPair{c, c + half, true} : RotaryPair{c - half, c - half, false};
}

// Column x of a pair turned by the angle with cosine `cos_t` and sine `sin_t`; `partner` is the
// pair's other column.
__host__ __device__ inline float rotary_value(float x, float partner, float cos_t, float sin_t, bool first) {
#ifdef __CUDA_ARCH__
  const float ps = __fmul_rn(partner, sin_t);  // never contracted into the fma below
  return __fmaf_rn(x, cos_t, first ? -ps : ps);
#else
  const float ps = partner * sin_t;
  return std::fma(x, cos_t, first ? -ps : ps);
#endif
}

}  // namespace fs::decoding
