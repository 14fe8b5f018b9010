#include "common/io_model.hpp"

#include <cstdint>

namespace fs {

namespace {
// Floats per head → bytes for all heads.
IoCount per_head(const Shape& s, std::int64_t read_floats, std::int64_t write_floats) {
  const std::int64_t bytes = s.heads() * std::int64_t(sizeof(float));
  return {read_floats * bytes, write_floats * bytes};
}
}  // namespace

IoCount io_standard_forward(const Shape& s) {
  const std::int64_t N = s.N, Nd = std::int64_t(s.N) * s.d, NN = N * N;
  return per_head(s, 3 * Nd + 2 * NN, 2 * NN + Nd + N);
}

IoCount io_standard_backward(const Shape& s) {
  const std::int64_t N = s.N, Nd = std::int64_t(s.N) * s.d, NN = N * N;
  return per_head(s, 5 * NN + 7 * Nd + N, 2 * NN + 3 * Nd + N);
}

}  // namespace fs
