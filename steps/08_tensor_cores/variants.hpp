// Step 08's variants, in one table: the names `--variant` takes and StepInfo::variants lists
// (tensor_cores.cu), the ids the dispatch switches on (forward_configs.cuh, backward_configs.cuh),
// what each refuses (tensor_cores.cu, unsupported) and the names the tests use all come from here.
//
//   fa2            every technique, tiles per head dimension; dQ by atomics (the default)
//   deterministic  fa2's forward; dQ by a kernel of its own (tc_dq_kernel): bit-identical runs
//   r1_mma         the ladder's first rung: mma.sync, plain row-major tiles, one stage, P through
//                  shared memory (forward_configs.cuh has each rung's config)
//   r2_swizzle     + the XOR swizzle
//   r3_pipeline    + two stages of K and V
//   r4_p_in_regs   + P from the accumulators
//   key_warps      the backward's rung: fa2 with the dK/dV kernel of 16-key warps (tc_dkdv_kernel)
//   3xtf32         fp32 on the tensor cores, each product as three TF32 ones
#pragma once

namespace fs::tc {

// Variant ids: indices into kTcVariants and StepInfo::variants; variant 0 is the default.
enum TcVariant : int { kFa2 = 0, kDeterministic, kR1Mma, kR2Swizzle, kR3Pipeline, kR4PInRegs, kKeyWarps, k3xTf32 };

// What a variant is compiled for, beside its name.
struct TcVariantRow {
  TcVariant id;
  const char* name;
  bool rung;         // a rung of the forward's ladder: bf16 at d = 64 and 128, no dropout
  bool ladder_only;  // compiled at the ladder's head dimensions alone (is_ladder_head_dim)
  bool plain_only;   // the plain problem: no score features, K/V shapes or packed sequences
  bool atomic_dq;    // its backward adds dQ with atomics (StepInfo::order_dependent)
  bool fp32;         // takes fp32 (3×TF32) and nothing else; the others take bf16 and fp16
};

inline constexpr TcVariantRow kTcVariants[] = {
    // id            name             rung   ladder plain  atomic fp32
    {kFa2,           "fa2",           false, false, false, true,  false},
    {kDeterministic, "deterministic", false, false, false, false, false},
    {kR1Mma,         "r1_mma",        true,  true,  true,  true,  false},
    {kR2Swizzle,     "r2_swizzle",    true,  true,  true,  true,  false},
    {kR3Pipeline,    "r3_pipeline",   true,  true,  true,  true,  false},
    {kR4PInRegs,     "r4_p_in_regs",  true,  true,  true,  true,  false},
    {kKeyWarps,      "key_warps",     false, true,  true,  true,  false},
    {k3xTf32,        "3xtf32",        false, false, false, true,  true},
};
inline constexpr int kTcVariantCount = sizeof(kTcVariants) / sizeof(kTcVariants[0]);

constexpr bool tc_table_in_order() {
  for (int v = 0; v < kTcVariantCount; ++v)
    if (kTcVariants[v].id != v) return false;
  return true;
}
static_assert(tc_table_in_order(), "row v of kTcVariants is variant v");

constexpr const TcVariantRow& tc_variant(int variant) { return kTcVariants[variant]; }
constexpr const char* tc_variant_name(int variant) { return kTcVariants[variant].name; }
constexpr bool is_rung(int variant) { return kTcVariants[variant].rung; }

// The rungs and key_warps are compiled for these head dimensions (the lesson's ladder is measured
// at both).
constexpr bool is_ladder_head_dim(int d) { return d == 64 || d == 128; }

}  // namespace fs::tc
