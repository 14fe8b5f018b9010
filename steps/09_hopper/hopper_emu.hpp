// The CPU emulation (common/emulator) of step 09's Hopper instructions (hopper.cuh): what each
// wrapper's FS_EMULATION branch calls. Included by hopper.cuh in emulated builds only.
//
//   mbarrier: a host struct in the barrier's 8 bytes (expected and pending arrivals, bytes still
//     to land, the phase bit); a waiter yields to the CTA's other threads (fs::emu::wait_until)
//     until the phase it names has completed, so a barrier that never completes is reported as a
//     deadlock.
//   TMA: a tensor map is this file's own description of the tensor (make_tensor_map,
//     make_dq_acc_map, make_tensor_map_fp8 below), not the driver's: 16-bit elements, float32
//     (the backward's dQacc) or bytes (the fp8 variant's e4m3), a box's rows 128 bytes. A load copies its box at once into shared memory in the
//     128-byte swizzle's layout, zeros outside the tensor, and completes its bytes on the
//     barrier; a store writes the box back from that layout at once, and a reduce-add adds it
//     (float32, one rounding per element) at once, both clipped to the tensor. The bulk groups'
//     waits have nothing left to wait for.
//   wgmma: the warpgroup's 128 threads gather their operands (fs::emu::warpgroup_gather), each
//     decodes the descriptors and computes its own accumulators in the layouts hopper.cuh gives.
//     A wgmma is complete when it returns: commit and wait do nothing. The products of 16-bit
//     (k16) or e4m3 (k32) inputs are exact in fp32 and are summed in k order: the tensor cores'
//     order and rounding of the sum are not modelled (as in step 08's emulation, mma.cuh).
//   Named barriers count threads (fs::emu::named_barrier); setmaxnreg and the fences do nothing.
//   The deterministic backward's counters in global memory: plain host reads and adds. The CTAs
//     run one at a time in blockIdx order (x fastest), so a counter a CTA waits for has been
//     raised by the CTAs before it, or never will be; a thread that keeps reading one value is
//     made to wait for it to change (ld_acquire below), and the emulator reports the deadlock.
//
// Covers step 09's forwards (hopper_forward_kernel, hopper_fp8_forward_kernel and fp8's quantizer)
// and backward (hopper_backward_kernel).
#pragma once

#ifndef FS_EMULATION
#error "steps/09_hopper/hopper_emu.hpp is the CPU emulation's (FS_EMULATION)"
#endif

#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/e4m3.hpp"
#include "common/emulator/emulator.hpp"
#include "common/problem.hpp"
#include "steps/08_tensor_cores/head_dims.hpp"
#include "steps/08_tensor_cores/mma.cuh"

namespace fs::hopper::emu_hopper {

// A kernel bug the hardware would hang or fault on: said, then the run stops.
[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "step 09 emulation: %s\n", what);
  std::abort();
}

// A shared-memory address (smem_u32's: the byte offset into the CTA's dynamic shared memory).
inline unsigned char* at(std::uint32_t addr) { return fs::emu::dynamic_smem() + addr; }

// The 128-byte swizzle on an address: its 16-byte chunk (bits 4-6) xor its row of 128 bytes
// within the 1024-byte atom (bits 7-9).
inline std::uint32_t swizzle(std::uint32_t addr) { return addr ^ (((addr >> 7) & 7u) << 4); }

// ---- mbarrier ----

struct Mbarrier {
  std::int32_t tx;  // bytes announced and not yet landed in this phase
  std::uint32_t expected : 15, pending : 15, phase : 1;
};
static_assert(sizeof(Mbarrier) == 8, "an mbarrier is 64 bits");

inline Mbarrier load_bar(std::uint32_t addr) {
  Mbarrier b;
  std::memcpy(&b, at(addr), sizeof b);
  return b;
}
inline void store_bar(std::uint32_t addr, const Mbarrier& b) { std::memcpy(at(addr), &b, sizeof b); }

