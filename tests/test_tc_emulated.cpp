// Step 08 on the CPU: the tensor-core forward and both backwards (fa2's FlashAttention-2 warp
// layout, key_warps' 16-key warps, deterministic's dQ kernel), their own source compiled by the
// host compiler and run by the emulator (common/emulator), with mma.sync and ldmatrix computed
// lane by lane from the fragment layouts steps/08_tensor_cores/mma.cuh documents. The outputs are
// held to the rule the GPU tests hold them to (tests/test_tensor_cores_gpu.cpp): the fp64
// reference under the 16-bit rule.
//
// No substitute for the GPU tests: the emulation sums each mma's products in its own order and
// rounds 2^x its own way, and sees nothing of timing or races (emulator.hpp). What it does see, on
// any machine: a fragment or swizzle index, a tile bound, a tail or a mask that is wrong — before
// a kernel change reaches a GPU.
#include "common/emulator/emulator.hpp"  // first: it defines threadIdx, __syncthreads, ... for the kernels

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/harness.hpp"
#include "common/reference.hpp"
#include "common/verify.hpp"
#include "steps/08_tensor_cores/backward_configs.cuh"
#include "steps/08_tensor_cores/forward_configs.cuh"
#include "tests/flash_checks.hpp"
#include "tests/host_convert.hpp"

namespace {

using fs::DType;

using fs::testing::to_16bit;
using fs::testing::to_float;

// Forward then backward of step 08's variant on host memory, outputs poisoned with NaN first;
// O, LSE, dQ, dK, dV as floats. With FlashAttention's features (mods; K, V of the Shape's own
// length and heads; packed sequences), the kernels' FlashFeatures instantiations, as
// tc_forward_dispatch chooses.
template <typename E, int D>
fs::testing::FlashOutputs run(const fs::Shape& s, const fs::HostProblem& p, int variant, bool causal,
                              fs::Dropout dropout, const fs::ScoreMods& mods = {}, const fs::Packed& packed = {}) {
  const E nan = E(NAN);
  const auto q = to_16bit<E>(p.q), k = to_16bit<E>(p.k), v = to_16bit<E>(p.v), dout = to_16bit<E>(p.dout);
  std::vector<E> o(s.elems(), nan), dq(s.elems(), nan), dk(s.kv_elems(), nan), dv(s.kv_elems(), nan);
  std::vector<float> lse(s.rows(), NAN);
  std::vector<float> workspace(fs::tc::tc_bwd_workspace_bytes(s) / sizeof(float) + 1, NAN);
  fs::FwdParams fp = fs::testing::forward_params(s, q.data(), k.data(), v.data(), o.data(), lse.data(), causal, dropout);
  fp.dtype = std::is_same_v<E, __nv_bfloat16> ? DType::bf16 : DType::fp16;
  fp.variant = variant;
  fp.mods = mods;
  fp.packed = packed;
  fs::tc::tc_forward_dispatch<E, D>(fp);
  fs::BwdParams bp = fs::testing::backward_params(fp, dout.data(), dq.data(), dk.data(), dv.data());
  bp.dtype = fp.dtype;
  bp.variant = variant;
  bp.workspace = workspace.data();
  fs::tc::tc_backward_dispatch<E, D>(bp);
  return {to_float(o), lse, to_float(dq), to_float(dk), to_float(dv)};
}

const char* variant_name(int v) {
  switch (v) {
    case fs::tc::kFa2: return "fa2";
    case fs::tc::kDeterministic: return "deterministic";
    case fs::tc::kKeyWarps: return "key_warps";
    case fs::tc::kR1Mma: return "r1_mma";
    case fs::tc::kR2Swizzle: return "r2_swizzle";
    case fs::tc::kR3Pipeline: return "r3_pipeline";
    case fs::tc::kR4PInRegs: return "r4_p_in_regs";
    default: return "?";
  }
}

template <typename E, int D>
void check(DType dtype, int N, bool causal, int variant, float p_drop) {
  const fs::Shape s{1, 2, N, D};
  const fs::Dropout dropout{p_drop, 17};
  const fs::HostProblem p = fs::random_problem(s, 4242 + N + D + variant, true, dtype);
  DYNAMIC_SECTION(fs::dtype_name(dtype) << " d=" << D << " N=" << N << (causal ? " causal " : " ")
                                        << variant_name(variant) << " dropout " << p_drop) {
    const auto out = run<E, D>(s, p, variant, causal, dropout);
    const fs::AttnOptions attn{fs::default_scale(D), causal, dropout, nullptr, dtype};
    fs::testing::require_reference(s, attn, p, out.o.data(), out.lse.data(), out.dq.data(), out.dk.data(),
                                   out.dv.data());
  }
}

}  // namespace

