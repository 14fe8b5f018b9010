// The Hopper building blocks of step 09, each a few lines of PTX: the mbarrier (a barrier in
// shared memory that counts arrivals and bytes), TMA (a copy engine that moves a tile between
// global and shared memory, given a tensor map), and wgmma (the warpgroup's asynchronous matrix
// multiply, reading its operands from shared memory through descriptors). They need sm_90a: the
// "a" features of the H100/H200 that later architectures do not promise.
//
// mbarrier. A 64-bit word in shared memory with a phase bit. It is initialised with an expected
// number of arrivals; a phase completes when that many threads have arrived and, if some arrival
// announced bytes (expect_tx), when that many bytes have landed through copies that name the
// barrier (TMA's complete_tx). Then the phase flips and the count starts again. A waiter names
// the parity of the phase it waits for: the k-th completion (k = 0, 1, ...) has parity k mod 2.
//
// TMA. cp.async.bulk.tensor copies a box of a tensor (here 64 elements of a row × up to 256 rows)
// in one instruction issued by one thread; rows outside the tensor read as zeros, which is how
// step 09 gets its tails for free. With the 128-byte swizzle, the box lands in shared memory as
// rows of 128 bytes in which the 16-byte chunk c of row r sits at chunk c ^ (r mod 8): the layout
// wgmma reads without bank conflicts, and the same one step 08's swizzle (mma.cuh) made by hand.
//
// wgmma. wgmma.mma_async.m64nNk16: the 128 threads of a warpgroup (4 consecutive warps) compute
// D (64 × N, fp32) += A (64 × 16) · B (16 × N). B, and A unless it is in registers, are read
// from shared memory through 64-bit descriptors (make_desc). D lives in registers: warp w of
// the warpgroup holds rows 16w .. 16w + 15 in mma.sync's C layout (mma.cuh) per 8 columns, so
// with g = lane / 4, t = lane % 4, element e of 8-column chunk i is row 16w + g + 8(e / 2),
// column 8i + 2t + e mod 2. A in registers has mma.sync m16n8k16's A layout per warp: the
// accumulators of S = QKᵀ become the A operand of P·V without moving, as in step 08.
// The instruction returns at once; wgmma.commit_group closes a group of them, and
// wgmma.wait_group n waits until at most n groups are in flight. Registers a wgmma reads or
// writes must not be touched in between (fence_operands tells the compiler so).
// FP8 (e4m3, the fp8 variant): wgmma.m64nNk32, 32 one-byte elements of k per instruction, both
// operands K-major (8-bit types have no transposed form, which is why V arrives transposed), and
// A in registers in mma.sync m16n8k32's layout: register 0 holds row g's k = 4t .. 4t + 3 (one
// byte each, the lowest k in the lowest byte), register 1 row g + 8's, registers 2 and 3 the same
// at k + 16. The 32 bytes a k-step reads along a 128-byte row are the 16-bit k16's 32 bytes.
#pragma once

#include <cuda.h>  // CUtensorMap (the type only: the driver's functions are found at run time)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#ifdef FS_EMULATION  // the CPU emulation of the instructions below (each wrapper's #else)
#include "steps/09_hopper/hopper_emu.hpp"
#endif

namespace fs::hopper {

// ---- shared-memory addresses -------------------------------------------------------------------

__device__ __forceinline__ std::uint32_t smem_u32(const void* p) {
#ifndef FS_EMULATION
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
#else  // the byte offset into the CTA's dynamic shared memory: what the descriptors' arithmetic takes
  return static_cast<std::uint32_t>(static_cast<const unsigned char*>(p) - fs::emu::dynamic_smem());
#endif
}

// ---- mbarrier ------------------------------------------------------------------------------------

__device__ __forceinline__ void mbar_init(std::uint64_t* bar, int arrivals) {
#ifndef FS_EMULATION
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(arrivals));
#else
  emu_hopper::mbar_init(smem_u32(bar), arrivals);
#endif
}
// Makes the initialised barriers visible to the async proxy (TMA) before any copy names them.
__device__ __forceinline__ void fence_barrier_init() {
#ifndef FS_EMULATION
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
// One arrival, announcing `bytes` more bytes that copies will complete on this phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(std::uint64_t* bar, std::uint32_t bytes) {
#ifndef FS_EMULATION
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes)
               : "memory");
