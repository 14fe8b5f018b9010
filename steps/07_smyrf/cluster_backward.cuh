// Step 07's backward: the gradients through fixed clusters (common/smyrf.hpp), round by round.
// With the merged LSE_i of the forward and D_i = rowsum(dO_i ∘ O_i), round ρ contributes, for each
// cluster's queries i and keys j,
//     P^ρ_ij = e^{S_ij − LSE_i},  dS^ρ_ij = P^ρ_ij (dO_i·v_j − D_i),
//     dV_j += P^ρ_ij dO_i,   dK_j += τ dS^ρ_ij q_i,   dQ_i += τ dS^ρ_ij k_j
// — step 05's recomputation backward (steps/05_recompute_backward/backward.cuh) on the clusters of
// the round, with its rows gathered through the orders (gather.cuh). The merge of the forward needs
// no backward of its own: using the merged LSE in P^ρ is exactly the weight e^{LSE_ρ − LSE} the
// merge gave round ρ.
//
//   bwd_preprocess_kernel     step 05's: D, and dQ zeroed (dK, dV by a memset)
//   smyrf_round_dkdv_kernel   one CTA per kBR consecutive slots of the round's key order: k, v and
//                             the dK, dV accumulators in registers while the queries of every
//                             cluster whose keys meet those slots stream through shared memory;
//                             then dK, dV += what the round added (read, add, write)
//   smyrf_round_dq_kernel     one CTA per kBR query slots of one cluster, as the forward: q, dO in
//                             registers while the cluster's keys stream through; then dQ += ...
//
// Deterministic by construction: in a round every key slot belongs to one dK/dV CTA and every
// query to one cluster, so each row of dQ, dK, dV has one owner per launch, and the rounds run one
// launch after the other. There is no atomic variant to offer.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/flash_tile.cuh"
#include "common/problem.hpp"
#include "common/smyrf.hpp"
#include "steps/05_recompute_backward/backward.cuh"
#include "steps/07_smyrf/gather.cuh"

namespace fs {

// Step 05's thread shape (R = 2 rows × DC = 16 columns, 8 scores per sub-tile; DC = 8 at d = 16)
// with kRowsCta rows (keys in the dK/dV kernel, queries in the dQ kernel) per CTA.
template <int D, int kRowsCta>
using SmyrfBwdTile = RowTile<D, 8, 2, (D == 16 ? 8 : 16), kRowsCta * (D / (D == 16 ? 8 : 16)) / 2>;

// The CTA rows for clusters of `cluster` rows: 32, 64 or 128 (64 at most at d = 128, whose
// 128-row CTA of 512 threads would need more registers than an SM has).
inline int smyrf_bwd_rows(int cluster, int d) {
  return cluster <= 32 ? 32 : cluster <= 64 || d == 128 ? 64 : 128;
}

// Q_i, dO_i of query slots [i0, i0 + kBwdStage) of an order (cp.async), LSE_i (log2) and D_i
// (plain loads) into one stage; slots at or past `end`: zero rows, LSE = +inf (so P = 0), D = 0.
template <int D, int kThreads>
__device__ __forceinline__ void gather_query_stage(const BwdParams& p, std::int64_t head, const float* gDelta,
                                                   const std::int32_t* order, float* sQ, float* sdO, float* sL,
                                                   float* sD, int i0, int end) {
  gather_rows_async<kBwdStage, D, kThreads>(sQ, as<float>(p.q) + head * D, order, i0, end);
  gather_rows_async<kBwdStage, D, kThreads>(sdO, as<float>(p.dout) + head * D, order, i0, end);
  cp_async_commit();
  for (int x = threadIdx.x; x < kBwdStage; x += kThreads) {
    const bool valid = i0 + x < end;
    const std::int64_t i = valid ? order[i0 + x] : 0;
    sL[x] = valid ? p.lse[head + i] * kLog2e : INFINITY;  // SMYRF's LSE is finite: every cluster has keys
    sD[x] = valid ? gDelta[head + i] : 0.f;
  }
}

// The trace's loads of n query slots from slot0 of round `round`: their indices (the order's
// rows are slots), then Q, dO, LSE and D through them. The events after it are in the round.
template <int D, class Tracer>
__device__ __forceinline__ void trace_query_rows(Tracer& tr, std::int64_t bh, int slot0, int n, int round) {
  tr.in_round(-1);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::Order, bh, slot0, n, round, 1, n * 4);
  tr.in_round(round);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::Q, bh, slot0, n, 0, D, n * D * kF);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::dO, bh, slot0, n, 0, D, n * D * kF);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::LSE, bh, slot0, n, 0, 1, n * kF);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::D, bh, slot0, n, 0, 1, n * kF);
}

