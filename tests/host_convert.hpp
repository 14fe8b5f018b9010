// Host vectors between float and the 16-bit element types, for the emulated tests that hand the
// kernels their inputs in host memory; and rows spread apart with NaN between them, to catch a
// kernel that reads or writes past a row's d columns.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace fs::testing {

template <typename E>
std::vector<E> to_16bit(const std::vector<float>& x) {
  std::vector<E> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = E(x[i]);  // exact: the inputs are the dtype's values
  return out;
}
template <typename E>
std::vector<float> to_float(const std::vector<E>& x) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = static_cast<float>(x[i]);
  return out;
}

// Rows of d elements `ld` apart (ld ≥ d), the gaps between them NaN: a kernel that reads a gap makes
// NaN of what it computes, and one that writes there leaves a number in it (gather_rows).
template <typename E>
std::vector<E> spread_rows(const std::vector<E>& dense, int d, int ld) {
  if (ld == d) return dense;
  std::vector<E> out(dense.size() / d * ld, E(NAN));
  for (std::size_t r = 0; r < dense.size() / d; ++r) std::copy_n(dense.begin() + r * d, d, out.begin() + r * ld);
  return out;
}
template <typename E>
std::vector<float> gather_rows(const std::vector<E>& spread, int d, int ld, const char* name) {
  std::vector<E> dense(spread.size() / ld * d);
  for (std::size_t r = 0; r < spread.size() / ld; ++r) {
    std::copy_n(spread.begin() + r * ld, d, dense.begin() + r * d);
    for (int c = d; c < ld; ++c)
      if (!std::isnan(float(spread[r * ld + c])))
        throw std::runtime_error(std::string(name) + ": a kernel wrote past column d = " + std::to_string(d) +
                                 " (row " + std::to_string(r) + ", column " + std::to_string(c) + ")");
  }
  return to_float(dense);
}

}  // namespace fs::testing
