// The tiles of step 08's backward at each head dimension, as configurations with named fields of
// its kernels (their traits derive the rest): the dK/dV kernel of 16-key warps (tc_dkdv_kernel.cuh),
// the one of FlashAttention-2's warp layout (flash_tc_backward.cuh), the deterministic dQ kernel
// (tc_dq_kernel.cuh) and 3xtf32's dK/dV kernel (flash_tc_backward_f32.cuh); then the passes of a
// backward and the dispatch.
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
// over two CTAs. The candidates measured once (docs/benchmarks/experiments/h200_tc_bwd_tiles.csv: bf16, N =
// 4096 and 16384, causal and not; tuneA-C there are 4 × 64, 8 × 128, 8 × 32 warps × queries at
// d = 64 and 4 × 64, 8 × 32, 4 × 32 at d = 128): at d = 64, 4 × 64 is 6-7% faster than 8 × 64,
// within 1% of 8 × 128 (which spills) and 25-30% faster than 8 × 32; at d = 128, 8 × 64 is 6-19%
// faster than each of the others. kDqRowTiles = 2 (each warp adds 32 rows of dQ's share, a
// quarter less of K and dSᵀ read per product than 16 rows) took the backward to 0.91× its time at
// d = 64 and 0.97× at d = 128 (docs/benchmarks/experiments/h200_tc_dq_tiles.csv, tuneA there).
#pragma once

#include <type_traits>

#include "common/recorder/launch.cuh"
#include "steps/08_tensor_cores/bwd_common.cuh"
#include "steps/08_tensor_cores/launchers.cuh"
#include "steps/08_tensor_cores/variants.hpp"

namespace fs::tc {

// fa2's dK/dV tiles at head dimension D = 32, 96 and 256: tc_dkdv_kernel's 16-key warps.
template <int D>
struct Fa2Dkdv {
  static constexpr int kWarps = D == 96 ? 8 : 4;  // of 16 keys: 64 or 128 keys per CTA
  static constexpr int kQueries = 64;             // per pipeline stage
  static constexpr int kSplit = D == 256 ? 2 : 1;  // CTAs a key tile's columns are split over: 128 columns each
  static constexpr bool kKVInRegs = D == 32;      // the warp's K and V fragments in registers for the whole kernel
  static constexpr int kDqRowTiles = 1;           // 16-row tiles of dQ's share per warp
};

// At d = 64 and 128: tc_dkdv_smem_kernel's, FlashAttention-2's warp layout.
template <int D>
struct Fa2DkdvSmem {
  static constexpr int kKeys = 128, kQueries = D == 64 ? 128 : 64;  // per CTA, per pipeline stage
  static constexpr int kWarps = 8;
  static constexpr int kKeyGroups = 4;   // warps in 4 rows of 32 keys
  static constexpr int kDqRowTiles = 2;  // each warp adds 32 rows of dQ's share
};

// The deterministic dQ kernel's tiles: 4 warps of 16 query rows, 64 keys per stage (32 at d = 256).
template <int D>
struct Fa2Dq {
  static constexpr int kWarps = 4, kMTiles = 1, kKeys = D == 256 ? 32 : 64;
};

// fa2's and deterministic's kernels at element type E, head dimension D.
template <typename E, int D>
struct Bwd {
  using Dkdv = std::conditional_t<D == 64 || D == 128, DkdvSmemTraits<E, D, Fa2DkdvSmem<D>>, DkdvTraits<E, D, Fa2Dkdv<D>>>;
  using Dq = DqTraits<E, D, Fa2Dq<D>>;
};

// key_warps, the backward's rung: tc_dkdv_kernel's 16-key warps at d = 64 and 128, on the tiles fa2
// has for them at d = 32 (4 warps, K and V in registers) and 96 (8 warps), each warp adding 32 rows
// of dQ's share.
template <int D>
struct KeyWarps : Fa2Dkdv<D == 64 ? 32 : 96> {
  static constexpr int kDqRowTiles = 2;
};

// 3xtf32's dK/dV tiles (DkdvF32Traits): 8 warps, 128 keys per CTA. Registers bound the queries per
// stage: a lane holds d floats of dK and dV and, while dV and dK take the stage's products, 16
// words of P's and dS's TF32 heads and rests per 8 queries — at d = 128 and 32 queries, 192 of
// them. Shared memory: at d = 128, 217 KiB of the 227 an SM gives a CTA (K, V; two stages of Q,
// dO; dSᵀ), so one CTA of 8 warps per SM, as registers allow anyway.
template <int D>
struct F32Dkdv {
  static constexpr int kWarps = 8, kQueries = D == 32 ? 64 : 32, kDqRowTiles = 2;
};

// kAtomicDQ of the variants whose dQ goes by atomics alone (key_warps, 3xtf32).
inline constexpr bool kDqByAtomics = true;

// The passes of a backward at element type E, head dimension D: the preprocess; then the dK/dV
// kernel of traits Dkdv with atomic dQ and the convert, or without (deterministic) and the dQ
// kernel of traits Dq.
template <typename E, int D, class Dkdv, class Dq, bool kAtomicDQ, bool kDropout, class Features>
void tc_backward_passes(const BwdParams& p) {
  constexpr bool kTraced = trace::kTracedAt<D>;  // the preprocess's and convert's twins where the kernels' are
  float* delta = static_cast<float*>(p.workspace);
  float* dq_acc = reinterpret_cast<float*>(static_cast<unsigned char*>(p.workspace) + tc_delta_bytes(p.shape));
  launch_tc_bwd_preprocess<E, kAtomicDQ, kTraced>(p, delta, dq_acc);
  launch_tc_dkdv<Dkdv, kDropout, kAtomicDQ, Features>(p, delta, dq_acc);
  if constexpr (kAtomicDQ)
    launch_tc_dq_convert<E, kTraced>(p, dq_acc);
  else
    launch_tc_dq<Dq, kDropout, Features>(p, delta);
}

// The backward of p at head dimension D, element type E: dQ by atomics (fa2 and the rungs) or by
// its own kernel (deterministic); key_warps' dK/dV kernel on the plain problem.
template <typename E, int D>
void tc_backward_dispatch(const BwdParams& p) {
  if constexpr (is_ladder_head_dim(D)) {
    if (p.variant == kKeyWarps)
      return with_bool(p.dropout.on(), [&](auto dropout) {
        tc_backward_passes<E, D, DkdvTraits<E, D, KeyWarps<D>>, void, kDqByAtomics, decltype(dropout)::value,
                           NoFeatures>(p);
      });
  }
  with_bool(tc_variant(p.variant).atomic_dq, [&](auto atomic) {
    with_dropout_and_features(p, [&](auto dropout, auto* features) {
      tc_backward_passes<E, D, typename Bwd<E, D>::Dkdv, typename Bwd<E, D>::Dq, decltype(atomic)::value,
                         decltype(dropout)::value, FeaturesOf<decltype(features)>>(p);
    });
  });
}

// The fp32 backward at head dimension D (3×TF32, atomic dQ), with every feature.
template <int D>
void tc_backward_f32_dispatch(const BwdParams& p) {
  with_dropout_and_features(p, [&](auto dropout, auto* features) {
    tc_backward_passes<float, D, DkdvF32Traits<D, F32Dkdv<D>>, void, kDqByAtomics, decltype(dropout)::value,
                       FeaturesOf<decltype(features)>>(p);
  });
}

}  // namespace fs::tc