// N = 130: two 128-row tiles, the second two rows long, and 64-key tiles with a tail.
TEST_CASE("step 08 on the CPU: forward and backward match the fp64 reference, each dK/dV layout", "[emulated][tc]") {
  for (bool causal : {false, true})
    for (int variant : {fs::tc::kFa2, fs::tc::kDeterministic, fs::tc::kKeyWarps}) {
      check<__nv_bfloat16, 64>(DType::bf16, 130, causal, variant, 0.f);
      check<__half, 128>(DType::fp16, 130, causal, variant, 0.f);
    }
}

TEST_CASE("step 08 on the CPU: dropout, short sequences and the other head dimensions", "[emulated][tc]") {
  check<__nv_bfloat16, 64>(DType::bf16, 130, true, fs::tc::kFa2, 0.15f);
  check<__half, 128>(DType::fp16, 70, false, fs::tc::kDeterministic, 0.15f);
  check<__nv_bfloat16, 32>(DType::bf16, 17, true, fs::tc::kFa2, 0.f);
  check<__half, 96>(DType::fp16, 17, false, fs::tc::kFa2, 0.f);
  check<__nv_bfloat16, 256>(DType::bf16, 40, true, fs::tc::kFa2, 0.f);
}

// The ladder's rungs (bf16, d = 64 and 128): plain and swizzled tiles, one stage and two, P through
// shared memory and in registers; their backward is fa2's.
TEST_CASE("step 08 on the CPU: the ladder's rungs", "[emulated][tc]") {
  for (int variant : {fs::tc::kR1Mma, fs::tc::kR2Swizzle, fs::tc::kR3Pipeline, fs::tc::kR4PInRegs})
    check<__nv_bfloat16, 64>(DType::bf16, 130, variant % 2 == 0, variant, 0.f);
  check<__nv_bfloat16, 128>(DType::bf16, 70, true, fs::tc::kR1Mma, 0.f);
}


// FlashAttention's interface features in fa2 and deterministic (tc_features.cuh): a window — inside
// one tile, across tiles (N = 300 leaves whole tiles out of every walk), one wider than N —,
// softcapping with its derivative, ALiBi, all three; K and V of their own length, fewer and more
// keys than queries (causal aligned to the bottom-right corner: the first rows see no key when
// Nk < N), one query; grouped-query and multi-query heads, whose dK/dV CTAs sum their group. d = 64
// runs tc_dkdv_smem_kernel, d = 32 and 96 tc_dkdv_kernel (with and without K, V in registers), d =
// 256 its column split; bf16 and fp16 alternate; dropout where it softcaps or caps and windows.
namespace {

struct FeatureCase {
  int N, Nk, H, Hkv;
  int left, right;  // the window; −1: unbounded
  float softcap;
  bool alibi;
  float p_drop;
};

template <typename E, int D>
void check_features(DType dtype, const FeatureCase& f, bool causal, int variant) {
  fs::Shape s{1, f.H, f.N, D};
  s.Nk = f.Nk;
  s.Hkv = f.Hkv;
  const std::vector<float> slopes = fs::alibi_slopes(f.H);
  const fs::ScoreMods mods = fs::testing::score_mods(f.left, f.right, f.softcap, f.alibi ? slopes.data() : nullptr);
  const fs::Dropout dropout{f.p_drop, 23};
  const fs::HostProblem p = fs::random_problem(s, 77ull * f.N + 5ull * f.Nk + f.Hkv + 3ull * (f.left + 2), true, dtype);
  DYNAMIC_SECTION(fs::dtype_name(dtype) << " d=" << D << " N=" << f.N << " Nk=" << f.Nk << " H=" << f.H
                                        << " Hkv=" << f.Hkv << (causal ? " causal " : " ") << variant_name(variant)
                                        << " window (" << f.left << ", " << f.right << ") softcap " << f.softcap
                                        << (f.alibi ? " alibi" : "") << " dropout " << f.p_drop) {
    const auto out = run<E, D>(s, p, variant, causal, dropout, mods);
    const fs::AttnOptions attn =
        fs::testing::with_score_mods(fs::AttnOptions{fs::default_scale(D), causal, dropout, nullptr, dtype}, mods,
                                     slopes.data());
    fs::testing::require_reference(s, attn, p, out.o.data(), out.lse.data(), out.dq.data(), out.dk.data(),
                                   out.dv.data());
  }
}

}  // namespace

