// Which tiles and techniques each variant of step 09's forward uses at each head dimension.
//
//   HopperConfig<E, D, kBlockN, kStages, kOverlap, kPingPong, kPersistent, EO, kProducer>
//   (flash_hopper_forward.cuh)
//
// Every variant has TMA and wgmma, and all but the wgmma rung the producer warpgroup; the ladder
// adds the producer, then FlashAttention-3's two schedules, one at a time. 128 query rows per CTA
// (two consumer warpgroups of 64).
#pragma once

#include "steps/09_hopper/flash_hopper_forward.cuh"

namespace fs::hopper {

// StepInfo::variants of step 09, in this order: variant 0, fa3, is the default. The ladder (bf16,
// d = 128): wgmma is TMA + wgmma, one CTA per work tile, the copies issued by a consumer thread
// between its products; ws adds the producer warpgroup; ws_overlap adds
// the intra-warpgroup overlap; ws_pingpong the ping-pong of the two consumer warpgroups; fa3 is
// that, persistent (one CTA per SM walking the work tiles, so that the producer loads the next
// tile's Q and K while the consumers store the last one's O).
// deterministic: fa3's forward; its backward adds dQ in a fixed order (bit-identical runs).
// fp8: fa3's forward on Q, K and V quantized to e4m3 (fp8.cuh), d = 128; no backward.
enum HopperVariant : int { kFa3 = 0, kWs, kWsOverlap, kWsPingPong, kDeterministic, kFp8, kWgmma, kHopperVariants };
constexpr bool is_rung(int variant) {
  return variant == kWgmma || variant == kWs || variant == kWsOverlap || variant == kWsPingPong;
}
constexpr bool is_backward_head_dim(int d) { return d == 64 || d == 128; }
constexpr bool is_head_dim(int d) { return d == 64 || d == 128 || d == 256; }
constexpr int kLadderHeadDim = 128;  // the rungs are compiled for bf16 at d = 128
constexpr int kFp8HeadDim = 128;     // and fp8 at d = 128 (bf16 or fp16 in and out)

// fa3's tiles per d: keys per tile and stages, as shared memory allows (227 KiB a CTA).
//   d = 64:  Q 16 KiB + 4 stages × (K, V: 16 + 16 KiB)
//   d = 128: Q 32 KiB + 2 stages × (32 + 32 KiB)
//   d = 256: Q 64 KiB + 2 stages × 64 keys × (32 + 32 KiB)
template <typename E, int D>
struct Fa3;
template <typename E>
struct Fa3<E, 64> { using Cfg = HopperConfig<E, 64, 128, 4, true, true, true>; };
template <typename E>
struct Fa3<E, 128> { using Cfg = HopperConfig<E, 128, 128, 2, true, true, true>; };
template <typename E>
struct Fa3<E, 256> { using Cfg = HopperConfig<E, 256, 64, 2, true, true, true>; };

template <typename E, int D>
using Wgmma = HopperConfig<E, D, 128, 2, false, false, false, E, false>;
template <typename E, int D>
using Ws = HopperConfig<E, D, 128, 2, false, false, false>;
template <typename E, int D>
using WsOverlap = HopperConfig<E, D, 128, 2, true, false, false>;
template <typename E, int D>
using WsPingPong = HopperConfig<E, D, 128, 2, true, true, false>;
static_assert(Wgmma<__nv_bfloat16, 128>::kBlockN == Ws<__nv_bfloat16, 128>::kBlockN &&
                  WsOverlap<__nv_bfloat16, 128>::kBlockN == Ws<__nv_bfloat16, 128>::kBlockN &&
                  WsPingPong<__nv_bfloat16, 128>::kBlockN == Ws<__nv_bfloat16, 128>::kBlockN,
              "block_n: the rungs share ws's tile");

// fp8: e4m3 Q, K and Vᵀ, O in EO (compiled in translation units of their own, fp8_instance.cu.in).
// Tiles of 224 keys, the quantizer's K and V blocks: Q 16 KiB + 2 stages × (K, Vᵀ: 28 + 32 KiB) +
// O 32 KiB (a third stage would not fit).
// Its softmax: ℓ in 4 partial sums, and the lazy max with a slack of 0.8 (P̃ = 2^(x − m + 8) ≤
// 2^8.8 < 448, O's rescale skipped where no row's max moved: kLazy). A larger slack needs a
// smaller offset (fp8_offset), and then ℓ ≥ 2^off no longer bounds the error of P̃'s subnormals
// as the FP8 rule assumes (common/verify.hpp: ℓ ≥ 2⁸). Every exponential is the MUFU unit's:
// moving 1 in 8 to a polynomial on the FMA units (FlashAttention-4's trick; the experiment patches
// in docs/benchmarks have it) was 11 % slower on the H200 (docs/benchmarks/h200_hopper_fp8_sweep2.txt).
// No ping-pong: the two consumer warpgroups issue their products without taking turns, which was
// as fast or faster at 224 keys on the H200 (docs/benchmarks/h200_hopper_fp8_224.txt).
template <typename EO>
struct Fp8Cfg : HopperConfig<__nv_fp8_e4m3, kFp8HeadDim, kFp8BlockKV, 2, true, false, true, EO> {
  static constexpr int kSumParts = 4;
  static constexpr bool kLazy = true;
  static constexpr float kSlack = 0.8f;
};

template <typename E, int D>
void forward_dispatch(const FwdParams& p) {
  if constexpr (D == kLadderHeadDim && std::is_same_v<E, __nv_bfloat16>) {
    switch (p.variant) {
      case kWgmma: return launch_hopper_forward<Wgmma<E, D>>(p);
      case kWs: return launch_hopper_forward<Ws<E, D>>(p);
      case kWsOverlap: return launch_hopper_forward<WsOverlap<E, D>>(p);
      case kWsPingPong: return launch_hopper_forward<WsPingPong<E, D>>(p);
      default: break;
    }
  }
  launch_hopper_forward<typename Fa3<E, D>::Cfg>(p);
}

// The keys per tile of a variant at d (the IO model's Bc), from the configurations themselves.
inline int block_n(int d, int variant) {
  using E = __nv_bfloat16;  // the tiles do not depend on the element type
  if (is_rung(variant)) return Ws<E, kLadderHeadDim>::kBlockN;  // every rung's tile is ws's
  if (variant == kFp8) return Fp8Cfg<E>::kBlockN;
  switch (d) {
    case 64: return Fa3<E, 64>::Cfg::kBlockN;
    case 128: return Fa3<E, 128>::Cfg::kBlockN;
    default: return Fa3<E, 256>::Cfg::kBlockN;
  }
}

}  // namespace fs::hopper