// Grid (⌈N / kBR⌉, B·H); shared memory: two stages of (Q, dO, LSE, D), as step 05's DkdvSmem.
// Traced (kTrace), its events name rows by their slots in the round's orders, as the forward's.
template <int D, typename T, bool kTrace>
__global__ void __launch_bounds__(T::kThreads)
    smyrf_round_dkdv_kernel(const BwdParams p, const float* __restrict__ gDelta, const std::int32_t* __restrict__ orders,
                            int round, trace::Slices slices) {
  constexpr int BC = T::kBC, DC = T::kDC, R = T::kRows, kSub = kBwdStage / BC;
  using L = DkdvSmem<D, T, false>;
  trace::CtaTracer<kTrace> tr(slices);
  float* smem = dynamic_smem<float>();  // two stages of (Q, dO, LSE, D): DkdvSmem

  const int N = p.shape.N, hashes = p.smyrf.hashes;
  const SmyrfGeometry g{N, p.smyrf.q_cluster, p.smyrf.k_cluster};
  const std::int64_t bh = blockIdx.y, BH = gridDim.y, head = bh * N;  // head: first row of the head
  const std::int32_t* q_order = orders + (bh * hashes + round) * N;
  const std::int32_t* k_order = orders + ((BH + bh) * hashes + round) * N;
  const int key0 = blockIdx.x * T::kBR, key_end = min(N, key0 + T::kBR);  // the CTA's key slots
  int c_first, c_last;
  g.clusters_of_keys(key0, key_end, &c_first, &c_last);
  if (c_first > c_last) return;  // keys in no cluster this round (C_k < C_q): nothing to add
  const int kslot = T::first_row(key0), part = T::part();

  float k[R][DC], v[R][DC];  // k scaled by τ·log2 e: k·q is S in log2 units
  int ki[R];
  gather_rows<D, R, DC>(as<float>(p.k) + head * D, k_order, kslot, key_end, part, p.scale * kLog2e, k, ki);
  gather_rows<D, R, DC>(as<float>(p.v) + head * D, k_order, kslot, key_end, part, 1.f, v, ki);
  const int n_keys = key_end - key0;
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::Order, bh, key0, n_keys, hashes + round, 1, n_keys * 4);
  tr.in_round(round);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::K, bh, key0, n_keys, 0, D, n_keys * D * kF);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::V, bh, key0, n_keys, 0, D, n_keys * D * kF);

  float dk[R][DC] = {}, dv[R][DC] = {};
  for (int c = c_first; c <= c_last; ++c) {
    const int qb = g.query_begin(c), qe = g.query_end(c), kb = g.key_begin(c), ke = g.key_end(c);
    float outside[R];  // 0 for this thread's keys among cluster c's, +inf for the others: P = e^{−inf} = 0
#pragma unroll
    for (int r = 0; r < R; ++r) outside[r] = ki[r] >= 0 && kslot + r >= kb && kslot + r < ke ? 0.f : INFINITY;
    const int n_stages = (qe - qb + kBwdStage - 1) / kBwdStage;
    gather_query_stage<D, T::kThreads>(p, head, gDelta, q_order, smem + L::q(0), smem + L::dout(0), smem + L::lse(0),
                                       smem + L::delta(0), qb, qe);
    for (int t = 0; t < n_stages; ++t) {
      const int s = t & 1, i_stage = qb + t * kBwdStage;
      if (t + 1 < n_stages) {  // prefetch the next stage while this one is computed
        gather_query_stage<D, T::kThreads>(p, head, gDelta, q_order, smem + L::q(s ^ 1), smem + L::dout(s ^ 1),
                                           smem + L::lse(s ^ 1), smem + L::delta(s ^ 1), i_stage + kBwdStage, qe);
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      __syncthreads();  // the stage has landed for everyone
      const int n_q = min(kBwdStage, qe - i_stage);
      trace_query_rows<D>(tr, bh, i_stage, n_q, round);
#pragma unroll 1
      for (int u = 0; u < kSub; ++u) {
        const float* sq = smem + L::q(s) + u * BC * D;
        const float* sdo = smem + L::dout(s) + u * BC * D;
        const float* sl = smem + L::lse(s) + u * BC;
        const float* sd = smem + L::delta(s) + u * BC;
        float pr[R][BC], dp[R][BC];  // Pᵀ and dPᵀ: [key][query]
        row_scores<D, BC, R, DC, T::kSplit>(k, sq, part, pr);
        row_scores<D, BC, R, DC, T::kSplit>(v, sdo, part, dp);
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int x = 0; x < BC; ++x) {
            pr[r][x] = exp2f(pr[r][x] - sl[x] - outside[r]);  // P_ij = exp(S_ij − LSE_i); 0 outside the cluster
            dp[r][x] = pr[r][x] * (dp[r][x] - sd[x]);                   // dS_ij = P_ij ∘ (dP_ij − D_i)
          }
        accumulate_pv<D, BC, R, DC>(pr, sdo, part, dv);  // dV_j += Pᵀ dO_i
        accumulate_pv<D, BC, R, DC>(dp, sq, part, dk);   // dK_j += dSᵀ Q_i  (τ at the end)
      }
      // S, dP, dS of the stage's queries against this CTA's keys (those of cluster c count).
      FS_TRACE_EVENT(tr, Kind::ComputeS, Tensor::S, bh, i_stage, n_q, key0, n_keys, 0);
      FS_TRACE_EVENT(tr, Kind::ComputeDP, Tensor::dP, bh, i_stage, n_q, key0, n_keys, 0);
      FS_TRACE_EVENT(tr, Kind::ComputeDS, Tensor::dS, bh, i_stage, n_q, key0, n_keys, 0);
      FS_TRACE_EVENT(tr, Kind::AccumulateDV, Tensor::dV, bh, key0, n_keys, 0, D, 0);
      FS_TRACE_EVENT(tr, Kind::AccumulateDK, Tensor::dK, bh, key0, n_keys, 0, D, 0);
      __syncthreads();  // everyone is done with stage s before it is refilled (or the next cluster's starts)
    }
  }
  // dK_j, dV_j += this round's; one CTA owns these keys in this round (round 0 adds to the zeros).
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (ki[r] < 0) continue;
    float4* dst_k = reinterpret_cast<float4*>(as<float>(p.dk) + (head + ki[r]) * D + part * DC);
    float4* dst_v = reinterpret_cast<float4*>(as<float>(p.dv) + (head + ki[r]) * D + part * DC);
