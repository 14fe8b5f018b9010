// The mask of step 09's forward: which scores it sets to −∞ (keys past N, and, causal, keys after
// the query's diagonal), and only in the tiles that hold one. Its scores are step 08's accumulator
// fragments, so the mask is step 08's tc_mask_tile. (The backward's scores are Sᵀ, masked in step
// 08's tc_p_ds_pair; its kernel says which tiles need it, `edge`.)
#pragma once

#include "steps/08_tensor_cores/tc_softmax.cuh"

namespace fs::hopper {

// The forward's, for one consumer warp's 16 rows of a work tile: key tile t of S (one 16-row tile
// of NT 8-key chunks, in wgmma's accumulator layout) masked where it reaches past N or (causal)
// past the work tile's first row's diagonal.
template <bool kCausal, int BN>
struct ForwardMask {
  const int row0;   // the work tile's first query row
  const int wrow0;  // the warp's first row in the work tile
  const int N;

  template <int NT>
  __device__ __forceinline__ void operator()(float (&s)[NT][4], int t) const {
    tc::tc_mask_tile<kCausal, BN>(*reinterpret_cast<float(*)[1][NT][4]>(&s), row0, wrow0, t * BN, N, 0);
  }
};

}  // namespace fs::hopper
