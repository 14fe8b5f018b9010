// Launching a kernel that has a tracing switch: an NVTX range named after the kernel around
// the launch, the plain instantiation when tracing is off, the traced one with its slices when
// the pass has a DeviceSink. One generic lambda names both instantiations, kTrace last:
//
//   // kernel: template <bool kTrace> __global__ void pv_kernel(..., fs::trace::Slices slices)
//   fs::trace::launch(p.trace, "pv_kernel", [](auto tr) { return pv_kernel<tr>; },
//                     grid, block, 0, p.stream, P, p.v, p.o, N, d);
//   // the same as, with tracing off:
//   //   pv_kernel<false><<<grid, block, 0, p.stream>>>(P, p.v, p.o, N, d, fs::trace::Slices{});
//   //   FS_CHECK_LAUNCH();
//
// (tr is std::false_type or std::true_type; kernels with more template parameters name them
// all: [](auto tr) { return flash_kernel<64, kCausal, tr>; }.) launch<false> compiles the plain
// instantiation alone: a configuration no trace is recorded with costs no traced twin in the
// build, and a traced run of it is refused (StepInfo::untraced says so before any run; kTracedAt
// below is the rule of steps 04-08). Above the 48 KiB of dynamic shared memory a kernel gets by
// default, it must opt in to more (cudaFuncAttributeMaxDynamicSharedMemorySize): launch() does
// that for the instantiation it launches, so launchers only say how much they need.
// common/recorder/same_ptx.py shows that the <false> one is the kernel as it was.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

#include "common/check.hpp"
#include "common/problem.hpp"
#include "common/recorder/nvtx.hpp"
#include "common/trace/record.hpp"
#include "common/recorder/sink.hpp"

namespace fs::trace {

// Whether steps 04-08 compile traced twins at head dimension D: at kTracedHeadDim alone
// (common/problem.hpp), the traced runs' shape, which the tour, the tests and the shipped traces
// record. A traced twin at every head dimension and type doubled those steps' build for traces
// nobody recorded; a traced run at another d is refused (untraced_head_dim, StepInfo::untraced).
template <int D>
inline constexpr bool kTracedAt = D == kTracedHeadDim;

#ifndef FS_EMULATION

// Above the 48 KiB of dynamic shared memory a kernel gets by default, it must opt in to more.
template <typename... Params>
void allow_dynamic_smem(void (*kernel)(Params...), std::size_t smem) {
  constexpr std::size_t kDefaultSmemLimit = 48 * 1024;
  if (smem > kDefaultSmemLimit)
    FS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
}

template <typename... Params, typename... Args>
void launch(DeviceSink* sink, const char* name, void (*plain)(Params...), void (*traced)(Params...), dim3 grid,
            dim3 block, std::size_t smem, cudaStream_t stream, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args) + 1, "the kernel's last parameter is its fs::trace::Slices");
  const nvtx::Range range(name);
  allow_dynamic_smem(sink ? traced : plain, smem);
  if (!sink) {
    plain<<<grid, block, smem, stream>>>(std::forward<Args>(args)..., Slices{});
    FS_CHECK_LAUNCH();
    return;
  }
  const Slices slices = sink->begin_kernel(name, grid, block, smem, reinterpret_cast<const void*>(traced), stream);
  traced<<<grid, block, smem, stream>>>(std::forward<Args>(args)..., slices);
  FS_CHECK_LAUNCH();
  sink->end_kernel(stream);
}

// The twins of kernel_of (the header): both where kTraced, else the plain one alone.
template <bool kTraced = true, typename KernelOf, typename... Args>
void launch(DeviceSink* sink, const char* name, KernelOf kernel_of, dim3 grid, dim3 block, std::size_t smem,
            cudaStream_t stream, Args&&... args) {
  if constexpr (kTraced) {
    launch(sink, name, kernel_of(std::false_type{}), kernel_of(std::true_type{}), grid, block, smem, stream,
           std::forward<Args>(args)...);
  } else {
    if (sink)
      throw CudaError(cudaErrorInvalidValue, std::string(name) + ": no traced instantiation is compiled for this "
                                                                 "configuration (StepInfo::untraced says which are)");
    launch(nullptr, name, kernel_of(std::false_type{}), kernel_of(std::false_type{}), grid, block, smem, stream,
           std::forward<Args>(args)...);
  }
}

// A kernel that records nothing (a step whose kernels have no tracing switch yet): the NVTX range
// and the shared-memory opt-in alone.
template <typename... Params, typename... Args>
void launch_untraced(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem,
                     cudaStream_t stream, Args&&... args) {
  const nvtx::Range range(name);
  allow_dynamic_smem(kernel, smem);
  kernel<<<grid, block, smem, stream>>>(std::forward<Args>(args)...);
  FS_CHECK_LAUNCH();
}

// A kernel that depends on the one launched before it on `stream` (programmatic dependent launch,
// sm_90+): it may start launching once that one's CTAs have called grid_dependents_launch()
// (common/cuda_utils.cuh), and calls grid_dependency_wait() before reading what that one wrote.
// What it saves is the gap between the two kernels (a few microseconds, which a decoding step of
// twenty notices). Untraced, like launch_untraced.
template <typename... Params, typename... Args>
void launch_dependent(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem,
                      cudaStream_t stream, Args&&... args) {
  const nvtx::Range range(name);
  allow_dynamic_smem(kernel, smem);
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  FS_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
  FS_CHECK_LAUNCH();
}

#else  // the CPU emulation (common/emulator): the plain kernel, run to completion; nothing is traced

template <typename... Params, typename... Args>
void launch(DeviceSink* /*sink: null in emulated runs*/, const char* /*name*/, void (*plain)(Params...),
            void (*/*traced*/)(Params...), dim3 grid, dim3 block, std::size_t smem, cudaStream_t, Args&&... args) {
  emu::launch(plain, grid, block, smem, std::forward<Args>(args)..., Slices{});
}

// The plain twin alone: no traced instantiation is compiled for the emulation.
template <bool kTraced = true, typename KernelOf, typename... Args>
void launch(DeviceSink* /*sink: null in emulated runs*/, const char* /*name*/, KernelOf kernel_of, dim3 grid,
            dim3 block, std::size_t smem, cudaStream_t, Args&&... args) {
  emu::launch(kernel_of(std::false_type{}), grid, block, smem, std::forward<Args>(args)..., Slices{});
}

template <typename... Params, typename... Args>
void launch_untraced(const char* /*name*/, void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem,
                     cudaStream_t, Args&&... args) {
  emu::launch(kernel, grid, block, smem, std::forward<Args>(args)...);
}
// Run in order after the one before, as the emulation runs every kernel.
template <typename... Params, typename... Args>
void launch_dependent(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem,
                      cudaStream_t stream, Args&&... args) {
  launch_untraced(name, kernel, grid, block, smem, stream, std::forward<Args>(args)...);
}

#endif

}  // namespace fs::trace
