#include "common/e4m3.hpp"

#include <algorithm>
#include <cmath>

namespace fs {

float e4m3_value(std::uint8_t bits) {
  const int exponent = (bits >> 3) & 15, mantissa = bits & 7;
  if (exponent == 15 && mantissa == 7) return NAN;
  const float magnitude =
      exponent == 0 ? std::ldexp(float(mantissa), -9) : std::ldexp(float(8 + mantissa), exponent - 10);
  return bits & 0x80 ? -magnitude : magnitude;
}

double e4m3_mma_sum(double acc, const float* a, const float* b, int n, int bits) {
  double big = std::abs(acc);
  for (int k = 0; k < n; ++k) big = std::max(big, std::abs(double(a[k]) * double(b[k])));
  if (big == 0.0) return acc;
  int e = 0;
  std::frexp(big, &e);  // big = f · 2^e with f in [1/2, 1): its exponent is e − 1
  const double unit = std::ldexp(1.0, e - 1 - bits);
  auto cut = [&](double x) { return std::trunc(x / unit) * unit; };
  double sum = cut(acc);  // multiples of unit below 2^(bits + 7): exact in double
  for (int k = 0; k < n; ++k) sum += cut(double(a[k]) * double(b[k]));
  return double(float(sum));
}

std::vector<float> e4m3_dequantized(const float* x, std::int64_t heads, int rows, int d, int block) {
  std::vector<float> out(static_cast<std::size_t>(heads) * rows * d);
  for (std::int64_t h = 0; h < heads; ++h)
    for (int r0 = 0; r0 < rows; r0 += block) {
      const std::int64_t begin = (h * rows + r0) * d, end = begin + std::int64_t(std::min(block, rows - r0)) * d;
      float amax = 0.f;
      for (std::int64_t i = begin; i < end; ++i) amax = std::max(amax, std::abs(x[i]));
      const float scale = e4m3_scale(amax), inverse = e4m3_inverse(amax);
      for (std::int64_t i = begin; i < end; ++i) out[i] = e4m3_value(to_e4m3(x[i] * inverse)) * scale;
    }
  return out;
}

}  // namespace fs
