// Which tiles and techniques each variant of step 08's forward uses at each head dimension.
//
//   FwdConfig<E, D, kBlockM, kBlockN, kWarps, kSwizzle, kStages, kPInRegs, kQInRegs>
//
// The ladder's rungs share FlashAttention-2's tile for the H100 (128 query rows × 64 keys,
// 4 warps of 32 rows each) and add one technique each; fa2 then picks its tiles per d.
#pragma once

#include <type_traits>

#include "steps/08_tensor_cores/flash_tc_forward.cuh"
#include "steps/08_tensor_cores/flash_tc_forward_f32.cuh"

namespace fs::tc {

// StepInfo::variants of step 08, in this order: variant 0, fa2, is the default.
// fa2 and deterministic run the same forward and differ in the backward (dQ by atomics, or by a
// kernel of its own); every rung's backward is fa2's. key_warps is the backward's rung: fa2 with
// the dK/dV kernel whose warps each own 16 keys over every query (tc_dkdv_kernel), where fa2 at
// d = 64 and 128 has FlashAttention-2's layout (tc_dkdv_smem_kernel); the two give the same bits.
// 3xtf32 is the fp32 variant: the forward on the tensor cores as 3×TF32 (flash_tc_forward_f32.cuh),
// the backward step 05's fp32 kernel (atomic dQ) until a tensor-core one is built.
enum TcVariant : int { kFa2 = 0, kDeterministic, kR1Mma, kR2Swizzle, kR3Pipeline, kR4PInRegs, kKeyWarps, k3xTf32, kTcVariants };
constexpr bool is_rung(int variant) { return variant >= kR1Mma && variant <= kR4PInRegs; }

// The rungs are compiled for these head dimensions (the lesson's ladder is measured at both).
constexpr bool is_ladder_head_dim(int d) { return d == 64 || d == 128; }

template <typename E, int D>
using R1Mma = FwdConfig<E, D, 128, 64, 4, /*swizzle*/ false, /*stages*/ 1, /*P in regs*/ false, /*Q in regs*/ false>;
template <typename E, int D>
using R2Swizzle = FwdConfig<E, D, 128, 64, 4, true, 1, false, false>;
template <typename E, int D>
using R3Pipeline = FwdConfig<E, D, 128, 64, 4, true, 2, false, false>;
template <typename E, int D>
using R4PInRegs = FwdConfig<E, D, 128, 64, 4, true, 2, true, false>;

// fa2: every technique, tiles per d. Registers per thread bound the tiles: a lane holds
// MT·(BN/8)·4 floats of S, MT·(d/8)·4 of O, and (Q in registers) MT·(d/16)·4 words of Q. The
// candidates measured at d = 64 and 128 (docs/benchmarks/h200_tc_tiles.csv) are in the lesson.
template <typename E, int D>
struct Fa2;
template <typename E>
struct Fa2<E, 32> { using Cfg = FwdConfig<E, 32, 128, 128, 4, true, 2, true, true>; };
template <typename E>
struct Fa2<E, 64> { using Cfg = FwdConfig<E, 64, 128, 64, 4, true, 2, true, true>; };
template <typename E>
struct Fa2<E, 96> { using Cfg = FwdConfig<E, 96, 128, 64, 4, true, 2, true, false>; };
template <typename E>
struct Fa2<E, 128> { using Cfg = FwdConfig<E, 128, 128, 64, 4, true, 2, true, false, /*lazy rescale*/ true>; };
template <typename E>
struct Fa2<E, 256> { using Cfg = FwdConfig<E, 256, 64, 64, 4, true, 2, true, false>; };

// The forward of p at head dimension D, element type E, variant p.variant.
template <typename E, int D>
void tc_forward_dispatch(const FwdParams& p) {
  if constexpr (is_ladder_head_dim(D) && std::is_same_v<E, __nv_bfloat16>) {
    switch (p.variant) {
      case kR1Mma: return launch_tc_forward<R1Mma<E, D>>(p);
      case kR2Swizzle: return launch_tc_forward<R2Swizzle<E, D>>(p);
      case kR3Pipeline: return launch_tc_forward<R3Pipeline<E, D>>(p);
      case kR4PInRegs: return launch_tc_forward<R4PInRegs<E, D>>(p);
      default: break;
    }
  }
  launch_tc_forward<typename Fa2<E, D>::Cfg, /*with dropout*/ true, /*with features*/ true>(p);
}

// 3xtf32's tiles, F32Config<D, kBlockM, kBlockN, kWarps, kPasses, lazy rescale>. fp32 tiles take
// twice the shared memory and each product three instructions: d = 32 and 64 keep fa2's 128 × 64
// tile (2 CTAs per SM), d = 128 halves both sides, 64 × 32, so that its O accumulators (64 floats a
// lane) leave room and two CTAs still fit an SM.
constexpr bool is_f32_head_dim(int d) { return d == 32 || d == 64 || d == 128; }
template <int D, int kPasses>
struct F32;
template <int P>
struct F32<32, P> { using Cfg = F32Config<32, 128, 64, 4, P>; };
template <int P>
struct F32<64, P> { using Cfg = F32Config<64, 128, 64, 4, P>; };
template <int P>
struct F32<128, P> { using Cfg = F32Config<128, 64, 32, 4, P, /*lazy rescale*/ true>; };

// The fp32 forward at head dimension D: 3×TF32 with every feature, or (passes = 1) plain TF32 on
// the plain problem, which the tests and the benchmark measure the error of.
template <int D>
void tc_forward_f32_dispatch(const FwdParams& p, int passes) {
  if (passes == 1) return launch_tc_forward<typename F32<D, 1>::Cfg, false, false, TcF32Forward>(p);
  launch_tc_forward<typename F32<D, 3>::Cfg, /*with dropout*/ true, /*with features*/ true, TcF32Forward>(p);
}

}  // namespace fs::tc