inline void mbar_init(std::uint32_t addr, int arrivals) {
  if (addr % 8 != 0 || arrivals <= 0 || arrivals >= (1 << 15)) fail("mbarrier.init: misaligned, or a bad count");
  Mbarrier b{};
  b.expected = b.pending = static_cast<std::uint32_t>(arrivals);
  b.phase = 0;
  store_bar(addr, b);
}
// The phase completes when every arrival has come and every announced byte has landed.
inline void complete_if_done(std::uint32_t addr, Mbarrier b) {
  if (b.pending == 0 && b.tx == 0) {
    b.pending = b.expected;
    b.phase ^= 1u;
  }
  store_bar(addr, b);
}
// One arrival, announcing `bytes` (expect_tx comes before the arrival it goes with).
inline void mbar_arrive(std::uint32_t addr, std::uint32_t bytes) {
  Mbarrier b = load_bar(addr);
  if (b.pending == 0) fail("mbarrier.arrive: more arrivals than the barrier expects");
  b.tx += static_cast<std::int32_t>(bytes);
  b.pending -= 1;
  complete_if_done(addr, b);
}
// A copy's bytes have landed.
inline void mbar_complete_tx(std::uint32_t addr, std::uint32_t bytes) {
  Mbarrier b = load_bar(addr);
  b.tx -= static_cast<std::int32_t>(bytes);
  if (b.tx < 0) fail("mbarrier complete_tx: more bytes landed than were announced");
  complete_if_done(addr, b);
}
// try_wait.parity in a loop: the phase of parity `parity` has completed once the barrier's
// current phase has the other parity.
inline void mbar_wait(std::uint32_t addr, int parity) {
  fs::emu::wait_until([addr, parity] { return load_bar(addr).phase != static_cast<std::uint32_t>(parity & 1); });
}

// ---- TMA ----

// The emulation's tensor map, in the CUtensorMap's 128 bytes: a 4-D tensor (d, rows, heads,
// batches) of 16-bit or float32 elements, boxes of 128 bytes (64 or 32 columns) × box_rows rows.
struct TensorMap {
  std::uint64_t tag;  // kTag: made by make_tensor_map below
  unsigned char* base;
  std::int64_t dims[4];
  std::int64_t strides[3];  // bytes between consecutive rows, heads, batches
  std::int32_t box_rows, elem_bytes;
};
constexpr std::uint64_t kTag = 0x46534c544d415031ull;
constexpr int kBoxBytes = 128;  // a box's row: the 128-byte swizzle's
static_assert(sizeof(TensorMap) <= sizeof(CUtensorMap), "the description fits the opaque map");

// hopper.cu's make_tensor_map, for the emulation: the same arguments (and DType::fp32), this
// description.
inline CUtensorMap make_tensor_map(const void* base, DType dtype, const Strides& strides, int d, int rows, int heads,
                                   int batches, int box_rows) {
  const Strides st = strides.or_dense(heads, rows, d);
  const std::int64_t e = static_cast<std::int64_t>(dtype_bytes(dtype));
  TensorMap t{};
  t.tag = kTag;
  t.base = static_cast<unsigned char*>(const_cast<void*>(base));
  t.dims[0] = d, t.dims[1] = rows, t.dims[2] = heads, t.dims[3] = batches;
  t.strides[0] = st.row * e, t.strides[1] = st.head * e, t.strides[2] = st.batch * e;
  t.box_rows = box_rows;
  t.elem_bytes = static_cast<std::int32_t>(e);
  CUtensorMap map{};
  std::memcpy(&map, &t, sizeof t);
  return map;
}
// hopper.cu's make_dq_acc_map: dQacc, float32 (B, H, N, d) in rows of tc_dq_acc_cols ≥ d floats,
// boxes of 32 columns × 64 rows.
inline CUtensorMap make_dq_acc_map(float* dq_acc, const Shape& s) {
  return make_tensor_map(dq_acc, DType::fp32, Strides{}.or_dense(s.H, s.N, tc::tc_dq_acc_cols(s)), s.d, s.N, s.H, s.B,
                         64);
}
// hopper.cu's make_tensor_map_fp8: bytes (cols, rows, heads, batches), dense, boxes of 128 columns.
inline CUtensorMap make_tensor_map_fp8(const void* base, int cols, int rows, int heads, int batches, int box_rows) {
  TensorMap t{};
  t.tag = kTag;
  t.base = static_cast<unsigned char*>(const_cast<void*>(base));
  t.dims[0] = cols, t.dims[1] = rows, t.dims[2] = heads, t.dims[3] = batches;
  t.strides[0] = cols, t.strides[1] = std::int64_t(cols) * rows, t.strides[2] = std::int64_t(cols) * rows * heads;
  t.box_rows = box_rows;
  t.elem_bytes = 1;
  CUtensorMap map{};
  std::memcpy(&map, &t, sizeof t);
  return map;
}

inline TensorMap read_map(const CUtensorMap* map) {
  TensorMap t;
  std::memcpy(&t, map, sizeof t);
  if (t.tag != kTag || (t.elem_bytes != 1 && t.elem_bytes != 2 && t.elem_bytes != 4))
    fail("a tensor map not made by emu_hopper::make_tensor_map");
  return t;
}

