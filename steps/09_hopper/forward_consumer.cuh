// The forward's consumers: two warpgroups of 64 query rows each. Per key tile t of a work tile,
// S_t = Q K_tᵀ by wgmma from shared memory (Q and K), the online softmax in registers (the
// Softmax object, softmax.cuh; the mask first, mask.cuh), and O += P̃_t V_t by wgmma with P̃ from
// registers and V from shared memory. A consumer waits for a stage's full barrier before its
// product reads the stage and releases it (one arrival per warp on its empty barrier) once the
// product has landed, so that the producer can refill it.
//
// Two schedules of the same products (the kernel chooses by kOverlap, and walks the key tiles):
//   sequential   S_t, its softmax, P̃_tV_t, one after another (the ws and wgmma rungs).
//   overlapped   FlashAttention-3's intra-warpgroup overlap: S_{t+1} = QK_{t+1}ᵀ and
//                O += P̃_t V_t are issued together, and the softmax of S_{t+1} runs while the tensor
//                cores finish P̃_t V_t; O's rescale by α waits until that product has landed.
//                kPingPong: the two consumer warpgroups take turns to issue their products
//                (named barriers, Turns), so that one warpgroup's softmax runs while the other's
//                products keep the tensor cores busy.
// Every schedule gives the same bits: the same products and the same arithmetic in the same order.
#pragma once

#include <cstdint>

#include "common/recorder/device.cuh"
#include "steps/09_hopper/forward_producer.cuh"
#include "steps/09_hopper/hopper.cuh"
#include "steps/09_hopper/tile_scheduler.cuh"
#include "steps/09_hopper/traits.cuh"

namespace fs::hopper {

// Ping-pong's turns: warpgroup cw issues when the other one has issued (named barrier 1 + cw), and
// then lets it go (barrier 2 − cw). Without kPingPong they cost nothing.
template <bool kPingPong>
struct Turns {
  const int cw;
  __device__ __forceinline__ void mine() const {
    if constexpr (kPingPong) named_sync(1 + cw, 256);
  }
  __device__ __forceinline__ void yours() const {
    if constexpr (kPingPong) named_arrive(2 - cw, 256);
  }
};

template <typename Cfg, bool kTrace, typename VTile = VRows>
struct ForwardConsumer {
  using T = ForwardTraits<Cfg>;
  using E = typename T::E;
  static constexpr int D = T::D, BM = T::kBlockM, BN = T::kBlockN, S = T::kStages, BX = T::kBoxCols;
  static constexpr int NT = BN / 8, DT = D / 8, KD = D / T::kStepK, KN = BN / T::kStepK;
  static constexpr std::int64_t kE = sizeof(E);
  using Notes = ConsumerNotes<kTrace, BN, D>;
  // A key tile's registers: S_t (then P̃_t), α_t, and (the sequential schedule's) P̃_t rounded for
  // its product; the overlap carries that from one tile to the next in the kernel's pf instead. The
  // kernel declares a Tile in each iteration of its loop over the key tiles (see there).
  struct Tile {
    const int t;               // its index in the work tile
    float s[NT][4];            // left uninitialised: the first product writes it
    float alpha[2];            // the softmax's α
    std::uint32_t pf[KN][4];  // sequential: P̃_t as P̃V's A operand
    __device__ __forceinline__ explicit Tile(int index) : t(index) {}
  };
  const ForwardSmem<Cfg>& sm;
  const ConsumerThread& th;
  const Turns<Cfg::kPingPong> turns;
  // Descriptors (hopper.cuh, make_desc). Q and K: K-major, kStepK columns of d (32 bytes) per
  // step kk, box kk / 4; V: VTile's. Each is made once, at the tiles' first element, and moved by a
  // byte offset (desc_add) for each product: kk and half are constants of unrolled loops, the
  // stage's part one product a tile.
  const std::uint64_t q0, k0, v0;

  __device__ __forceinline__ ForwardConsumer(const ForwardSmem<Cfg>& smem, const ConsumerThread& thread)
      : sm(smem),
        th(thread),
        turns{thread.cw},
        q0(make_desc(smem.sQ + thread.cw * 64 * BX, 16, 1024)),
        k0(make_desc(smem.sK, 16, 1024)),
        v0(VTile::template desc<T>(smem.sV)) {}

