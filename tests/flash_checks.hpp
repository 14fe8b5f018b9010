// What the tests that launch steps 04-06's kernels themselves share (test_flash_emulated.cpp on the
// CPU, test_flash_features_gpu.cpp on the GPU): the kernels' parameters from a pass's buffers, the
// reference's options for FlashAttention's score features, and the check every step's outputs are
// held to — O, LSE, dQ, dK, dV against the fp64 reference under the fp32 rule (common/verify.hpp).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "common/harness.hpp"
#include "common/problem.hpp"
#include "common/reference.hpp"
#include "common/verify.hpp"

namespace fs::testing {

// A pass's outputs, on the host; dq, dk, dv empty when no backward ran.
struct FlashOutputs {
  std::vector<float> o, lse, dq, dk, dv;
};

// The forward's parameters over buffers where the kernels run (host memory in the emulation).
inline FwdParams forward_params(const Shape& s, const void* q, const void* k, const void* v, void* o, float* lse,
                                bool causal, Dropout dropout = {}) {
  FwdParams fp;
  fp.q = q;
  fp.k = k;
  fp.v = v;
  fp.o = o;
  fp.lse = lse;
  fp.shape = s;
  fp.scale = default_scale(s.d);
  fp.causal = causal;
  fp.dropout = dropout;
  // The contiguous layouts, written out: step 08's dispatch takes them as given (tc_forward is
  // what fills them in for a caller that leaves them at zero).
  fp.q_strides = fp.o_strides = Strides{}.or_dense(s.H, s.N, s.d);
  fp.k_strides = fp.v_strides = Strides{}.or_dense(s.kv_heads(), s.keys(), s.d);
  return fp;
}

// The backward's of the same pass: the forward's inputs, settings and outputs, dO, the gradients.
inline BwdParams backward_params(const FwdParams& fp, const void* dout, void* dq, void* dk, void* dv) {
  BwdParams bp;
  bp.q = fp.q;
  bp.k = fp.k;
  bp.v = fp.v;
  bp.o = fp.o;
  bp.lse = fp.lse;
  bp.dout = dout;
  bp.dq = dq;
  bp.dk = dk;
  bp.dv = dv;
  bp.shape = fp.shape;
  bp.scale = fp.scale;
  bp.causal = fp.causal;
  bp.dropout = fp.dropout;
  bp.sparse = fp.sparse;
  bp.mods = fp.mods;
  bp.packed = fp.packed;
  bp.q_strides = bp.o_strides = bp.dout_strides = bp.dq_strides = fp.q_strides;
  bp.k_strides = bp.v_strides = bp.dk_strides = bp.dv_strides = fp.k_strides;
  return bp;
}

// FlashAttention's score features for the kernels: the window (−1: an unbounded side), the
// softcap (0: none), the ALiBi slopes where the kernels run (null: none), (H) or with
// alibi_batch_stride = H (B, H).
inline ScoreMods score_mods(int window_left, int window_right, float softcap, const float* alibi_slopes,
                            int alibi_batch_stride = 0) {
  ScoreMods mods;
  mods.window_left = window_left;
  mods.window_right = window_right;
  mods.softcap = softcap;
  mods.alibi_slopes = alibi_slopes;
  mods.alibi_batch_stride = alibi_batch_stride;
  return mods;
}

// The reference's options for the kernels' score features; `host_slopes` are mods' ALiBi slopes as
// the CPU reads them (the kernels' may be in device memory), of mods' shape.
inline AttnOptions with_score_mods(AttnOptions attn, const ScoreMods& mods, const float* host_slopes) {
  attn.window_left = mods.window_left;
  attn.window_right = mods.window_right;
  attn.softcap = mods.softcap;
  attn.alibi_slopes = mods.alibi_slopes ? host_slopes : nullptr;
  attn.alibi_batch_stride = mods.alibi_batch_stride;
  return attn;
}

// ALiBi slopes of shape (B, H) (B batches, or packed sequences) whose rows differ from each other
// and from the standard slopes of H heads: row b is those slopes turned by b heads and scaled by
// b + 1/2. A kernel that reads row 0 (or the (H) form) for every batch, or swaps the batch and the
// head, biases the scores of the other batches otherwise, which the reference's check catches.
inline std::vector<float> batch_slopes(int B, int H) {
  const std::vector<float> standard = alibi_slopes(H);
  std::vector<float> out;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) out.push_back(standard[std::size_t((h + b) % H)] * (float(b) + 0.5f));
  return out;
}