// Each element of the box at (c0, c1, c2, c3): its global address, or null outside the tensor,
// and its shared-memory address in the swizzled layout from `smem` (rows of 128 bytes).
template <typename F>
void for_box(const TensorMap& t, std::uint32_t smem, int c0, int c1, int c2, int c3, F&& f) {
  if (smem % 128 != 0) fail("TMA: a shared-memory box not 128-byte aligned");
  const bool slab = c2 >= 0 && c2 < t.dims[2] && c3 >= 0 && c3 < t.dims[3];
  for (int r = 0; r < t.box_rows; ++r)
    for (int c = 0; c < kBoxBytes / t.elem_bytes; ++c) {
      const std::int64_t col = std::int64_t(c0) + c, row = std::int64_t(c1) + r;
      const bool inside = slab && col >= 0 && col < t.dims[0] && row >= 0 && row < t.dims[1];
      unsigned char* g = inside ? t.base + c3 * t.strides[2] + c2 * t.strides[1] + row * t.strides[0] + col * t.elem_bytes
                                : nullptr;
      f(g, swizzle(smem + std::uint32_t(r * kBoxBytes + c * t.elem_bytes)));
    }
}

inline void tma_load(std::uint32_t dst, const CUtensorMap* map, std::uint32_t bar, int c0, int c1, int c2, int c3) {
  const TensorMap t = read_map(map);
  const std::size_t e = std::size_t(t.elem_bytes);
  for_box(t, dst, c0, c1, c2, c3, [&](const unsigned char* g, std::uint32_t s) {
    if (g) std::memcpy(at(s), g, e);
    else std::memset(at(s), 0, e);
  });
  mbar_complete_tx(bar, std::uint32_t(t.box_rows) * kBoxBytes);  // the whole box
}

inline void tma_store(const CUtensorMap* map, std::uint32_t src, int c0, int c1, int c2, int c3) {
  const TensorMap t = read_map(map);
  for_box(t, src, c0, c1, c2, c3, [&](unsigned char* g, std::uint32_t s) {
    if (g) std::memcpy(g, at(s), std::size_t(t.elem_bytes));
  });
}

// cp.reduce.async.bulk.tensor .add of a float32 box: each element of the tensor += the box's.
inline void tma_reduce_add(const CUtensorMap* map, std::uint32_t src, int c0, int c1, int c2, int c3) {
  const TensorMap t = read_map(map);
  if (t.elem_bytes != 4) fail("TMA reduce-add: a map of 16-bit elements (the emulation adds float32 only)");
  for_box(t, src, c0, c1, c2, c3, [&](unsigned char* g, std::uint32_t s) {
    if (!g) return;
    float x, y;
    std::memcpy(&x, g, 4);
    std::memcpy(&y, at(s), 4);
    x += y;
    std::memcpy(g, &x, 4);
  });
}

// ---- the deterministic backward's counters ----

// ld.acquire: a plain read. The CTAs run one at a time, so a thread that reads one value at one
// address kSpinReads times in a row spins on a counter that nothing will raise (a hang on the
// GPU): it waits for the value to change, which the emulator reports as a deadlock.
constexpr int kSpinReads = 1000;
inline int ld_acquire(const int* p) {
  struct Spin {
    const int* p;
    int value, reads;
  };
  static Spin spins[1024];  // by thread (a CTA has at most 1024)
  Spin& s = spins[threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)];
  const int v = *p;
  if (s.p != p || s.value != v) {
    s = {p, v, 1};
    return v;
  }
  if (++s.reads < kSpinReads) return v;
  s.reads = 0;
  fs::emu::wait_until([p, v] { return *p != v; });
  return *p;
}

// ---- wgmma ----

// A descriptor's fields (hopper.cuh, make_desc), in bytes.
struct Desc {
  std::uint32_t start, leading, stride;
};
inline Desc decode(std::uint64_t d) {
  if (d >> 62 != 1) fail("wgmma: a descriptor without the 128-byte swizzle");
  return {std::uint32_t(d & 0x3fff) << 4, std::uint32_t(d >> 16 & 0x3fff) << 4, std::uint32_t(d >> 32 & 0x3fff) << 4};
}
// Element (row, k) of a K-major operand of `eb`-byte elements: rows of 128 bytes, 8-row groups
// `stride` bytes apart, k along the row from the start address.
inline std::uint32_t k_major(const Desc& d, int row, int k, int eb = 2) {
  return d.start + std::uint32_t(row / 8) * d.stride + std::uint32_t(row % 8) * 128 + std::uint32_t(eb * k);
}
// Element (k, n) of an MN-major operand (16-bit): 64 n per 128-byte row, the next 64 `leading`
// bytes on, 8 k-rows per `stride` bytes.
inline std::uint32_t mn_major(const Desc& d, int k, int n) {
  return d.start + std::uint32_t(n / 64) * d.leading + std::uint32_t(k / 8) * d.stride + std::uint32_t(k % 8) * 128 +
         2 * std::uint32_t(n % 64);
}
// The element at a (swizzled) shared-memory address, as a float: 16-bit, or e4m3.
template <typename E>
float smem_element(std::uint32_t addr) {
  if constexpr (sizeof(E) == 1) {
    return fs::e4m3_value(*at(swizzle(addr)));
  } else {
    std::uint16_t h;
    std::memcpy(&h, at(swizzle(addr)), sizeof h);
    return tc::emu_mma::element<E>(h, 0);
  }
}

