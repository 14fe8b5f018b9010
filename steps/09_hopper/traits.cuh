// What a named configuration of step 09's forward implies (configs.cuh names them: Fa3Config and the
// ladder's rungs; flash_hopper_fp8.cuh Fp8Config): the threads and their registers, the boxes TMA
// moves, and shared memory's layout and bytes, computed once here from the config's fields
//
//   E, EO       the elements the tensor cores read (16-bit, or e4m3), and O's
//   D           the head dimension
//   kBlockM     query rows per CTA (two consumer warpgroups of 64)
//   kBlockN     keys per tile
//   kStages     K and V tiles in flight: the ring's stages
//   kProducer   a producer warpgroup issues the copies (false: consumer 0's first thread, rung_wgmma.cuh)
//   kOverlap    FlashAttention-3's intra-warpgroup overlap (forward_consumer.cuh)
//   kPingPong   the two consumer warpgroups take turns at the tensor cores
//   kPersistent one CTA per SM walking the work tiles (tile_scheduler.cuh; not causal)
//   kTmaStore   O leaves through shared memory and a TMA store (forward_epilogue.cuh)
//   Copies      who issues the copies, as the consumers see it: ProducerCopies, or the wgmma rung's
//               ConsumerCopies
//
// and what the kernel's roles share: the tensor maps (TmaMaps), the CTA's shared memory
// (ForwardSmem), a consumer thread's place (ConsumerThread) and its warpgroup's trace events
// (ConsumerNotes).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "common/recorder/device.cuh"
#include "steps/09_hopper/hopper.cuh"
#include "steps/09_hopper/tile_scheduler.cuh"

namespace fs::hopper {

template <typename Cfg>
struct ForwardTraits {
  using E = typename Cfg::E;
  using EO = typename Cfg::EO;
  static constexpr int D = Cfg::D, kBlockM = Cfg::kBlockM, kBlockN = Cfg::kBlockN, kStages = Cfg::kStages;
  static constexpr bool kFp8 = kIsFp8<E>;
  static_assert(kBlockM == 128, "two consumer warpgroups of 64 query rows");
  static_assert(Cfg::kProducer || (!Cfg::kOverlap && !Cfg::kPersistent),
                "without a producer: one product at a time, a CTA per tile");
  static_assert(sizeof(EO) == 2 && (kFp8 || std::is_same_v<E, EO>), "O in the 16-bit type of the problem");
  static_assert(!Cfg::kPingPong || Cfg::kOverlap, "ping-pong takes turns at the products the overlap issues together");
  static_assert(!Cfg::kOverlap || kStages >= 2, "the overlap holds tile t − 1's stage while it waits for tile t's");
  static_assert(D % 64 == 0 && D <= 256, "d in 64-column boxes (the 128-byte swizzle of 16-bit elements)");
  static_assert(kBlockN == 64 || kBlockN == 128 || (kFp8 && kBlockN == 224), "S's wgmma: m64n64, m64n128, m64n224");
  static_assert(!kFp8 || (D == 128 && kBlockN <= 256), "fp8: d = 128 (one box of Q and K; one box of K's rows)");
  static_assert(!Cfg::kTmaStore || D <= 128, "O's tile for the TMA store beside the others: d ≤ 128");
  static constexpr int kConsumers = 2;                                           // warpgroups of 64 query rows
  static constexpr int kThreads = 128 * (kConsumers + (Cfg::kProducer ? 1 : 0));  // and the producer
  static constexpr int kBoxCols = 128 / int(sizeof(E));  // a 128-byte row of the swizzle
  static constexpr int kStepK = 32 / int(sizeof(E));     // k per wgmma: k16, or k32 for e4m3
  static constexpr int kColBlocks = D / kBoxCols;
  static constexpr int kQElems = kBlockM * D, kKVElems = kBlockN * D;
  // wgmma reads 8-bit operands K-major only: e4m3's V arrives as Vᵀ (the quantizer writes it so), d
  // rows of the tile's keys in boxes of 128 keys (the 128-byte swizzle's rows); a tile of 224 keys
  // takes two, the second's last 32 keys being the next tile's (never read).
  static constexpr bool kVTransposed = sizeof(E) == 1;
  static constexpr int kVBoxes = kVTransposed ? (kBlockN + 127) / 128 : 1;
  static constexpr int kVElems = kVTransposed ? kVBoxes * 128 * D : kKVElems;
  static constexpr int kONt = D < 128 ? D : 128;  // columns of O per P̃V wgmma
  // Registers per thread: the producer gives its back, the consumers take them (65536 in all).
  static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
  // Q, then K's stages, then V's, each tile kColBlocks boxes of (rows × 64) one after another;
  // then O's tile (kTmaStore); then the barriers. 1024 bytes of slack: the swizzle needs 1024-byte
  // aligned tiles.
  static constexpr int kBarriers = 2 + 4 * kStages;
  static constexpr int kOElems = Cfg::kTmaStore ? kBlockM * D : 0;
  static constexpr std::size_t kTileBytes =
      sizeof(E) * std::size_t(kQElems + kStages * (kKVElems + kVElems)) + sizeof(EO) * std::size_t(kOElems);
  static constexpr std::size_t kSmemBytes = 1024 + kTileBytes + 8 * kBarriers;
  static_assert(kSmemBytes <= 227 * 1024, "a CTA's shared memory on sm_90");
};

// Q, K and V as TMA sees them: 4-D tensors (d, rows, heads, batches), boxes of 128 bytes of a
// row (64 16-bit columns, 128 e4m3 ones); the fp8 forward's V is Vᵀ (keys, d, heads, batches).
struct TmaMaps {
  CUtensorMap q, k, v, o;  // o: boxes of 64 rows (a consumer warpgroup's), for kTmaStore
  // The fp8 forward's block scales (fp8.cuh), (B·H, blocks_q) for Q, (B·H, blocks_kv) for
  // K and V; null in the 16-bit forward, which reads none of them.
  const float *scale_q = nullptr, *scale_k = nullptr, *scale_v = nullptr;
  int blocks_q = 0, blocks_kv = 0;
};

// The CTA's shared memory: Q, kStages stages of K and of V, O's tile, then the barriers of the ring.
// Each stage has mbarriers: full_k and full_v (the copy's bytes have landed), and empty_k and
// empty_v (every consumer warp is done with the tile, so the stage can be refilled). K and V have
// barriers of their own because they are done with at different times: K when S has landed, V
// only when P̃V has — a tile later, with kOverlap — and K_{t+1} should not wait for V_{t−1}. Q has
// its pair too, for the next work tile's Q (kPersistent).
template <typename Cfg>
struct ForwardSmem {
  using T = ForwardTraits<Cfg>;
  using E = typename T::E;
  using EO = typename T::EO;
  static constexpr int S = T::kStages;
  E* sQ;   // CB boxes of BM × 64
  E* sK;   // kStages × (CB boxes of BN × 64)
  E* sV;   // likewise (Vᵀ: kVBoxes boxes of d × 128 keys)
  EO* sO;  // kTmaStore: O's tile, in 64-column boxes
  std::uint64_t *full_q, *empty_q, *full_k, *full_v, *empty_k, *empty_v;  // the last four [kStages]