TEST_CASE("step 08 on the CPU with FlashAttention's interface features: windows, softcap, ALiBi, Nk != N and "
          "grouped K/V heads match the fp64 reference, forward and both backwards",
          "[emulated][tc][features]") {
  const FeatureCase cases[] = {
      {300, 300, 2, 2, 8, 0, 0.f, false, 0.f},      // a window of whole tiles left out
      {130, 130, 2, 2, 3, 40, 0.f, false, 0.f},     // both sides
      {130, 130, 2, 2, 500, 300, 0.f, false, 0.f},  // wider than N: every key
      {130, 130, 2, 2, -1, -1, 2.f, false, 0.15f},  // softcap, with dropout
      {130, 130, 2, 2, -1, -1, 0.f, true, 0.f},     // ALiBi
      {100, 170, 4, 2, -1, -1, 0.f, false, 0.f},    // more keys than queries, GQA
      {170, 37, 2, 1, -1, -1, 0.f, false, 0.f},     // fewer keys, MQA: causal leaves rows keyless
      {1, 70, 2, 1, -1, -1, 0.f, false, 0.f},       // one query
      {150, 97, 4, 2, 20, 3, 1.5f, true, 0.1f},     // everything, with dropout
  };
  for (bool causal : {false, true})
    for (int variant : {fs::tc::kFa2, fs::tc::kDeterministic})
      for (std::size_t c = 0; c < std::size(cases); ++c) {
        if (c % 2 == 0)
          check_features<__nv_bfloat16, 64>(DType::bf16, cases[c], causal, variant);
        else
          check_features<__half, 64>(DType::fp16, cases[c], causal, variant);
      }
}

TEST_CASE("step 08 on the CPU with the interface features at the other head dimensions", "[emulated][tc][features]") {
  for (bool causal : {false, true}) {
    check_features<__nv_bfloat16, 32>(DType::bf16, {150, 97, 4, 2, 20, 3, 1.5f, true, 0.1f}, causal, fs::tc::kFa2);
    check_features<__half, 32>(DType::fp16, {200, 250, 2, 1, 70, -1, 0.f, false, 0.f}, causal,
                               fs::tc::kDeterministic);
    check_features<__half, 96>(DType::fp16, {90, 130, 4, 1, 10, 10, 0.f, true, 0.f}, causal, fs::tc::kFa2);
    check_features<__half, 128>(DType::fp16, {150, 97, 4, 2, 20, 3, 1.5f, true, 0.1f}, causal, fs::tc::kFa2);
    check_features<__nv_bfloat16, 256>(DType::bf16, {40, 57, 2, 1, 5, 9, 3.f, true, 0.f}, causal,
                                       fs::tc::kDeterministic);
  }
}

