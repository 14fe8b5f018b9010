#include "common/problem.hpp"

#include <algorithm>
#include <cmath>

namespace fs {

float default_scale(int d) { return 1.0f / std::sqrt(static_cast<float>(d)); }

std::string untraced_head_dim(const Shape& s, const PassSettings&) {
  if (s.d == kTracedHeadDim) return {};
  return "this step's traced kernels are compiled for d = " + std::to_string(kTracedHeadDim) +
         " (the traced runs' shape, as the tour and the shipped traces record it); got d = " + std::to_string(s.d);
}

double forward_flops(const Shape& s, bool causal) {
  const double f = 4.0 * double(s.heads()) * double(s.N) * double(s.N) * double(s.d);
  return causal ? f / 2 : f;
}

double backward_flops(const Shape& s, bool causal) { return 2.5 * forward_flops(s, causal); }

double forward_flops(const Shape& s, bool causal, const PackedSeqs& packed) {
  if (!packed.on()) return forward_flops(s, causal);
  double area = 0;  // query × key pairs, summed over the sequences
  for (int b = 0; b < packed.count(); ++b) {
    const double n = packed.queries(b), nk = packed.keys(b);
    area += !causal ? n * nk : nk >= n ? n * nk - n * n / 2 : nk * nk / 2;
  }
  return 4.0 * double(s.heads()) * double(s.d) * area;
}

double backward_flops(const Shape& s, bool causal, const PackedSeqs& packed) {
  return 2.5 * forward_flops(s, causal, packed);
}

int PackedSeqs::max_queries() const {
  int most = 0;
  for (int b = 0; b < count(); ++b) most = std::max(most, queries(b));
  return most;
}

int PackedSeqs::max_keys() const {
  int most = 0;
  for (int b = 0; b < count(); ++b) most = std::max(most, keys(b));
  return most;
}

Shape PackedSeqs::sequence(const Shape& s, int b) const {
  Shape one = s;
  one.B = 1;
  one.N = queries(b);
  one.Nk = keys(b);
  return one;
}

}  // namespace fs
