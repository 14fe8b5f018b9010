// The head dimensions step 08's 16-bit kernels are compiled at, and the one a run of any other d
// uses: the next of them, its tiles holding the run's d columns and zeros past them
// (tc_tiles.cuh, head_cols), as FlashAttention compiles a few head dimensions and serves the
// others from the next.
#pragma once

#include <cuda_runtime.h>

#include "common/problem.hpp"

namespace fs::tc {

inline constexpr int kMaxHeadDim = 256;

// The head dimensions compiled (their kernels take d = D with or without FlashAttention's features).
__host__ __device__ constexpr bool is_tc_head_dim(int d) {
  return d == 32 || d == 64 || d == 96 || d == 128 || d == 256;
}

// The compiled head dimension that runs d, 1 ≤ d ≤ 256.
__host__ __device__ constexpr int tc_compiled_head_dim(int d) {
  return d <= 32 ? 32 : d <= 64 ? 64 : d <= 96 ? 96 : d <= 128 ? 128 : 256;
}

// The backward's dQacc rows (bwd_common.cuh's workspace): the compiled head dimension's floats, as
// many as a kernel at any d adds into (its columns past d zero). Step 09's reduce-adds use these rows.
__host__ __device__ constexpr int tc_dq_acc_cols(const Shape& s) { return tc_compiled_head_dim(s.d); }

}  // namespace fs::tc
