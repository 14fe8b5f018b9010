// Launching a kernel that has a tracing switch: an NVTX range named after the kernel around
// the launch, the plain instantiation when tracing is off, the traced one with its slices when
// the pass has a DeviceSink.
//
//   // kernel: template <bool kTrace> __global__ void pv_kernel(..., fs::trace::Slices slices)
//   fs::trace::launch(p.trace, "pv_kernel", pv_kernel<false>, pv_kernel<true>,
//                     grid, block, 0, p.stream, P, p.v, p.o, N, d);
//   // the same as, with tracing off:
//   //   pv_kernel<false><<<grid, block, 0, p.stream>>>(P, p.v, p.o, N, d, fs::trace::Slices{});
//   //   FS_CHECK_LAUNCH();
//
// Kernels with more template parameters pass both instantiations the same way
// (flash_kernel<64, true, false>, flash_kernel<64, true, true>), kTrace last. Above the 48 KiB
// of dynamic shared memory a kernel gets by default, it must opt in to more
// (cudaFuncAttributeMaxDynamicSharedMemorySize): launch() does that for the instantiation it
// launches, so launchers only say how much they need. common/recorder/same_ptx.py shows that the
// <false> one is the kernel as it was.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "common/check.hpp"
#include "common/recorder/nvtx.hpp"
#include "common/trace/record.hpp"
#include "common/recorder/sink.hpp"

namespace fs::trace {

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

#else  // the CPU emulation (common/emulator): the plain kernel, run to completion; nothing is traced

template <typename... Params, typename... Args>
void launch(DeviceSink* /*sink: null in emulated runs*/, const char* /*name*/, void (*plain)(Params...),
            void (*/*traced*/)(Params...), dim3 grid, dim3 block, std::size_t smem, cudaStream_t, Args&&... args) {
  emu::launch(plain, grid, block, smem, std::forward<Args>(args)..., Slices{});
}

template <typename... Params, typename... Args>
void launch_untraced(const char* /*name*/, void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem,
                     cudaStream_t, Args&&... args) {
  emu::launch(kernel, grid, block, smem, std::forward<Args>(args)...);
}

#endif

}  // namespace fs::trace
