// Host vectors between float and the 16-bit element types, for the emulated tests that hand the
// kernels their inputs in host memory.
#pragma once

#include <cstddef>
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

}  // namespace fs::testing
