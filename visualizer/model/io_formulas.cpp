#include "visualizer/model/io_formulas.hpp"

#include <algorithm>
#include <cmath>


namespace fs::viz {

namespace {
constexpr double kFloat = 4;
}

Tiles paper_tiles(double N, double d, double sram_bytes) {
  const double M = sram_bytes / kFloat;
  const double bc = std::ceil(M / (4 * d));
  Tiles t;
  t.Bc = int(std::clamp(bc, 1.0, std::max(1.0, N)));
  t.Br = int(std::clamp(std::min(bc, d), 1.0, std::max(1.0, N)));
  return t;
}

IoBytes io_standard(const IoShape& s) {
  // The same count as common/io_model.hpp, in doubles so that the calculator's N can grow
  // past what int64 bytes of N² would hold for many heads.
  const double N = s.N, Nd = s.N * s.d, NN = N * N;
  return {(3 * Nd + 2 * NN) * s.heads * kFloat, (2 * NN + Nd + N) * s.heads * kFloat};
}

IoBytes io_flash(const IoShape& s) {
  IoShape dense = s;
  dense.sparsity = 1;
  return io_block_sparse(dense);
}

IoBytes io_block_sparse(const IoShape& s) {
  const Tiles t = paper_tiles(s.N, s.d, s.sram_bytes);
  const double N = s.N, Nd = s.N * s.d, Tc = std::ceil(N / t.Bc), sp = std::clamp(s.sparsity, 0.0, 1.0);
  const double read = 2 * Nd + 2 * N + sp * Tc * (2 * Nd + 2 * N);
  const double write = Nd + 3 * N + sp * Tc * (Nd + 2 * N);
  return {read * s.heads * kFloat, write * s.heads * kFloat};
}

IoBytes io_flash_fa2(double N, double d, double heads, int Br, int Bc, bool causal) {
  const long long n = (long long)N, Tr = (n + Br - 1) / Br;
  double kv_elems = 0;
  for (long long i = 0; i < Tr; ++i) {
    const long long last_row = std::min(n, (i + 1) * Br) - 1;
    // Causal: every K tile that holds a key up to this tile's last row, whole.
    const long long keys = causal ? std::min(n, (last_row + Bc) / Bc * Bc) : n;
    kv_elems += 2.0 * double(keys) * d;
  }
  return {(N * d + kv_elems) * heads * kFloat, (N * d + N) * heads * kFloat};
}

}  // namespace fs::viz
