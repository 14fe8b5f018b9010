// Step 09's backward: step 08's recomputation backward (the same passes, the same P and dS, bit
// for bit the same formulas) with its five matrix products on wgmma and its tiles moved by TMA,
// the way FlashAttention-3 runs it on the H100, in roles:
//
//   tc_bwd_preprocess_kernel   step 08's: D = rowsum(dO ∘ O), LSE's copy (+inf where a row saw no
//                              key), dQacc = 0 (a float32 copy of dQ's shape).
//   hopper_backward_kernel     one CTA per tile of 128 keys of a head (KeyTile, backward_traits.cuh),
//                              three warpgroups:
//     warpgroup 0, the producer (backward_producer.cuh): K_j and V_j once, then Q_i, dO_i, LSE_i and
//       D_i of every query tile the keys meet, into a ring of kStages stages.
//     warpgroups 1 and 2, the consumers (backward_consumer.cuh): 64 keys each, Sᵀ and dPᵀ, P and
//       dS, dV and dK accumulated in registers, and a block of dQ_i, which backward_dq.cuh adds to
//       dQacc by a TMA reduce-add (kDeterministic: in the order of the key tiles).
//   tc_dq_convert_kernel       step 08's: dQ = τ dQacc in the run's element type.
//
// The tiles: 128 keys per CTA (64 per consumer); query tiles of 64 rows at d = 128, 128 at d = 64
// (Sᵀ of m64n64 or m64n128). d = 256 does not fit: a warpgroup's dK and dV of 64 keys would be
// 256 registers a thread, before S and dP (step 08 splits d over two CTAs there).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <type_traits>

#include "common/problem.hpp"
#include "common/recorder/device.cuh"
#include "common/recorder/launch.cuh"
#include "steps/08_tensor_cores/flash_tc_backward.cuh"
#include "steps/09_hopper/backward_consumer.cuh"
#include "steps/09_hopper/backward_dq.cuh"
#include "steps/09_hopper/backward_producer.cuh"
#include "steps/09_hopper/backward_traits.cuh"
#include "steps/09_hopper/flash_hopper_forward.cuh"
#include "steps/09_hopper/hopper.cuh"

namespace fs::hopper {

// The plain problem (NoFeatures) at any d ≤ the kernel's D (variants.hpp, runs_head_dim): step 08's
// store of dK and dV stops at the run's d (head_cols).
struct PlainAnyHeadDim : NoFeatures {
  using NoFeatures::NoFeatures;
  static constexpr bool kAnyHeadDim = true;
};

template <typename Cfg, bool kCausal, bool kTrace>
__global__ void __launch_bounds__(BackwardTraits<Cfg>::kThreads, 1)
    hopper_backward_kernel(const __grid_constant__ BwdMaps maps, const BwdParams p, const float* __restrict__ delta,
                           int* __restrict__ dq_order, trace::Slices slices) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(FS_EMULATION)
  using T = BackwardTraits<Cfg>;
  using Consumer = BackwardConsumer<Cfg, kCausal, kTrace>;
  using E = typename T::E;
  constexpr int D = T::D, BM = T::kBlockM, BN = T::kBlockN, S = T::kStages;
  // Traced (kTrace), each warpgroup records its own lane, as in the forward: lane 0 the producer's
  // copies and waits, lanes 1 and 2 each consumer's waits, products, dQ adds and dK, dV stores.
  trace::CtaTracer<kTrace> tr(slices);
  extern __shared__ unsigned char smem_raw[];
  E* sK = reinterpret_cast<E*>((reinterpret_cast<std::uintptr_t>(smem_raw) + 1023) & ~std::uintptr_t(1023));
  E* sV = sK + T::kKVElems;
  E* sQ = sV + T::kKVElems;     // [kStages]
  E* sdO = sQ + S * T::kQElems;  // [kStages]
  E* sdS = sdO + S * T::kQElems;  // [2]
  float* sdQ = reinterpret_cast<float*>(sdS + 2 * T::kDsElems);  // [kConsumers]
  float* sLse = sdQ + T::kConsumers * T::kDqFloats;             // [kStages][BM]
  float* sDelta = sLse + S * BM;                                // [kStages][BM]
  std::uint64_t* bars = reinterpret_cast<std::uint64_t*>(sDelta + S * BM);
  const BackwardSmem<Cfg> sm{sK, sV, sQ, sdO, sdS, sdQ, sLse, sDelta, bars, bars + 1, bars + 1 + S};
  const int N = p.shape.N, H = p.shape.H;
  const KeyTile<kCausal, BM, BN> kt(p.shape, N, H);