// Packed sequences (flash_attn_varlen_func's cu_seqlens): one batch of tokens, each sequence its own
// problem with its own δ, masks and walks, on a grid of the longest sequence's tiles (the CTAs past a
// shorter one's end leave at once). The cases hold an empty sequence, one of a single token (after
// which the sequences start at odd tokens, where a lane's dropout pair straddles two Philox blocks),
// queries without keys (their O = 0, LSE = -inf, dQ = 0) and keys without queries (dK = dV = 0),
// lengths that are not multiples of a tile, more keys than queries and fewer, grouped K/V heads, and
// every score feature with dropout.
namespace {

struct PackedCase {
  std::vector<int> q_lens, k_lens;
  int H, Hkv;
  int left, right;
  float softcap;
  bool alibi;
  float p_drop;
};

std::vector<std::int32_t> prefix_sums(const std::vector<int>& lens) {
  std::vector<std::int32_t> cu{0};
  for (int n : lens) cu.push_back(cu.back() + n);
  return cu;
}

template <typename E, int D>
void check_packed(DType dtype, const PackedCase& c, bool causal, int variant) {
  const std::vector<std::int32_t> cu_q = prefix_sums(c.q_lens), cu_k = prefix_sums(c.k_lens);
  fs::Shape s{1, c.H, cu_q.back(), D};
  s.Nk = cu_k.back();
  s.Hkv = c.Hkv;
  fs::Packed packed;  // the emulated kernels read host memory
  packed.cu_q = cu_q.data();
  packed.cu_k = cu_k.data();
  packed.count = static_cast<int>(c.q_lens.size());
  packed.max_q = *std::max_element(c.q_lens.begin(), c.q_lens.end());
  packed.max_k = *std::max_element(c.k_lens.begin(), c.k_lens.end());
  const std::vector<float> slopes = fs::alibi_slopes(c.H);
  const fs::ScoreMods mods = fs::testing::score_mods(c.left, c.right, c.softcap, c.alibi ? slopes.data() : nullptr);
  const fs::Dropout dropout{c.p_drop, 29};
  const fs::HostProblem p = fs::random_problem(s, 31ull * s.N + 7ull * s.keys() + c.Hkv, true, dtype);
  DYNAMIC_SECTION(fs::dtype_name(dtype) << " d=" << D << " " << packed.count << " sequences, N=" << s.N
                                        << " Nk=" << s.keys() << " H=" << c.H << " Hkv=" << c.Hkv
                                        << (causal ? " causal " : " ") << variant_name(variant) << " window ("
                                        << c.left << ", " << c.right << ") softcap " << c.softcap
                                        << (c.alibi ? " alibi" : "") << " dropout " << c.p_drop) {
    const auto out = run<E, D>(s, p, variant, causal, dropout, mods, packed);
    fs::AttnOptions attn = fs::testing::with_score_mods(
        fs::AttnOptions{fs::default_scale(D), causal, dropout, nullptr, dtype}, mods, slopes.data());
    attn.cu_seqlens_q = &cu_q;
    attn.cu_seqlens_k = &cu_k;
    fs::testing::require_reference(s, attn, p, out.o.data(), out.lse.data(), out.dq.data(), out.dk.data(),
                                   out.dv.data());
  }
}

const PackedCase kPackedCases[] = {
    // empty, one token, then odd starts; lengths across 64-key and 128-row tiles
    {{70, 0, 130, 1, 65}, {70, 0, 130, 1, 65}, 2, 2, -1, -1, 0.f, false, 0.1f},
    // queries without keys (33:0), keys without queries (0:17), more and fewer keys; GQA
    {{50, 33, 0, 90}, {80, 0, 17, 61}, 4, 2, -1, -1, 0.f, false, 0.1f},
    // a window, softcap and ALiBi on sequences of unequal sides
    {{100, 37}, {37, 100}, 2, 1, 20, 3, 1.5f, true, 0.1f},
    // a window wider than every sequence
    {{130, 7}, {129, 9}, 2, 2, 500, 300, 0.f, false, 0.f},
};

}  // namespace

TEST_CASE("step 08 on the CPU with packed sequences (cu_seqlens): each sequence its own problem, empty ones "
          "included, forward and both backwards",
          "[emulated][tc][features][packed]") {
  for (bool causal : {false, true})
    for (int variant : {fs::tc::kFa2, fs::tc::kDeterministic})
      for (std::size_t c = 0; c < std::size(kPackedCases); ++c) {
        if (c % 2 == 0)
          check_packed<__nv_bfloat16, 64>(DType::bf16, kPackedCases[c], causal, variant);
        else
          check_packed<__half, 64>(DType::fp16, kPackedCases[c], causal, variant);
      }
}

// The other dK/dV kernels: tc_dkdv_kernel (d = 32) and its column split (d = 256).
TEST_CASE("step 08 on the CPU with packed sequences at the other head dimensions", "[emulated][tc][features][packed]") {
  for (bool causal : {false, true}) {
    check_packed<__nv_bfloat16, 32>(DType::bf16, kPackedCases[1], causal, fs::tc::kFa2);
    check_packed<__half, 256>(DType::fp16, kPackedCases[0], causal, fs::tc::kDeterministic);
  }
}

