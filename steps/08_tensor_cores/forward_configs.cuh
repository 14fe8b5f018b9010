// Which tiles and techniques each variant of step 08's forward uses (variants.hpp names them), as
// configurations with named fields of the one 16-bit kernel, tc_forward_kernel
// (flash_tc_forward.cuh: FwdTraits derives the rest), and of the fp32 one; then the dispatch.
//
// The ladder's rungs share one tile (128 query rows × 64 keys, 4 warps of 32 rows each; FlashAttention-2
// takes 128 × 128 at d = 64 and 128 × 64 at d = 128 on the H100) and each turns one technique on: a rung's config is the one before it with what
// that rung changes (the lesson shows each). fa2 is the last rung with its tiles picked per d.
#pragma once

#include <type_traits>

#include "steps/08_tensor_cores/launchers.cuh"
#include "steps/08_tensor_cores/variants.hpp"

namespace fs::tc {

// r1_mma: the tile on mma.sync, and nothing else.
struct R1Mma {
  static constexpr int kBlockM = 128, kBlockN = 64;  // query rows per CTA, keys per tile
  static constexpr int kWarps = 4;                   // 32 query rows each
  static constexpr bool kSwizzle = false;            // plain row-major tiles
  static constexpr int kStages = 1;                  // K_j and V_j loaded, then computed
  static constexpr bool kPInRegs = false;            // P̃ written to shared memory and read back
  static constexpr bool kQInRegs = false;            // Q's fragments read again on every key tile
  static constexpr bool kLazyRescale = false;        // O rescaled by α on every key tile
};

// Each rung after it is the one before with one technique on: its config is what it changes.
// r2_swizzle: + the XOR swizzle (mma.cuh, SmemTile): ldmatrix without bank conflicts.
struct R2Swizzle : R1Mma {
  static constexpr bool kSwizzle = true;  // chunk c of row r stored at chunk c ^ (r mod 8)
};

// r3_pipeline: + two stages: K_{j+1}, V_{j+1} arrive (cp.async) while tile j is computed, and the
// load of Q overlaps the first tile's.
struct R3Pipeline : R2Swizzle {
  static constexpr int kStages = 2;
};

// r4_p_in_regs: + P̃ straight from S's accumulators (mma.cuh, pack_a), no shared-memory round trip.
struct R4PInRegs : R3Pipeline {
  static constexpr bool kPInRegs = true;
};

// fa2: every technique of r4_p_in_regs, tiles per d. Registers per thread bound the tiles: a lane
// holds MT·(BN/8)·4 floats of S, MT·(d/8)·4 of O, and (Q in registers) MT·(d/16)·4 words of Q. The
// candidates measured at d = 64 and 128 (docs/benchmarks/experiments/h200_tc_tiles.csv) are in the lab
// notebook, docs/lab/08_tensor_cores.md.
template <int D>
struct Fa2 : R4PInRegs {
  static constexpr int kBlockM = D == 256 ? 64 : 128;  // d = 256: 16 rows a warp, O takes 64 registers a row tile
  static constexpr int kBlockN = D == 32 ? 128 : 64;   // d = 32: S, O and Q fit a lane's registers at 128 keys
  static constexpr bool kQInRegs = D <= 64;            // Q's fragments loaded once, where registers allow
  static constexpr bool kLazyRescale = D == 128;       // O rescaled only in the tiles where a row's max moves
};

// The forward of p at head dimension D, element type E, variant p.variant: fa2's (deterministic
// and key_warps run it too), or a rung's.
template <typename E, int D>
void tc_forward_dispatch(const FwdParams& p) {
  if constexpr (is_ladder_head_dim(D) && std::is_same_v<E, __nv_bfloat16>) {
    switch (p.variant) {
      case kR1Mma: return launch_tc_forward<FwdTraits<E, D, R1Mma>, kNoDropout, NoFeatures>(p);
      case kR2Swizzle: return launch_tc_forward<FwdTraits<E, D, R2Swizzle>, kNoDropout, NoFeatures>(p);
      case kR3Pipeline: return launch_tc_forward<FwdTraits<E, D, R3Pipeline>, kNoDropout, NoFeatures>(p);
      case kR4PInRegs: return launch_tc_forward<FwdTraits<E, D, R4PInRegs>, kNoDropout, NoFeatures>(p);
      default: break;
    }
  }
  with_dropout_and_features(p, [&](auto dropout, auto* features) {
    launch_tc_forward<FwdTraits<E, D, Fa2<D>>, decltype(dropout)::value, FeaturesOf<decltype(features)>>(p);
  });
}

// 3xtf32's tiles (F32Traits). fp32 tiles take twice the shared memory and each product three
// instructions: d = 32 and 64 keep fa2's 128 × 64 tile (2 CTAs per SM), d = 128 halves both sides,
// 64 × 32, so that its O accumulators (64 floats a lane) leave room and two CTAs still fit an SM.
constexpr bool is_f32_head_dim(int d) { return d == 32 || d == 64 || d == 128; }
template <int D>
struct F32Fwd {
  static constexpr int kBlockM = D == 128 ? 64 : 128, kBlockN = D == 128 ? 32 : 64;  // query rows per CTA, keys per tile
  static constexpr int kWarps = 4;
  static constexpr bool kLazyRescale = D == 128;
};

// The passes of 3xtf32's products (three TF32 products per product), and of plain TF32 (one), which
// the tests and the benchmark measure the error of.
inline constexpr int k3Passes = 3, kPlainTf32 = 1;

// The fp32 forward at head dimension D: 3×TF32 with every feature, or (passes = 1) plain TF32 on
// the plain problem.
template <int D>
void tc_forward_f32_dispatch(const FwdParams& p, int passes) {
  if (passes == 1) return launch_tc_forward<F32Traits<D, F32Fwd<D>, kPlainTf32>, kNoDropout, NoFeatures>(p);
  with_dropout_and_features(p, [&](auto dropout, auto* features) {
    launch_tc_forward<F32Traits<D, F32Fwd<D>, k3Passes>, decltype(dropout)::value, FeaturesOf<decltype(features)>>(p);
  });
}

}  // namespace fs::tc
