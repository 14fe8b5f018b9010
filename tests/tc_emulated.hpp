// What step 08's emulated tests share (test_tc_emulated*.cpp): a pass of the step's own kernels on
// the CPU — their source compiled by the host compiler and run by the emulator (common/emulator),
// mma.sync and ldmatrix computed lane by lane from the fragment layouts
// steps/08_tensor_cores/mma.cuh documents — and the cases the tests sweep. The kernels compile in
// units of their own, one per pass, element type and head dimension (tc_emulated_forward.cpp,
// tc_emulated_backward.cpp); the tests include none of them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "common/harness.hpp"
#include "common/problem.hpp"
#include "steps/08_tensor_cores/bwd_common.cuh"
#include "steps/08_tensor_cores/forward_configs.cuh"
#include "steps/08_tensor_cores/launchers.cuh"
#include "steps/08_tensor_cores/variants.hpp"
#include "tests/flash_checks.hpp"
#include "tests/host_convert.hpp"

namespace fs::testing {

// The dispatch of step 08 (tc_forward_dispatch, tc_backward_dispatch; fp32's with `passes` TF32
// products) at element type E (float: fp32) and head dimension D, emulated.
template <typename E, int D>
void tc_emulated_forward(const FwdParams& p, int passes);
template <typename E, int D>
void tc_emulated_backward(const BwdParams& p);

inline void tc_emulated_forward(const FwdParams& p, int passes = 3) {
  tc::with_element_and_dim(p, [&](auto* e, auto d) {
    using E = std::remove_pointer_t<decltype(e)>;
    if constexpr (!std::is_same_v<E, float> || tc::is_f32_head_dim(decltype(d)::value))
      tc_emulated_forward<E, decltype(d)::value>(p, passes);
  });
}
inline void tc_emulated_backward(const BwdParams& p) {
  tc::with_element_and_dim(p, [&](auto* e, auto d) {
    using E = std::remove_pointer_t<decltype(e)>;
    if constexpr (!std::is_same_v<E, float> || tc::is_f32_head_dim(decltype(d)::value))
      tc_emulated_backward<E, decltype(d)::value>(p);
  });
}

// Forward then backward of step 08's variant on host memory, outputs poisoned with NaN first;
// O, LSE, dQ, dK, dV as floats. With FlashAttention's features (mods; K, V of the Shape's own
// length and heads; packed sequences), the kernels' FlashFeatures instantiations, as the dispatch
// chooses. The inputs are rounded to dtype (bf16 or fp16) on the way in. gap: every tensor's rows
// d + gap elements apart, the gaps NaN and checked to stay NaN in the outputs (spread_rows).
template <typename E>
FlashOutputs tc_run(const Shape& s, const HostProblem& p, int variant, bool causal, Dropout dropout,
                    const ScoreMods& mods = {}, const Packed& packed = {}, int gap = 0) {
  const E nan = E(NAN);
  const int d = s.d, ld = d + gap;
  const auto q = spread_rows(to_16bit<E>(p.q), d, ld), k = spread_rows(to_16bit<E>(p.k), d, ld),
             v = spread_rows(to_16bit<E>(p.v), d, ld), dout = spread_rows(to_16bit<E>(p.dout), d, ld);
  std::vector<E> o(s.rows() * ld, nan), dq(s.rows() * ld, nan), dk(s.kv_elems() / d * ld, nan),
      dv(s.kv_elems() / d * ld, nan);
  std::vector<float> lse(s.rows(), NAN);
  std::vector<float> workspace(tc::tc_bwd_workspace_bytes(s) / sizeof(float) + 1, NAN);
  FwdParams fp = forward_params(s, q.data(), k.data(), v.data(), o.data(), lse.data(), causal, dropout);
  fp.dtype = std::is_same_v<E, __nv_bfloat16> ? DType::bf16 : DType::fp16;
  fp.variant = variant;
  fp.mods = mods;
  fp.packed = packed;
  fp.q_strides = fp.o_strides = Strides{}.or_dense(s.H, s.N, ld);
  fp.k_strides = fp.v_strides = Strides{}.or_dense(s.kv_heads(), s.keys(), ld);
  tc_emulated_forward(fp);
  BwdParams bp = backward_params(fp, dout.data(), dq.data(), dk.data(), dv.data());
  bp.dtype = fp.dtype;
  bp.variant = variant;
  bp.workspace = workspace.data();
  tc_emulated_backward(bp);
  return {gather_rows(o, d, ld, "O"), lse, gather_rows(dq, d, ld, "dQ"), gather_rows(dk, d, ld, "dK"),
          gather_rows(dv, d, ld, "dV")};
}

// A problem with FlashAttention's features: N queries, Nk keys, H query heads on Hkv K/V heads, a
// window (−1: unbounded), a softcap (0: none), ALiBi, dropout.
struct FeatureCase {
  int N, Nk, H, Hkv;
  int left, right;
  float softcap;
  bool alibi;
  float p_drop;
};

// Packed sequences (flash_attn_varlen_func's cu_seqlens): the sequences' query and key lengths,
// and the rest as FeatureCase's.
struct PackedCase {
  std::vector<int> q_lens, k_lens;
  int H, Hkv;
  int left, right;
  float softcap;
  bool alibi;
  float p_drop;
};

inline std::vector<std::int32_t> prefix_sums(const std::vector<int>& lens) {
  std::vector<std::int32_t> cu{0};
  for (int n : lens) cu.push_back(cu.back() + n);
  return cu;
}

// The packed problem of c at head dimension d: its Shape (one batch of every sequence's tokens) and
// its Packed, which points into cu_q and cu_k (they must outlive it).
inline Packed packed_of(const PackedCase& c, const std::vector<std::int32_t>& cu_q,
                        const std::vector<std::int32_t>& cu_k, Shape& s, int d) {
  s = Shape{1, c.H, cu_q.back(), d};
  s.Nk = cu_k.back();
  s.Hkv = c.Hkv;
  Packed packed;  // the emulated kernels read host memory
  packed.cu_q = cu_q.data();
  packed.cu_k = cu_k.data();
  packed.count = static_cast<int>(c.q_lens.size());
  packed.max_q = *std::max_element(c.q_lens.begin(), c.q_lens.end());
  packed.max_k = *std::max_element(c.k_lens.begin(), c.k_lens.end());
  return packed;
}

// The cases of packed sequences: empty, one token, then odd starts; queries without keys and keys
// without queries; unequal sides with every feature; a window wider than every sequence.
inline const std::vector<PackedCase>& packed_cases() {
  static const std::vector<PackedCase> cases = {
      // empty, one token, then odd starts; lengths across 64-key and 128-row tiles
      {{70, 0, 130, 1, 65}, {70, 0, 130, 1, 65}, 2, 2, -1, -1, 0.f, false, 0.1f},
      // queries without keys (33:0), keys without queries (0:17), more and fewer keys; GQA
      {{50, 33, 0, 90}, {80, 0, 17, 61}, 4, 2, -1, -1, 0.f, false, 0.1f},
      // a window, softcap and ALiBi on sequences of unequal sides
      {{100, 37}, {37, 100}, 2, 1, 20, 3, 1.5f, true, 0.1f},
      // a window wider than every sequence
      {{130, 7}, {129, 9}, 2, 2, 500, 300, 0.f, false, 0.f},
  };
  return cases;
}

}  // namespace fs::testing
