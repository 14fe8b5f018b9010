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

IoCount io_flash2_backward(const Shape& s, bool causal, const TcBwdTiles& t, bool atomic_dq, int elem_bytes,
                           int window_left, int window_right) {
  const std::int64_t N = s.N, Nk = s.keys(), d = s.d, e = elem_bytes, f = sizeof(float);
  auto real = [&](std::int64_t start, std::int64_t n, std::int64_t end) {
    return std::max<std::int64_t>(0, std::min(n, end - start));
  };
  // The tiles of a walk from `first` to `end`, as the kernels clip it when FlashFeatures is on (a
  // window; δ = Nk − N ≠ 0, whose causal bounds can fall outside [0, Nk)): window_lo, window_end.
  const int delta = int(Nk - N);
  const bool clipped = !s.square() || window_left >= 0 || window_right >= 0;
  auto walk = [&](int first, int end, int tile, int lo, int hi, auto visit) {
    const int count = (end - first + tile - 1) / tile;
    const TileRun run = clipped ? clip_tiles(first, count, tile, lo, hi) : TileRun{first, count};
    for (int c = 0; c < run.count; ++c) visit(std::int64_t(run.first) + c * tile);
  };
  // Per query head (q_*) and per K/V head (kv_*): a K/V head's dK/dV CTAs visit the query tiles of
  // each of the H / Hkv query heads of its group, the same tiles for each.
  std::int64_t q_reads = 2 * N * d * e + N * f, q_writes = 2 * N * f;  // preprocess: O, dO, LSE; D, LSE's copy
  std::int64_t kv_reads = 0, kv_writes = 0;
  if (atomic_dq) q_writes += N * d * f;  // dQacc = 0
  // dK/dV: each of a key tile's kSplit CTAs reads the tile and every query stage it visits in
  // full, and writes (and, atomic, adds to dQacc) its share of the columns. Causal: from the first
  // query whose diagonal key, i + δ, reaches key0.
  for (std::int64_t key0 = 0; key0 < Nk; key0 += t.keys) {
    const std::int64_t keys = real(key0, t.keys, Nk), last_key = key0 + keys - 1;
    kv_reads += t.split * 2 * keys * d * e;  // K_j, V_j
    kv_writes += 2 * keys * d * e;           // dK_j, dV_j
    walk(causal ? int(key0 - delta) / t.queries * t.queries : 0, int(N), t.queries,
         window_lo(int(key0) - delta, window_right), window_end(int(last_key) - delta, window_left), [&](std::int64_t i0) {
           const std::int64_t q = real(i0, t.queries, N);
           q_reads += t.split * (2 * q * d * e + 2 * q * f);  // Q_i, dO_i, LSE_i, D_i
           if (atomic_dq) {  // dQacc_i, read and written by the atomic adds
             q_reads += q * d * f;
             q_writes += q * d * f;
           }
         });
  }
  if (atomic_dq) {  // dQ = τ dQacc
    q_reads += N * d * f;
    q_writes += N * d * e;
  } else {
    for (std::int64_t row0 = 0; row0 < N; row0 += t.dq_rows) {
      const std::int64_t rows = real(row0, t.dq_rows, N), last_row = row0 + rows - 1;
      q_reads += 2 * rows * d * e + 2 * rows * f;  // Q_i, dO_i, LSE_i, D_i
      q_writes += rows * d * e;                    // dQ_i
      // K_j, V_j: causal, up to the last row's diagonal key, last_row + δ.
      walk(0, causal ? int(last_row + delta + 1) : int(Nk), t.dq_keys, window_lo(int(row0) + delta, window_left),
           std::min(int(Nk), window_end(int(last_row) + delta, window_right)),
           [&](std::int64_t j0) { q_reads += 2 * real(j0, t.dq_keys, Nk) * d * e; });
    }
  }
  const std::int64_t q_heads = s.heads(), kv_heads = std::int64_t(s.B) * s.kv_heads();
  return {q_reads * q_heads + kv_reads * kv_heads, q_writes * q_heads + kv_writes * kv_heads};
}

}  // namespace fs
