// The forward's producer: one thread issues every copy, by TMA, into the CTA's shared memory — a
// work tile's Q once, then its key tiles' K and V into the ring of kStages stages (traits.cuh,
// ForwardSmem), each copy completing its bytes on the stage's full barrier, each stage refilled
// once the consumers have released it (its empty barrier).
//
// K_t is loaded before V_{t−1}: the consumers need S_t = Q K_tᵀ before P̃_{t−1}V_{t−1} (the
// overlap issues them together), so K runs a tile ahead. The producer warpgroup keeps few
// registers (setmaxnreg, in the kernel); in the wgmma rung the same copies are issued by a
// consumer's thread between its products (rung_wgmma.cuh).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "common/problem.hpp"
#include "common/recorder/device.cuh"
#include "steps/09_hopper/hopper.cuh"
#include "steps/09_hopper/tile_scheduler.cuh"
#include "steps/09_hopper/traits.cuh"

namespace fs::hopper {

// A key tile's rows into shared memory: BN rows of d, in kColBlocks boxes of (BN rows × 128
// bytes) one after another (K, and 16-bit V), at key row t·BN of the work tile's K/V head.
template <typename T>
__device__ __forceinline__ void load_key_rows(typename T::E* dst, const CUtensorMap* map, std::uint64_t* bar, int t,
                                              const Work& wk) {
#pragma unroll
  for (int c = 0; c < T::kColBlocks; ++c)
    tma_load_4d(dst + c * T::kBlockN * T::kBoxCols, map, bar, T::kBoxCols * c, t * T::kBlockN, wk.h_kv, wk.b);
}

// V as HBM holds it, in K's boxes (16-bit V): P̃V's B operand, which wgmma reads MN-major (its n
// index, d, along the 128-byte rows; k, the key, down them). The fp8 forward's V arrives
// transposed instead (flash_hopper_fp8.cuh, VTransposed).
struct VRows {
  template <typename T>
  __device__ __forceinline__ static void load(typename T::E* dst, const CUtensorMap* map, std::uint64_t* bar, int t,
                                              const Work& wk) {
    load_key_rows<T>(dst, map, bar, t, wk);
  }
  // The descriptor of stage 0's tile (hopper.cuh, make_desc): 16 keys per k-step (2048 bytes),
  // d's 64-column boxes BN · 128 bytes apart.
  template <typename T>
  __device__ __forceinline__ static std::uint64_t desc(const typename T::E* sV) {
    return make_desc(sV, T::kBlockN * 128, 1024);
  }
  // P̃V's k-step kk over the keys, for columns [half · kONt, +kONt) of O, in stage `stage`.
  template <typename T>
  __device__ __forceinline__ static std::uint64_t at(std::uint64_t v0, int stage, int kk, int half) {
    constexpr std::int64_t kE = sizeof(typename T::E);
    return desc_add(v0, kE * (stage * T::kKVElems + half * 2 * T::kBlockN * 64 + kk * 16 * 64));
  }
};

template <typename Cfg, bool kTrace, typename VTile = VRows>
struct ForwardProducer {
  using T = ForwardTraits<Cfg>;
  using E = typename T::E;
  static constexpr int D = T::D, BM = T::kBlockM, BN = T::kBlockN, S = T::kStages;
  static constexpr int CB = T::kColBlocks, BX = T::kBoxCols;
  static constexpr std::int64_t kE = sizeof(E);
  const TmaMaps& maps;
  const ForwardSmem<Cfg>& sm;
  const Shape& shape;
  const int N;
  trace::CtaTracer<kTrace>& tr;  // lane 0: the copies and the waits for free stages

  __device__ __forceinline__ void prefetch_descriptors() const {
    tma_prefetch_descriptor(&maps.q);
    tma_prefetch_descriptor(&maps.k);
    tma_prefetch_descriptor(&maps.v);
  }

