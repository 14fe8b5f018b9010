// A CPU emulation of CUDA kernels, for the tests of a machine without a GPU (CI): the kernels'
// own source, compiled by the host compiler with FS_EMULATION defined, run with every CUDA thread
// as a fiber on one host thread. A CTA at a time: its threads run in turn until each reaches a
// barrier (__syncthreads, __syncwarp, a warp shuffle, a warpgroup's wgmma), a wait for a flag
// (wait_until: an mbarrier, a named barrier) or its end, so every barrier of the source is
// honoured, and a barrier some threads never reach, or a flag no thread will set, is reported as
// a deadlock instead of a hang.
//
//   #include "common/emulator/emulator.hpp"      // first: before any kernel header
//   #include "steps/07_smyrf/cluster_forward.cuh"
//   fs::emu::launch(fs::my_kernel<64>, grid, block, smem_bytes, args...);   // runs to completion
//
// What it is: a way to execute a kernel's indexing, tiling, masking and arithmetic where there is
// no GPU, in a fixed order, so that a wrong index or a missing mask fails a test on any machine.
// What it is not: a GPU. Memory is the host's (pass host pointers), cp.async copies at once, a
// warp's threads do not run in lockstep (code that relies on that without __syncwarp is wrong on
// a GPU too, but may pass here), nothing about timing, occupancy or the memory model carries over,
// and no race is detected (compute-sanitizer's racecheck is the tool for that). Dynamic shared
// memory is filled with NaN bytes before each CTA, so a read of what no thread wrote shows; static
// shared arrays are not emulated (below).
#pragma once

#ifndef FS_EMULATION
#error "common/emulator/emulator.hpp is for builds that define FS_EMULATION (kernels run on the CPU)"
#endif

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>

// Shared memory: dynamic shared memory only, as dynamic_smem<T>() (common/cuda_utils.cuh) returns
// it, or as a kernel in namespace fs names it, `extern __shared__ float smem[]` (__shared__ is
// nothing here, so that declares the emulator's array fs::smem; another element type or name
// needs its own alias of it in emulator.cpp, as step 08's fs::tc::smem and step 09's
// fs::hopper::smem_raw have). A static `__shared__ float x[n]` would be a local array of each
// thread, not one array of the CTA's: kernels that run in the emulation use dynamic shared memory.
#undef __shared__
#define __shared__
// Occupancy hints mean nothing here.
#define __launch_bounds__(...)

namespace fs::emu {

const uint3& thread_index();  // the running fiber's threadIdx
extern uint3 block_index;
extern dim3 block_dim, grid_dim;

void sync_threads();
void sync_warp();
// The value `bits` of the lane whose index is this lane's xor lane_mask, within the warp.
std::uint64_t shuffle_xor(std::uint64_t bits, int lane_mask);
// Every lane's `bytes` bytes at `mine` (at most kGatherBytes), lane 0's first, into `all` (32 ×
// bytes): what a warp-wide instruction that reads other lanes' registers (mma.sync, ldmatrix)
// needs, as one exchange and two warp barriers.
constexpr std::size_t kGatherBytes = 48;
void warp_gather(const void* mine, std::size_t bytes, void* all);
// The same for the 128 threads of this thread's warpgroup (4 consecutive warps, thread 0's
// first, into `all`: 128 × bytes): what Hopper's warpgroup-wide wgmma needs.
void warpgroup_gather(const void* mine, std::size_t bytes, void* all);
// Yields to the CTA's other threads until ready() holds (a thread spinning on a flag in shared
// memory: an mbarrier's phase, a named barrier). ready() is called from the scheduler as well, so
// it reads memory only. When no thread can run and no waiter's ready() holds, the CTA is reported
// as deadlocked, as for a barrier nobody will reach.
void wait_until(const std::function<bool()>& ready);
// A named barrier (bar.sync / bar.arrive id, threads): `threads` arrivals (a multiple of 32)
// complete it; with `wait`, this thread waits until they have. Each thread counts as it arrives
// (the hardware counts a warp's threads together: the same where whole warps arrive). Barrier 0 is
// __syncthreads' and is not taken here.
void named_barrier(int id, int threads, bool wait);
// The CTA's dynamic shared memory (the launch's smem bytes, 1024-byte aligned, as the 128-byte
// swizzle's atoms need).
unsigned char* dynamic_smem();
constexpr std::size_t kMaxSmemBytes = 228 * 1024;  // an H100/H200 SM's

// Runs body() as every thread of every CTA of the grid; throws std::runtime_error on a deadlock.
void run(dim3 grid, dim3 block, std::size_t smem, const std::function<void()>& body);

template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem, Args&&... args) {
  run(grid, block, smem, [&] { kernel(args...); });
}

}  // namespace fs::emu

#define threadIdx (::fs::emu::thread_index())
#define blockIdx (::fs::emu::block_index)
#define blockDim (::fs::emu::block_dim)
#define gridDim (::fs::emu::grid_dim)

inline void __syncthreads() { fs::emu::sync_threads(); }
inline void __syncwarp(unsigned = 0xffffffffu) { fs::emu::sync_warp(); }

template <typename T>
T __shfl_xor_sync(unsigned /*mask: the whole warp*/, T value, int lane_mask) {
  static_assert(sizeof(T) <= 8, "one register's worth");
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = fs::emu::shuffle_xor(bits, lane_mask);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

// Whether any lane of the warp passes a nonzero predicate (a vote: every lane gets the answer).
inline int __any_sync(unsigned /*mask: the whole warp*/, int predicate) {
  int all[32];
  fs::emu::warp_gather(&predicate, sizeof predicate, all);
  for (int p : all)
    if (p) return 1;
  return 0;
}

// CUDA's integer min and max, one overload per integer type.
template <typename A, typename B, typename = std::enable_if_t<std::is_integral_v<A> && std::is_integral_v<B>>>
std::common_type_t<A, B> min(A a, B b) {
  return a < b ? a : b;
}
template <typename A, typename B, typename = std::enable_if_t<std::is_integral_v<A> && std::is_integral_v<B>>>
std::common_type_t<A, B> max(A a, B b) {
  return a < b ? b : a;
}

inline float __int_as_float(int x) {
  float out;
  std::memcpy(&out, &x, sizeof x);
  return out;
}
inline unsigned __float_as_uint(float x) {
  unsigned out;
  std::memcpy(&out, &x, sizeof x);
  return out;
}
inline float __uint_as_float(unsigned x) {
  float out;
  std::memcpy(&out, &x, sizeof x);
  return out;
}
// One rounding each, never fused into a neighbour (volatile keeps the host compiler from
// contracting a product into the sum that uses it), as the CUDA intrinsics promise.
inline float __fmul_rn(float a, float b) {
  volatile float r = a * b;
  return r;
}
inline float __fadd_rn(float a, float b) {
  volatile float r = a + b;
  return r;
}
inline float __fsub_rn(float a, float b) {
  volatile float r = a - b;
  return r;
}
inline long long __double_as_longlong(double x) {
  long long out;
  std::memcpy(&out, &x, sizeof x);
  return out;
}
inline double __longlong_as_double(long long x) {
  double out;
  std::memcpy(&out, &x, sizeof x);
  return out;
}
// Fibers take turns on one host thread: a read-modify-write is atomic as it stands.
inline unsigned long long atomicMax(unsigned long long* address, unsigned long long value) {
  const unsigned long long old = *address;
  if (value > old) *address = value;
  return old;
}
inline float atomicAdd(float* address, float value) {
  const float old = *address;
  *address = old + value;
  return old;
}
