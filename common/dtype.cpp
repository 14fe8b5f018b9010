#include "common/dtype.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstring>

namespace fs {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::bf16: return "bf16";
    case DType::fp16: return "fp16";
    default: return "fp32";
  }
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType t : {DType::fp32, DType::bf16, DType::fp16})
    if (name == dtype_name(t)) return t;
  return std::nullopt;
}

std::size_t dtype_bytes(DType t) { return t == DType::fp32 ? 4 : 2; }
bool is_16bit(DType t) { return t != DType::fp32; }

float round_to_16bit(DType dtype, float x) {
  switch (dtype) {
    case DType::bf16: return __bfloat162float(__float2bfloat16_rn(x));
    case DType::fp16: return __half2float(__float2half_rn(x));
    default: return x;
  }
}

double ulp(DType dtype, double x) {
  if (dtype == DType::fp32 || !(x > 0)) return 0;
  const int mantissa_bits = dtype == DType::bf16 ? 7 : 10;  // stored fraction bits
  int e;
  std::frexp(x, &e);  // x = f · 2^e, f in [0.5, 1)
  return std::ldexp(1.0, e - 1 - mantissa_bits);
}

std::int64_t round_all(DType dtype, std::vector<float>& values) {
  std::int64_t changed = 0;
  if (dtype == DType::fp32) return 0;
  for (float& x : values) {
    const float r = round_to(dtype, x);
    if (std::memcmp(&r, &x, sizeof r) != 0 && !(r != r && x != x)) ++changed;  // NaN stays NaN
    x = r;
  }
  return changed;
}

void encode(DType dtype, const float* in, void* out, std::size_t n) {
  switch (dtype) {
    case DType::bf16: {
      auto* o = static_cast<__nv_bfloat16*>(out);
      for (std::size_t i = 0; i < n; ++i) o[i] = __float2bfloat16_rn(in[i]);
      break;
    }
    case DType::fp16: {
      auto* o = static_cast<__half*>(out);
      for (std::size_t i = 0; i < n; ++i) o[i] = __float2half_rn(in[i]);
      break;
    }
    default: std::memcpy(out, in, n * sizeof(float));
  }
}

void decode(DType dtype, const void* in, float* out, std::size_t n) {
  switch (dtype) {
    case DType::bf16: {
      const auto* x = static_cast<const __nv_bfloat16*>(in);
      for (std::size_t i = 0; i < n; ++i) out[i] = __bfloat162float(x[i]);
      break;
    }
    case DType::fp16: {
      const auto* x = static_cast<const __half*>(in);
      for (std::size_t i = 0; i < n; ++i) out[i] = __half2float(x[i]);
      break;
    }
    default: std::memcpy(out, in, n * sizeof(float));
  }
}

}  // namespace fs
