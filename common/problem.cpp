#include "common/problem.hpp"

#include <cmath>

namespace fs {

float default_scale(int d) { return 1.0f / std::sqrt(static_cast<float>(d)); }

double forward_flops(const Shape& s, bool causal) {
  const double f = 4.0 * double(s.heads()) * double(s.N) * double(s.N) * double(s.d);
  return causal ? f / 2 : f;
}

double backward_flops(const Shape& s, bool causal) { return 2.5 * forward_flops(s, causal); }

}  // namespace fs
