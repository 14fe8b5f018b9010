// Element types of the tensors a step reads and writes: fp32 (steps 01-06), and the 16-bit
// formats of the tensor-core steps (from 08 on), bf16 and fp16.
//
// On the host every tensor is held as float32 values. A 16-bit run rounds its inputs to the
// dtype first (round to nearest, ties to even: what PyTorch's .to(torch.bfloat16) does), so
// that the fp64 reference sees exactly the numbers the kernel reads; bf16 → fp32 and fp16 →
// fp32 are exact, so its outputs come back as float32 with nothing lost.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fs {

enum class DType : std::uint8_t { fp32, bf16, fp16 };

const char* dtype_name(DType t);                          // "fp32", "bf16", "fp16"
std::optional<DType> parse_dtype(std::string_view name);  // the inverse; nullopt for others
std::size_t dtype_bytes(DType t);                         // 4, 2, 2
bool is_16bit(DType t);

// The value of `dtype` nearest to x (ties to even), as a float; x itself for fp32 (inline: the
// fp32 CPU reference calls it for every product).
float round_to_16bit(DType dtype, float x);
inline float round_to(DType dtype, float x) { return dtype == DType::fp32 ? x : round_to_16bit(dtype, x); }
// The spacing of the dtype's numbers at magnitude x (one unit in the last place); 0 for fp32.
double ulp(DType dtype, double x);

// Rounds every value in place; returns how many changed (were not representable).
std::int64_t round_all(DType dtype, std::vector<float>& values);

// Host conversions between float32 values and the dtype's bytes (n elements).
void encode(DType dtype, const float* in, void* out, std::size_t n);
void decode(DType dtype, const void* in, float* out, std::size_t n);

}  // namespace fs
