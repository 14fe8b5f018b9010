// Step 09's backward: step 08's recomputation backward (the same passes, the same P and dS, bit
// for bit the same formulas) with its five matrix products on wgmma and its tiles moved by TMA,
// the way FlashAttention-3 runs it on the H100.
//
//   tc_bwd_preprocess_kernel   step 08's: D = rowsum(dO ∘ O), LSE's copy (+inf where a row saw no
//                              key), dQacc = 0 (a float32 copy of dQ's shape).
//   hopper_backward_kernel     one CTA per tile of 128 keys of a head, three warpgroups:
//     warpgroup 0, the producer: thread 0 loads K_j and V_j once, then Q_i and dO_i of every query
//       tile the keys meet into a ring of two stages (TMA); warp 1 copies LSE_i and D_i beside
//       them. full_q / empty_q mbarriers per stage, as in the forward.
//     warpgroups 1 and 2, the consumers: 64 keys each, for which they accumulate dK and dV in
//       registers over all query tiles. Per query tile i, each computes the transposed tiles
//         Sᵀ = K_j Q_iᵀ,  dPᵀ = V_j dO_iᵀ          (wgmma, K or V and Q or dO from shared memory)
//       so that Pᵀ and dSᵀ come out in the accumulator registers of the warpgroup that owns those
//       keys (step 08's arrangement), and feed, as A operands from registers,
//         dV_j += Pᵀ dO_i,  dK_j += dSᵀ Q_i       (B: dO_i or Q_i read transposed by wgmma).
//       dSᵀ also goes to shared memory; once both warpgroups' halves are there, each computes a
//       64 × 64 block of dQ_i's share, dS_ij K_j (both operands transposed by wgmma), writes it to
//       shared memory and one thread adds it to dQacc with a TMA reduce-add
//       (cp.reduce.async.bulk.tensor .add): the copy engine does the read-modify-write in L2,
//       where step 08's warps issued one atomic per element.
//   tc_dq_convert_kernel       step 08's: dQ = τ dQacc in the run's element type.
//
// kDeterministic: the reduce-adds into each block of dQacc happen in the order of the key tiles
// (a counter per block of dQacc that the CTA of key tile j waits to read j before adding, then
// raises), so that runs are bit-identical; the CTAs wait for each other, which costs time.
//
// The tiles: 128 keys per CTA (64 per consumer); query tiles of 64 rows at d = 128, 128 at d = 64
// (Sᵀ of m64n64 or m64n128). d = 256 does not fit: a warpgroup's dK and dV of 64 keys would be
// 256 registers a thread, before S and dP (step 08 splits d over two CTAs there).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "common/problem.hpp"
#include "common/recorder/device.cuh"
#include "common/recorder/launch.cuh"
#include "steps/08_tensor_cores/flash_tc_backward.cuh"
#include "steps/09_hopper/flash_hopper_forward.cuh"

