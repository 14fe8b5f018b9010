// The backward's consumers: two warpgroups of 64 keys each, which accumulate dK and dV of their
// keys in registers over all query tiles. Per query tile i, each computes the transposed tiles
//   Sᵀ = K_j Q_iᵀ,  dPᵀ = V_j dO_iᵀ          (wgmma, K or V and Q or dO from shared memory)
// so that Pᵀ and dSᵀ come out in the accumulator registers of the warpgroup that owns those keys
// (step 08's arrangement), and feed, as A operands from registers,
//   dV_j += Pᵀ dO_i,  dK_j += dSᵀ Q_i       (B: dO_i or Q_i read transposed by wgmma).
// dSᵀ also goes to shared memory; once both warpgroups' halves are there, each computes a 64 × 64
// block of dQ_i's share, dS_ij K_j (both operands transposed by wgmma), which backward_dq.cuh adds
// to dQacc. The kernel walks the query tiles and calls these in order.
#pragma once

#include <cstdint>

#include "common/problem.hpp"
#include "common/recorder/device.cuh"
#include "steps/08_tensor_cores/flash_tc_backward.cuh"
#include "steps/09_hopper/backward_traits.cuh"
#include "steps/09_hopper/hopper.cuh"
#include "steps/09_hopper/mask.cuh"
#include "steps/09_hopper/softmax.cuh"

namespace fs::hopper {

// A consumer thread of the backward: its warpgroup cw (keys [64 cw, 64 cw + 64) of the CTA's), its
// warp's first key, its lane (g, t4 in the fragments), and its warpgroup's block of dQ_i: rows
// [dq_row, +64) × columns [dq_col, +64) — at d = 128 the two split the columns, at d = 64 (128
// queries) the rows.
template <int BM, int D>
struct BackwardThread {
  const int cw, warp, lane, g, t4, wkey, dq_row, dq_col;
  __device__ __forceinline__ explicit BackwardThread(int cw_)
      : cw(cw_),
        warp((threadIdx.x % 128) / 32),
        lane(threadIdx.x % 32),
        g(lane / 4),
        t4(lane % 4),
        wkey(64 * cw + 16 * warp),
        dq_row(BM == 128 ? 64 * cw : 0),
        dq_col(D == 128 ? 64 * cw : 0) {}
};

// A consumer warpgroup's trace events (lanes 1 and 2): its 64 keys of the tile (none past N).
template <bool kTrace, int D>
struct BackwardNotes {
  trace::CtaTracer<kTrace>& ctr;
  const int bh, key0, keys;
  const std::int64_t kv_bh;
  __device__ __forceinline__ BackwardNotes(trace::CtaTracer<kTrace>& tracer, int bh_, std::int64_t kv_bh_, int key0_,
                                           int cw, int N)
      : ctr(tracer), bh(bh_), key0(key0_ + 64 * cw), keys(max(0, min(64, N - key0_ - 64 * cw))), kv_bh(kv_bh_) {}
  // A phase of query tile [q0, q0 + n_q) against the warpgroup's keys.
  __device__ __forceinline__ void note(trace::Kind kind, trace::Tensor tensor, int q0, int n_q) const {
    if (keys > 0) ctr.event(kind, tensor, bh, q0, n_q, key0, keys, 0);
  }
  // One of the warpgroup's keys × d (dK's and dV's products and stores).
  __device__ __forceinline__ void keys_d(trace::Kind kind, trace::Tensor tensor, std::int64_t bytes) const {
    if (keys > 0) ctr.event(kind, tensor, kv_bh, key0, keys, 0, D, bytes);
  }
};

template <typename Cfg, bool kCausal, bool kTrace>
struct BackwardConsumer {
  using T = BackwardTraits<Cfg>;
  using E = typename T::E;
  static constexpr int D = T::D, BM = T::kBlockM, BN = T::kBlockN, S = T::kStages;
  static constexpr int KD = D / 16;   // 16-wide steps over d (Sᵀ, dPᵀ)
  static constexpr int KM = BM / 16;  // over the queries (dV, dK)
  static constexpr int KN = BN / 16;  // over the keys (dQ)
  static constexpr int NT = BM / 8;   // 8-query chunks of Sᵀ
  static constexpr int DT = D / 8;    // 8-column chunks of dK, dV
  static constexpr bool kDropout = false;  // step 09's backward: no dropout (tc_p_ds_pair's flag)
  static constexpr std::int64_t kE = sizeof(E);
  using Thread = BackwardThread<BM, D>;
  const BackwardSmem<Cfg>& sm;
  const Thread& th;
  const KeyTile<kCausal, BM, BN>& kt;

  // Sᵀ = K_j Q_iᵀ and dPᵀ = V_j dO_iᵀ: the warpgroup's 64 keys × BM queries, landed.
  __device__ __forceinline__ void scores(float (&s)[NT][4], float (&dp)[NT][4], const E* q_tile,
                                         const E* do_tile) const {
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < KD; ++kk)
      wgmma_ss<E, BM>(s, kmaj_rows(sm.sK, BN, 64 * th.cw, kk), kmaj_rows(q_tile, BM, 0, kk), kk > 0);
#pragma unroll
    for (int kk = 0; kk < KD; ++kk)
      wgmma_ss<E, BM>(dp, kmaj_rows(sm.sV, BN, 64 * th.cw, kk), kmaj_rows(do_tile, BM, 0, kk), kk > 0);
    wgmma_commit();
    wgmma_wait<0>();
    fence_operands(s);
    fence_operands(dp);
  }

