// Step 08: tensor cores. The FlashAttention-2 forward of step 04 on mma.sync, bf16 or fp16 in,
// fp32 accumulate, with the ladder of techniques that makes it fast as its variants.
#pragma once

#include "common/problem.hpp"

namespace fs {

void tc_forward(const FwdParams& p);  // p.dtype: bf16 or fp16; p.variant: a rung or fa2

// The query rows per CTA (Br) and keys per tile (Bc) of a variant at head dimension d.
struct TcTiles {
  int Br = 0, Bc = 0;
};
TcTiles tc_forward_tiles(int d, int variant);

StepInfo step08_info();

namespace tc {
// One per element type and head dimension (forward_instance.cu.in).
#define FS_TC_FORWARD(type)                       \
  void forward_##type##_d32(const FwdParams& p);  \
  void forward_##type##_d64(const FwdParams& p);  \
  void forward_##type##_d96(const FwdParams& p);  \
  void forward_##type##_d128(const FwdParams& p); \
  void forward_##type##_d256(const FwdParams& p);
FS_TC_FORWARD(bf16)
FS_TC_FORWARD(fp16)
#undef FS_TC_FORWARD
}  // namespace tc

}  // namespace fs
