// What a named configuration of step 09's backward implies (backward_configs.cuh names them:
// Fa3BwdConfig, DeterministicBwdConfig), from its fields
//
//   E                the elements (bf16 or fp16)
//   D                the head dimension, 64 or 128
//   kBlockN          keys per CTA, 64 per consumer warpgroup
//   kBlockM          queries per stage of the ring (Sᵀ is m64n128 or m64n64)
//   kStages          the ring's stages of Q, dO, LSE and D
//   kDeterministic   dQ's reduce-adds in the order of the key tiles (backward_dq.cuh)
//
// and what the kernel's roles share: the tensor maps (BwdMaps), the CTA's shared memory
// (BackwardSmem) and its tile of keys and the query tiles they meet (KeyTile, the backward's
// scheduler: one CTA per key tile of a head).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

#include "common/problem.hpp"
#include "steps/09_hopper/hopper.cuh"

namespace fs::hopper {

template <typename Cfg>
struct BackwardTraits {
  using E = typename Cfg::E;
  static constexpr int D = Cfg::D, kBlockN = Cfg::kBlockN, kBlockM = Cfg::kBlockM, kStages = Cfg::kStages;
  static_assert(D == 64 || D == 128, "the backward's warpgroups hold dK and dV of 64 keys × d: d = 64 or 128");
  static_assert(kBlockN == 128 && (kBlockM == 64 || kBlockM == 128),
                "two warpgroups of 64 keys; Sᵀ of m64n64 or m64n128");
  static constexpr int kConsumers = 2, kThreads = 128 * (kConsumers + 1);
  static constexpr int kColBlocks = D / 64;  // 64-column boxes (128 bytes of 16-bit elements)
  static constexpr int kProducerRegs = 24, kConsumerRegs = 240;
  static constexpr int kKVElems = kBlockN * D, kQElems = kBlockM * D;
  static constexpr int kDsElems = kBlockN * kBlockM;  // dSᵀ (keys × queries), kBlockM / 64 boxes
  static constexpr int kDqFloats = 64 * 64;           // a consumer's block of dQ: two boxes of 64 rows × 32 floats
  // K, V; Q and dO per stage; dSᵀ twice (a warpgroup may still read the last tile's while the other
  // writes this one's); each consumer's dQ block; LSE and D per stage; the barriers.
  static constexpr std::size_t kTileBytes =
      sizeof(E) * std::size_t(2 * kKVElems + 2 * kStages * kQElems + 2 * kDsElems) +
      sizeof(float) * std::size_t(kConsumers * kDqFloats + 2 * kStages * kBlockM);
  static constexpr int kBarriers = 1 + 2 * kStages;
  static constexpr std::size_t kSmemBytes = 1024 + kTileBytes + 8 * kBarriers;
  static_assert(kSmemBytes <= 227 * 1024, "a CTA's shared memory on sm_90");
};

// Q, K, V, dO (boxes of 64 columns × the tile's rows) and dQacc (float32, boxes of 32 columns × 64
// rows, the 128-byte swizzle) as TMA sees them.
struct BwdMaps {
  CUtensorMap q, k, v, dout, dq_acc;
};

// The CTA's shared memory: K and V (loaded once), kStages stages of Q, dO, LSE and D, dSᵀ twice,
// each consumer's block of dQ, then the barriers: full_kv (K and V have landed), and per stage
// full_q (Q and dO by TMA, LSE and D by the producer's warp 1) and empty_q (every consumer warp is
// done with the stage). The kernel lays it out (hopper_backward_kernel: made by a constructor
// here, the compiler arranged the kernel's instructions otherwise; common/recorder/same_ptx.py).
template <typename Cfg>
struct BackwardSmem {
  using T = BackwardTraits<Cfg>;
  using E = typename T::E;
  static constexpr int S = T::kStages, BM = T::kBlockM;
  E* sK;
  E* sV;
  E* sQ;      // [kStages]
  E* sdO;     // [kStages]
  E* sdS;     // [2]
  float* sdQ;     // [kConsumers]
  float* sLse;    // [kStages][BM]
  float* sDelta;  // [kStages][BM]
  std::uint64_t *full_kv, *full_q, *empty_q;  // the last two [kStages]

  // By one thread, before the CTA's first __syncthreads.
  __device__ __forceinline__ void init_barriers() const {
    mbar_init(full_kv, 1);
    for (int i = 0; i < S; ++i) {
      mbar_init(&full_q[i], 1 + 32);              // the TMA thread and warp 1's lanes
      mbar_init(&empty_q[i], T::kConsumers * 4);  // one arrival per consumer warp
    }
    fence_barrier_init();
  }
};

// The backward's scheduler: CTA (x, y) takes key tile x of head y, and walks the query tiles those
// keys meet — causal, from the tile of the first query that sees key0. Causal walks them from the
// last, which every key tile's CTA meets: the CTAs start there together, and in kDeterministic each
// waits one add for the key tile before it. Walked from the first, the CTA of key tile j would wait
// at its first query tile until key tile 0's CTA had come that far, holding its SM meanwhile. Both
// variants walk alike, so that their dK and dV (summed over the query tiles in this order) are the
// same bits.
template <bool kCausal, int BM, int BN>
struct KeyTile {
  const int bh, b, h;
  const std::int64_t kv_bh;  // K and V's head, as an index of their (B, kv heads) blocks
  const int n_block, key0, n_keys;
  const int m_begin, m_end, n_iter;  // the query tiles [m_begin, m_end), n_iter of them

  // N and H: the shape's, which the kernel has read.
  __device__ __forceinline__ KeyTile(const Shape& s, int N, int H)
      : bh(blockIdx.y),
        b(bh / H),
        h(bh % H),
        kv_bh(std::int64_t(b) * s.kv_heads() + h),
        n_block(blockIdx.x),
        key0(n_block * BN),
        n_keys(min(BN, N - key0)),
        m_begin(kCausal ? key0 / BM : 0),
        m_end((N + BM - 1) / BM),
        n_iter(m_end - m_begin) {}
  // The query tile of iteration it.
  __device__ __forceinline__ int m_of(int it) const { return kCausal ? m_end - 1 - it : m_begin + it; }
};

}  // namespace fs::hopper