namespace fs::hopper {

template <typename E_, int D_, bool kDeterministic_>
struct HopperBwdConfig {
  using E = E_;
  static constexpr int D = D_;
  static_assert(D == 64 || D == 128, "the backward's warpgroups hold dK and dV of 64 keys × d: d = 64 or 128");
  static constexpr bool kDeterministic = kDeterministic_;
  static constexpr int kBlockN = 128;               // keys per CTA, 64 per consumer warpgroup
  static constexpr int kBlockM = D == 64 ? 128 : 64;  // queries per stage: Sᵀ is m64n128 or m64n64
  static constexpr int kStages = 2;
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

template <typename Cfg, bool kCausal, bool kTrace>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    hopper_backward_kernel(const __grid_constant__ BwdMaps maps, const BwdParams p, const float* __restrict__ delta,
                           int* __restrict__ dq_order, trace::Slices slices) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(FS_EMULATION)
  using E = typename Cfg::E;
  constexpr int D = Cfg::D, BM = Cfg::kBlockM, BN = Cfg::kBlockN, S = Cfg::kStages, CB = Cfg::kColBlocks;
  constexpr int KD = D / 16;   // 16-wide steps over d (Sᵀ, dPᵀ)
  constexpr int KM = BM / 16;  // over the queries (dV, dK)
  constexpr int KN = BN / 16;  // over the keys (dQ)
  constexpr int NT = BM / 8;   // 8-query chunks of Sᵀ
  constexpr int DT = D / 8;    // 8-column chunks of dK, dV
  constexpr std::int64_t kE = sizeof(E), kF = sizeof(float);
  // Traced (kTrace), each warpgroup records its own lane, as in the forward: lane 0 the producer's
  // copies and waits, lanes 1 and 2 each consumer's waits, products, dQ adds and dK, dV stores.
  trace::CtaTracer<kTrace> tr(slices);
  extern __shared__ unsigned char smem_raw[];
  E* sK = reinterpret_cast<E*>((reinterpret_cast<std::uintptr_t>(smem_raw) + 1023) & ~std::uintptr_t(1023));
  E* sV = sK + Cfg::kKVElems;
  E* sQ = sV + Cfg::kKVElems;        // [kStages]
  E* sdO = sQ + S * Cfg::kQElems;    // [kStages]
  E* sdS = sdO + S * Cfg::kQElems;   // [2]
  float* sdQ = reinterpret_cast<float*>(sdS + 2 * Cfg::kDsElems);  // [kConsumers]
  float* sLse = sdQ + Cfg::kConsumers * Cfg::kDqFloats;             // [kStages][BM]
  float* sDelta = sLse + S * BM;                                    // [kStages][BM]
  std::uint64_t* bars = reinterpret_cast<std::uint64_t*>(sDelta + S * BM);
  std::uint64_t* full_kv = bars;
  std::uint64_t* full_q = bars + 1;       // [kStages]: Q, dO (TMA) and LSE, D (warp 1)
  std::uint64_t* empty_q = bars + 1 + S;  // [kStages]

  const int N = p.shape.N, H = p.shape.H;
  const int bh = blockIdx.y, b = bh / H, h = bh % H;
  const std::int64_t kv_bh = std::int64_t(b) * p.shape.kv_heads() + h;
  const int n_block = blockIdx.x, key0 = n_block * BN, n_keys = min(BN, N - key0);
  // The query tiles these keys meet: causal, from the tile of the first query that sees key0.
  const int m_begin = kCausal ? key0 / BM : 0, m_end = (N + BM - 1) / BM, n_iter = m_end - m_begin;
  // The query tile of iteration it. Causal walks them from the last, which every key tile's CTA
  // meets: the CTAs start there together, and in kDeterministic each waits one add for the key
  // tile before it. Walked from the first, the CTA of key tile j would wait at its first query tile
  // until key tile 0's CTA had come that far, holding its SM meanwhile. Both variants walk alike,
  // so that their dK and dV (summed over the query tiles in this order) are the same bits.
  auto m_of = [&](int it) { return kCausal ? m_end - 1 - it : m_begin + it; };