  // Q of work tile wk (the k-th of the CTA): once the consumers are done with the previous work
  // tile's (its last S has landed).
  __device__ __forceinline__ void load_q(const Work& wk, int k) {
    if (k > 0) {
      mbar_wait(sm.empty_q, (k - 1) & 1);
      FS_TRACE_EVENT(tr, Kind::Wait, Tensor::None, wk.bh, wk.row0, wk.rows, 0, 0, 0);
    }
    mbar_arrive_expect_tx(sm.full_q, T::kQElems * kE);
#pragma unroll
    for (int c = 0; c < CB; ++c) tma_load_4d(sm.sQ + c * BM * BX, &maps.q, sm.full_q, BX * c, wk.row0, wk.h, wk.b);
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::Q, wk.bh, wk.row0, wk.rows, 0, D, wk.rows * D * kE);
  }
  // K_t and V_t of work tile wk, whose key tiles start at ring position g: once the consumers are
  // done with what its stage held.
  __device__ __forceinline__ void load_k(const Work& wk, int g, int t) { load_kv(wk, g, t, false); }
  __device__ __forceinline__ void load_v(const Work& wk, int g, int t) { load_kv(wk, g, t, true); }

  // Keys a causal work tile never reads, for the trace.
  __device__ __forceinline__ void note_skipped(const Work& wk) {
    if constexpr (kTrace)
      if (wk.n_tiles * BN < N)
        FS_TRACE_EVENT(tr, Kind::Skip, Tensor::S, wk.bh, wk.row0, wk.rows, wk.n_tiles * BN, N - wk.n_tiles * BN, 0);
  }

  // The producer's thread: every work tile of the CTA's walk, in the consumers' order.
  template <typename Scheduler>
  __device__ __forceinline__ void load(const Scheduler& sched) {
    prefetch_descriptors();
    int k = 0, g = 0;  // the ring's position (in this order: the compiler numbers them so)
    for (int w = blockIdx.x; w < sched.n_work; w += gridDim.x, ++k) {
      const Work wk = sched.work(w);
      load_q(wk, k);
      // K_t, then V_{t−1}: K runs a tile ahead, as the consumers need it (S_t before
      // P̃_{t−1}V_{t−1}).
      for (int t = 0; t <= wk.n_tiles; ++t) {
        if (t < wk.n_tiles) load_k(wk, g, t);
        if (t > 0) load_v(wk, g, t - 1);
      }
      note_skipped(wk);
      g += wk.n_tiles;
    }
  }

 private:
  __device__ __forceinline__ int keys(int j0) const { return min(BN, N - j0); }
  __device__ __forceinline__ void load_kv(const Work& wk, int g, int t, bool v) {
    const CUtensorMap* map = v ? &maps.v : &maps.k;
    std::uint64_t *full = v ? sm.full_v : sm.full_k, *empty = v ? sm.empty_v : sm.empty_k;
    const int i = g + t, stage = i % S;
    if (i >= S) {
      mbar_wait(&empty[stage], ((i / S) & 1) ^ 1);
      FS_TRACE_EVENT(tr, Kind::Wait, Tensor::None, kv_head(wk, shape), t * BN, keys(t * BN), 0, 0, 0);
    }
    E* dst = v ? sm.sV + stage * T::kVElems : sm.sK + stage * T::kKVElems;
    mbar_arrive_expect_tx(&full[stage], (v ? T::kVElems : T::kKVElems) * kE);
    if (v)
      VTile::template load<T>(dst, map, &full[stage], t, wk);
    else
      load_key_rows<T>(dst, map, &full[stage], t, wk);
    const int j0 = t * BN;
    if (v) FS_TRACE_EVENT(tr, Kind::Load, Tensor::V, kv_head(wk, shape), j0, keys(j0), 0, D, keys(j0) * D * kE);
    else FS_TRACE_EVENT(tr, Kind::Load, Tensor::K, kv_head(wk, shape), j0, keys(j0), 0, D, keys(j0) * D * kE);
  }
};

// The copies when a producer warpgroup issues them (a config's Copies, configs.cuh): nothing for a
// consumer to do. The wgmma rung's consumer 0 issues them itself (ConsumerCopies, rung_wgmma.cuh).
template <typename Cfg, bool kTrace>
struct ProducerCopies {
  static_assert(Cfg::kProducer, "the copies are the producer warpgroup's");
  template <typename... Any>
  __device__ __forceinline__ explicit ProducerCopies(const Any&...) {}
  __device__ __forceinline__ void begin(const Work&, int, int) {}
  __device__ __forceinline__ void before_tile(const Work&, int, int) {}
};

}  // namespace fs::hopper