  __device__ __forceinline__ explicit ForwardSmem(unsigned char* raw) {
    sQ = reinterpret_cast<E*>((reinterpret_cast<std::uintptr_t>(raw) + 1023) & ~std::uintptr_t(1023));
    sK = sQ + T::kQElems;
    sV = sK + S * T::kKVElems;
    sO = reinterpret_cast<EO*>(sV + S * T::kVElems);
    std::uint64_t* bars = reinterpret_cast<std::uint64_t*>(sO + T::kOElems);
    full_q = bars;
    empty_q = bars + 1;
    full_k = bars + 2;
    full_v = bars + 2 + S;
    empty_k = bars + 2 + 2 * S;
    empty_v = bars + 2 + 3 * S;
  }

  // By one thread, before the CTA's first __syncthreads: a full barrier completes on its one
  // arrival (the copier's expect_tx) and the bytes, an empty one on an arrival per consumer warp.
  __device__ __forceinline__ void init_barriers() const {
    mbar_init(full_q, 1);
    mbar_init(empty_q, T::kConsumers * 4);
    for (int i = 0; i < S; ++i) {
      mbar_init(&full_k[i], 1);
      mbar_init(&full_v[i], 1);
      mbar_init(&empty_k[i], T::kConsumers * 4);
      mbar_init(&empty_v[i], T::kConsumers * 4);
    }
    fence_barrier_init();
  }
};

// A consumer thread: its warpgroup cw (rows [64 cw, 64 cw + 64) of the work tile), its warp's
// first row in the work tile, its lane (g = lane / 4 and t4 = lane mod 4 in the fragments).
struct ConsumerThread {
  const int cw, warp, lane, t4, wrow0;
  __device__ __forceinline__ explicit ConsumerThread(int cw_)
      : cw(cw_), warp((threadIdx.x % 128) / 32), lane(threadIdx.x % 32), t4(lane % 4), wrow0(64 * cw + 16 * warp) {}
};

// A consumer warpgroup's trace events (kTrace, lanes 1 and 2): its 64 rows of the work tile (none
// in a short last tile), their waits, products, softmax and stores.
template <bool kTrace, int BN, int D>
struct ConsumerNotes {
  trace::CtaTracer<kTrace>& ctr;
  const int bh, row0, rows, N;
  __device__ __forceinline__ ConsumerNotes(trace::CtaTracer<kTrace>& tracer, const Work& wk, int cw, int n)
      : ctr(tracer), bh(wk.bh), row0(wk.row0 + 64 * cw), rows(max(0, min(64, n - row0))), N(n) {}
  __device__ __forceinline__ void note(trace::Kind kind, trace::Tensor tensor, int col0, int cols,
                                       std::int64_t bytes) const {
    if (rows > 0) ctr.event(kind, tensor, bh, row0, rows, col0, cols, bytes);
  }
  __device__ __forceinline__ void wait() const { note(trace::Kind::Wait, trace::Tensor::None, 0, 0, 0); }
  __device__ __forceinline__ void keys(trace::Kind kind, trace::Tensor tensor, int t) const {
    note(kind, tensor, t * BN, min(BN, N - t * BN), 0);
  }
  __device__ __forceinline__ void o(trace::Kind kind) const { note(kind, trace::Tensor::O, 0, D, 0); }
};

}  // namespace fs::hopper