  if (threadIdx.x == 0) sm.init_barriers();
  __syncthreads();  // the barriers are initialised before any thread waits on one or a copy names it

  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    // ---- the producer (backward_producer.cuh) ----
    setmaxnreg_dec<T::kProducerRegs>();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const BackwardProducer<Cfg, kCausal, kTrace> load{maps, sm, kt, N, tr};
    if (threadIdx.x == 0) load.load();
    else if (warp == 1) load.load_lse_d(p, delta, lane);
  } else {
    // ---- the consumers (backward_consumer.cuh, backward_dq.cuh) ----
    setmaxnreg_inc<T::kConsumerRegs>();
    const typename Consumer::Thread th(wg - 1);  // consumer warpgroup 0 or 1
    trace::CtaTracer<kTrace> ctr(slices, 1 + th.cw, threadIdx.x % 128 == 0);
    const BackwardNotes<kTrace, D> notes(ctr, kt.bh, kt.kv_bh, kt.key0, th.cw, N);
    const Consumer mma{sm, th, kt};
    const DqAdd<Cfg, kCausal, kTrace> dq_add{maps, sm, th, kt, dq_order, N};
    float dk[Consumer::DT][4], dv[Consumer::DT][4];  // the warpgroup's keys' dK and dV, over every query tile
#pragma unroll
    for (int i = 0; i < Consumer::DT; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) dk[i][e] = dv[i][e] = 0.f;
    const bool issuer = threadIdx.x % 128 == 0;
    const tc::TcDropout no_dropout(p.dropout, kt.bh);
    const SeqSpan seq{0, N, 0, N};
    const bool pow2_scale = (__float_as_uint(p.scale) & 0x7fffffu) == 0;  // τ a power of 2 (p_and_ds)

    mbar_wait(sm.full_kv, 0);
    // The loop over the query tiles is the kernel's, with the registers the products write first
    // declared in it (see the forward's kernel).
    for (int it = 0; it < kt.n_iter; ++it) {
      const int stage = it % S, q0 = kt.m_of(it) * BM;
      const E* q_tile = sm.sQ + stage * T::kQElems;
      const E* do_tile = sm.sdO + stage * T::kQElems;
      E* ds_tile = sm.sdS + (it % 2) * T::kDsElems;
      const int n_q = min(BM, N - q0);
      mbar_wait(&sm.full_q[stage], (it / S) & 1);
      notes.note(trace::Kind::Wait, trace::Tensor::None, q0, n_q);
      float s[Consumer::NT][4], dp[Consumer::NT][4];  // Sᵀ and dPᵀ, then Pᵀ and dSᵀ
      mma.scores(s, dp, q_tile, do_tile);
      notes.note(trace::Kind::ComputeS, trace::Tensor::S, q0, n_q);  // and dPᵀ, in the same group of products
      const bool edge = (kCausal && kt.key0 + BN - 1 > q0) || kt.key0 + BN > N;  // a key past the diagonal or N
      mma.p_and_ds(s, dp, p, seq, no_dropout, pow2_scale, edge, stage, q0);
      notes.note(trace::Kind::ComputeDS, trace::Tensor::dS, q0, n_q);
      std::uint32_t pf[Consumer::KM][4], df[Consumer::KM][4];  // Pᵀ and dSᵀ rounded to E
      mma.dv_dk_ds(dv, dk, s, dp, pf, df, q_tile, do_tile, ds_tile);
      notes.note(trace::Kind::Wait, trace::Tensor::None, q0, n_q);
      float dq[8][4];
      mma.dq_block(dq, dv, dk, ds_tile);
      // dV's, dK's and dQ's products, one wait: named as dK's (the warpgroup's keys × d), as step 08's.
      notes.keys_d(trace::Kind::AccumulateDK, trace::Tensor::dK, 0);
      mma.release(stage);
      dq_add.add(dq, it, q0, n_q, issuer, notes);
    }
    if (issuer) bulk_wait<0>();
    // dK = τ dK and dV, the warp's 16 keys, to HBM (step 08's store; keys past N and columns past d
    // are not stored).
    tc::tc_store_dkdv<E, D, PlainAnyHeadDim, Consumer::DT>(p, seq, dk, dv, kt.kv_bh, kt.key0 + th.wkey, 0);
    notes.keys_d(trace::Kind::Store, trace::Tensor::dK, std::int64_t(notes.keys) * D * std::int64_t(sizeof(E)));
    notes.keys_d(trace::Kind::Store, trace::Tensor::dV, std::int64_t(notes.keys) * D * std::int64_t(sizeof(E)));
  }