#else
  emu_hopper::mbar_arrive(smem_u32(bar), bytes);
#endif
}
__device__ __forceinline__ void mbar_arrive(std::uint64_t* bar) {
#ifndef FS_EMULATION
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
#else
  emu_hopper::mbar_arrive(smem_u32(bar), 0);
#endif
}
// Waits until the phase of parity `parity` has completed. try_wait may suspend the thread until
// the phase completes or a time limit passes; without a hint the limit is short, and a waiter that
// waits long (the producer, for a free stage) loops, each try two instructions issued beside its
// scheduler's other warps (14 million tries in one profile of fp8's kernel at N = 4096). The hint
// (nanoseconds) makes the limit 10 ms: the thread sleeps until the phase completes.
constexpr std::uint32_t kSuspendHintNs = 10000000;
__device__ __forceinline__ void mbar_wait(std::uint64_t* bar, int parity) {
#ifndef FS_EMULATION
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1, %2;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(smem_u32(bar)),
      "r"(parity), "r"(kSuspendHintNs)
      : "memory");
#else
  emu_hopper::mbar_wait(smem_u32(bar), parity);
#endif
}

// ---- TMA -----------------------------------------------------------------------------------------

// The box of `map` at coordinates (c0, c1, c2, c3) (innermost first: column, row, head, batch)
// into shared memory at dst, completing its bytes on `bar`.
__device__ __forceinline__ void tma_load_4d(void* dst, const CUtensorMap* map, std::uint64_t* bar, int c0, int c1,
                                            int c2, int c3) {
#ifndef FS_EMULATION
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], "
      "[%2];\n" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
#else
  emu_hopper::tma_load(smem_u32(dst), map, smem_u32(bar), c0, c1, c2, c3);