// fp32 on the tensor cores (variant 3xtf32, flash_tc_forward_f32.cuh): the forward held to the fp32
// rule — the one steps 04 and 05 pass — at each compiled head dimension, tails, causal, the
// features, dropout and packed sequences; and plain TF32 (one product instead of three), which the
// rule must catch: its error is TF32's 2^-11, where 3×TF32's is fp32's.
namespace {

// The fp32 forward's parameters (variant 3xtf32) over o and lse.
fs::FwdParams f32_params(const fs::Shape& s, const fs::HostProblem& p, float* o, float* lse, bool causal,
                         fs::Dropout dropout, const fs::ScoreMods& mods, const fs::Packed& packed) {
  fs::FwdParams fp = fs::testing::forward_params(s, p.q.data(), p.k.data(), p.v.data(), o, lse, causal, dropout);
  fp.dtype = DType::fp32;
  fp.variant = fs::tc::k3xTf32;
  fp.mods = mods;
  fp.packed = packed;
  return fp;
}

// O and LSE of the fp32 forward with `passes` TF32 products (3: 3xtf32).
template <int D>
std::pair<std::vector<float>, std::vector<float>> run_f32(const fs::Shape& s, const fs::HostProblem& p, int passes,
                                                          bool causal, fs::Dropout dropout,
                                                          const fs::ScoreMods& mods = {}, const fs::Packed& packed = {}) {
  std::vector<float> o(s.elems(), NAN), lse(s.rows(), NAN);
  fs::tc::tc_forward_f32_dispatch<D>(f32_params(s, p, o.data(), lse.data(), causal, dropout, mods, packed), passes);
  return {o, lse};
}

// The fp32 forward (3xtf32), then its backward (tc_dkdv_f32_kernel, atomic dQ); dQ, dK, dV
// poisoned with NaN first.
template <int D>
fs::testing::FlashOutputs run_f32_backward(const fs::Shape& s, const fs::HostProblem& p, bool causal,
                                           fs::Dropout dropout, const fs::ScoreMods& mods = {},
                                           const fs::Packed& packed = {}) {
  auto [o, lse] = run_f32<D>(s, p, 3, causal, dropout, mods, packed);
  std::vector<float> dq(s.elems(), NAN), dk(s.kv_elems(), NAN), dv(s.kv_elems(), NAN);
  std::vector<float> workspace(fs::tc::tc_bwd_workspace_bytes(s) / sizeof(float) + 1, NAN);
  const fs::FwdParams fp = f32_params(s, p, o.data(), lse.data(), causal, dropout, mods, packed);
  fs::BwdParams bp = fs::testing::backward_params(fp, p.dout.data(), dq.data(), dk.data(), dv.data());
  bp.dtype = DType::fp32;
  bp.variant = fs::tc::k3xTf32;
  bp.workspace = workspace.data();
  fs::tc::tc_backward_f32_dispatch<D>(bp);
  return {o, lse, dq, dk, dv};
}

template <int D>
void check_f32(int N, int Nk, int H, int Hkv, bool causal, const FeatureCase& f = {0, 0, 0, 0, -1, -1, 0.f, false, 0.f}) {
  fs::Shape s{1, H, N, D};
  s.Nk = Nk;
  s.Hkv = Hkv;
  const std::vector<float> slopes = fs::alibi_slopes(H);
  const fs::ScoreMods mods = fs::testing::score_mods(f.left, f.right, f.softcap, f.alibi ? slopes.data() : nullptr);
  const fs::Dropout dropout{f.p_drop, 41};
  const fs::HostProblem p = fs::random_problem(s, 1000ull + 7 * N + Nk + D, true, DType::fp32);
  DYNAMIC_SECTION("fp32 3xtf32 d=" << D << " N=" << N << " Nk=" << Nk << " H=" << H << " Hkv=" << Hkv
                                   << (causal ? " causal" : "") << " window (" << f.left << ", " << f.right
                                   << ") softcap " << f.softcap << (f.alibi ? " alibi" : "") << " dropout " << f.p_drop) {
    const auto out = run_f32_backward<D>(s, p, causal, dropout, mods);
    const fs::AttnOptions attn = fs::testing::with_score_mods(
        fs::AttnOptions{fs::default_scale(D), causal, dropout, nullptr, DType::fp32}, mods, slopes.data());
    fs::testing::require_reference(s, attn, p, out);
  }
}

}  // namespace

