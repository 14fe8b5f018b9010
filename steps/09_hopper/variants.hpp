// Step 09's variants, one row each: the one table from which the step takes their names
// (StepInfo::variants, in this order: variant 0, fa3, is the default), what each is, and what each
// runs — configs.cuh maps a variant to its forward's config, backward_configs.cuh to its backward's.
// The tests take the ids from here.
//
// The ladder (bf16, d = 128): wgmma is TMA + wgmma, one CTA per work tile, the copies issued by a
// consumer's thread between its products; ws adds the producer warpgroup; ws_overlap the
// intra-warpgroup overlap; ws_pingpong the ping-pong of the two consumer warpgroups; fa3 is that,
// persistent.
#pragma once

namespace fs::hopper {

enum HopperVariant : int { kFa3 = 0, kWs, kWsOverlap, kWsPingPong, kDeterministic, kFp8, kWgmma, kHopperVariants };

// Which backward a variant runs (backward_configs.cuh).
enum class HopperBackward { kAtomicDq, kOrderedDq, kNone };

struct HopperVariantRow {
  HopperVariant id;
  const char* name;         // --variant
  bool rung;                // a rung of the ladder: compiled for bf16 at d = 128 only
  bool e4m3;                // Q, K, V rounded to e4m3 (checked under the FP8 rule)
  HopperBackward backward;  // kAtomicDq: dQ's adds in whatever order they land
  const char* what;
};

inline constexpr HopperVariantRow kHopperVariantTable[kHopperVariants] = {
    {kFa3, "fa3", false, false, HopperBackward::kAtomicDq,
     "FlashAttention-3: the producer warpgroup, the overlap, ping-pong, persistent (configs.cuh, Fa3Config)"},
    {kWs, "ws", true, false, HopperBackward::kAtomicDq,
     "the producer warpgroup (warp specialisation), one product at a time"},
    {kWsOverlap, "ws_overlap", true, false, HopperBackward::kAtomicDq,
     "ws with the intra-warpgroup overlap: S_{t+1} issued with P̃_t V_t"},
    {kWsPingPong, "ws_pingpong", true, false, HopperBackward::kAtomicDq,
     "ws_overlap with the consumer warpgroups taking turns at the tensor cores"},
    {kDeterministic, "deterministic", false, false, HopperBackward::kOrderedDq,
     "fa3's forward; its backward adds dQ in the order of the key tiles (bit-identical runs)"},
    {kFp8, "fp8", false, true, HopperBackward::kNone,
     "fa3's forward on Q, K and V quantized to e4m3 (flash_hopper_fp8.cuh), d = 128; no backward"},
    {kWgmma, "wgmma", true, false, HopperBackward::kAtomicDq,
     "TMA and wgmma, the copies issued by a consumer's thread between its products (rung_wgmma.cuh)"},
};

constexpr bool table_in_id_order(int i = 0) {
  return i == kHopperVariants || (kHopperVariantTable[i].id == i && table_in_id_order(i + 1));
}
static_assert(table_in_id_order(), "row i of the table is variant i");

constexpr bool is_rung(int variant) { return kHopperVariantTable[variant].rung; }
constexpr bool is_backward_head_dim(int d) { return d == 64 || d == 128; }
constexpr bool is_head_dim(int d) { return d == 64 || d == 128 || d == 256; }
constexpr int kLadderHeadDim = 128;  // the rungs are compiled for bf16 at d = 128
constexpr int kFp8HeadDim = 128;     // and fp8 at d = 128 (bf16 or fp16 in and out)

}  // namespace fs::hopper