  if (threadIdx.x == 0) {
    mbar_init(full_kv, 1);
    for (int i = 0; i < S; ++i) {
      mbar_init(&full_q[i], 1 + 32);            // the TMA thread and warp 1's lanes
      mbar_init(&empty_q[i], Cfg::kConsumers * 4);  // one arrival per consumer warp
    }
    fence_barrier_init();
  }
  __syncthreads();

  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    // ---- the producer ----
    setmaxnreg_dec<Cfg::kProducerRegs>();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (threadIdx.x == 0) {
      tma_prefetch_descriptor(&maps.q);
      tma_prefetch_descriptor(&maps.dout);
      mbar_arrive_expect_tx(full_kv, 2 * Cfg::kKVElems * kE);
#pragma unroll
      for (int c = 0; c < CB; ++c) {
        tma_load_4d(sK + c * BN * 64, &maps.k, full_kv, 64 * c, key0, h, b);
        tma_load_4d(sV + c * BN * 64, &maps.v, full_kv, 64 * c, key0, h, b);
      }
      FS_TRACE_EVENT(tr, Kind::Load, Tensor::K, kv_bh, key0, n_keys, 0, D, n_keys * D * kE);
      FS_TRACE_EVENT(tr, Kind::Load, Tensor::V, kv_bh, key0, n_keys, 0, D, n_keys * D * kE);
      for (int it = 0; it < n_iter; ++it) {
        const int stage = it % S, q0 = m_of(it) * BM;
        if (it >= S) {
          mbar_wait(&empty_q[stage], ((it / S) & 1) ^ 1);
          FS_TRACE_EVENT(tr, Kind::Wait, Tensor::None, bh, q0, min(BM, N - q0), 0, 0, 0);
        }
        mbar_arrive_expect_tx(&full_q[stage], 2 * Cfg::kQElems * kE);
#pragma unroll
        for (int c = 0; c < CB; ++c) {
          tma_load_4d(sQ + stage * Cfg::kQElems + c * BM * 64, &maps.q, &full_q[stage], 64 * c, q0, h, b);
          tma_load_4d(sdO + stage * Cfg::kQElems + c * BM * 64, &maps.dout, &full_q[stage], 64 * c, q0, h, b);
        }
        const int n_q = min(BM, N - q0);
        FS_TRACE_EVENT(tr, Kind::Load, Tensor::Q, bh, q0, n_q, 0, D, n_q * D * kE);
        FS_TRACE_EVENT(tr, Kind::Load, Tensor::dO, bh, q0, n_q, 0, D, n_q * D * kE);
        FS_TRACE_EVENT(tr, Kind::Load, Tensor::LSE, bh, q0, n_q, 0, 1, n_q * kF);
        FS_TRACE_EVENT(tr, Kind::Load, Tensor::D, bh, q0, n_q, 0, 1, n_q * kF);
      }
    } else if (warp == 1) {
      // LSE_i (the preprocess's copy) and D_i: rows past N get +inf and 0, so that their P is 0.
      const float* gD = delta + std::int64_t(bh) * N;
      const float* gL = delta + tc::tc_delta_floats(p.shape) + std::int64_t(bh) * N;
      for (int it = 0; it < n_iter; ++it) {
        const int stage = it % S, q0 = m_of(it) * BM;
        if (it >= S) mbar_wait(&empty_q[stage], ((it / S) & 1) ^ 1);
        for (int r = lane; r < BM; r += 32) {
          const int q = q0 + r;
          sLse[stage * BM + r] = q < N ? gL[q] : INFINITY;
          sDelta[stage * BM + r] = q < N ? gD[q] : 0.f;
        }
        mbar_arrive(&full_q[stage]);
      }
    }
  } else {
    // ---- the consumers ----
    setmaxnreg_inc<Cfg::kConsumerRegs>();
    const int cw = wg - 1;  // consumer warpgroup 0 or 1: keys [64 cw, 64 cw + 64) of the tile
    const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
    const int wkey = 64 * cw + 16 * warp;  // the warp's first key in the tile
    // This warpgroup's block of dQ_i: rows [dq_row, +64) × columns [dq_col, +64). At d = 128 the
    // two split the columns, at d = 64 (128 queries) the rows.
    const int dq_row = BM == 128 ? 64 * cw : 0, dq_col = D == 128 ? 64 * cw : 0;
    trace::CtaTracer<kTrace> ctr(slices, 1 + cw, threadIdx.x % 128 == 0);
    // This warpgroup's events name its 64 keys of the tile (none past N), and its block of dQ.
    const int c_keys = max(0, min(64, N - key0 - 64 * cw));
    auto note = [&](trace::Kind kind, trace::Tensor tensor, int q0, int n_q) {
      if (c_keys > 0) ctr.event(kind, tensor, bh, q0, n_q, key0 + 64 * cw, c_keys, 0);
    };

    // Descriptors (hopper.cuh, make_desc). K-major (k = d): the warpgroup's 64 rows of K or V as A,
    // Q_i or dO_i as B (N = BM queries). MN-major: Q_i, dO_i as B of dK, dV (k = queries, n = d);
    // dSᵀ as A of dQ (k = keys, m = queries) and K as its B (k = keys, n = d).
    auto kmaj_rows = [&](const E* tile, int rows, int row0, int kk) {
      return make_desc(tile + (kk / 4) * rows * 64 + row0 * 64 + (kk % 4) * 16, 16, 1024);
    };
    auto mnmaj = [&](const E* tile, int rows, int box, int kk) {
      return make_desc(tile + box * rows * 64 + kk * 16 * 64, rows * 128, 1024);
    };
    float dk[DT][4], dv[DT][4];
#pragma unroll
    for (int i = 0; i < DT; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) dk[i][e] = dv[i][e] = 0.f;
    const bool issuer = threadIdx.x % 128 == 0;
    const tc::TcDropout no_dropout(p.dropout, bh);
    const SeqSpan seq{0, N, 0, N};
    // τ a power of 2: one FMA rounds τs − LSE as tc_prob's two roundings do (step 08's fast path).
    const bool pow2_scale = (__float_as_uint(p.scale) & 0x7fffffu) == 0;

    mbar_wait(full_kv, 0);
    for (int it = 0; it < n_iter; ++it) {
      const int stage = it % S, q0 = m_of(it) * BM;
      const E* q_tile = sQ + stage * Cfg::kQElems;
      const E* do_tile = sdO + stage * Cfg::kQElems;
      E* ds_tile = sdS + (it % 2) * Cfg::kDsElems;
      const int n_q = min(BM, N - q0);
      mbar_wait(&full_q[stage], (it / S) & 1);
      note(Kind::Wait, Tensor::None, q0, n_q);

      // Sᵀ = K_j Q_iᵀ and dPᵀ = V_j dO_iᵀ: the warpgroup's 64 keys × BM queries.
      float s[NT][4], dp[NT][4];
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < KD; ++kk) wgmma_ss<E, BM>(s, kmaj_rows(sK, BN, 64 * cw, kk), kmaj_rows(q_tile, BM, 0, kk), kk > 0);
#pragma unroll
      for (int kk = 0; kk < KD; ++kk)
        wgmma_ss<E, BM>(dp, kmaj_rows(sV, BN, 64 * cw, kk), kmaj_rows(do_tile, BM, 0, kk), kk > 0);
      wgmma_commit();
      wgmma_wait<0>();
      fence_operands(s);
      fence_operands(dp);
      note(Kind::ComputeS, Tensor::S, q0, n_q);  // and dPᵀ, in the same group of products

      // P = exp(τ S − LSE) and dS = P ∘ (dP − D), step 08's tc_p_ds_pair: element e of chunk i is
      // key wkey + g + 8(e / 2), query 8i + 2t4 + e mod 2. The mask (causal, keys past N) only on
      // the tiles that need it.
      const bool edge = (kCausal && key0 + BN - 1 > q0) || key0 + BN > N;
      tc::with_flags(pow2_scale, edge, [&](auto exact_scale, auto masked) {
#pragma unroll
        for (int i = 0; i < NT; ++i) {
          const float2 lse = *reinterpret_cast<const float2*>(sLse + stage * BM + 8 * i + 2 * t4);
          const float2 dd = *reinterpret_cast<const float2*>(sDelta + stage * BM + 8 * i + 2 * t4);
#pragma unroll
          for (int hh = 0; hh < 2; ++hh)
            tc::tc_p_ds_pair<decltype(exact_scale)::value, false, NoFeatures>(
                s[i][2 * hh], s[i][2 * hh + 1], dp[i][2 * hh], dp[i][2 * hh + 1], lse, dd, key0 + wkey + g + 8 * hh,
                q0 + 8 * i + 2 * t4, decltype(masked)::value, p, seq, no_dropout);
        }
      });
      note(Kind::ComputeDS, Tensor::dS, q0, n_q);

      // dV_j += Pᵀ dO_i and dK_j += dSᵀ Q_i: A from registers (the accumulators, rounded to E).
      std::uint32_t pf[KM][4], df[KM][4];
      pack_p<E>(s, pf);
      pack_p<E>(dp, df);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < KM; ++kk) wgmma_rs<E, D>(dv, pf[kk], mnmaj(do_tile, BM, 0, kk), 1);
#pragma unroll
      for (int kk = 0; kk < KM; ++kk) wgmma_rs<E, D>(dk, df[kk], mnmaj(q_tile, BM, 0, kk), 1);
      wgmma_commit();