TEST_CASE("step 08 on the CPU in fp32 (3xtf32): forward and backward pass the fp32 rule", "[emulated][tc][fp32]") {
  for (bool causal : {false, true}) {
    check_f32<64>(130, 130, 2, 2, causal);
    check_f32<32>(17, 17, 2, 2, causal);
    check_f32<128>(70, 70, 2, 2, causal);
    check_f32<64>(100, 170, 4, 2, causal, {0, 0, 0, 0, 20, 3, 1.5f, true, 0.1f});
    check_f32<128>(150, 97, 4, 1, causal, {0, 0, 0, 0, 500, 300, 0.f, false, 0.15f});
  }
}

// The tensor cores round each mma's result toward zero (the emulation does too). Three products per
// 8 keys accumulated in place into O drift it by ~3N/8 truncations of the running sum: on the H200
// that failed the fp32 rule at N = 1025 (docs/benchmarks/h200_tc_fp32_errors.txt). Here, with the
// in-place sums, O's error was 3.62e-6 against a tolerance of 1.88e-6 (each key tile's P̃V summed
// from zero instead left 2.2e-7 on the H200 at d = 64, N = 1025, B = 1, H = 2:
// docs/benchmarks/h200_tc_fp32_tilesum_check.txt). Long enough rows, then, that a return to
// in-place sums fails on the CPU too.
TEST_CASE("step 08 on the CPU in fp32: 1025 keys, where sums in place drift past the fp32 rule", "[emulated][tc][fp32]") {
  const fs::Shape s{1, 1, 1025, 64};
  const fs::HostProblem p = fs::random_problem(s, 3064, false, DType::fp32);
  const auto [o, lse] = run_f32<64>(s, p, 3, false, {});
  fs::testing::require_reference(s, fs::AttnOptions{fs::default_scale(64), false, {}, nullptr, DType::fp32}, p, o.data(),
                                 lse.data());
}

TEST_CASE("step 08 on the CPU in fp32 with packed sequences", "[emulated][tc][fp32][packed]") {
  const PackedCase& c = kPackedCases[1];  // queries without keys, keys without queries, GQA
  const std::vector<std::int32_t> cu_q = prefix_sums(c.q_lens), cu_k = prefix_sums(c.k_lens);
  fs::Shape s{1, c.H, cu_q.back(), 64};
  s.Nk = cu_k.back();
  s.Hkv = c.Hkv;
  fs::Packed packed;
  packed.cu_q = cu_q.data();
  packed.cu_k = cu_k.data();
  packed.count = static_cast<int>(c.q_lens.size());
  packed.max_q = *std::max_element(c.q_lens.begin(), c.q_lens.end());
  packed.max_k = *std::max_element(c.k_lens.begin(), c.k_lens.end());
  const fs::Dropout dropout{c.p_drop, 29};
  const fs::HostProblem p = fs::random_problem(s, 99, true, DType::fp32);
  for (bool causal : {false, true}) {
    const auto out = run_f32_backward<64>(s, p, causal, dropout, {}, packed);
    fs::AttnOptions attn{fs::default_scale(64), causal, dropout, nullptr, DType::fp32};
    attn.cu_seqlens_q = &cu_q;
    attn.cu_seqlens_k = &cu_k;
    fs::testing::require_reference(s, attn, p, out);
  }
}

TEST_CASE("step 08 on the CPU: plain TF32 fails the fp32 rule that 3xTF32 passes", "[emulated][tc][fp32]") {
  const fs::Shape s{1, 2, 130, 64};
  const fs::HostProblem p = fs::random_problem(s, 5, false, DType::fp32);
  const fs::AttnOptions attn{fs::default_scale(64), false, {}, nullptr, DType::fp32};
  const auto three = run_f32<64>(s, p, 3, false, {});
  const auto one = run_f32<64>(s, p, 1, false, {});
  const auto r3 = fs::verify_forward(s, attn, p.q.data(), p.k.data(), p.v.data(), three.first.data(), three.second.data(), 7);
  const auto r1 = fs::verify_forward(s, attn, p.q.data(), p.k.data(), p.v.data(), one.first.data(), one.second.data(), 7);
  INFO("3xTF32: " << r3.summary() << "TF32: " << r1.summary());
  REQUIRE(r3.pass());
  REQUIRE_FALSE(r1.pass());
  REQUIRE(r1.tensors[0].err > 30 * r3.tensors[0].err);  // O: TF32's 2^-11 against fp32's 2^-24, and more
}