#endif
}
// The box of `map` at (c0, c1, c2, c3) written from shared memory at src (rows outside the
// tensor are not written). Stores are tracked in bulk groups: bulk_commit closes one,
// bulk_wait_read<n> waits until at most n groups still read shared memory, bulk_wait<n> until at
// most n are unfinished. Writes to shared memory by threads must be made visible to the copy
// engine first (fence_async_shared).
__device__ __forceinline__ void tma_store_4d(const CUtensorMap* map, const void* src, int c0, int c1, int c2, int c3) {
#ifndef FS_EMULATION
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(
                   reinterpret_cast<std::uint64_t>(map)),
               "r"(smem_u32(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
#else
  emu_hopper::tma_store(map, smem_u32(src), c0, c1, c2, c3);
#endif
}
#ifndef FS_EMULATION
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int kInFlight>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(kInFlight) : "memory");
}
template <int kInFlight>
__device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(kInFlight) : "memory");
}
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void tma_prefetch_descriptor(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<std::uint64_t>(map)) : "memory");
}
// The box at (c0, c1, c2, c3) of `map` (float32) += the box at src, element by element, in L2 by
// the copy engine (the backward's dQ); tracked in bulk groups like the stores.
__device__ __forceinline__ void tma_reduce_add_4d(const CUtensorMap* map, const void* src, int c0, int c1, int c2,
                                                  int c3) {
  asm volatile(
      "cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(
          reinterpret_cast<std::uint64_t>(map)),
      "r"(smem_u32(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}
// Orders this thread's generic accesses to global memory with the copy engine's (async proxy).
__device__ __forceinline__ void fence_proxy_async_global() { asm volatile("fence.proxy.async.global;\n" ::: "memory"); }
// A counter in global memory read with acquire semantics, raised with release (GPU scope).
__device__ __forceinline__ int ld_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void red_release_add(int* p, int v) {
  asm volatile("red.release.gpu.global.add.s32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
#else  // the emulated stores and reduce-adds are done when issued: nothing to wait for, fence or prefetch
inline void bulk_commit() {}
template <int kInFlight>
void bulk_wait_read() {}
template <int kInFlight>
void bulk_wait() {}
inline void fence_async_shared() {}
inline void tma_prefetch_descriptor(const CUtensorMap*) {}
inline void tma_reduce_add_4d(const CUtensorMap* map, const void* src, int c0, int c1, int c2, int c3) {
  emu_hopper::tma_reduce_add(map, smem_u32(src), c0, c1, c2, c3);
}
inline void fence_proxy_async_global() {}
// Host memory, one CTA at a time (hopper_emu.hpp): a spin that cannot end is reported as a deadlock.
inline int ld_acquire(const int* p) { return emu_hopper::ld_acquire(p); }
inline void red_release_add(int* p, int v) { *p += v; }
#endif

// ---- warpgroups ----------------------------------------------------------------------------------

// Gives this warpgroup's registers back to the SM (dec) or takes more (inc): the producer needs
// few, the consumers' accumulators many. Every warp of the warpgroup executes it.
#ifndef FS_EMULATION
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
#else  // registers are the host's: nothing to give or take
template <int kRegs>
void setmaxnreg_dec() {}
template <int kRegs>
void setmaxnreg_inc() {}
#endif
// Named barriers 1..15 (0 is __syncthreads): sync waits until `threads` threads have arrived or
// synced on barrier id; arrive counts this thread without waiting.
#ifndef FS_EMULATION
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
#else
inline void named_sync(int id, int threads) { fs::emu::named_barrier(id, threads, true); }
inline void named_arrive(int id, int threads) { fs::emu::named_barrier(id, threads, false); }
#endif

// ---- wgmma -----------------------------------------------------------------------------------------

// A shared-memory matrix descriptor for the 128-byte swizzle: bits 0-13 the address / 16, 16-29
// the leading byte offset / 16, 32-45 the stride byte offset / 16, 62-63 the layout (1: 128-byte
// swizzle). Tiles start on 1024-byte boundaries (the swizzle's period: 8 rows of 128 bytes), and
// an address inside one steps along a row's 128 bytes (the hardware swizzles the sum).
//   K-major (Q and K for S = QKᵀ: the k index, d, runs along the 128-byte rows): the 8-row groups
//     are `stride` = 1024 bytes apart; the leading offset is not used.
//   MN-major (V for P·V: its n index, d, runs along the rows, k = key down them): 64 columns of
//     n per row of 128 bytes, the next 64 columns `leading` bytes on; 8 keys per 1024 bytes.
__device__ __forceinline__ std::uint64_t make_desc(const void* smem, std::uint32_t leading, std::uint32_t stride) {
  return std::uint64_t((smem_u32(smem) & 0x3ffff) >> 4) | std::uint64_t((leading >> 4) & 0x3fff) << 16 |
         std::uint64_t((stride >> 4) & 0x3fff) << 32 | std::uint64_t(1) << 62;
}

// The descriptor of a matrix `bytes` further on in shared memory: the address field (bits 0-13,
// the address / 16) plus bytes / 16. Every shared-memory address is below 2¹⁸ bytes, so the sum
// stays inside the field. One add, where make_desc converts and masks a pointer each time.
__host__ __device__ constexpr std::uint64_t desc_add(std::uint64_t desc, std::uint32_t bytes) {
  return desc + (bytes >> 4);
}

#ifndef FS_EMULATION
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kInFlight>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kInFlight) : "memory");
}
#else  // an emulated wgmma is complete when it returns
inline void wgmma_fence() {}
inline void wgmma_commit() {}
template <int kInFlight>
void wgmma_wait() {}
#endif
// The compiler must neither read nor move these registers across a wgmma in flight: an empty asm
// that "writes" them pins them where they are.
template <int NT>
__device__ __forceinline__ void fence_operands(float (&d)[NT][4]) {
#ifndef FS_EMULATION
#pragma unroll
  for (int i = 0; i < NT; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[i][e])::"memory");
#else
  (void)d;  // the emulation: nothing is in flight
#endif
}

// ---- the wgmma shapes (operand lists written out, as inline PTX needs them) ----

