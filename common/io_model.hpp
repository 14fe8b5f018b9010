// The IO model: HBM bytes a step's algorithm moves for a shape, counting each kernel's
// compulsory traffic (every input it reads once, every output it writes once). It is the
// count of the FlashAttention paper's analysis (docs/notation.md: Theorems 2 and 5,
// Proposition 4) with the constants of our kernels; Nsight Compute's dram__bytes measures
// what actually reached DRAM, and the lessons put the two side by side.
#pragma once

#include "common/problem.hpp"

namespace fs {

// Standard attention (Algorithm 0) as step 01 runs it, per head, in floats:
//   S = τQKᵀ       reads Q, K (2Nd)       writes S (N²)
//   P = softmax(S) reads S (N²)           writes P (N²), LSE (N)
//   O = PV         reads P (N²), V (Nd)   writes O (Nd)
// Θ(Nd + N²): reads 3Nd + 2N², writes 2N² + Nd + N. The causal mask changes nothing here:
// the naive kernels write every masked entry too.
IoCount io_standard_forward(const Shape& s);

// Standard attention backward (Algorithm 3, with D = rowsum(dO ∘ O)), per head, in floats:
//   dV = Pᵀ dO          reads P (N²), dO (Nd)          writes dV (Nd)
//   dP = dO Vᵀ          reads dO, V (2Nd)              writes dP (N²)
//   D = rowsum(dO ∘ O)  reads dO, O (2Nd)              writes D (N)
//   dS = P ∘ (dP − D)   reads P, dP (2N²), D (N)       writes dS (N²)
//   dQ = τ dS K         reads dS (N²), K (Nd)          writes dQ (Nd)
//   dK = τ dSᵀ Q        reads dS (N²), Q (Nd)          writes dK (Nd)
// reads 5N² + 7Nd + N, writes 2N² + 3Nd + N.
IoCount io_standard_backward(const Shape& s);

// Step 02, standard attention with the elementwise passes fused into the matmul kernels:
//   forward   S, mask, softmax in one kernel: reads Q, K (2Nd), writes P (N²), LSE (N);
//             O = PV as step 01: reads P (N²), V (Nd), writes O (Nd)
//             reads 3Nd + N², writes N² + Nd + N  (step 01 minus S: 2N² fewer)
//   backward  dV = Pᵀ dO as step 01; dP, D and dS in one kernel: reads dO, O, V (3Nd), P (N²),
//             writes dS (N²); dQ, dK as step 01
//             reads 4N² + 6Nd, writes N² + 3Nd  (step 01 minus dP and D)
IoCount io_fused_forward(const Shape& s);
IoCount io_fused_backward(const Shape& s);

// The tiled steps count what moves between HBM and the chip tile by tile, as the paper's
// Theorem 2 does: a tile loaded by several CTAs (or several times by one) counts each time.
// Br × Bc is the tile of the score matrix; a causal run skips the tiles above the diagonal.

// Step 03, two passes: per query tile, Q once, K (pass one: row max), then K and V (pass
// two: normaliser and O); writes O and LSE once. Θ(N²d/Br) — K is streamed twice.
IoCount io_tiled_forward(const Shape& s, bool causal, int Br, int Bc);

// Step 04, Algorithm 1 (K/V outer, Q inner). O = 0, ℓ = 0, m = -inf written first; each K/V
// tile read once; for every (i, j) computed, Q_i, O_i, ℓ_i, m_i read and O_i, ℓ_i, m_i
// written; finally LSE = m + log ℓ. Θ(N²d²/M) with Br, Bc from M (Theorem 2).
IoCount io_flash1_forward(const Shape& s, bool causal, int Br, int Bc);

// Step 04, FlashAttention-2 loop order (Q outer, K/V inner): per query tile, Q once and
// each needed K/V tile once; O and LSE written once; m, ℓ never leave the chip.
// elem_bytes: of Q, K, V and O (2 for the 16-bit tensor-core kernels of step 08); LSE is fp32.
// A window (ScoreMods; −1: unbounded) leaves out the key tiles no row of a query tile sees. With
// K, V of Nk keys the causal mask ends at a row's diagonal key i + δ, δ = Nk − N; each query
// head's CTAs load the K/V tiles of their K/V head (grouped heads are not shared on chip).
IoCount io_flash2_forward(const Shape& s, bool causal, int Br, int Bc, int elem_bytes = 4, int window_left = -1,
                          int window_right = -1);

// The recomputation backward of steps 08 and 09 on the tensor cores: a preprocess (D, LSE's copy),
// CTAs of `keys` keys (each key tile's columns split over `split` of them) streaming the query
// tiles of `queries` rows their keys meet, and dQ either added up in a float32 copy (atomic_dq:
// atomics or reduce-adds, then a convert) or by a kernel of its own, dq_rows rows per CTA streaming
// K/V tiles of dq_keys keys. elem_bytes, the window and K/V's shapes as io_flash2_forward's.
struct TcBwdTiles {
  int keys = 0, queries = 0, split = 1, dq_rows = 0, dq_keys = 0;
};
IoCount io_flash2_backward(const Shape& s, bool causal, const TcBwdTiles& tiles, bool atomic_dq, int elem_bytes,
                           int window_left = -1, int window_right = -1);

}  // namespace fs