#else
  __trap();  // compiled for another architecture than sm_90a: step 09 refuses other GPUs first
#endif
}

// dQacc, float32 (B, H, N, d) in rows of tc_dq_acc_cols floats, as TMA's 4-D tensor for the
// reduce-adds (hopper.cu).
CUtensorMap make_dq_acc_map(float* dq_acc, const Shape& s);

// The backward's workspace: step 08's (D, LSE's copy, dQacc), then kDeterministic's counters, one
// per consumer warpgroup and block of dQacc.
inline std::size_t hopper_order_bytes(const Shape& s, int block_m) {
  return std::size_t(s.heads()) * std::size_t((s.N + block_m - 1) / block_m) * 2 * sizeof(int);
}

template <typename Cfg>
void launch_hopper_backward(const BwdParams& p) {
  using E = typename Cfg::E;
  using T = BackwardTraits<Cfg>;
  const Shape& s = p.shape;
  float* delta = static_cast<float*>(p.workspace);
  float* dq_acc = reinterpret_cast<float*>(static_cast<unsigned char*>(p.workspace) + tc::tc_delta_bytes(s));
  int* order = reinterpret_cast<int*>(static_cast<unsigned char*>(p.workspace) + tc::tc_bwd_workspace_bytes(s));
  if (s.N == 0 || s.heads() == 0) return;
  const BwdMaps maps{make_tensor_map(p.q, p.dtype, p.q_strides, s.d, s.N, s.H, s.B, Cfg::kBlockM),
                     make_tensor_map(p.k, p.dtype, p.k_strides, s.d, s.N, s.H, s.B, Cfg::kBlockN),
                     make_tensor_map(p.v, p.dtype, p.v_strides, s.d, s.N, s.H, s.B, Cfg::kBlockN),
                     make_tensor_map(p.dout, p.dtype, p.dout_strides, s.d, s.N, s.H, s.B, Cfg::kBlockM),
                     make_dq_acc_map(dq_acc, s)};
  if (p.trace) p.trace->set_tiles(Cfg::kBlockM, Cfg::kBlockN);
  const unsigned pre_grid = static_cast<unsigned>((s.rows() + tc::kTcPreprocessRows - 1) / tc::kTcPreprocessRows);
  constexpr bool kZeroDQ = true;  // the preprocess zeroes dQacc, which the reduce-adds accumulate into
  trace::launch(p.trace, "tc_bwd_preprocess_kernel", [](auto tr) { return tc::tc_bwd_preprocess_kernel<E, kZeroDQ, tr>; },
                dim3(pre_grid), tc::kTcPreprocessWarps * 32, 0, p.stream, p, delta, dq_acc);
  if constexpr (Cfg::kDeterministic)
    FS_CUDA_CHECK(cudaMemsetAsync(order, 0, hopper_order_bytes(s, Cfg::kBlockM), p.stream));
  const dim3 grid(static_cast<unsigned>((s.N + Cfg::kBlockN - 1) / Cfg::kBlockN), static_cast<unsigned>(s.heads()));
  const float* cdelta = delta;
  if (p.trace) p.trace->set_lanes({"producer", "consumer 0", "consumer 1"});  // this launch's (the kernel's)
  static_assert(T::kConsumers == 2, "the lanes' names: the producer and two consumers");
  auto launch_causal = [&](auto causal) {
    trace::launch(p.trace, "hopper_backward_kernel",
                  [](auto tr) { return hopper_backward_kernel<Cfg, decltype(causal)::value, tr>; }, grid, T::kThreads,
                  T::kSmemBytes, p.stream, maps, p, cdelta, order);
  };
  if (p.causal) launch_causal(std::true_type{});
  else launch_causal(std::false_type{});
  trace::launch(p.trace, "tc_dq_convert_kernel", [](auto tr) { return tc::tc_dq_convert_kernel<E, tr>; },
                dim3(tc::tc_dq_convert_blocks(s)), tc::kTcConvertThreads, 0, p.stream, p,
                static_cast<const float*>(dq_acc));
}

}  // namespace fs::hopper
