// Step 08 on the CPU (tests/tc_emulated.hpp) in fp32 (variant 3xtf32).
#include "common/emulator/emulator.hpp"  // first: it defines threadIdx, __syncthreads, ... for the kernels

#include <catch2/catch.hpp>

#include <cstdint>
#include <utility>
#include <vector>

#include "common/harness.hpp"
#include "common/reference.hpp"
#include "common/verify.hpp"
#include "steps/08_tensor_cores/variants.hpp"
#include "tests/flash_checks.hpp"
#include "tests/tc_emulated.hpp"

// fp32 on the tensor cores (variant 3xtf32, flash_tc_forward_f32.cuh): the forward held to the fp32
// rule — the one steps 04 and 05 pass — at each compiled head dimension, tails, causal, the
// features, dropout and packed sequences; and plain TF32 (one product instead of three), which the
// rule must catch: its error is TF32's 2^-11, where 3×TF32's is fp32's.
namespace {

using fs::DType;
using fs::testing::FeatureCase;

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
  fs::testing::tc_emulated_forward(f32_params(s, p, o.data(), lse.data(), causal, dropout, mods, packed), passes);
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
  fs::testing::tc_emulated_backward(bp);
  return {o, lse, dq, dk, dv};
}

// B batches; with more than one, ALiBi's slopes are of shape (B, H), rows that differ (batch_slopes).
template <int D>
void check_f32(int N, int Nk, int H, int Hkv, bool causal,
               const FeatureCase& f = {0, 0, 0, 0, -1, -1, 0.f, false, 0.f}, int B = 1) {
  fs::Shape s{B, H, N, D};
  s.Nk = Nk;
  s.Hkv = Hkv;
  const std::vector<float> slopes = B > 1 ? fs::testing::batch_slopes(B, H) : fs::alibi_slopes(H);
  const fs::ScoreMods mods =
      fs::testing::score_mods(f.left, f.right, f.softcap, f.alibi ? slopes.data() : nullptr, B > 1 ? H : 0);
  const fs::Dropout dropout{f.p_drop, 41};
  const fs::HostProblem p = fs::random_problem(s, 1000ull + 7 * N + Nk + D, true, DType::fp32);
  DYNAMIC_SECTION("fp32 3xtf32 d=" << D << " B=" << B << " N=" << N << " Nk=" << Nk << " H=" << H << " Hkv=" << Hkv
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
    check_f32<64>(100, 170, 4, 2, causal, {0, 0, 0, 0, 20, 3, 1.5f, true, 0.1f}, 3);  // ALiBi of shape (B, H)
  }
}

// The tensor cores round each mma's result toward zero (the emulation does too). Three products per
// 8 keys accumulated in place into O drift it by ~3N/8 truncations of the running sum: on the H200
// that failed the fp32 rule at N = 1025 (docs/benchmarks/experiments/h200_tc_fp32_errors.txt). Here, with the
// in-place sums, O's error was 3.62e-6 against a tolerance of 1.88e-6 (each key tile's P̃V summed
// from zero instead left 2.2e-7 on the H200 at d = 64, N = 1025, B = 1, H = 2:
// docs/benchmarks/experiments/h200_tc_fp32_tilesum_check.txt). Long enough rows, then, that a return to
// in-place sums fails on the CPU too.
TEST_CASE("step 08 on the CPU in fp32: 1025 keys, where sums in place drift past the fp32 rule", "[emulated][tc][fp32]") {
  const fs::Shape s{1, 1, 1025, 64};
  const fs::HostProblem p = fs::random_problem(s, 3064, false, DType::fp32);
  const auto [o, lse] = run_f32<64>(s, p, 3, false, {});
  fs::testing::require_reference(s, fs::AttnOptions{fs::default_scale(64), false, {}, nullptr, DType::fp32}, p, o.data(),
                                 lse.data());
}

TEST_CASE("step 08 on the CPU in fp32 with packed sequences", "[emulated][tc][fp32][packed]") {
  const fs::testing::PackedCase& c = fs::testing::packed_cases()[1];  // queries without keys, keys without queries, GQA
  const std::vector<std::int32_t> cu_q = fs::testing::prefix_sums(c.q_lens), cu_k = fs::testing::prefix_sums(c.k_lens);
  fs::Shape s;
  const fs::Packed packed = fs::testing::packed_of(c, cu_q, cu_k, s, 64);
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
