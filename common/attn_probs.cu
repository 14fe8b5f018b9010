// launch_attn_probs (common/attn_probs.hpp): the kernel of common/attn_probs.cuh at the call's
// element type. Compiled into the Python module (common/python/CMakeLists.txt).
#include "common/attn_probs.cuh"
#include "common/check.hpp"

namespace fs {

void launch_attn_probs(const ProbsParams& p, cudaStream_t stream) {
  if (p.elements() == 0) return;
  const dim3 grid = attn_probs_grid(p);
  switch (p.dtype) {
    case DType::bf16:
      attn_probs_kernel<__nv_bfloat16><<<grid, kProbsThreads, 0, stream>>>(p);
      break;
    case DType::fp16:
      attn_probs_kernel<__half><<<grid, kProbsThreads, 0, stream>>>(p);
      break;
    case DType::fp32:
      attn_probs_kernel<float><<<grid, kProbsThreads, 0, stream>>>(p);
      break;
  }
  FS_CHECK_LAUNCH();
}

}  // namespace fs