  // P = exp(τ S − LSE) and dS = P ∘ (dP − D), step 08's tc_p_ds_pair: element e of chunk i is key
  // wkey + g + 8(e / 2), query 8i + 2t4 + e mod 2. The mask (causal, keys past N) only on the tiles
  // that need it (edge, the kernel's). pow2_scale: τ a power of 2, where one FMA rounds τs − LSE as
  // tc_prob's two roundings do (step 08's fast path).
  __device__ __forceinline__ void p_and_ds(float (&s)[NT][4], float (&dp)[NT][4], const BwdParams& p,
                                           const SeqSpan& seq, const tc::TcDropout& no_dropout, bool pow2_scale,
                                           bool edge, int stage, int q0) const {
    tc::with_flags(pow2_scale, edge, [&](auto exact_scale, auto masked) {
#pragma unroll
      for (int i = 0; i < NT; ++i) {
        const float2 lse = *reinterpret_cast<const float2*>(sm.sLse + stage * BM + 8 * i + 2 * th.t4);
        const float2 dd = *reinterpret_cast<const float2*>(sm.sDelta + stage * BM + 8 * i + 2 * th.t4);
#pragma unroll
        for (int hh = 0; hh < 2; ++hh)
          tc::tc_p_ds_pair<decltype(exact_scale)::value, kDropout, NoFeatures>(
              s[i][2 * hh], s[i][2 * hh + 1], dp[i][2 * hh], dp[i][2 * hh + 1], lse, dd,
              kt.key0 + th.wkey + th.g + 8 * hh, q0 + 8 * i + 2 * th.t4, decltype(masked)::value, p, seq, no_dropout);
      }
    });
  }

  // dV_j += Pᵀ dO_i and dK_j += dSᵀ Q_i, issued: A from registers (the accumulators, rounded to E:
  // pf, df).
  // Then dSᵀ to shared memory, the 128-byte swizzle of 64-query boxes (keys down the rows), the very
  // words dK's A operand holds: df[kk] is chunks 2kk (words 0, 1) and 2kk + 1 (2, 3), rows g (words
  // 0, 2) and g + 8 (1, 3); and once both warpgroups' halves are in, the block of dQ_i.
  __device__ __forceinline__ void dv_dk_ds(float (&dv)[DT][4], float (&dk)[DT][4], const float (&s)[NT][4],
                                           const float (&dp)[NT][4], std::uint32_t (&pf)[KM][4],
                                           std::uint32_t (&df)[KM][4], const E* q_tile, const E* do_tile,
                                           E* ds_tile) const {
    pack_p<E>(s, pf);
    pack_p<E>(dp, df);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < KM; ++kk) wgmma_rs<E, D>(dv, pf[kk], mnmaj(do_tile, BM, 0, kk), 1);
#pragma unroll
    for (int kk = 0; kk < KM; ++kk) wgmma_rs<E, D>(dk, df[kk], mnmaj(q_tile, BM, 0, kk), 1);
    wgmma_commit();
#pragma unroll
    for (int kk = 0; kk < KM; ++kk)
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        const int r = th.wkey + th.g + 8 * (w % 2), c = 16 * kk + 8 * (w / 2) + 2 * th.t4, box = c / 64, cc = c % 64;
        unsigned char* at = reinterpret_cast<unsigned char*>(ds_tile + box * BN * 64) + r * 128 +
                            16 * ((cc / 8) ^ (r % 8)) + 2 * (cc % 8);
        *reinterpret_cast<std::uint32_t*>(at) = df[kk][w];
      }
    fence_async_shared();  // the threads' writes, visible to wgmma's reads
    named_sync(1, 256);    // both warpgroups' halves of dSᵀ are in
  }

  // dQ_i's block: dS (queries × the 128 keys) · K_j (keys × 64 columns), both transposed reads; one
  // wait for it and dV's and dK's products.
  __device__ __forceinline__ void dq_block(float (&dq)[8][4], float (&dv)[DT][4], float (&dk)[DT][4],
                                           const E* ds_tile) const {
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < KN; ++kk)
      wgmma_ss<E, 64, Major::kMN>(dq, mnmaj(ds_tile, BN, th.dq_row / 64, kk), mnmaj(sm.sK, BN, th.dq_col / 64, kk),
                                  kk > 0);
    wgmma_commit();
    wgmma_wait<0>();
    fence_operands(dv);
    fence_operands(dk);
    fence_operands(dq);
  }

  // One arrival per warp: Q_i, dO_i, LSE_i and D_i of the stage are done with.
  __device__ __forceinline__ void release(int stage) const {
    __syncwarp();
    if (th.lane == 0) mbar_arrive(&sm.empty_q[stage]);
  }

 private:
  // Descriptors (hopper.cuh, make_desc). K-major (k = d): the warpgroup's 64 rows of K or V as A,
  // Q_i or dO_i as B (N = BM queries). MN-major: Q_i, dO_i as B of dK, dV (k = queries, n = d);
  // dSᵀ as A of dQ (k = keys, m = queries) and K as its B (k = keys, n = d).
  __device__ __forceinline__ static std::uint64_t kmaj_rows(const E* tile, int rows, int row0, int kk) {
    return make_desc(tile + (kk / 4) * rows * 64 + row0 * 64 + (kk % 4) * 16, 16, 1024);
  }
  __device__ __forceinline__ static std::uint64_t mnmaj(const E* tile, int rows, int box, int kk) {
    return make_desc(tile + box * rows * 64 + kk * 16 * 64, rows * 128, 1024);
  }
};

}  // namespace fs::hopper