  // A work tile's start (the k-th of the CTA, its key tiles from ring position g): O = 0, the
  // softmax's m = −∞ and ℓ = 0, the copies (the wgmma rung's), and Q has landed.
  template <typename Softmax, typename Copies>
  __device__ __forceinline__ void begin(float (&o)[1][DT][4], Softmax& softmax, Copies& copies, const Work& wk, int g,
                                        int k) const {
#pragma unroll
    for (int dt = 0; dt < DT; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[0][dt][e] = 0.f;
    softmax.begin(wk);
    copies.begin(wk, g, k);
    mbar_wait(sm.full_q, k & 1);
  }

  // ---- one product at a time (the ws and wgmma rungs): S_t, its softmax, P̃_t V_t ----
  template <typename Softmax, typename Mask, typename Copies>
  __device__ __forceinline__ void sequential(Tile& tile, float (&o)[1][DT][4], Softmax& softmax, const Mask& mask,
                                             Copies& copies, const Work& wk, int g, const Notes& notes) const {
    auto& s = tile.s;
    const int t = tile.t, n_tiles = wk.n_tiles;
    const Ring ring{g};
    const int stage = ring.stage(t), parity = ring.phase(t);
    copies.before_tile(wk, g, t);
    const auto scales = softmax.tile_scales(wk, t);
    mbar_wait(&sm.full_k[stage], parity);
    notes.wait();
    issue_s(s, stage);
    wgmma_wait<0>();
    fence_operands(s);
    release(sm.empty_k, stage);
    notes.keys(trace::Kind::ComputeS, trace::Tensor::S, t);
    if (t == n_tiles - 1) release(sm.empty_q, 0);  // the work tile's last S: Q can be refilled
    auto& alpha = tile.alpha;
    mask(s, t);
    softmax.step(s, t, scales, alpha);
    notes.keys(trace::Kind::Softmax, trace::Tensor::P, t);
    softmax.rescale(o[0], alpha);
    auto& pf = tile.pf;
    softmax.pack(s, pf);
    notes.o(trace::Kind::Rescale);
    mbar_wait(&sm.full_v[stage], parity);
    notes.wait();
    issue_pv(o, pf, stage);
    wgmma_wait<0>();
    fence_operands(o[0]);
    release(sm.empty_v, stage);
    notes.o(trace::Kind::AccumulateO);
  }

  // ---- the overlap: [S_0], then [S_t, P̃_{t−1}V_{t−1}] for t = 1 .. n − 1, then [P̃_{n−1}V_{n−1}] ----
  // With kPingPong these are the turns: each warpgroup's n + 1 turns alternate with the other's,
  // warpgroup 0 first (warpgroup 1 gives it the first turn, and owes no turn after its last).
  // pf carries P̃_{t−1} from one key tile to the next.

  // Tile 0: S and its softmax alone (O is 0: α does not matter).
  template <typename Softmax, typename Mask>
  __device__ __forceinline__ void overlap_first(Tile& tile, std::uint32_t (&pf)[KN][4], Softmax& softmax,
                                                const Mask& mask, const Work& wk, int g, const Notes& notes) const {
    auto& s = tile.s;
    auto& alpha = tile.alpha;
    if constexpr (Cfg::kPingPong)
      if (th.cw == 1) named_arrive(1, 256);
    const Ring ring{g};
    const auto scales = softmax.tile_scales(wk, 0);
    mbar_wait(&sm.full_k[ring.stage(0)], ring.phase(0));
    turns.mine();
    notes.wait();
    issue_s(s, ring.stage(0));
    turns.yours();
    wgmma_wait<0>();
    fence_operands(s);
    release(sm.empty_k, ring.stage(0));
    notes.keys(trace::Kind::ComputeS, trace::Tensor::S, 0);
    mask(s, 0);
    softmax.step(s, 0, scales, alpha);
    softmax.pack(s, pf);
    notes.keys(trace::Kind::Softmax, trace::Tensor::P, 0);
  }
  // Tile t ≥ 1: S_t and P̃_{t−1}V_{t−1} issued together; S_t's softmax while P̃V runs.
  template <typename Softmax, typename Mask>
  __device__ __forceinline__ void overlap(Tile& tile, float (&o)[1][DT][4], std::uint32_t (&pf)[KN][4],
                                          Softmax& softmax, const Mask& mask, const Work& wk, int g,
                                          const Notes& notes) const {
    auto& s = tile.s;
    const int t = tile.t;
    auto& alpha = tile.alpha;
    const Ring ring{g};
    const int stage = ring.stage(t), prev = ring.stage(t - 1);
    const auto scales = softmax.tile_scales(wk, t);
    mbar_wait(&sm.full_k[stage], ring.phase(t));
    mbar_wait(&sm.full_v[prev], ring.phase(t - 1));
    turns.mine();
    notes.wait();
    issue_s(s, stage);      // S_t = Q K_tᵀ
    issue_pv(o, pf, prev);  // O += P̃_{t−1} V_{t−1}
    turns.yours();
    wgmma_wait<1>();  // S_t has landed (groups complete in order); P̃V is still running
    fence_operands(s);
    release(sm.empty_k, stage);
    notes.keys(trace::Kind::ComputeS, trace::Tensor::S, t);
    mask(s, t);
    softmax.step(s, t, scales, alpha);
    notes.keys(trace::Kind::Softmax, trace::Tensor::P, t);
    wgmma_wait<0>();
    fence_operands(o[0]);
    release(sm.empty_v, prev);
    notes.o(trace::Kind::AccumulateO);  // P̃_{t−1}V_{t−1}, which ran beside the softmax
    softmax.rescale(o[0], alpha);
    softmax.pack(s, pf);  // only now: pf fed P̃_{t−1}V_{t−1} (see Pitfalls on rounding P̃_t earlier)
    notes.o(trace::Kind::Rescale);
  }
  // After the last tile: Q's stage released (every S of the work tile has landed), the last P̃V.
  __device__ __forceinline__ void overlap_last(float (&o)[1][DT][4], std::uint32_t (&pf)[KN][4], int g, int n_tiles,
                                               const Notes& notes) const {
    const Ring ring{g};
    release(sm.empty_q, 0);
    const int last = ring.stage(n_tiles - 1);
    mbar_wait(&sm.full_v[last], ring.phase(n_tiles - 1));
    turns.mine();
    notes.wait();
    issue_pv(o, pf, last);
    if (th.cw == 0) turns.yours();
    wgmma_wait<0>();
    fence_operands(o[0]);
    release(sm.empty_v, last);
    notes.o(trace::Kind::AccumulateO);
  }

 private:
  // Key tile t of a work tile whose tiles start at ring position g: its stage, and its phase's parity.
  struct Ring {
    const int& g;
    __device__ __forceinline__ int stage(int t) const { return (g + t) % S; }
    __device__ __forceinline__ int phase(int t) const { return ((g + t) / S) & 1; }
  };
  __device__ __forceinline__ std::uint64_t q_desc(int kk) const {
    return desc_add(q0, kE * ((kk / 4) * BM * BX + (kk % 4) * T::kStepK));
  }
  __device__ __forceinline__ std::uint64_t k_desc(int stage, int kk) const {
    return desc_add(k0, kE * (stage * T::kKVElems + (kk / 4) * BN * BX + (kk % 4) * T::kStepK));
  }
  // S = Q K_tᵀ, issued (not waited for).
  __device__ __forceinline__ void issue_s(float (&s)[NT][4], int stage) const {
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < KD; ++kk) wgmma_ss<E, BN>(s, q_desc(kk), k_desc(stage, kk), kk > 0);
    wgmma_commit();
  }
  // O += P̃ V_t, issued.
  __device__ __forceinline__ void issue_pv(float (&o)[1][DT][4], std::uint32_t (&pf)[KN][4], int stage) const {
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < KN; ++kk)
#pragma unroll
      for (int half = 0; half < D / T::kONt; ++half)
        wgmma_rs<E, T::kONt>(*reinterpret_cast<float(*)[T::kONt / 8][4]>(&o[0][half * T::kONt / 8]), pf[kk],
                             VTile::template at<T>(v0, stage, kk, half), 1);
    wgmma_commit();
  }
  // One arrival per warp on the stage's empty barrier: the warp is done with the tile there.
  __device__ __forceinline__ void release(std::uint64_t* empty, int stage) const {
    __syncwarp();
    if (th.lane == 0) mbar_arrive(&empty[stage]);
  }
};

}  // namespace fs::hopper
