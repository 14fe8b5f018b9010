// The CPU reference: exact attention, forward and backward, computed row by row.
//
// One implementation, instantiated twice (docs/notation.md, Algorithms 0 and 3):
//   T = double  the reference every kernel is checked against;
//   T = float   a plain float32 implementation of the same math, whose own error against
//               the double one sets the tolerance (DESIGN.md, "Numbers and checks"). For a
//               16-bit run (AttnOptions::dtype) it also rounds to that dtype where a 16-bit
//               kernel must: P before P·V, dS and P before their products, and the outputs.
// Inputs are float32 values (what the kernels read: of the run's dtype); everything after the
// load is T.
//
// Row by row, so a check of a large problem can compute only a sample of rows: a forward
// row costs O(N·d). A backward row of dQ needs only its own row's statistics, but a row of
// dK or dV sums over every query row, so the backward first computes LSE and
// D = rowsum(dO ∘ O) for all rows of the head (O(N²·d)), then any rows of dQ, dK, dV.
#pragma once

#include <cstdint>
#include <vector>

#include "common/problem.hpp"

namespace fs {

// Which keys a query sees under a block mask (docs/notation.md, Algorithm 5): a view of
// BlockMask::dense (common/block_mask.hpp), Tr × Tc, row-major, 0 or 1.
struct BlockMaskView {
  const std::uint8_t* dense = nullptr;
  int block_r = 1, block_c = 1, Tc = 0;
  bool visible(std::int64_t i, std::int64_t j) const {
    return dense[(i / block_r) * Tc + j / block_c] != 0;
  }
};

struct AttnOptions {
  AttnOptions(float scale_ = 0.f, bool causal_ = false, Dropout dropout_ = {}, const BlockMaskView* mask_ = nullptr,
              DType dtype_ = DType::fp32, const SmyrfClusters* clusters_ = nullptr)
      : scale(scale_), causal(causal_), dropout(dropout_), mask(mask_), dtype(dtype_), clusters(clusters_) {}
  float scale = 0.f;
  bool causal = false;
  Dropout dropout;               // the kernels' mask, from the same generator (common/philox.hpp)
  const BlockMaskView* mask = nullptr;  // null: every block visible
  DType dtype = DType::fp32;     // the kernel's: where the float32 version rounds (see above)
  // SMYRF (common/smyrf.hpp): attention inside these clusters, merged over their rounds, instead
  // of dense attention; fp32, not causal, no dropout or block mask.
  const SmyrfClusters* clusters = nullptr;
  // The kernels rounded Q, K and V to e4m3 first (step 09's fp8; common/e4m3.hpp): verify_forward
  // holds O to the reference of those rounded inputs, under the FP8 rule (verify.hpp).
  bool e4m3 = false;
  // > 0: the float reference adds S's products as the FP8 tensor core does (e4m3_mma_sum, this
  // many bits; the double reference is exact as ever). The FP8 rule sets it for its yardstick.
  int e4m3_mma_bits = 0;
  // FlashAttention's interface features (flash_attn_func), as it defines them (docs/notation.md,
  // "The interface features"). Steps 04/05's kernels take the window, ALiBi and softcap for square
  // shapes (common/flash_features.cuh); the rest only the reference has. The Shape is the
  // queries': Q, O are (B, H, N, d). With δ = N_k − N (masks aligned to the bottom-right corner):
  //   K, V     (B, kv_heads, kv_len, d); 0 means the Shape's (Shape::Hkv, Shape::Nk: H and N
  //            unless it says otherwise). H must be a multiple of kv_heads (GQA,
  //            MQA: query head h reads K/V head h / (H / kv_heads))
  //   causal   key j is kept for query i when j ≤ i + δ
  //   window   key j is kept when i + δ − window_left ≤ j ≤ i + δ + window_right; −1 leaves that
  //            side unbounded (window_left = −1, window_right = 0 is the causal mask)
  //   ALiBi    S_ij += −slope · |i + δ − j|, the slope of head h = bh mod H: one per head, (H), or
  //            with alibi_batch_stride = H one per batch and head, (B, H), batch b = bh / H's row
  //            (packed: sequence b's row, as flash_attn_varlen_func takes them); null: none
  //   softcap  > 0: S_ij = softcap · tanh(τ q_i·k_j / softcap), before the bias and the masks
  //   packed   cu_seqlens_q, cu_seqlens_k (both or neither): sequences packed along the tokens of
  //            one batch (B = 1, N and kv_len the totals, prefix sums from 0 of equal length):
  //            sequence b's queries [cu_q[b], cu_q[b+1]) see only its keys [cu_k[b], cu_k[b+1]),
  //            with its own δ and masks; a sequence may be empty
  int kv_heads = 0, kv_len = 0;
  const std::vector<std::int32_t>* cu_seqlens_q = nullptr;
  const std::vector<std::int32_t>* cu_seqlens_k = nullptr;
  int window_left = -1, window_right = -1;
  const float* alibi_slopes = nullptr;
  int alibi_batch_stride = 0;  // 0: (H) slopes; H: (B, H) (ScoreMods::alibi_batch_stride)
  float softcap = 0.f;
  int kv_heads_of(const Shape& s) const { return kv_heads > 0 ? kv_heads : s.kv_heads(); }
  int keys(const Shape& s) const { return kv_len > 0 ? kv_len : s.keys(); }
};

// The standard ALiBi slopes of H heads (Press et al. 2022, as FlashAttention's tests take them):
// slope_h = 2^(−8(h + 1)/H) for H a power of 2; otherwise those of the power of 2 below H, then
// every other slope of the one above.
std::vector<float> alibi_slopes(int H);

// Row `row` = bh·N + i of the forward: o_row[0..d) and its LSE (natural log).
// A row whose every key is masked has O = 0 and LSE = -inf. With dropout, O = (P ∘ Z) V with
// Z_ij = 1/(1 − p) where kept, 0 where dropped; LSE is the softmax's, before dropout.
template <typename T>
void reference_forward_row(const Shape& s, const float* q, const float* k, const float* v,
                           const AttnOptions& opt, std::int64_t row, T* o_row, T* lse);

// Row `row` = bh·N + i of the attention probabilities, as flash_attn_func(..., return_attn_probs=True)
// defines them (its S_dmask; the kernels' twin is common/attn_probs.cuh): p[j] = exp(S_ij − LSE_i)
// for the keys j of the row's sequence (kv_len of them, or its own with packed sequences; p is
// resized to that), 0 where masked; where the dropout mask drops (i, j), −p[j] instead (−0 where
// P is 0), so that the sign bit is the mask and |p| the probability before dropout.
template <typename T>
void reference_probs_row(const Shape& s, const float* q, const float* k, const AttnOptions& opt, std::int64_t row,
                         std::vector<T>& p);

// Rows `rows` (indices into the B·H·N rows) of O and LSE: o is rows.size() × d.
template <typename T>
void reference_forward(const Shape& s, const float* q, const float* k, const float* v,
                       const AttnOptions& opt, const std::vector<std::int64_t>& rows,
                       std::vector<T>& o, std::vector<T>& lse);

// Gradients of one head bh for the loss Σ O ∘ dO: rows q_rows of dQ and kv_rows of dK, dV
// (indices 0..N-1 inside the head, 0..kv_len-1 for K and V); dq is q_rows.size() × d, dk and dv
// kv_rows.size() × d. With grouped K/V heads, dk and dv are query head bh's share of its K/V
// head's gradients: the H / kv_heads heads of a group add up to them.
template <typename T>
void reference_backward_head(const Shape& s, const float* q, const float* k, const float* v,
                             const float* dout, const AttnOptions& opt, std::int64_t bh,
                             const std::vector<std::int64_t>& q_rows,
                             const std::vector<std::int64_t>& kv_rows, std::vector<T>& dq,
                             std::vector<T>& dk, std::vector<T>& dv);

// 0, 1, ..., n-1.
std::vector<std::int64_t> all_indices(std::int64_t n);

}  // namespace fs