// What a thread gives the warpgroup: the operands every thread must agree on, and A's registers.
struct Operands {
  std::uint32_t a[4];
  std::uint64_t desc_a, desc_b;
  int accumulate;
};

// d (this thread's part of 64 × N) = A·B + (accumulate ? d : 0), A (64 × K) from a(row, k),
// B (K × N) from b(k, n): the warpgroup gathered first (every thread must issue the same wgmma).
// K = 16 for 16-bit elements, 32 for e4m3.
template <int N, int K, typename A, typename B>
void wgmma(float (&d)[N / 8][4], const Operands& mine, A&& a, B&& b) {
  Operands all[128];
  fs::emu::warpgroup_gather(&mine, sizeof mine, all);
  for (const Operands& o : all)
    if (o.desc_a != mine.desc_a || o.desc_b != mine.desc_b || o.accumulate != mine.accumulate)
      fail("wgmma: the warpgroup's threads issued different descriptors");
  const int warp = static_cast<int>(threadIdx.x % 128) / 32, lane = static_cast<int>(threadIdx.x % 32);
  const int g = lane / 4, t = lane % 4;
  float rows[2][K];
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < K; ++k) rows[h][k] = a(all, warp, g + 8 * h, k);
  for (int i = 0; i < N / 8; ++i)
    for (int e = 0; e < 4; ++e) {
      const int col = 8 * i + 2 * t + e % 2;
      float sum = mine.accumulate ? d[i][e] : 0.f;
      for (int k = 0; k < K; ++k) sum += rows[e / 2][k] * b(k, col);
      d[i][e] = sum;
    }
}

template <typename E>
constexpr int kStepK = 32 / static_cast<int>(sizeof(E));  // k per wgmma: 32 bytes of a row

// A and B in shared memory, K-major, or MN-major where kTransA, kTransB say so (16-bit only).
template <typename E, int N, bool kTransA = false, bool kTransB = false>
void wgmma_ss(float (&d)[N / 8][4], std::uint64_t desc_a, std::uint64_t desc_b, int accumulate) {
  constexpr int eb = static_cast<int>(sizeof(E));
  static_assert(eb == 2 || (!kTransA && !kTransB), "8-bit operands are K-major only");
  const Desc da = decode(desc_a), db = decode(desc_b);
  wgmma<N, kStepK<E>>(
      d, Operands{{}, desc_a, desc_b, accumulate},
      [&](const Operands*, int warp, int r, int k) {
        return smem_element<E>(kTransA ? mn_major(da, k, 16 * warp + r) : k_major(da, 16 * warp + r, k, eb));
      },
      [&](int k, int n) { return smem_element<E>(kTransB ? mn_major(db, k, n) : k_major(db, n, k, eb)); });
}

// A from registers (warp w's rows 16w .. 16w + 15), B MN-major (16-bit) or K-major (e4m3).
//   16-bit, mma.sync m16n8k16's A layout: row r, column k is lane 4(r mod 8) + (k mod 8) / 2,
//     register (r / 8) + 2 (k / 8), half k mod 2.
//   e4m3, m16n8k32's: lane 4(r mod 8) + (k mod 16) / 4, register (r / 8) + 2 (k / 16), byte k mod 4.
template <typename E, int N>
void wgmma_rs(float (&d)[N / 8][4], const std::uint32_t (&a)[4], std::uint64_t desc_b, int accumulate) {
  const Desc db = decode(desc_b);
  wgmma<N, kStepK<E>>(
      d, Operands{{a[0], a[1], a[2], a[3]}, 0, desc_b, accumulate},
      [&](const Operands* all, int warp, int r, int k) {
        if constexpr (sizeof(E) == 1) {
          const Operands& o = all[32 * warp + 4 * (r % 8) + (k % 16) / 4];
          return fs::e4m3_value(static_cast<std::uint8_t>(o.a[r / 8 + 2 * (k / 16)] >> (8 * (k % 4))));
        } else {
          const Operands& o = all[32 * warp + 4 * (r % 8) + (k % 8) / 2];
          return tc::emu_mma::element<E>(o.a[r / 8 + 2 * (k / 8)], k % 2);
        }
      },
      [&](int k, int n) {
        if constexpr (sizeof(E) == 1) return smem_element<E>(k_major(db, n, k, 1));
        else return smem_element<E>(mn_major(db, k, n));
      });
}

}  // namespace fs::hopper::emu_hopper