#pragma unroll
    for (int x = 0; x < DC; x += 4) {
      const float4 ok = dst_k[x / 4], ov = dst_v[x / 4];
      dst_k[x / 4] = make_float4(ok.x + p.scale * dk[r][x], ok.y + p.scale * dk[r][x + 1], ok.z + p.scale * dk[r][x + 2],
                                 ok.w + p.scale * dk[r][x + 3]);
      dst_v[x / 4] = make_float4(ov.x + dv[r][x], ov.y + dv[r][x + 1], ov.z + dv[r][x + 2], ov.w + dv[r][x + 3]);
    }
  }
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::dK, bh, key0, n_keys, 0, D, n_keys * D * kF);  // read, added to ...
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::dV, bh, key0, n_keys, 0, D, n_keys * D * kF);
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::dK, bh, key0, n_keys, 0, D, n_keys * D * kF);  // ... and written
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::dV, bh, key0, n_keys, 0, D, n_keys * D * kF);
}

// Grid (clusters × tiles_per_cluster, B·H); shared memory: two stages of (K, V), kBwdStage keys.
template <int D, typename T, bool kTrace>
__global__ void __launch_bounds__(T::kThreads)
    smyrf_round_dq_kernel(const BwdParams p, const float* __restrict__ gDelta, const std::int32_t* __restrict__ orders,
                          int round, int tiles_per_cluster, trace::Slices slices) {
  constexpr int BC = T::kBC, DC = T::kDC, R = T::kRows, kSub = kBwdStage / BC;
  trace::CtaTracer<kTrace> tr(slices);
  float* smem = dynamic_smem<float>();  // stage s: K at smem + 2s·stage·D, V after it

  const int N = p.shape.N, hashes = p.smyrf.hashes;
  const SmyrfGeometry g{N, p.smyrf.q_cluster, p.smyrf.k_cluster};
  const std::int64_t bh = blockIdx.y, BH = gridDim.y, head = bh * N;
  const std::int32_t* q_order = orders + (bh * hashes + round) * N;
  const std::int32_t* k_order = orders + ((BH + bh) * hashes + round) * N;
  const int cluster = blockIdx.x / tiles_per_cluster;
  const int row0 = g.query_begin(cluster) + (blockIdx.x % tiles_per_cluster) * T::kBR;
  if (row0 >= g.query_end(cluster)) return;  // a tile past a short last cluster: the whole CTA
  const int row_end = min(g.query_end(cluster), row0 + T::kBR);
  const int slot = T::first_row(row0), part = T::part();

  float q[R][DC], dout[R][DC], lse2[R], delta[R];
  int qi[R];
  gather_rows<D, R, DC>(as<float>(p.q) + head * D, q_order, slot, row_end, part, p.scale * kLog2e, q, qi);
  gather_rows<D, R, DC>(as<float>(p.dout) + head * D, q_order, slot, row_end, part, 1.f, dout, qi);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    lse2[r] = qi[r] >= 0 ? p.lse[head + qi[r]] * kLog2e : INFINITY;
    delta[r] = qi[r] >= 0 ? gDelta[head + qi[r]] : 0.f;
  }
  const int rows = row_end - row0;
  trace_query_rows<D>(tr, bh, row0, rows, round);

  const int j_begin = g.key_begin(cluster), j_end = g.key_end(cluster);
  const int n_stages = (j_end - j_begin + kBwdStage - 1) / kBwdStage;
  auto k_stage = [&](int s) { return smem + 2 * s * kBwdStage * D; };
  auto v_stage = [&](int s) { return smem + (2 * s + 1) * kBwdStage * D; };
  gather_rows_async<kBwdStage, D, T::kThreads>(k_stage(0), as<float>(p.k) + head * D, k_order, j_begin, j_end);
  gather_rows_async<kBwdStage, D, T::kThreads>(v_stage(0), as<float>(p.v) + head * D, k_order, j_begin, j_end);
  cp_async_commit();

  float dq[R][DC] = {};
  for (int t = 0; t < n_stages; ++t) {
    const int s = t & 1, j_stage = j_begin + t * kBwdStage;
    if (t + 1 < n_stages) {
      gather_rows_async<kBwdStage, D, T::kThreads>(k_stage(s ^ 1), as<float>(p.k) + head * D, k_order,
                                                   j_stage + kBwdStage, j_end);
      gather_rows_async<kBwdStage, D, T::kThreads>(v_stage(s ^ 1), as<float>(p.v) + head * D, k_order,
                                                   j_stage + kBwdStage, j_end);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // the stage has landed for everyone
    const int n_k = min(kBwdStage, j_end - j_stage);
    tr.in_round(-1);
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::Order, bh, j_stage, n_k, hashes + round, 1, n_k * 4);
    tr.in_round(round);
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::K, bh, j_stage, n_k, 0, D, n_k * D * kF);
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::V, bh, j_stage, n_k, 0, D, n_k * D * kF);
#pragma unroll 1
    for (int u = 0; u < kSub; ++u) {
      const int j0 = j_stage + u * BC;
      const float* sk = k_stage(s) + u * BC * D;
      const float* sv = v_stage(s) + u * BC * D;
      float pr[R][BC], dp[R][BC];
      row_scores<D, BC, R, DC, T::kSplit>(q, sk, part, pr);
      row_scores<D, BC, R, DC, T::kSplit>(dout, sv, part, dp);
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int x = 0; x < BC; ++x) {
          pr[r][x] = j0 + x < j_end ? exp2f(pr[r][x] - lse2[r]) : 0.f;  // slots past the cluster's keys: P = 0
          dp[r][x] = pr[r][x] * (dp[r][x] - delta[r]);                   // dS_ij
        }
      accumulate_pv<D, BC, R, DC>(dp, sk, part, dq);  // dQ_i += dS_ij K_j  (τ at the end)
    }
    FS_TRACE_EVENT(tr, Kind::ComputeS, Tensor::S, bh, row0, rows, j_stage, n_k, 0);
    FS_TRACE_EVENT(tr, Kind::ComputeDP, Tensor::dP, bh, row0, rows, j_stage, n_k, 0);
    FS_TRACE_EVENT(tr, Kind::ComputeDS, Tensor::dS, bh, row0, rows, j_stage, n_k, 0);
    FS_TRACE_EVENT(tr, Kind::AccumulateDQ, Tensor::dQ, bh, row0, rows, 0, D, 0);
    __syncthreads();  // everyone is done with stage s before it is refilled
  }
  // dQ_i += this round's; the query is in this cluster only, this round.
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (qi[r] < 0) continue;
    float4* dst = reinterpret_cast<float4*>(as<float>(p.dq) + (head + qi[r]) * D + part * DC);
#pragma unroll
    for (int x = 0; x < DC; x += 4) {
      const float4 old = dst[x / 4];
      dst[x / 4] = make_float4(old.x + p.scale * dq[r][x], old.y + p.scale * dq[r][x + 1], old.z + p.scale * dq[r][x + 2],
                               old.w + p.scale * dq[r][x + 3]);
    }
  }
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::dQ, bh, row0, rows, 0, D, rows * D * kF);  // read, added to ...
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::dQ, bh, row0, rows, 0, D, rows * D * kF);  // ... and written
}

}  // namespace fs
