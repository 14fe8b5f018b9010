// The backward's producer warpgroup. Its thread 0 loads K_j and V_j once, then Q_i and dO_i of
// every query tile the keys meet into a ring of kStages stages (TMA); its warp 1 copies LSE_i and
// D_i beside them, with plain loads and stores (rows past N get LSE = +inf and D = 0, so that their
// P is 0). A stage's full barrier completes on the TMA thread's arrival, its bytes and warp 1's 32
// arrivals; its empty barrier on an arrival per consumer warp.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/problem.hpp"
#include "common/recorder/device.cuh"
#include "steps/08_tensor_cores/flash_tc_backward.cuh"
#include "steps/09_hopper/backward_traits.cuh"
#include "steps/09_hopper/hopper.cuh"

namespace fs::hopper {

template <typename Cfg, bool kCausal, bool kTrace>
struct BackwardProducer {
  using T = BackwardTraits<Cfg>;
  using E = typename T::E;
  static constexpr int D = T::D, BM = T::kBlockM, BN = T::kBlockN, S = T::kStages, CB = T::kColBlocks;
  static constexpr std::int64_t kE = sizeof(E), kF = sizeof(float);
  const BwdMaps& maps;
  const BackwardSmem<Cfg>& sm;
  const KeyTile<kCausal, BM, BN>& kt;
  const int N;
  trace::CtaTracer<kTrace>& tr;  // lane 0: the copies and the waits for free stages

  // Thread 0: K_j and V_j, then Q_i and dO_i of each iteration into its stage, once the consumers
  // are done with what the stage held.
  __device__ __forceinline__ void load() const {
    tma_prefetch_descriptor(&maps.q);
    tma_prefetch_descriptor(&maps.dout);
    mbar_arrive_expect_tx(sm.full_kv, 2 * T::kKVElems * kE);
#pragma unroll
    for (int c = 0; c < CB; ++c) {
      tma_load_4d(sm.sK + c * BN * 64, &maps.k, sm.full_kv, 64 * c, kt.key0, kt.h, kt.b);
      tma_load_4d(sm.sV + c * BN * 64, &maps.v, sm.full_kv, 64 * c, kt.key0, kt.h, kt.b);
    }
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::K, kt.kv_bh, kt.key0, kt.n_keys, 0, D, kt.n_keys * D * kE);
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::V, kt.kv_bh, kt.key0, kt.n_keys, 0, D, kt.n_keys * D * kE);
    for (int it = 0; it < kt.n_iter; ++it) {
      const int stage = it % S, q0 = kt.m_of(it) * BM;
      if (it >= S) {
        mbar_wait(&sm.empty_q[stage], ((it / S) & 1) ^ 1);
        FS_TRACE_EVENT(tr, Kind::Wait, Tensor::None, kt.bh, q0, min(BM, N - q0), 0, 0, 0);
      }
      mbar_arrive_expect_tx(&sm.full_q[stage], 2 * T::kQElems * kE);
#pragma unroll
      for (int c = 0; c < CB; ++c) {
        tma_load_4d(sm.sQ + stage * T::kQElems + c * BM * 64, &maps.q, &sm.full_q[stage], 64 * c, q0, kt.h, kt.b);
        tma_load_4d(sm.sdO + stage * T::kQElems + c * BM * 64, &maps.dout, &sm.full_q[stage], 64 * c, q0, kt.h, kt.b);
      }
      const int n_q = min(BM, N - q0);
      FS_TRACE_EVENT(tr, Kind::Load, Tensor::Q, kt.bh, q0, n_q, 0, D, n_q * D * kE);
      FS_TRACE_EVENT(tr, Kind::Load, Tensor::dO, kt.bh, q0, n_q, 0, D, n_q * D * kE);
      FS_TRACE_EVENT(tr, Kind::Load, Tensor::LSE, kt.bh, q0, n_q, 0, 1, n_q * kF);
      FS_TRACE_EVENT(tr, Kind::Load, Tensor::D, kt.bh, q0, n_q, 0, 1, n_q * kF);
    }
  }

  // Warp 1: LSE_i (the preprocess's copy, step 08's tc_bwd_preprocess_kernel) and D_i of each
  // iteration into its stage.
  __device__ __forceinline__ void load_lse_d(const BwdParams& p, const float* delta, int lane) const {
    const float* gD = delta + std::int64_t(kt.bh) * N;
    const float* gL = delta + tc::tc_delta_floats(p.shape) + std::int64_t(kt.bh) * N;
    for (int it = 0; it < kt.n_iter; ++it) {
      const int stage = it % S, q0 = kt.m_of(it) * BM;
      if (it >= S) mbar_wait(&sm.empty_q[stage], ((it / S) & 1) ^ 1);
      for (int r = lane; r < BM; r += 32) {
        const int q = q0 + r;
        sm.sLse[stage * BM + r] = q < N ? gL[q] : INFINITY;
        sm.sDelta[stage * BM + r] = q < N ? gD[q] : 0.f;
      }
      mbar_arrive(&sm.full_q[stage]);
    }
  }
};

}  // namespace fs::hopper
