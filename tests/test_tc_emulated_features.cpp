// Step 08 on the CPU (tests/tc_emulated.hpp) with FlashAttention's interface features, in fa2 and
// deterministic (tc_features.cuh), against the fp64 reference.
#include "common/emulator/emulator.hpp"  // first: it defines threadIdx, __syncthreads, ... for the kernels

#include <catch2/catch.hpp>

#include <cstddef>
#include <vector>

#include "common/harness.hpp"
#include "common/reference.hpp"
#include "common/verify.hpp"
#include "steps/08_tensor_cores/variants.hpp"
#include "tests/flash_checks.hpp"
#include "tests/tc_emulated.hpp"

// FlashAttention's interface features in fa2 and deterministic (tc_features.cuh): a window — inside
// one tile, across tiles (N = 300 leaves whole tiles out of every walk), one wider than N —,
// softcapping with its derivative, ALiBi, all three; K and V of their own length, fewer and more
// keys than queries (causal aligned to the bottom-right corner: the first rows see no key when
// Nk < N), one query; grouped-query and multi-query heads, whose dK/dV CTAs sum their group. d = 64
// runs tc_dkdv_smem_kernel, d = 32 and 96 tc_dkdv_kernel (with and without K, V in registers), d =
// 256 its column split; bf16 and fp16 alternate; dropout where it softcaps or caps and windows.
namespace {

using fs::DType;
using fs::testing::FeatureCase;

// per_batch: three batches, the ALiBi slopes of shape (B, H) with rows that differ (batch_slopes);
// else one batch, the standard slopes of H heads.
// gap: rows d + gap elements apart, the gaps NaN (tc_run).
template <typename E, int D>
void check_features(DType dtype, const FeatureCase& f, bool causal, int variant, bool per_batch = false, int gap = 0) {
  fs::Shape s{per_batch ? 3 : 1, f.H, f.N, D};
  s.Nk = f.Nk;
  s.Hkv = f.Hkv;
  const std::vector<float> slopes = per_batch ? fs::testing::batch_slopes(s.B, f.H) : fs::alibi_slopes(f.H);
  const fs::ScoreMods mods =
      fs::testing::score_mods(f.left, f.right, f.softcap, f.alibi ? slopes.data() : nullptr, per_batch ? f.H : 0);
  const fs::Dropout dropout{f.p_drop, 23};
  const fs::HostProblem p = fs::random_problem(s, 77ull * f.N + 5ull * f.Nk + f.Hkv + 3ull * (f.left + 2), true, dtype);
  DYNAMIC_SECTION(fs::dtype_name(dtype) << " d=" << D << " N=" << f.N << " Nk=" << f.Nk << " H=" << f.H
                                        << " Hkv=" << f.Hkv << (causal ? " causal " : " ") << fs::tc::tc_variant_name(variant)
                                        << " window (" << f.left << ", " << f.right << ") softcap " << f.softcap
                                        << (f.alibi ? per_batch ? " alibi (B, H)" : " alibi" : "") << " dropout "
                                        << f.p_drop << " B=" << s.B << " row gap " << gap) {
    const auto out = fs::testing::tc_run<E>(s, p, variant, causal, dropout, mods, {}, gap);
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

// ALiBi slopes of shape (B, H): each of three batches takes its own row, in the forward, the dQ
// kernel and the dK/dV kernels (whose CTAs find the batch from their K/V head), at the dK/dV
// kernels of d = 64 and 32 and the column split of d = 256.
TEST_CASE("step 08 on the CPU with ALiBi slopes of shape (B, H), a row per batch", "[emulated][tc][features]") {
  for (bool causal : {false, true})
    for (int variant : {fs::tc::kFa2, fs::tc::kDeterministic}) {
      check_features<__nv_bfloat16, 64>(DType::bf16, {150, 97, 4, 2, 20, 3, 1.5f, true, 0.1f}, causal, variant, true);
      check_features<__half, 64>(DType::fp16, {130, 130, 2, 2, -1, -1, 0.f, true, 0.f}, causal, variant, true);
    }
  check_features<__half, 32>(DType::fp16, {90, 130, 4, 1, 10, 10, 0.f, true, 0.f}, true, fs::tc::kFa2, true);
  check_features<__nv_bfloat16, 256>(DType::bf16, {40, 57, 2, 1, 5, 9, 3.f, true, 0.f}, false, fs::tc::kDeterministic,
                                     true);
}

// Any head dimension 1 ... 256: a d the kernels are not compiled at runs in the next one's kernels
// (32, 64, 96, 128, 256) with FlashAttention's features, its tiles zero past d (tc_tiles.cuh,
// head_cols): whole 16-byte chunks where d is a multiple of 8 (8, 40, 80, 160, 192, 224), element by
// element where it is not (1, 59, 111; rows then 2 bytes apart as well). Every tensor's rows have a
// gap of NaN after them, so that a kernel reading past d poisons its results and one writing past d
// is caught (tc_run); N odd; the plain problem, and every feature with dropout; both backwards.
TEST_CASE("step 08 on the CPU at any head dimension: loads masked past d, outputs written at d",
          "[emulated][tc][features][head_dim]") {
  const FeatureCase plain{77, 77, 2, 2, -1, -1, 0.f, false, 0.f};
  const FeatureCase every{61, 90, 4, 2, 20, 3, 1.5f, true, 0.1f};
  for (bool causal : {false, true}) {
    const int fa2 = fs::tc::kFa2, det = fs::tc::kDeterministic;
    check_features<__nv_bfloat16, 1>(DType::bf16, plain, causal, fa2, false, 3);
    check_features<__half, 8>(DType::fp16, every, causal, det, false, 8);
    check_features<__half, 40>(DType::fp16, plain, causal, fa2, false, 8);
    check_features<__nv_bfloat16, 59>(DType::bf16, every, causal, fa2, false, 1);
    check_features<__nv_bfloat16, 80>(DType::bf16, plain, causal, det, false, 8);
    check_features<__half, 111>(DType::fp16, plain, causal, fa2, false, 5);
    check_features<__nv_bfloat16, 160>(DType::bf16, every, causal, det, false, 8);
    check_features<__half, 192>(DType::fp16, plain, causal, fa2, false, 8);
    check_features<__nv_bfloat16, 224>(DType::bf16, plain, causal, fa2, false, 0);
  }
  // A compiled d with gaps too: the kernels of the plain problem (NoFeatures) read and write its rows
  // whole.
  check_features<__nv_bfloat16, 64>(DType::bf16, plain, true, fs::tc::kFa2, false, 8);
}
