#include "common/io_model.hpp"

#include <algorithm>
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

IoCount io_fused_forward(const Shape& s) {
  const std::int64_t N = s.N, Nd = std::int64_t(s.N) * s.d, NN = N * N;
  return per_head(s, 3 * Nd + NN, NN + Nd + N);
}

IoCount io_fused_backward(const Shape& s) {
  const std::int64_t N = s.N, Nd = std::int64_t(s.N) * s.d, NN = N * N;
  return per_head(s, 4 * NN + 6 * Nd, NN + 3 * Nd);
}

namespace {
// Keys a query tile of rows [r0, r1) works on: all N, or (causal) every key tile that holds
// a key ≤ r1 − 1, whole tiles (the diagonal tile is loaded entire, then masked).
std::int64_t keys_for_rows(const Shape& s, bool causal, std::int64_t r1, int Bc) {
  if (!causal) return s.N;
  return std::min<std::int64_t>(s.N, (r1 + Bc - 1) / Bc * Bc);
}
}  // namespace

IoCount io_tiled_forward(const Shape& s, bool causal, int Br, int Bc) {
  std::int64_t reads = 0, writes = 0;
  for (std::int64_t r0 = 0; r0 < s.N; r0 += Br) {
    const std::int64_t rows = std::min<std::int64_t>(Br, s.N - r0);
    const std::int64_t keys = keys_for_rows(s, causal, r0 + rows, Bc);
    reads += rows * s.d + 3 * keys * s.d;  // Q; K in pass one; K, V in pass two
    writes += rows * s.d + rows;           // O, LSE
  }
  return per_head(s, reads, writes);
}

// Keys a query tile of rows [r0, r0 + rows) of the FlashAttention-2 forward loads: every key
// tile its walk visits (causal: up to its last row's diagonal key, last + δ), less those a window
// leaves out (clip_tiles, as the kernels clip), each tile's real keys.
std::int64_t flash2_keys(const Shape& s, bool causal, int r0, int rows, int Bc, int left, int right) {
  const int Nk = s.keys(), delta = Nk - s.N, last = r0 + rows - 1;
  if (s.square() && left < 0 && right < 0) return keys_for_rows(s, causal, r0 + rows, Bc);
  const int end = causal ? std::min(Nk, last + delta + 1) : Nk;
  if (end <= 0) return 0;
  const TileRun run = clip_tiles(0, (end + Bc - 1) / Bc, Bc, window_lo(r0 + delta, left),
                                 std::min(Nk, window_end(last + delta, right)));
  return std::max<std::int64_t>(0, std::min<std::int64_t>(Nk, run.first + std::int64_t(run.count) * Bc) - run.first);
}

IoCount io_flash2_forward(const Shape& s, bool causal, int Br, int Bc, int elem_bytes, int window_left,
                          int window_right) {
  std::int64_t elems_read = 0, elems_written = 0, lse = 0;
  for (std::int64_t r0 = 0; r0 < s.N; r0 += Br) {
    const std::int64_t rows = std::min<std::int64_t>(Br, s.N - r0);
    const std::int64_t keys = flash2_keys(s, causal, int(r0), int(rows), Bc, window_left, window_right);
    elems_read += rows * s.d + 2 * keys * s.d;  // Q; K, V
    elems_written += rows * s.d;                                                  // O
    lse += rows;                                                                  // LSE
  }
  const std::int64_t heads = s.heads(), f = sizeof(float);
  return {elems_read * elem_bytes * heads, (elems_written * elem_bytes + lse * f) * heads};
}

IoCount io_flash1_forward(const Shape& s, bool causal, int Br, int Bc) {
  const std::int64_t N = s.N, d = s.d;
  std::int64_t reads = 0, writes = N * d + 2 * N;  // line 2: O = 0, ℓ = 0, m = -inf
  for (std::int64_t j0 = 0; j0 < N; j0 += Bc) {
    reads += 2 * std::min<std::int64_t>(Bc, N - j0) * d;  // line 6: K_j, V_j
    for (std::int64_t r0 = 0; r0 < N; r0 += Br) {
      const std::int64_t rows = std::min<std::int64_t>(Br, N - r0);
      if (causal && r0 + rows - 1 < j0) continue;  // every (row, key) of the pair masked: skipped
      reads += 2 * rows * d + 2 * rows;   // line 8: Q_i, O_i, ℓ_i, m_i
      writes += rows * d + 2 * rows;      // lines 12-13: O_i, ℓ_i, m_i
    }
  }
  reads += 2 * N;  // LSE = m + log ℓ
  writes += N;
  return per_head(s, reads, writes);
}

}  // namespace fs
