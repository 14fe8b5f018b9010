// The forward's tile scheduler: which work tiles a CTA takes, in which order, and the grid.
//
// A work tile is 128 query rows of one head: the CTA's producer loads its Q once and streams the
// key tiles it visits (causal: none past its last row's diagonal key), its two consumers compute
// its O. The list of work tiles is walked by every CTA from blockIdx.x in steps of gridDim.x, so
// a grid of one CTA per work tile takes one each, and a persistent grid (kPersistent, one CTA per
// SM) takes every gridDim.x-th: the producer then loads the next work tile's Q and K while the
// consumers store the last one's O. Producer and consumers walk the same list, each with its own
// ForwardScheduler, and each keeps the ring's position: g, the K/V tiles of the CTA's work tiles
// before this one, so that the ring's stages and phases run on across work tiles (key tile t of the
// work tile is stage (g + t) mod kStages, phase (g + t) / kStages), and k, the work tiles before
// it (Q's phase).
#pragma once

#include <algorithm>
#include <cstdint>

#include "common/problem.hpp"

namespace fs::hopper {

// One work tile: query rows [row0, row0 + rows) of head bh (batch b, head h; K/V head h_kv),
// and the key tiles it visits (causal: none past its last row's diagonal key).
struct Work {
  int row0, rows, bh, b, h, h_kv, n_tiles;
};
// Work tile w of the grid's list. Causal: the longest rows first (the last query tiles of every
// head, then the ones before), so that the short ones fill in at the end; otherwise head by head,
// so that the CTAs running together share their K and V in L2.
template <bool kCausal, int BM, int BN>
__device__ __forceinline__ Work work_tile(int w, int n_qtiles, const Shape& s) {
  const int heads = s.B * s.H;
  const int tile = kCausal ? n_qtiles - 1 - w / heads : w % n_qtiles;
  const int bh = kCausal ? w % heads : w / n_qtiles;
  const int row0 = tile * BM, rows = min(BM, s.N - row0);
  const int key_end = kCausal ? min(s.N, row0 + rows) : s.N;
  const int h = bh % s.H;
  return {row0, rows, bh, bh / s.H, h, h / (s.H / s.kv_heads()), (key_end + BN - 1) / BN};
}
// The K/V head of a work tile, as an index of the (B, kv heads) blocks of K and V.
__device__ __forceinline__ std::int64_t kv_head(const Work& w, const Shape& s) {
  return std::int64_t(w.b) * s.kv_heads() + w.h_kv;
}

// A CTA's walk: for (int w = blockIdx.x; w < sched.n_work; w += gridDim.x) ... sched.work(w).
template <bool kCausal, int BM, int BN>
struct ForwardScheduler {
  const Shape& s;
  const int n_qtiles, n_work;

  // N and H: the shape's, which the kernel has read.
  __device__ __forceinline__ ForwardScheduler(const Shape& shape, int N, int H)
      : s(shape), n_qtiles((N + BM - 1) / BM), n_work(n_qtiles * shape.B * H) {}
  __device__ __forceinline__ Work work(int w) const { return work_tile<kCausal, BM, BN>(w, n_qtiles, s); }
};

int sm_count();  // of the current device (hopper.cu)

// The grid: one CTA per work tile (query tiles × B·H), or (persistent) one per SM, each taking
// every gridDim.x-th work tile; 0 where there is no work. The launcher asks for a persistent grid
// only where the work tiles are alike (not causal): causal ones differ in length, and a fixed share
// per SM leaves some SMs idle at the end, where the hardware's scheduler, handing out CTAs as SMs
// free up, balances them better.
inline unsigned forward_grid(const Shape& s, int block_m, bool persistent) {
  const std::int64_t work = std::int64_t((s.N + block_m - 1) / block_m) * s.heads();
  return static_cast<unsigned>(persistent ? std::min<std::int64_t>(work, sm_count()) : work);
}

}  // namespace fs::hopper