// The accumulators of m64nN, d[i][e] being element e of 8-column chunk i (FS_WGMMA_C(i), chunk i's
// four), and their operand numbers (FS_WGMMA_R##N); each N after the first adds chunks to the last.
#define FS_WGMMA_C(i) "+f"(d[i][0]), "+f"(d[i][1]), "+f"(d[i][2]), "+f"(d[i][3])
#define FS_WGMMA_D64 \
    FS_WGMMA_C(0), FS_WGMMA_C(1), FS_WGMMA_C(2), FS_WGMMA_C(3), FS_WGMMA_C(4), FS_WGMMA_C(5), FS_WGMMA_C(6), FS_WGMMA_C(7)
#define FS_WGMMA_R64 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define FS_WGMMA_D128 \
    FS_WGMMA_D64, FS_WGMMA_C(8), FS_WGMMA_C(9), FS_WGMMA_C(10), FS_WGMMA_C(11), FS_WGMMA_C(12), FS_WGMMA_C(13), \
    FS_WGMMA_C(14), FS_WGMMA_C(15)
#define FS_WGMMA_R128 FS_WGMMA_R64 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
// m64n192 and m64n224 (the fp8 forward's S).
#define FS_WGMMA_D192 \
    FS_WGMMA_D128, FS_WGMMA_C(16), FS_WGMMA_C(17), FS_WGMMA_C(18), FS_WGMMA_C(19), FS_WGMMA_C(20), FS_WGMMA_C(21), \
    FS_WGMMA_C(22), FS_WGMMA_C(23)
#define FS_WGMMA_R192 FS_WGMMA_R128 ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define FS_WGMMA_D224 FS_WGMMA_D192, FS_WGMMA_C(24), FS_WGMMA_C(25), FS_WGMMA_C(26), FS_WGMMA_C(27)
#define FS_WGMMA_R224 FS_WGMMA_R192 ", %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111"

// D (64 × N) = A·B + (accumulate ? D : 0), A and B from shared memory: K-major, or MN-major
// where TR ("1") says so (TA: A's m index along the rows, TB: B's n index).
#define FS_WGMMA_SS(N, T, IA, IB, IS, TA, TB)                                                              \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" IS ", 0;\nwgmma.mma_async.sync.aligned.m64n" #N "k16.f32." T \
               "." T " {" FS_WGMMA_R##N "}, %" IA ", %" IB ", p, 1, 1, " TA ", " TB ";\n}\n"              \
               : FS_WGMMA_D##N                                                                              \
               : "l"(desc_a), "l"(desc_b), "r"(accumulate))
// D (64 × N) += A·B, A from registers (4 per lane, mma.sync's A layout), B from shared memory
// MN-major (transposed: its n index runs along the rows); 8-bit B K-major.
// FP8: m64nNk32 e4m3 × e4m3, both operands K-major (no transpose immediates for 8-bit types).
#define FS_WGMMA_SS8(N, IA, IB, IS)                                                                           \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" IS ", 0;\nwgmma.mma_async.sync.aligned.m64n" #N            \
               "k32.f32.e4m3.e4m3 {" FS_WGMMA_R##N "}, %" IA ", %" IB ", p, 1, 1;\n}\n"                        \
               : FS_WGMMA_D##N                                                                              \
               : "l"(desc_a), "l"(desc_b), "r"(accumulate))
#define FS_WGMMA_RS8(N, IA, IA1, IA2, IA3, IB, IS)                                                            \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" IS ", 0;\nwgmma.mma_async.sync.aligned.m64n" #N            \
               "k32.f32.e4m3.e4m3 {" FS_WGMMA_R##N "}, {%" IA ", %" IA1 ", %" IA2 ", %" IA3 "}, %" IB ", p, 1, 1;\n}\n" \
               : FS_WGMMA_D##N                                                                              \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate))
#define FS_WGMMA_RS(N, T, IA, IA1, IA2, IA3, IB, IS)                                                       \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" IS ", 0;\nwgmma.mma_async.sync.aligned.m64n" #N "k16.f32." T \
               "." T " {" FS_WGMMA_R##N "}, {%" IA ", %" IA1 ", %" IA2 ", %" IA3 "}, %" IB ", p, 1, 1, 1;\n}\n"  \
               : FS_WGMMA_D##N                                                                              \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate))

