// HBM accesses of attention as the paper counts them, for the IO calculator: standard
// attention (Theorem 2's Θ(Nd + N²)), FlashAttention's Algorithm 1 (Θ(N²d²M⁻¹)), block-sparse
// FlashAttention (Proposition 4's Θ(Nd + N²d²M⁻¹s)), and step 04's loop order (one CTA per
// query tile, FlashAttention-2). Counts are in bytes of float32 for B·H heads; the
// Θ-constants are our kernels' (see each function), so a trace's totals can be checked
// against them.
#pragma once

#include <cstdint>

namespace fs::viz {

struct IoBytes {
  double read = 0, write = 0;
  double total() const { return read + write; }
};

struct IoShape {
  double N = 1024, d = 64;
  double heads = 1;          // B·H
  double sram_bytes = 100 * 1024;  // M, in bytes (the paper's M is in elements: M = bytes / 4)
  double sparsity = 1;       // s: fraction of nonzero blocks (block-sparse only)
};

// Algorithm 1's tile sizes for an SRAM of M elements: B_c = ⌈M/4d⌉, B_r = min(⌈M/4d⌉, d),
// never more than N.
struct Tiles {
  int Br = 1, Bc = 1;
};
Tiles paper_tiles(double N, double d, double sram_bytes);

// Standard attention as step 01 runs it (common/io_model.hpp: reads 3Nd + 2N², writes
// 2N² + Nd + N per head).
IoBytes io_standard(const IoShape& s);

// Algorithm 1 (K_j, V_j outer, Q_i inner), as step 04's alg1 kernel runs it and
// common/io_model.hpp's io_flash1_forward counts it (the tests hold the two equal). Per head,
// T_c = ⌈N/B_c⌉:
//   reads  2Nd (every K_j, V_j once) + T_c·(2Nd + 2N) (Q_i, O_i, ℓ_i, m_i each outer step)
//          + 2N (m, ℓ for LSE)
//   writes Nd + 2N (O = 0, ℓ = 0, m = −∞) + T_c·(Nd + 2N) (O_i, ℓ_i, m_i each outer step) + N
// Closed forms, so the calculator can draw them for every N each frame.
IoBytes io_flash(const IoShape& s);

// Algorithm 5 over Algorithm 1 with a fraction s of the T_r × T_c blocks nonzero: the
// per-block traffic scales by s; K, V, the initial O, ℓ, m and the LSE pass do not:
//   reads 2Nd + 2N + s·T_c·(2Nd + 2N),  writes Nd + 3N + s·T_c·(Nd + 2N).
IoBytes io_block_sparse(const IoShape& s);

// Step 04 (FlashAttention-2 loop order, io_flash2_forward): each CTA reads its Q_i once and
// every K_j, V_j it does not skip; it writes O_i and LSE_i once. With tiles Br × Bc over N:
//   reads Nd + Σ_i (keys kept for row tile i)·2d,  writes Nd + N.
// `causal` keeps the keys up to each tile's last row.
IoBytes io_flash_fa2(double N, double d, double heads, int Br, int Bc, bool causal);

}  // namespace fs::viz
