// Step 07's attention inside the clusters of one round, and the merge of that round into the
// rounds before it: step 04's FlashAttention-2 forward (steps/04_online_softmax/flash2_forward.cuh)
// with three changes, each one line or a few at its place:
//
//   where the CTA's rows are   a CTA owns kBR consecutive slots of one cluster in the round's
//                              query order (common/smyrf.hpp, SmyrfGeometry), not kBR consecutive
//                              rows of Q: its rows are gathered through the order (gather.cuh)
//   which keys it visits       only its cluster's: the key slots [key_begin, key_end), in tiles
//                              of BC, gathered through the key order; the tail tile is masked
//   where the result goes      the round's (O_ρ, LSE_ρ) is merged with what the rounds before left
//                              in O and LSE (round 0: written as it is), by the LSE rule
//                                LSE = log(e^{LSE_acc} + e^{LSE_ρ}),
//                                O = e^{LSE_acc − LSE} O_acc + e^{LSE_ρ − LSE} O_ρ
//                              Every query is in exactly one cluster of a round, so each row of O
//                              has one owner per launch: the rounds run one launch after the other,
//                              and no atomics are needed.
//
// The thread layout is step 04's (common/flash_tile.cuh, RowTile: R rows × DC columns per thread),
// with as many threads as the cluster needs: 32 query rows per CTA for clusters of up to 32
// queries, 64 or 128 for larger ones, so that a small cluster does not leave most of a CTA idle.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/flash_tile.cuh"
#include "common/problem.hpp"
#include "common/recorder/device.cuh"
#include "common/smyrf.hpp"
#include "steps/07_smyrf/gather.cuh"

namespace fs {

// The thread shape at head dimension D: step 04's (R rows × DC columns, BC keys per tile), with
// one row a thread at d ≤ 32 so that a warp holds 32 rows.
template <int D>
struct SmyrfRowShape {
  static constexpr int R = D == 128 ? 4 : D == 64 ? 2 : 1;
  static constexpr int DC = D == 32 || D == 64 ? 32 : 16;
  static constexpr int BC = D == 128 ? 8 : 16;
};

// A CTA of kRowsCta query rows (32, 64 or 128).
template <int D, int kRowsCta>
using SmyrfFwdTile = RowTile<D, SmyrfRowShape<D>::BC, SmyrfRowShape<D>::R, SmyrfRowShape<D>::DC,
                             kRowsCta * (D / SmyrfRowShape<D>::DC) / SmyrfRowShape<D>::R>;

// The CTA rows for clusters of q_cluster queries: the smallest of 32, 64, 128 that holds one,
// else 128.
inline int smyrf_cta_rows(int q_cluster) { return q_cluster <= 32 ? 32 : q_cluster <= 64 ? 64 : 128; }

// Round `round` of p (orders: the (2, B·H, hashes, N) orders, queries then keys). Grid
// (clusters × tiles_per_cluster, B·H); 2 stages × (K, V) tiles of shared memory.
//
// Traced (kTrace), its events name rows by their slots in the round's orders (trace.hpp,
// Event::round): the indices it reads are loads of `order`, whose rows are slots already.
template <int D, typename T, bool kTrace>
__global__ void __launch_bounds__(T::kThreads)
    smyrf_round_forward_kernel(const FwdParams p, const std::int32_t* __restrict__ orders, int round,
                               int tiles_per_cluster, trace::Slices slices) {
  constexpr int BC = T::kBC, DC = T::kDC, R = T::kRows;
  trace::CtaTracer<kTrace> tr(slices);
  float* smem = dynamic_smem<float>();  // stage s: K tile at smem + 2s·BC·D, V tile after it

  const int N = p.shape.N, hashes = p.smyrf.hashes;
  const SmyrfGeometry g{N, p.smyrf.q_cluster, p.smyrf.k_cluster};
  const std::int64_t bh = blockIdx.y, BH = gridDim.y, head = bh * N * D;
  const std::int32_t* q_order = orders + (bh * hashes + round) * N;         // slot → query
  const std::int32_t* k_order = orders + ((BH + bh) * hashes + round) * N;  // slot → key
  const float* gK = as<float>(p.k) + head;  // (N, D)
  const float* gV = as<float>(p.v) + head;  // (N, D)
  // The CTA's query slots: [row0, row_end) of its cluster.
  const int cluster = blockIdx.x / tiles_per_cluster;
  const int row0 = g.query_begin(cluster) + (blockIdx.x % tiles_per_cluster) * T::kBR;
  if (row0 >= g.query_end(cluster)) return;  // a tile past a short last cluster: the whole CTA, before any barrier
  const int row_end = min(g.query_end(cluster), row0 + T::kBR);
  const int slot = T::first_row(row0), part = T::part();

  // For the trace: the CTA's query slots, the real keys of the tile at j0; the sampled row is
  // thread 0's first slot, row0.
  const int rows = row_end - row0;

  float q[R][DC];
  int qi[R];  // the queries this thread's rows are (−1: none)
  gather_rows<D, R, DC>(as<float>(p.q) + head, q_order, slot, row_end, part, p.scale * kLog2e, q, qi);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::Order, bh, row0, rows, round, 1, rows * 4);
  tr.in_round(round);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::Q, bh, row0, rows, 0, D, rows * D * kF);

  // The cluster's keys: slots [j_begin, j_end) of the key order, never empty.
  const int j_begin = g.key_begin(cluster), j_end = g.key_end(cluster);
  const int n_tiles = (j_end - j_begin + BC - 1) / BC;
  auto keys = [&](int j0) { return min(BC, j_end - j0); };
  auto k_tile = [&](int stage) { return smem + 2 * stage * T::kTileFloats; };
  auto v_tile = [&](int stage) { return smem + (2 * stage + 1) * T::kTileFloats; };

  float o[R][DC] = {};
  float m[R], l[R];  // each row's running max (log2 units) and normaliser
