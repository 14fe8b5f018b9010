// Step 09: Hopper. Step 08's forward rebuilt on the H100/H200's own machinery: TMA copies into a
// ring of shared-memory stages guarded by mbarriers, wgmma (asynchronous warpgroup matrix
// multiply), a producer warpgroup beside the consumers, and FlashAttention-3's two schedules
// (intra-warpgroup overlap and ping-pong) as the rungs of its ladder. bf16 or fp16 in, fp32
// accumulate; sm_90a only.
#pragma once

#include <vector>

#include "common/problem.hpp"

namespace fs {

void hopper_forward(const FwdParams& p);  // p.dtype: bf16 or fp16; p.variant: fa3, a rung, or fp8 (d = 128)
void hopper_backward(const BwdParams& p);  // d = 64 or 128; p.variant deterministic: bit-identical runs
StepInfo step09_info();

namespace hopper {
#define FS_HOPPER_FORWARD(type)                   \
  void forward_##type##_d64(const FwdParams& p);  \
  void forward_##type##_d128(const FwdParams& p); \
  void forward_##type##_d256(const FwdParams& p);
FS_HOPPER_FORWARD(bf16)
FS_HOPPER_FORWARD(fp16)
#undef FS_HOPPER_FORWARD
void forward_fp8_bf16(const FwdParams& p);  // the fp8 variant (d = 128): O in bf16
void forward_fp8_fp16(const FwdParams& p);  // O in fp16
#define FS_HOPPER_BACKWARD(type)                   \
  void backward_##type##_d64(const BwdParams& p); \
  void backward_##type##_d128(const BwdParams& p);
FS_HOPPER_BACKWARD(bf16)
FS_HOPPER_BACKWARD(fp16)
#undef FS_HOPPER_BACKWARD

// The FP8 tensor core's adder, measured (fp8_probe.cu): one wgmma.m64n64k32 e4m3 on this GPU.
// sum_bits: the largest j for which 2⁸ + 2^(8−j), two products of one instruction, comes out
// exact (17 at most: e4m3's smallest subnormal); acc_bits: the largest j for which the
// accumulator 2^j plus a product 1 does (23 at most: fp32's own). fp32 FMAs keep all of them;
// the FP8 rule's model of the tensor core (common/e4m3.hpp, kE4m3MmaBits) assumes no fewer.
struct Fp8MmaProbe {
  int sum_bits = 0, acc_bits = 0;
  std::vector<float> sum, acc;  // what each row gave: j = 0 .. 31
};
Fp8MmaProbe probe_fp8_mma();  // on the current device, which must be sm_90
}  // namespace hopper

}  // namespace fs
