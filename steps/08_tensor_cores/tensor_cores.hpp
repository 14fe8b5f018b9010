// Step 08: tensor cores. The FlashAttention-2 forward of step 04 and the recomputation backward of
// step 05 on mma.sync, bf16 or fp16 in, fp32 accumulate, with the ladder of techniques that makes
// the forward fast as its variants.
#pragma once

#include "common/io_model.hpp"
#include "common/problem.hpp"

namespace fs {

void tc_forward(const FwdParams& p);   // p.dtype: bf16 or fp16 (p.variant: a rung or fa2), or fp32 (3xtf32)
// The fp32 forward with `passes` TF32 products per product: 3 is variant 3xtf32 (tc_forward); 1,
// plain TF32, runs the plain problem only (no features, dropout or packed sequences) and is there
// to measure its error against fp32's (tests/test_tensor_cores_gpu.cpp, case [fp32]).
void tc_forward_tf32(const FwdParams& p, int passes);
void tc_backward(const BwdParams& p);  // p.variant: deterministic, or dQ by atomics (the others)

// The query rows per CTA (Br) and keys per tile (Bc) of a variant at head dimension d.
struct TcTiles {
  int Br = 0, Bc = 0;
};
TcTiles tc_forward_tiles(int d, int variant);

// The backward's tiles at head dimension d for a variant (tc::TcVariant): keys per dK/dV CTA, queries per stage, the CTAs a
// key tile's columns are split over; rows per deterministic dQ CTA, keys per stage.
TcBwdTiles tc_backward_tiles(int d, int variant);
// The backward's HBM bytes of a variant (atomic dQ, or deterministic: the dQ kernel), elem_bytes
// per element; K and V of the Shape's own length and heads, the walks clipped to a window's reach
// (clamp_reach; −1: unbounded).
IoCount io_tc_backward(const Shape& s, bool causal, int variant, int elem_bytes, int window_left = -1,
                       int window_right = -1);

StepInfo step08_info();

}  // namespace fs
