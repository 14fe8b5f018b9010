// Step 08 on the CPU: the tensor-core forward and both backwards (fa2's FlashAttention-2 warp
// layout, key_warps' 16-key warps, deterministic's dQ kernel), their own source compiled by the
// host compiler and run by the emulator (tests/tc_emulated.hpp), with mma.sync and ldmatrix
// computed lane by lane from the fragment layouts steps/08_tensor_cores/mma.cuh documents. The
// outputs are held to the rule the GPU tests hold them to (tests/test_tensor_cores_gpu.cpp): the
// fp64 reference under the 16-bit rule. FlashAttention's features, packed sequences and fp32 have
// tests of their own (test_tc_emulated_features.cpp, _packed.cpp, _fp32.cpp).
//
// No substitute for the GPU tests: the emulation sums each mma's products in its own order and
// rounds 2^x its own way, and sees nothing of timing or races (emulator.hpp). What it does see, on
// any machine: a fragment or swizzle index, a tile bound, a tail or a mask that is wrong — before
// a kernel change reaches a GPU.
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

namespace {

using fs::DType;

template <typename E, int D>
void check(DType dtype, int N, bool causal, int variant, float p_drop) {
  const fs::Shape s{1, 2, N, D};
  const fs::Dropout dropout{p_drop, 17};
  const fs::HostProblem p = fs::random_problem(s, 4242 + N + D + variant, true, dtype);
  DYNAMIC_SECTION(fs::dtype_name(dtype) << " d=" << D << " N=" << N << (causal ? " causal " : " ")
                                        << fs::tc::tc_variant_name(variant) << " dropout " << p_drop) {
    const auto out = fs::testing::tc_run<E>(s, p, variant, causal, dropout);
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
