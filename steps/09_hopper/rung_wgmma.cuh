// The ladder's first rung, wgmma (WgmmaConfig, below): TMA and wgmma without a producer
// warpgroup. The CTA is the two consumer warpgroups alone, and consumer 0's first thread issues the
// copies between its own products: a work tile's Q and its first kStages key tiles when the work
// tile begins, then, at the top of tile t, tile t + kStages − 1 into the stage tile t − 1 held (the
// sequential schedule's hook, ForwardConsumer::sequential). The copies are the producer's own
// functions (forward_producer.cuh), recorded in lane 0 as the producer's are; ws, the next rung,
// gives them to a warpgroup of their own (kProducer).
//
// What it costs: the copies wait in line behind the products of the thread that issues them, and
// that thread's warp waits at each __syncwarp for it, so a copy is issued only when its consumer
// comes round to it — a ring kStages tiles deep, refilled one tile late.
#pragma once

#include "common/problem.hpp"
#include "common/recorder/device.cuh"
#include "steps/09_hopper/configs.cuh"
#include "steps/09_hopper/forward_producer.cuh"
#include "steps/09_hopper/tile_scheduler.cuh"
#include "steps/09_hopper/traits.cuh"

namespace fs::hopper {

template <typename Cfg, bool kTrace>
struct ConsumerCopies {
  static_assert(!Cfg::kProducer && !Cfg::kOverlap, "the copies between the products of the sequential schedule");
  static constexpr int S = Cfg::kStages;
  ForwardProducer<Cfg, kTrace> copier;
  const bool issuer = threadIdx.x == 0;  // consumer 0's first thread

  __device__ __forceinline__ ConsumerCopies(const TmaMaps& maps, const ForwardSmem<Cfg>& sm, const Shape& shape, int N,
                                            trace::CtaTracer<kTrace>& tr)
      : copier{maps, sm, shape, N, tr} {
    if (issuer) copier.prefetch_descriptors();
  }
  // Work tile wk (the k-th), its key tiles from ring position g: Q and the first kStages tiles.
  __device__ __forceinline__ void begin(const Work& wk, int g, int k) {
    if (issuer) {
      copier.load_q(wk, k);
      for (int t = 0; t < min(S, wk.n_tiles); ++t) {
        copier.load_k(wk, g, t);
        copier.load_v(wk, g, t);
      }
      copier.note_skipped(wk);
    }
    __syncwarp();  // warp 0 together again before its wgmma
  }
  // The top of key tile t: tile t + kStages − 1 into the stage tile t − 1 held (released when its
  // P̃V landed, at the end of tile t − 1).
  __device__ __forceinline__ void before_tile(const Work& wk, int g, int t) {
    const int n_tiles = wk.n_tiles;
    if (issuer && t > 0 && t + S - 1 < n_tiles) {
      copier.load_k(wk, g, t + S - 1);
      copier.load_v(wk, g, t + S - 1);
    }
    __syncwarp();  // warp 0 together again before its wgmma
  }
};

// wgmma: ws without the producer warpgroup, its copies issued by consumer 0's first thread (above);
// a CTA of two warpgroups.
template <typename E, int D>
struct WgmmaConfig : WsConfig<E, D> {
  static constexpr bool kProducer = false;
  template <typename Cfg, bool kTrace>
  using Copies = ConsumerCopies<Cfg, kTrace>;
};

}  // namespace fs::hopper