#pragma unroll
  for (int r = 0; r < R; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.f;
  }
  gather_rows_async<BC, D, T::kThreads>(k_tile(0), gK, k_order, j_begin, j_end);
  gather_rows_async<BC, D, T::kThreads>(v_tile(0), gV, k_order, j_begin, j_end);
  cp_async_commit();
  for (int t = 0; t < n_tiles; ++t) {
    const int j0 = j_begin + t * BC;
    if (t + 1 < n_tiles) {  // prefetch tile t+1 while tile t is computed
      gather_rows_async<BC, D, T::kThreads>(k_tile((t + 1) & 1), gK, k_order, j0 + BC, j_end);
      gather_rows_async<BC, D, T::kThreads>(v_tile((t + 1) & 1), gV, k_order, j0 + BC, j_end);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // tile t has landed, for every thread's reads below
    tr.in_round(-1);
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::Order, bh, j0, keys(j0), hashes + round, 1, keys(j0) * 4);
    tr.in_round(round);
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::K, bh, j0, keys(j0), 0, D, keys(j0) * D * kF);
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::V, bh, j0, keys(j0), 0, D, keys(j0) * D * kF);

    float s[R][BC];  // S_ij for this thread's rows, log2 units
    row_scores<D, BC, R, DC, T::kSplit>(q, k_tile(t & 1), part, s);
    if (j0 + BC > j_end) mask_scores<R, BC>(s, j0, j_end, 0, false);  // the cluster's last tile: slots past it
    FS_TRACE_EVENT(tr, Kind::ComputeS, Tensor::S, bh, row0, rows, j0, keys(j0), 0);

#pragma unroll
    for (int r = 0; r < R; ++r) {
      // Every cluster has a key, so m_new is finite from the first tile on (no −inf − −inf).
      const float m_new = fmaxf(m[r], row_max<BC>(s[r]));
      const float alpha = exp2f(m[r] - m_new);  // e^{m − m_new}; 0 on the first tile
      l[r] *= alpha;
#pragma unroll
      for (int c = 0; c < DC; ++c) o[r][c] *= alpha;
#pragma unroll
      for (int j = 0; j < BC; ++j) {
        s[r][j] = exp2f(s[r][j] - m_new);  // P̃_ij
        l[r] += s[r][j];
      }
      m[r] = m_new;
    }
    // The sampled row's m (natural log: m is kept in log2 units) and ℓ after this tile.
    FS_TRACE_STATS(tr, Kind::Softmax, Tensor::P, bh, row0, rows, j0, keys(j0), m[0] * kLn2, l[0], slot);
    FS_TRACE_STATS(tr, Kind::Rescale, Tensor::O, bh, row0, rows, 0, D, m[0] * kLn2, l[0], slot);
    accumulate_pv<D, BC, R, DC>(s, v_tile(t & 1), part, o);
    FS_TRACE_EVENT(tr, Kind::AccumulateO, Tensor::O, bh, row0, rows, 0, D, 0);
    __syncthreads();  // everyone is done with stage t&1 before tile t+2 overwrites it
  }
  // The key slots outside the cluster: never loaded. In slot space what was computed is the
  // cluster's block on the diagonal.
  if (j_begin > 0) FS_TRACE_EVENT(tr, Kind::Skip, Tensor::S, bh, row0, rows, 0, j_begin, 0);
  if (j_end < N) FS_TRACE_EVENT(tr, Kind::Skip, Tensor::S, bh, row0, rows, j_end, N - j_end, 0);

  // The merge with the rounds before. The kSplit threads of a row all read its LSE_acc before
  // the first of them writes the merged one: they are lanes of one warp, ordered by __syncwarp.
  float* gO = as<float>(p.o) + head;
  float* gL = p.lse + bh * N;
  float prev[R];  // LSE_acc, log2 units; −inf in round 0 (O and LSE hold the poison there, never read)
#pragma unroll
  for (int r = 0; r < R; ++r) prev[r] = round > 0 && qi[r] >= 0 ? gL[qi[r]] * kLog2e : -INFINITY;
  __syncwarp();
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (qi[r] < 0) continue;
    const float lse_r = m[r] + log2f(l[r]);  // LSE_ρ, log2 units
    const float top = fmaxf(prev[r], lse_r);
    const float lse = top + log2f(exp2f(prev[r] - top) + exp2f(lse_r - top));
    const float w_prev = exp2f(prev[r] - lse), w_r = exp2f(lse_r - lse) / l[r];  // o is O_ρ · ℓ
    float4* dst = reinterpret_cast<float4*>(gO + std::int64_t(qi[r]) * D + part * DC);
#pragma unroll
    for (int c = 0; c < DC; c += 4) {
      const float4 old = round > 0 ? dst[c / 4] : make_float4(0.f, 0.f, 0.f, 0.f);
      dst[c / 4] = make_float4(w_prev * old.x + w_r * o[r][c], w_prev * old.y + w_r * o[r][c + 1],
                               w_prev * old.z + w_r * o[r][c + 2], w_prev * old.w + w_r * o[r][c + 3]);
    }
    if (part == 0) gL[qi[r]] = kLn2 * lse;
  }
  if (round > 0) {  // the merge read what the rounds before left
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::O, bh, row0, rows, 0, D, rows * D * kF);
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::LSE, bh, row0, rows, 0, 1, rows * kF);
  }
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::O, bh, row0, rows, 0, D, rows * D * kF);
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::LSE, bh, row0, rows, 0, 1, rows * kF);
}

}  // namespace fs
