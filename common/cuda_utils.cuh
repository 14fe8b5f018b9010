// Device helpers the steps share: warp reductions and asynchronous global → shared copies.
#pragma once

#include <cuda_runtime.h>

#include <cstring>

namespace fs {

constexpr int kWarpSize = 32;

// A device function kept out of line: a slow path whose code the kernels' unrolled loops need not
// carry (nvcc's __noinline__; the emulation's host compiler knows the GNU attribute).
#ifdef FS_EMULATION
#define FS_NOINLINE __attribute__((noinline))
#else
#define FS_NOINLINE __noinline__
#endif

__device__ __forceinline__ float warp_sum(float x) {
  for (int o = kWarpSize / 2; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

__device__ __forceinline__ float warp_max(float x) {
  for (int o = kWarpSize / 2; o > 0; o /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

// 16 bytes global → shared without passing through registers (sm_80+: cp.async). When
// `valid` is false nothing is read and the 16 bytes are zero-filled: rows past N of a tail
// tile become 0, so that 0 · (masked P) never meets uninitialised NaN bits.
#ifndef FS_EMULATION
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Wait until at most `kPending` committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}
// Programmatic dependent launch (sm_90+; trace::launch_dependent launches the second grid): the
// first grid's CTAs let the second start launching (its CTAs may then become resident beside
// them), and the second waits, before it reads anything the first wrote, until the first has
// finished and its writes are visible. Below sm_90 both are nothing (and the launch is a plain one).
__device__ __forceinline__ void grid_dependents_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
#else  // the CPU emulation (common/emulator): the copy happens at once, the waits have nothing to wait for
inline void grid_dependents_launch() {}
inline void grid_dependency_wait() {}
inline void cp_async_16(void* smem, const void* gmem, bool valid) {
  if (valid) std::memcpy(smem, gmem, 16);
  else std::memset(smem, 0, 16);
}
inline void cp_async_commit() {}
template <int kPending>
void cp_async_wait() {}
#endif

// The CTA's dynamic shared memory (the launch's third <<< >>> argument), as T: what a kernel's
// `extern __shared__ T smem[]` names, one array of each element type (the same code as that
// declaration generates), and in the CPU emulation the emulator's.
template <typename T>
__device__ T* dynamic_smem();
#ifndef FS_EMULATION
#define FS_DYNAMIC_SMEM(T, name)                          \
  template <>                                              \
  __device__ __forceinline__ T* dynamic_smem<T>() {        \
    extern __shared__ T name[];                            \
    return name;                                           \
  }
#else
#define FS_DYNAMIC_SMEM(T, name) \
  template <>                    \
  inline T* dynamic_smem<T>() { return reinterpret_cast<T*>(emu::dynamic_smem()); }
#endif
FS_DYNAMIC_SMEM(float, fs_dynamic_smem_float)
FS_DYNAMIC_SMEM(double, fs_dynamic_smem_double)
FS_DYNAMIC_SMEM(int, fs_dynamic_smem_int)
#undef FS_DYNAMIC_SMEM

// Rows [row0, row0 + kRows) of a row-major (n_rows, kD) matrix, its rows ld floats apart (kD:
// contiguous; a multiple of 4 and 16-byte aligned rows in any case), into shared memory laid out
// (kRows, kD), by all kThreads threads of the CTA in 16-byte pieces; rows at or past n_rows are
// zero-filled. Asynchronous: commit and wait before reading.
template <int kRows, int kD, int kThreads>
__device__ __forceinline__ void load_rows_async(float* smem, const float* gmem, int row0, int n_rows,
                                                long long ld = kD) {
  static_assert(kD % 4 == 0, "rows are copied in 16-byte (4-float) pieces");
  constexpr int kPieces = kRows * kD / 4;
  for (int p = threadIdx.x; p < kPieces; p += kThreads) {
    const int r = p / (kD / 4), c = (p % (kD / 4)) * 4;
    const bool valid = row0 + r < n_rows;
    const float* src = gmem + static_cast<long long>(valid ? row0 + r : 0) * ld + c;
    cp_async_16(smem + r * kD + c, src, valid);
  }
}

}  // namespace fs