      // dSᵀ to shared memory, the 128-byte swizzle of 64-query boxes (keys down the rows), the
      // very words dK's A operand holds: df[kk] is chunks 2kk (words 0, 1) and 2kk + 1 (2, 3),
      // rows g (words 0, 2) and g + 8 (1, 3).
#pragma unroll
      for (int kk = 0; kk < KM; ++kk)
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          const int r = wkey + g + 8 * (w % 2), c = 16 * kk + 8 * (w / 2) + 2 * t4, box = c / 64, cc = c % 64;
          unsigned char* at = reinterpret_cast<unsigned char*>(ds_tile + box * BN * 64) + r * 128 +
                              16 * ((cc / 8) ^ (r % 8)) + 2 * (cc % 8);
          *reinterpret_cast<std::uint32_t*>(at) = df[kk][w];
        }
      fence_async_shared();   // the threads' writes, visible to wgmma's reads
      named_sync(1, 256);     // both warpgroups' halves of dSᵀ are in
      note(Kind::Wait, Tensor::None, q0, n_q);

      // dQ_i's block: dS (queries × the 128 keys) · K_j (keys × 64 columns), both transposed reads.
      float dq[8][4];
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < KN; ++kk)
        wgmma_ss<E, 64, true, true>(dq, mnmaj(ds_tile, BN, dq_row / 64, kk), mnmaj(sK, BN, dq_col / 64, kk), kk > 0);
      wgmma_commit();
      wgmma_wait<0>();
      fence_operands(dv);
      fence_operands(dk);
      fence_operands(dq);
      // dV's, dK's and dQ's products, one wait: named as dK's (the warpgroup's keys × d), as step 08's.
      if (c_keys > 0) ctr.event(Kind::AccumulateDK, Tensor::dK, kv_bh, key0 + 64 * cw, c_keys, 0, D, 0);
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty_q[stage]);  // Q_i, dO_i, LSE_i and D_i are done with

      // dQ's block to shared memory (two boxes of 32 floats × 64 rows, 128-byte swizzle: chunk c of
      // row r at c xor (r mod 8)), then one thread adds it to dQacc.
      float* my_dq = sdQ + cw * Cfg::kDqFloats;
      if (issuer) bulk_wait_read<0>();  // the last reduce has read the buffer
      named_sync(3 + cw, 128);
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int r = 16 * warp + g + 8 * hh, c = 8 * i + 2 * t4, box = c / 32, cc = c % 32;
          unsigned char* at = reinterpret_cast<unsigned char*>(my_dq + box * 64 * 32) + r * 128 +
                              16 * ((cc / 4) ^ (r % 8)) + 4 * (cc % 4);
          *reinterpret_cast<float2*>(at) = make_float2(dq[i][2 * hh], dq[i][2 * hh + 1]);
        }
      fence_async_shared();
      named_sync(3 + cw, 128);
      if (issuer) {
        int* order = nullptr;
        if constexpr (Cfg::kDeterministic) {
          // Key tile n_block adds after tiles 0 .. n_block − 1 have (every CTA that adds to this
          // block of dQacc has a smaller n_block, causal or not).
          order = dq_order + (std::int64_t(bh) * m_end + m_of(it)) * Cfg::kConsumers + cw;
          while (ld_acquire(order) != n_block) {
          }
          fence_proxy_async_global();
        }
        if constexpr (Cfg::kDeterministic) note(Kind::Wait, Tensor::None, q0, n_q);  // its turn to add
#pragma unroll
        for (int box = 0; box < 2; ++box)
          tma_reduce_add_4d(&maps.dq_acc, my_dq + box * 64 * 32, dq_col + 32 * box, q0 + dq_row, h, b);
        bulk_commit();
        // The reduce-add reads and writes this block of dQacc in L2 (the IO model's atomics).
        const int dq_rows = max(0, min(64, N - q0 - dq_row));
        if (dq_rows > 0) {
          ctr.event(Kind::Load, Tensor::dQacc, bh, q0 + dq_row, dq_rows, dq_col, 64, std::int64_t(dq_rows) * 64 * kF);
          ctr.event(Kind::AccumulateDQ, Tensor::dQacc, bh, q0 + dq_row, dq_rows, dq_col, 64, 0);
          ctr.event(Kind::Store, Tensor::dQacc, bh, q0 + dq_row, dq_rows, dq_col, 64, std::int64_t(dq_rows) * 64 * kF);
        }
        if constexpr (Cfg::kDeterministic) {
          bulk_wait<0>();  // the adds have landed before the next tile may add
          fence_proxy_async_global();
          red_release_add(order, 1);
        }
      }
    }
    if (issuer) bulk_wait<0>();
    // dK = τ dK and dV, the warp's 16 keys, to HBM (step 08's store; keys past N are not stored).
    tc::tc_store_dkdv<E, D, NoFeatures, DT>(p, seq, dk, dv, kv_bh, key0 + wkey, 0);
    if (c_keys > 0) {
      ctr.event(Kind::Store, Tensor::dK, kv_bh, key0 + 64 * cw, c_keys, 0, D, std::int64_t(c_keys) * D * kE);
      ctr.event(Kind::Store, Tensor::dV, kv_bh, key0 + 64 * cw, c_keys, 0, D, std::int64_t(c_keys) * D * kE);
    }
  }
