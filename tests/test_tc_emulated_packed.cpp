// Step 08 on the CPU (tests/tc_emulated.hpp) with packed sequences, in fa2 and deterministic,
// against the fp64 reference.
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

// Packed sequences (flash_attn_varlen_func's cu_seqlens): one batch of tokens, each sequence its own
// problem with its own δ, masks and walks, on a grid of the longest sequence's tiles (the CTAs past a
// shorter one's end leave at once). The cases hold an empty sequence, one of a single token (after
// which the sequences start at odd tokens, where a lane's dropout pair straddles two Philox blocks),
// queries without keys (their O = 0, LSE = -inf, dQ = 0) and keys without queries (dK = dV = 0),
// lengths that are not multiples of a tile, more keys than queries and fewer, grouped K/V heads, and
// every score feature with dropout.
namespace {

using fs::DType;
using fs::testing::PackedCase;

// per_sequence: the ALiBi slopes of shape (sequences, H), a row per sequence that differs from
// the others (batch_slopes); else the standard slopes of H heads.
template <typename E, int D>
void check_packed(DType dtype, const PackedCase& c, bool causal, int variant, bool per_sequence = false) {
  const std::vector<std::int32_t> cu_q = fs::testing::prefix_sums(c.q_lens), cu_k = fs::testing::prefix_sums(c.k_lens);
  fs::Shape s;
  const fs::Packed packed = fs::testing::packed_of(c, cu_q, cu_k, s, D);
  const std::vector<float> slopes =
      per_sequence ? fs::testing::batch_slopes(packed.count, c.H) : fs::alibi_slopes(c.H);
  const fs::ScoreMods mods =
      fs::testing::score_mods(c.left, c.right, c.softcap, c.alibi ? slopes.data() : nullptr, per_sequence ? c.H : 0);
  const fs::Dropout dropout{c.p_drop, 29};
  const fs::HostProblem p = fs::random_problem(s, 31ull * s.N + 7ull * s.keys() + c.Hkv, true, dtype);
  DYNAMIC_SECTION(fs::dtype_name(dtype) << " d=" << D << " " << packed.count << " sequences, N=" << s.N
                                        << " Nk=" << s.keys() << " H=" << c.H << " Hkv=" << c.Hkv
                                        << (causal ? " causal " : " ") << fs::tc::tc_variant_name(variant) << " window ("
                                        << c.left << ", " << c.right << ") softcap " << c.softcap
                                        << (c.alibi ? per_sequence ? " alibi (sequences, H)" : " alibi" : "")
                                        << " dropout " << c.p_drop) {
    const auto out = fs::testing::tc_run<E>(s, p, variant, causal, dropout, mods, packed);
    fs::AttnOptions attn = fs::testing::with_score_mods(
        fs::AttnOptions{fs::default_scale(D), causal, dropout, nullptr, dtype}, mods, slopes.data());
    attn.cu_seqlens_q = &cu_q;
    attn.cu_seqlens_k = &cu_k;
    fs::testing::require_reference(s, attn, p, out.o.data(), out.lse.data(), out.dq.data(), out.dk.data(),
                                   out.dv.data());
  }
}

}  // namespace

TEST_CASE("step 08 on the CPU with packed sequences (cu_seqlens): each sequence its own problem, empty ones "
          "included, forward and both backwards",
          "[emulated][tc][features][packed]") {
  for (bool causal : {false, true})
    for (int variant : {fs::tc::kFa2, fs::tc::kDeterministic})
      for (std::size_t c = 0; c < fs::testing::packed_cases().size(); ++c) {
        if (c % 2 == 0)
          check_packed<__nv_bfloat16, 64>(DType::bf16, fs::testing::packed_cases()[c], causal, variant);
        else
          check_packed<__half, 64>(DType::fp16, fs::testing::packed_cases()[c], causal, variant);
      }
}

// The other dK/dV kernels: tc_dkdv_kernel (d = 32) and its column split (d = 256).
TEST_CASE("step 08 on the CPU with packed sequences at the other head dimensions", "[emulated][tc][features][packed]") {
  for (bool causal : {false, true}) {
    check_packed<__nv_bfloat16, 32>(DType::bf16, fs::testing::packed_cases()[1], causal, fs::tc::kFa2);
    check_packed<__half, 256>(DType::fp16, fs::testing::packed_cases()[0], causal, fs::tc::kDeterministic);
  }
}

// ALiBi slopes of shape (sequences, H), as flash_attn_varlen_func takes them: sequence b's row, the
// kernels finding b from blockIdx.z (the grid's y is the head alone: one batch). Every length of
// packed_cases()[0] and [1] (empty sequences, one token, queries without keys, keys without queries)
// with a window and ALiBi.
TEST_CASE("step 08 on the CPU with packed sequences and ALiBi slopes of shape (sequences, H)",
          "[emulated][tc][features][packed]") {
  for (bool causal : {false, true})
    for (int variant : {fs::tc::kFa2, fs::tc::kDeterministic}) {
      fs::testing::PackedCase a = fs::testing::packed_cases()[0], b = fs::testing::packed_cases()[1];
      a.alibi = b.alibi = true;
      a.left = 40, a.right = 2;
      check_packed<__nv_bfloat16, 64>(DType::bf16, a, causal, variant, true);
      check_packed<__half, 64>(DType::fp16, b, causal, variant, true);
      check_packed<__nv_bfloat16, 64>(DType::bf16, fs::testing::packed_cases()[2], causal, variant, true);
    }
}