// Sequences packed along the tokens (FwdParams::packed), from their (queries, keys) lengths: the
// prefix sums the kernels and the reference take, and the longest lengths, which cut the grids.
struct PackedSequences {
  std::vector<std::int32_t> cu_q{0}, cu_k{0};
  int max_q = 0, max_k = 0;

  explicit PackedSequences(const std::vector<std::pair<int, int>>& lengths) {
    for (const auto& [n, nk] : lengths) {
      cu_q.push_back(cu_q.back() + n);
      cu_k.push_back(cu_k.back() + nk);
      max_q = std::max(max_q, n);
      max_k = std::max(max_k, nk);
    }
  }
  int count() const { return static_cast<int>(cu_q.size()) - 1; }
  // The problem of the packed tokens: one batch of every sequence's queries and keys.
  Shape shape(int H, int Hkv, int d) const {
    Shape s{1, H, cu_q.back(), d};
    s.Nk = cu_k.back();
    s.Hkv = Hkv;
    return s;
  }
  // The kernels' parameter, with the prefix sums at cu_q, cu_k where the kernels run (these
  // vectors' data in the emulation, device copies of them on a GPU).
  Packed params(const std::int32_t* cu_q_at, const std::int32_t* cu_k_at) const {
    return Packed{cu_q_at, cu_k_at, count(), max_q, max_k};
  }
  // The reference's options with these sequences (the options hold pointers to this object's vectors).
  AttnOptions reference(AttnOptions attn) const {
    attn.cu_seqlens_q = &cu_q;
    attn.cu_seqlens_k = &cu_k;
    return attn;
  }
};

// A tensor of (B, heads, rows, d) elements in another layout (Strides, common/problem.hpp): a buffer
// of `size` floats, NaN where no element lies, so that a kernel that reads or leaves a hole
// shows it.
struct Laid {
  Strides strides;
  std::size_t size = 0;
  // (B, rows, heads + pad, d): flash_attn_func's layout with `pad` more heads' room in each row
  // (0: (B, rows, heads, d) itself; > 0: one head of a wider tensor, as a slice of packed QKV is).
  static Laid rows_heads(int B, int heads, int rows, int d, int pad = 0) {
    const std::int64_t row = std::int64_t(heads + pad) * d;
    return {Strides{rows * row, d, row}, static_cast<std::size_t>(B * rows * row)};
  }
  // The contiguous x of (B, heads, rows, d) elements, placed in this layout.
  std::vector<float> place(const std::vector<float>& x, int heads, int rows, int d) const {
    std::vector<float> out(size, NAN);
    for_each(x.size(), heads, rows, d, [&](std::size_t e, std::int64_t at) { out[at] = x[e]; });
    return out;
  }
  // The inverse: the (B, heads, rows, d) elements of y, contiguous.
  std::vector<float> gather(const std::vector<float>& y, std::size_t count, int heads, int rows, int d) const {
    std::vector<float> out(count);
    for_each(count, heads, rows, d, [&](std::size_t e, std::int64_t at) { out[e] = y[at]; });
    return out;
  }

 private:
  template <typename F>
  void for_each(std::size_t count, int heads, int rows, int d, F f) const {
    for (std::size_t e = 0; e < count; ++e) {
      const std::int64_t r = e / d, bh = r / rows;
      f(e, strides.of_head(bh, heads) + (r % rows) * strides.row + std::int64_t(e % d));
    }
  }
};

// O and LSE, then (when they were computed) dQ, dK, dV against the fp64 reference under `attn`.
inline void require_reference(const Shape& s, const AttnOptions& attn, const HostProblem& p, const float* o,
                              const float* lse, const float* dq = nullptr, const float* dk = nullptr,
                              const float* dv = nullptr) {
  const auto fwd = verify_forward(s, attn, p.q.data(), p.k.data(), p.v.data(), o, lse, 7);
  INFO(fwd.summary());
  REQUIRE(fwd.pass());
  if (!dq) return;
  const auto bwd = verify_backward(s, attn, p.q.data(), p.k.data(), p.v.data(), p.dout.data(), dq, dk, dv, 7);
  INFO(bwd.summary());
  REQUIRE(bwd.pass());
}
inline void require_reference(const Shape& s, const AttnOptions& attn, const HostProblem& p, const FlashOutputs& g) {
  if (g.dq.empty()) return require_reference(s, attn, p, g.o.data(), g.lse.data());
  require_reference(s, attn, p, g.o.data(), g.lse.data(), g.dq.data(), g.dk.data(), g.dv.data());
}

}  // namespace fs::testing
