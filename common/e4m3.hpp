// e4m3, the FP8 format of step 09's fp8 variant: a sign, 4 exponent bits (bias 7), 3 mantissa
// bits; ±448 at most, no infinities (S.1111.111 is NaN), subnormals below 2⁻⁶ in steps of 2⁻⁹.
// 8 values per binade (1.000 to 1.875 times its power of two): rounding to nearest errs by at most
// 2⁻⁴ of the value (bf16: 2⁻⁸).
//
// Per-block scaling: each block of rows of a head is divided by its own scale, its largest |x| /
// 448, before it is rounded, and multiplied by it again where it is used. The blocks are the fp8
// forward's tiles: 128 rows of Q (a query tile), 224 of K and of V (a key tile), so that a tile
// has one scale. One definition here of what that does, for the kernels (steps/09_hopper/fp8.cuh,
// on the GPU) and for the check's reference (common/verify.cpp, on the host), which must round
// alike.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>
#include <vector>

namespace fs {

constexpr int kE4m3BlockQ = 128;   // rows of a head per scale: Q
constexpr int kE4m3BlockKV = 224;  // and K, V
constexpr float kE4m3Max = 448.f;  // the largest finite e4m3 value

// A block's scale from its largest |x| (1 for a block of zeros), and its inverse: x · inverse is
// what is rounded. Correctly rounded divisions, on the GPU as on the host.
__host__ __device__ inline float e4m3_scale(float amax) { return amax > 0.f ? amax / kE4m3Max : 1.f; }
__host__ __device__ inline float e4m3_inverse(float amax) { return amax > 0.f ? kE4m3Max / amax : 1.f; }
// x rounded to the nearest e4m3 (ties to even), saturating at ±448: its byte.
__host__ __device__ inline std::uint8_t to_e4m3(float x) {
  return static_cast<std::uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

// The FP8 tensor core's adder, as the FP8 rule models it (common/verify.hpp). A wgmma k32 adds its
// 32 products and the accumulator in a fixed-point window: each is cut (toward zero) to a multiple
// of 2^(e − bits), e the exponent of the largest of them, so bits more than `bits` below the
// largest term are lost; the sum is then a float. fp32 FMAs keep every bit of such sums; the FP8
// tensor core keeps fewer (step 09's probe measures them on the GPU: hopper::probe_fp8_mma, and
// test_hopper_gpu holds the GPU to at least kE4m3MmaBits).
constexpr int kE4m3MmaBits = 13;  // the bits the model keeps
constexpr int kE4m3MmaK = 32;     // products per instruction
// acc + Σ_{k<n} a_k b_k as the model adds it, with the products a_k b_k exact (e4m3's are).
double e4m3_mma_sum(double acc, const float* a, const float* b, int n, int bits = kE4m3MmaBits);

// An e4m3 byte's value, decoded from its bits (not by cuda_fp8.h, whose conversion to_e4m3 is:
// tests/test_reference.cpp holds the two to each other for all 256 bytes).
float e4m3_value(std::uint8_t bits);

// x, (heads, rows, d) dense, quantized as the fp8 kernels quantize it (blocks of `block` rows of a
// head, to_e4m3(x · inverse)) and scaled back (value · scale, rounded to float): the values the
// kernels multiply.
std::vector<float> e4m3_dequantized(const float* x, std::int64_t heads, int rows, int d, int block);

}  // namespace fs
