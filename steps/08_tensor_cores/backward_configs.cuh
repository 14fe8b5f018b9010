// The tiles of step 08's backward at each head dimension.
//
//   DkdvConfig<E, D, kWarps, kQueries, kSplit, kKVInRegs, kDqRowTiles>   keys per CTA = 16·kWarps
//   DkdvSmemConfig<E, D, kKeys, kQueries, kWarps, kKeyGroups, kDqRowTiles>
//   DqConfig<E, D, kWarps, kMTiles, kKeys>                  rows per CTA = 16·kMTiles·kWarps
//
// d = 64 and 128 run tc_dkdv_smem_kernel on FlashAttention-2's tiles (128 keys × 128 or 64
// queries, 8 warps in 4 rows of 32 keys): against the 16-key warps of tc_dkdv_kernel at their
// best tiles (KeyWarps below, the variant key_warps) the backward took 0.97× the time at d = 64
// and 0.93× at d = 128 (bf16, N = 16384, not causal; docs/benchmarks/h200.csv, commit
// 38e66b812c); P and dS through shared memory is what lets a warp's 32 keys meet only part of the
// queries. Other tiles of the kernel measured slower and were not kept: at d = 64, 128 keys × 64
// queries on 8 warps and 64 × 128 on 4; at d = 128, 64 × 64 on 4.
//
// A tc_dkdv_kernel lane holds 2 × 16 × (d / kSplit) / 32 floats of dK and dV, and
// 2 × 16 × kQueries / 32 of Sᵀ and dPᵀ while a stage is computed: at d = 128 that is 128 + 64
// registers, about all that leaves room for addresses and fragments. d = 256 splits its columns
// over two CTAs. The candidates measured once (docs/benchmarks/h200_tc_bwd_tiles.csv: bf16, N =
// 4096 and 16384, causal and not; tuneA-C there are 4 × 64, 8 × 128, 8 × 32 warps × queries at
// d = 64 and 4 × 64, 8 × 32, 4 × 32 at d = 128): at d = 64, 4 × 64 is 6-7% faster than 8 × 64,
// within 1% of 8 × 128 (which spills) and 25-30% faster than 8 × 32; at d = 128, 8 × 64 is 6-19%
// faster than each of the others. kDqRowTiles = 2 (each warp adds 32 rows of dQ's share, a
// quarter less of K and dSᵀ read per product than 16 rows) took the backward to 0.91× its time at
// d = 64 and 0.97× at d = 128 (docs/benchmarks/h200_tc_dq_tiles.csv, tuneA there).
#pragma once

#include "steps/08_tensor_cores/flash_tc_backward.cuh"
#include "steps/08_tensor_cores/flash_tc_backward_f32.cuh"
#include "steps/08_tensor_cores/forward_configs.cuh"

namespace fs::tc {

template <typename E, int D>
struct Bwd;
template <typename E>
struct Bwd<E, 32> {
  using Dkdv = DkdvConfig<E, 32, 4, 64, 1, true>;
  using Dq = DqConfig<E, 32, 4, 1, 64>;
};
template <typename E>
struct Bwd<E, 64> {
  using Dkdv = DkdvSmemConfig<E, 64, 128, 128, 8, 4, 2>;
  using Dq = DqConfig<E, 64, 4, 1, 64>;
};
template <typename E>
struct Bwd<E, 96> {
  using Dkdv = DkdvConfig<E, 96, 8, 64, 1, false>;
  using Dq = DqConfig<E, 96, 4, 1, 64>;
};
template <typename E>
struct Bwd<E, 128> {
  using Dkdv = DkdvSmemConfig<E, 128, 128, 64, 8, 4, 2>;
  using Dq = DqConfig<E, 128, 4, 1, 64>;
};
template <typename E>
struct Bwd<E, 256> {
  using Dkdv = DkdvConfig<E, 256, 4, 64, 2, false>;
  using Dq = DqConfig<E, 256, 4, 1, 32>;
};

// key_warps: the backward's rung, tc_dkdv_kernel's 16-key warps at the tiles fa2 had there.
template <typename E, int D>
using KeyWarps = std::conditional_t<D == 64, DkdvConfig<E, 64, 4, 64, 1, true, 2>, DkdvConfig<E, D, 8, 64, 1, false, 2>>;

// The backward of p at head dimension D, element type E: dQ by atomics (fa2 and the rungs) or
// by its own kernel (deterministic).
template <typename E, int D>
void tc_backward_dispatch(const BwdParams& p) {
  if constexpr (is_ladder_head_dim(D)) {
    if (p.variant == kKeyWarps)
      return launch_tc_backward<KeyWarps<E, D>, typename Bwd<E, D>::Dq, /*with features*/ false>(p, true);
  }
  launch_tc_backward<typename Bwd<E, D>::Dkdv, typename Bwd<E, D>::Dq>(p, p.variant != kDeterministic);
}

// 3xtf32's backward, DkdvF32Config<D, kWarps, kQueries, kDqRowTiles>: 8 warps, 128 keys per CTA.
// Registers bound the queries per stage: a lane holds d floats of dK and dV and, while dV and dK
// take the stage's products, 16 words of P's and dS's TF32 heads and rests per 8 queries — at
// d = 128 and 32 queries, 192 of them. Shared memory: at d = 128, 217 KiB of the 227 an SM gives a
// CTA (K, V; two stages of Q, dO; dSᵀ), so one CTA of 8 warps per SM, as registers allow anyway.
template <int D>
struct BwdF32;
template <>
struct BwdF32<32> { using Dkdv = DkdvF32Config<32, 8, 64, 2>; };
template <>
struct BwdF32<64> { using Dkdv = DkdvF32Config<64, 8, 32, 2>; };
template <>
struct BwdF32<128> { using Dkdv = DkdvF32Config<128, 8, 32, 2>; };

// The fp32 backward at head dimension D (3×TF32, atomic dQ), with every feature.
template <int D>
void tc_backward_f32_dispatch(const BwdParams& p) {
  launch_tc_backward<typename BwdF32<D>::Dkdv, /*no dQ kernel*/ void>(p, true);
}

}  // namespace fs::tc