// E: __nv_bfloat16 or __half (k16), or __nv_fp8_e4m3 (k32, K-major only).
template <typename E>
inline constexpr bool kIsFp8 = std::is_same_v<E, __nv_fp8_e4m3>;

// Major::kK: both operands K-major (the forward's and the backward's Sᵀ, dPᵀ); Major::kMN: both
// MN-major (the backward's dQ = dS K reads dSᵀ and K so).
enum class Major { kK, kMN };

template <typename E, int N, Major kMajor = Major::kK>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 8][4], std::uint64_t desc_a, std::uint64_t desc_b,
                                         int accumulate) {
  static_assert(N == 64 || N == 128 || (N == 224 && kIsFp8<E>), "m64n64, m64n128 and (e4m3) m64n224: step 09's shapes");
  constexpr bool kTransA = kMajor == Major::kMN, kTransB = kMajor == Major::kMN;
#ifdef FS_EMULATION
  emu_hopper::wgmma_ss<E, N, kTransA, kTransB>(d, desc_a, desc_b, accumulate);
#else
  constexpr bool kBf16 = std::is_same_v<E, __nv_bfloat16>;
  if constexpr (kIsFp8<E>) {
    static_assert(!kTransA && !kTransB, "8-bit operands are K-major only");
    if constexpr (N == 64) FS_WGMMA_SS8(64, "32", "33", "34");
    else if constexpr (N == 128) FS_WGMMA_SS8(128, "64", "65", "66");
    else FS_WGMMA_SS8(224, "112", "113", "114");
  } else if constexpr (N == 64) {
#define FS_WGMMA_SS_T(N, IA, IB, IS, TA, TB)                   \
  if constexpr (kBf16) FS_WGMMA_SS(N, "bf16", IA, IB, IS, TA, TB); \
  else FS_WGMMA_SS(N, "f16", IA, IB, IS, TA, TB);
    if constexpr (!kTransA && !kTransB) { FS_WGMMA_SS_T(64, "32", "33", "34", "0", "0") }
    else { FS_WGMMA_SS_T(64, "32", "33", "34", "1", "1") }
  } else {
    static_assert(!kTransA && !kTransB, "m64n128 from shared memory: K-major operands");
    FS_WGMMA_SS_T(128, "64", "65", "66", "0", "0")
  }
#undef FS_WGMMA_SS_T
#endif
}

template <typename E, int N>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 8][4], const std::uint32_t (&a)[4], std::uint64_t desc_b,
                                         int accumulate) {
  static_assert(N == 64 || N == 128, "m64n64 and m64n128 are the shapes step 09 uses");
#ifdef FS_EMULATION
  emu_hopper::wgmma_rs<E, N>(d, a, desc_b, accumulate);
#else
  constexpr bool kBf16 = std::is_same_v<E, __nv_bfloat16>;
  // The operands' numbers: D's N / 2 accumulators first, then A's four registers, B, accumulate.
  if constexpr (N == 64) {
    if constexpr (kIsFp8<E>) FS_WGMMA_RS8(64, "32", "33", "34", "35", "36", "37");
    else if constexpr (kBf16) FS_WGMMA_RS(64, "bf16", "32", "33", "34", "35", "36", "37");
    else FS_WGMMA_RS(64, "f16", "32", "33", "34", "35", "36", "37");
  } else {
    if constexpr (kIsFp8<E>) FS_WGMMA_RS8(128, "64", "65", "66", "67", "68", "69");
    else if constexpr (kBf16) FS_WGMMA_RS(128, "bf16", "64", "65", "66", "67", "68", "69");
    else FS_WGMMA_RS(128, "f16", "64", "65", "66", "67", "68", "69");
  }
#endif
}

#undef FS_WGMMA_SS
#undef FS_WGMMA_RS
#undef FS_WGMMA_SS8
#undef FS_WGMMA_RS8
#undef FS_WGMMA_D64
#undef FS_WGMMA_R64
#undef FS_WGMMA_D128
#undef FS_WGMMA_R128
#undef FS_WGMMA_D192
#undef FS_WGMMA_R192
#undef FS_WGMMA_D224
#undef FS_WGMMA_R224
#undef FS_WGMMA_C

}  // namespace fs::hopper
