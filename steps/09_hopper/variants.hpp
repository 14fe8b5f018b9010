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

// What a variant is for, what its kernels read, and which backward it runs (backward_configs.cuh).
enum class HopperRole { kProduction, kRung };  // a rung: compiled for bf16 at d = 128 only
enum class HopperInputs { k16Bit, kE4m3 };     // e4m3: checked under the FP8 rule
enum class HopperBackward { kAtomicDq, kOrderedDq, kNone };

struct HopperVariantRow {
  HopperVariant id;
  const char* name;  // --variant
  HopperRole role;
  HopperInputs inputs;
  HopperBackward backward;  // kAtomicDq: dQ's adds in whatever order they land
};

// Variant v's row: the table, in --variant's order. Each variant's forward config: configs.cuh's
// with_forward_config (fp8's, flash_hopper_fp8.cuh).
constexpr HopperVariantRow hopper_variant(int v) {
  constexpr HopperVariantRow rows[kHopperVariants] = {
      // FlashAttention-3: the producer warpgroup, the overlap, ping-pong, persistent (Fa3Config)
      {kFa3, "fa3", HopperRole::kProduction, HopperInputs::k16Bit, HopperBackward::kAtomicDq},
      // the ladder's rungs: fa3 not persistent, then without ping-pong, then without the overlap
      {kWs, "ws", HopperRole::kRung, HopperInputs::k16Bit, HopperBackward::kAtomicDq},
      {kWsOverlap, "ws_overlap", HopperRole::kRung, HopperInputs::k16Bit, HopperBackward::kAtomicDq},
      {kWsPingPong, "ws_pingpong", HopperRole::kRung, HopperInputs::k16Bit, HopperBackward::kAtomicDq},
      // fa3's forward, its backward's dQ added in a fixed order; fa3's forward on e4m3 Q, K and V
      {kDeterministic, "deterministic", HopperRole::kProduction, HopperInputs::k16Bit, HopperBackward::kOrderedDq},
      {kFp8, "fp8", HopperRole::kProduction, HopperInputs::kE4m3, HopperBackward::kNone},
      // the ladder's first rung, ws without the producer warpgroup (rung_wgmma.cuh); last, as it came
      {kWgmma, "wgmma", HopperRole::kRung, HopperInputs::k16Bit, HopperBackward::kAtomicDq},
  };
  return rows[v];
}
constexpr bool rows_in_id_order(int v = 0) {
  return v == kHopperVariants || (hopper_variant(v).id == v && rows_in_id_order(v + 1));
}
static_assert(rows_in_id_order(), "row v of the table is variant v");

constexpr bool is_rung(int variant) { return hopper_variant(variant).role == HopperRole::kRung; }
// The head dimensions the forward is compiled at (the backward: 64 and 128), and those they run:
// any multiple of 8 up to 256 (128 for the backward), in the next compiled one's kernels. TMA
// fills a box's columns past the tensor's d with zeros, which add nothing to S = QKᵀ or dP = dO Vᵀ
// and make zero columns of O, dQ, dK and dV, and its stores stop at d; a multiple of 8, as TMA takes
// a tensor whose rows are multiples of 16 bytes. Step 08 takes any d.
constexpr bool is_head_dim(int d) { return d == 64 || d == 128 || d == 256; }
constexpr bool runs_head_dim(int d) { return d >= 8 && d <= 256 && d % 8 == 0; }
constexpr bool runs_backward_head_dim(int d) { return runs_head_dim(d) && d <= 128; }
constexpr int compiled_head_dim(int d) { return d <= 64 ? 64 : d <= 128 ? 128 : 256; }
constexpr int kLadderHeadDim = 128;  // the rungs are compiled for bf16 at d = 128
constexpr int kFp8HeadDim = 128;     // and fp8 at d = 128 (bf16 or fp16 in and out)

}  // namespace fs::hopper