#else
  __trap();  // compiled for another architecture than sm_90a: step 09 refuses other GPUs first
#endif
}

// dQacc, float32 (B, H, N, d), as TMA's 4-D tensor for the reduce-adds (hopper.cu).
CUtensorMap make_dq_acc_map(float* dq_acc, const Shape& s);

// The backward's workspace: step 08's (D, LSE's copy, dQacc), then kDeterministic's counters, one
// per consumer warpgroup and block of dQacc.
inline std::size_t hopper_order_bytes(const Shape& s, int block_m) {
  return std::size_t(s.heads()) * std::size_t((s.N + block_m - 1) / block_m) * 2 * sizeof(int);
}

template <typename Cfg>
void launch_hopper_backward(const BwdParams& p) {
  using E = typename Cfg::E;
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
  trace::launch(p.trace, "tc_bwd_preprocess_kernel", [](auto tr) { return tc::tc_bwd_preprocess_kernel<E, true, tr>; },
                dim3(pre_grid), tc::kTcPreprocessWarps * 32, 0, p.stream, p, delta, dq_acc);
  if constexpr (Cfg::kDeterministic)
    FS_CUDA_CHECK(cudaMemsetAsync(order, 0, hopper_order_bytes(s, Cfg::kBlockM), p.stream));
  const dim3 grid(static_cast<unsigned>((s.N + Cfg::kBlockN - 1) / Cfg::kBlockN), static_cast<unsigned>(s.heads()));
  const float* cdelta = delta;
  if (p.trace) p.trace->set_lanes({"producer", "consumer 0", "consumer 1"});  // this launch's (the kernel's)
  static_assert(Cfg::kConsumers == 2, "the lanes' names: the producer and two consumers");
  if (p.causal)
    trace::launch(p.trace, "hopper_backward_kernel", [](auto tr) { return hopper_backward_kernel<Cfg, true, tr>; },
                  grid, Cfg::kThreads, Cfg::kSmemBytes, p.stream, maps, p, cdelta, order);
  else
    trace::launch(p.trace, "hopper_backward_kernel", [](auto tr) { return hopper_backward_kernel<Cfg, false, tr>; },
                  grid, Cfg::kThreads, Cfg::kSmemBytes, p.stream, maps, p, cdelta, order);
  const unsigned cvt_grid = static_cast<unsigned>((s.elems() / 8 + 255) / 256);
  trace::launch(p.trace, "tc_dq_convert_kernel", [](auto tr) { return tc::tc_dq_convert_kernel<E, tr>; },
                dim3(cvt_grid), 256, 0, p.stream, p, static_cast<const float*>(dq_acc));
}

}  // namespace fs::hopper
