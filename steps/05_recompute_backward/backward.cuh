// The recomputation backward's kernels (docs/notation.md, Algorithm 4, in FlashAttention-2's
// parallel form), as templates on the policies of common/tile_policies.cuh: the tile walk
// (step 05: DenseWalk; step 06: BlockListWalk, the nonzero blocks of the CTA's block column or
// row) and the dropout (NoDropout, or PhiloxDropout from dropout.cuh).
//
//   bwd_preprocess_kernel  D_i = rowsum(dO_i ∘ O_i) (line 19), once per row, to HBM (B·H·N
//                          floats: the backward's only extra memory). Zeroes dQ for the
//                          atomic variant.
//   bwd_dkdv_kernel        one CTA per (K_j, V_j) tile, the paper's outer loop (line 6). The
//                          CTA's threads own its keys: k_j, v_j and the dK_j, dV_j accumulators
//                          stay in registers while Q_i, dO_i, LSE_i, D_i stream through shared
//                          memory (line 10). Per (i, j), on chip and never stored:
//                            S_ij = τ Q_i K_jᵀ, P_ij = exp(S_ij − LSE_i)     (lines 11-13)
//                            dV_j += (P_ij ∘ Z_ij)ᵀ dO_i                     (line 16)
//                            dP_ij = (dO_i V_jᵀ) ∘ Z_ij, dS_ij = P_ij ∘ (dP_ij − D_i)  (17-20)
//                            dK_j += τ dS_ijᵀ Q_i                             (line 22)
//                          kAtomicDQ: also dQ_i += τ dS_ij K_j (line 21), an atomic add to
//                          HBM (many CTAs add to the same dQ_i).
//   bwd_dq_kernel          the deterministic dQ: one CTA per Q_i tile streams every K_j, V_j,
//                          recomputes P_ij and dS_ij, and sums dQ_i = τ Σ_j dS_ij K_j in
//                          registers in a fixed order. Three more N²d matmuls (S, dP again),
//                          no atomics, bit-identical runs.
//
// Thread layout (common/flash_tile.cuh): R rows × DC columns per thread, the same helpers as
// the forward. In bwd_dkdv_kernel the "rows" are keys and the broadcast operands are queries
// (S_ijᵀ = K_j Q_iᵀ): row_scores gives Sᵀ and dPᵀ, accumulate_pv gives dV += PᵀdO and
// dK += dSᵀQ. Scores are in log2 units (k scaled by τ·log2 e; LSE·log2 e).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "common/check.hpp"
#include "common/flash_tile.cuh"
#include "common/tile_policies.cuh"
#include "common/recorder/device.cuh"
#include "common/recorder/launch.cuh"
#include "steps/04_online_softmax/flash_params.hpp"
#include "steps/05_recompute_backward/backward.hpp"
#include "steps/05_recompute_backward/dropout.cuh"

namespace fs {

// R = 2 rows × DC = 16 columns per thread (8 for d = 16, so that no CTA holds more than 128
// keys: a block-sparse mask's 128-key blocks stay whole); 8 scores per row per sub-tile.
template <int D>
using BwdTile = RowTile<D, 8, 2, (D == 16 ? 8 : 16)>;
constexpr int kBwdStage = 32;  // queries (dK/dV kernel) or keys (dQ kernel) per pipeline stage
constexpr int kPreprocessRows = 8;  // rows per CTA of the preprocess kernel, one warp each

// LSE in log2 units for P = exp2(s' − LSE'); a row that saw no key (LSE = −inf) and a row past
// N get +inf, so that every P of theirs is exactly 0.
__device__ __forceinline__ float lse_log2(const float* lse, int i, int N) {
  if (i >= N) return INFINITY;
  const float x = lse[i];
  return x == -INFINITY ? INFINITY : x * kLog2e;
}

template <bool kZeroDQ, bool kTrace>
__global__ void __launch_bounds__(kPreprocessRows * kWarpSize)
    bwd_preprocess_kernel(const BwdParams p, float* __restrict__ delta, trace::Slices slices) {
  trace::CtaTracer<kTrace> tr(slices);
  const int d = p.shape.d, N = p.shape.N;
  const std::int64_t rows = std::int64_t(p.shape.B) * p.shape.H * N;
  const std::int64_t r0 = std::int64_t(blockIdx.x) * kPreprocessRows, r1 = min(rows, r0 + kPreprocessRows);
  const std::int64_t r = r0 + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (r < rows) {
    // Row r of the B·H·N rows is row i of head bh, in each tensor's own layout (Strides).
    const std::int64_t bh = r / N, i = r % N;
    auto at = [&](const Strides& st) { return st.of_head(bh, p.shape.H) + i * st.row; };
    const float* dout = as<float>(p.dout) + at(p.dout_strides);
    const float* o = as<float>(p.o) + at(p.o_strides);
    float acc = 0.f;
    for (int c = lane; c < d; c += kWarpSize) acc = fmaf(dout[c], o[c], acc);
    acc = warp_sum(acc);
    if (lane == 0) delta[r] = acc;
    if constexpr (kZeroDQ)
      for (int c = lane; c < d; c += kWarpSize) as<float>(p.dq)[at(p.dq_strides) + c] = 0.f;
  }
  if constexpr (kTrace)
    if (tr.records())
      trace::for_each_head(r0, r1, N, [&](std::int64_t bh, std::int64_t i, std::int64_t n) {
        FS_TRACE_EVENT(tr, Kind::Load, Tensor::O, bh, i, n, 0, d, n * d * kF);
        FS_TRACE_EVENT(tr, Kind::Load, Tensor::dO, bh, i, n, 0, d, n * d * kF);
        FS_TRACE_EVENT(tr, Kind::Store, Tensor::D, bh, i, n, 0, 1, n * kF);
        if (kZeroDQ) FS_TRACE_EVENT(tr, Kind::Store, Tensor::dQ, bh, i, n, 0, d, n * d * kF);
      });
}

// Which scores of a thread's R × BC block are masked: queries past N, keys past Nk, causal
// key > query + δ (δ = Nk − N: the bottom-right corner). kKeyRows: rows are keys, columns
// queries (dK/dV kernel).
template <bool kKeyRows, int R, int BC>
__device__ __forceinline__ void mask_probs(float (&p)[R][BC], int row, int col0, int N, int Nk, int shift,
                                           bool causal) {
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int c = 0; c < BC; ++c) {
      const int q = kKeyRows ? col0 + c : row + r, k = kKeyRows ? row + r : col0 + c;
      if (q >= N || k >= Nk || (causal && k > q + shift)) p[r][c] = 0.f;
    }
}

// Shared memory of bwd_dkdv_kernel, in floats: two stages of (Q_i, dO_i, LSE_i, D_i); with
// atomic dQ also K_j (unscaled) and one dS sub-tile.
template <int D, typename T, bool kAtomicDQ>
struct DkdvSmem {
  static constexpr int kStage = 2 * kBwdStage * D + 2 * kBwdStage;
  __host__ __device__ static constexpr int q(int s) { return s * kStage; }
  __host__ __device__ static constexpr int dout(int s) { return s * kStage + kBwdStage * D; }
  __host__ __device__ static constexpr int lse(int s) { return s * kStage + 2 * kBwdStage * D; }
  __host__ __device__ static constexpr int delta(int s) { return lse(s) + kBwdStage; }
  __host__ __device__ static constexpr int k() { return 2 * kStage; }          // (kBR, D)
  __host__ __device__ static constexpr int ds() { return k() + T::kBR * D; }   // (BC, kBR): dS of one sub-tile, by query
  __host__ __device__ static constexpr int floats() { return kAtomicDQ ? ds() + T::kBC * T::kBR : 2 * kStage; }
};

// The rows of query head bh in the CTA's span (SeqSpan): Q, dO and dQ in their own layouts (rows
// ld_* floats apart), LSE and D ((B, H, N), contiguous).
struct QueryRows {
  const float *q, *dout, *lse, *delta;
  float* dq;
  std::int64_t ld_q, ld_do, ld_dq;
  __device__ QueryRows(const BwdParams& p, const float* gDelta, std::int64_t bh, const SeqSpan& seq)
      : q(span_rows(as<float>(p.q), p.q_strides, bh, p.shape.H, seq.q0)),
        dout(span_rows(as<float>(p.dout), p.dout_strides, bh, p.shape.H, seq.q0)),
        lse(p.lse + bh * p.shape.N + seq.q0),
        delta(gDelta + bh * p.shape.N + seq.q0),
        dq(span_rows(as<float>(p.dq), p.dq_strides, bh, p.shape.H, seq.q0)),
        ld_q(p.q_strides.row),
        ld_do(p.dout_strides.row),
        ld_dq(p.dq_strides.row) {}
};

// Q_i, dO_i (cp.async) and LSE_i (log2), D_i (plain loads) of the stage at query i0 of the N
// queries of rows `h` (rows past N are zeros, LSE +inf).
template <int D, int kThreads>
__device__ __forceinline__ void load_query_stage(const QueryRows& h, int N, float* sQ, float* sdO, float* sL, float* sD,
                                                 int i0) {
  load_rows_async<kBwdStage, D, kThreads>(sQ, h.q, i0, N, h.ld_q);
  load_rows_async<kBwdStage, D, kThreads>(sdO, h.dout, i0, N, h.ld_do);
  cp_async_commit();
  for (int i = threadIdx.x; i < kBwdStage; i += kThreads) {
    sL[i] = lse_log2(h.lse, i0 + i, N);
    sD[i] = i0 + i < N ? h.delta[i0 + i] : 0.f;
  }
}

template <int D, typename T, template <int> class Walk, class TileDropout, class Features, bool kAtomicDQ,
          bool kTrace>
__global__ void __launch_bounds__(T::kThreads)
    bwd_dkdv_kernel(const BwdParams p, const float* __restrict__ gDelta, trace::Slices slices) {
  constexpr int BC = T::kBC, DC = T::kDC, R = T::kRows, kSub = kBwdStage / BC;
  using L = DkdvSmem<D, T, kAtomicDQ>;
  trace::CtaTracer<kTrace> tr(slices);
  extern __shared__ float smem[];

  // N queries; the Nk keys of K/V head kv_bh, δ = Nk − N, read by the G query heads of its group
  // (Features: N, 0 and G = 1 but for FlashFeatures). With packed sequences, those of sequence
  // blockIdx.z (SeqSpan): keys and queries are counted within it, and q0, k0 added to addresses.
  const SeqSpan seq = Features::sequence(p.packed, p.shape);
  const int N = seq.n, Nk = seq.nk, shift = seq.shift();
  const std::int64_t kv_bh = blockIdx.y;
  const int key0 = blockIdx.x * T::kBR;
  if (Features::kSequences && key0 >= Nk) return;  // packed: past this sequence's keys (before any barrier)
  const int key = T::first_row(key0), part = T::part();  // this thread's first key
  const int n_keys = min(T::kBR, Nk - key0);
  // The span's keys of K/V head kv_bh, in K's and V's layouts (Strides); dK's and dV's at the end.
  const int Hkv = p.shape.kv_heads();
  const float* gK = span_rows(as<float>(p.k), p.k_strides, kv_bh, Hkv, seq.k0);
  const float* gV = span_rows(as<float>(p.v), p.v_strides, kv_bh, Hkv, seq.k0);

  float k[R][DC], v[R][DC];  // k scaled by τ·log2 e: k·q is S in log2 units
  load_q_rows<D, R, DC>(gK, key, Nk, part, p.scale * kLog2e, k, p.k_strides.row);
  load_q_rows<D, R, DC>(gV, key, Nk, part, 1.f, v, p.v_strides.row);
  if constexpr (kAtomicDQ) load_rows_async<T::kBR, D, T::kThreads>(smem + L::k(), gK, key0, Nk, p.k_strides.row);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::K, kv_bh, key0, n_keys, 0, D, n_keys * D * kF);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::V, kv_bh, key0, n_keys, 0, D, n_keys * D * kF);

  float dk[R][DC] = {}, dv[R][DC] = {};
  // dK_j, dV_j add up over the group's query heads (grouped-query attention); one head here.
  for (int g = 0; g < Features::group(p.shape); ++g) {
    const std::int64_t bh = Features::query_head(p.shape, kv_bh, g);
    const QueryRows head(p, gDelta, bh, seq);  // its rows in Q, dO, dQ, LSE and D

    // The query tiles this CTA visits. Causal: none before the first whose diagonal key, i + δ,
    // reaches key0; a window: none outside it.
    const Features features(p.mods, p.shape, seq, bh);  // NoFeatures, or FlashFeatures (common/flash_features.cuh)
    const Walk<kBwdStage> walk =
        features.queries(Walk<kBwdStage>::queries_of(p.sparse, N, key0 - shift, p.causal), key0, key0 + n_keys - 1);
    const int n_tiles = walk.size();
    const TileDropout dropout(p.dropout, bh, seq.q0, seq.k0);  // NoDropout, or PhiloxDropout (dropout.cuh)

    if (n_tiles == 0) {  // nothing to add up (a block column the mask leaves empty): dK_j = dV_j = 0
      cp_async_commit();
      cp_async_wait<0>();
    } else {
      load_query_stage<D, T::kThreads>(head, N, smem + L::q(0), smem + L::dout(0), smem + L::lse(0),
                                       smem + L::delta(0), walk.start(0));
    }
    for (int t = 0; t < n_tiles; ++t) {
      const int s = t & 1, i_stage = walk.start(t), n_q = min(kBwdStage, N - i_stage);
      if (t + 1 < n_tiles) {  // prefetch the next stage while this one is computed
        load_query_stage<D, T::kThreads>(head, N, smem + L::q(s ^ 1), smem + L::dout(s ^ 1), smem + L::lse(s ^ 1),
                                         smem + L::delta(s ^ 1), walk.start(t + 1));
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      __syncthreads();  // the stage (and, the first time, K_j) has landed for everyone
      FS_TRACE_EVENT(tr, Kind::Load, Tensor::Q, bh, i_stage, n_q, 0, D, n_q * D * kF);
      FS_TRACE_EVENT(tr, Kind::Load, Tensor::dO, bh, i_stage, n_q, 0, D, n_q * D * kF);
      FS_TRACE_EVENT(tr, Kind::Load, Tensor::LSE, bh, i_stage, n_q, 0, 1, n_q * kF);
      FS_TRACE_EVENT(tr, Kind::Load, Tensor::D, bh, i_stage, n_q, 0, 1, n_q * kF);

#pragma unroll 1
      for (int u = 0; u < kSub; ++u) {
        const int i0 = i_stage + u * BC;
        const float* sq = smem + L::q(s) + u * BC * D;
        const float* sdo = smem + L::dout(s) + u * BC * D;
        const float* sl = smem + L::lse(s) + u * BC;
        const float* sd = smem + L::delta(s) + u * BC;
        float pr[R][BC], dp[R][BC];  // Pᵀ and dPᵀ: [key][query]
        row_scores<D, BC, R, DC, T::kSplit>(k, sq, part, pr);
        row_scores<D, BC, R, DC, T::kSplit>(v, sdo, part, dp);
        const auto chain = features.template scores<true, R, BC>(pr, key, i0);  // softcap, ALiBi, window
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int c = 0; c < BC; ++c) pr[r][c] = exp2f(pr[r][c] - sl[c]);  // P_ij = exp(S_ij − LSE_i)
        mask_probs<true, R, BC>(pr, key, i0, N, Nk, shift, p.causal);  // unconditional: a branch here costs registers
        const auto keep = dropout.template keep<true, R, BC>(key, i0);
        keep.apply(dp);  // dP_ij = (dO_i V_jᵀ) ∘ Z_ij
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int c = 0; c < BC; ++c) dp[r][c] = pr[r][c] * (dp[r][c] - sd[c]);  // dS_ij = P_ij ∘ (dP_ij − D_i)
        chain.apply(dp);  // a softcap's derivative, for dK and dQ
        keep.apply(pr);  // P_ij ∘ Z_ij, for dV
        accumulate_pv<D, BC, R, DC>(pr, sdo, part, dv);  // dV_j += (P ∘ Z)ᵀ dO_i
        accumulate_pv<D, BC, R, DC>(dp, sq, part, dk);   // dK_j += dSᵀ Q_i  (τ at the end)
        if constexpr (kAtomicDQ) {
          // dQ_i += τ dS_ij K_j: the sum runs over this CTA's keys, held by different threads,
          // so dS goes through shared memory, (BC queries × kBR keys).
          float* sdS = smem + L::ds();
          if (part == 0)
#pragma unroll
            for (int r = 0; r < R; ++r)
#pragma unroll
              for (int c = 0; c < BC; ++c) sdS[c * T::kBR + (key - key0) + r] = dp[r][c];
          __syncthreads();
          const float* sK = smem + L::k();
          for (int e = threadIdx.x; e < BC * D / 4; e += T::kThreads) {
            const int c = e / (D / 4), x = (e % (D / 4)) * 4;
            float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
            for (int j = 0; j < n_keys; ++j) {
              const float w = sdS[c * T::kBR + j];
              const float4 kx = *reinterpret_cast<const float4*>(sK + j * D + x);
              acc.x = fmaf(w, kx.x, acc.x);
              acc.y = fmaf(w, kx.y, acc.y);
              acc.z = fmaf(w, kx.z, acc.z);
              acc.w = fmaf(w, kx.w, acc.w);
            }
            if (i0 + c < N) {
              float* dst = head.dq + (i0 + c) * head.ld_dq + x;
              atomicAdd(dst, p.scale * acc.x);
              atomicAdd(dst + 1, p.scale * acc.y);
              atomicAdd(dst + 2, p.scale * acc.z);
              atomicAdd(dst + 3, p.scale * acc.w);
            }
          }
          __syncthreads();  // sdS is rewritten by the next sub-tile
        }
      }
      FS_TRACE_EVENT(tr, Kind::ComputeS, Tensor::S, bh, i_stage, n_q, key0, n_keys, 0);
      FS_TRACE_EVENT(tr, Kind::ComputeDP, Tensor::dP, bh, i_stage, n_q, key0, n_keys, 0);
      FS_TRACE_EVENT(tr, Kind::ComputeDS, Tensor::dS, bh, i_stage, n_q, key0, n_keys, 0);
      FS_TRACE_EVENT(tr, Kind::AccumulateDV, Tensor::dV, kv_bh, key0, n_keys, 0, D, 0);
      FS_TRACE_EVENT(tr, Kind::AccumulateDK, Tensor::dK, kv_bh, key0, n_keys, 0, D, 0);
      if constexpr (kAtomicDQ) {  // an atomic add reads and writes the dQ_i tile (Algorithm 4, lines 10 and 21)
        FS_TRACE_EVENT(tr, Kind::Load, Tensor::dQ, bh, i_stage, n_q, 0, D, n_q * D * kF);
        FS_TRACE_EVENT(tr, Kind::AccumulateDQ, Tensor::dQ, bh, i_stage, n_q, 0, D, 0);
        FS_TRACE_EVENT(tr, Kind::Store, Tensor::dQ, bh, i_stage, n_q, 0, D, n_q * D * kF);
      }
      __syncthreads();  // everyone is done with stage s before it is refilled
    }
    if constexpr (kTrace)  // the queries this CTA never loaded: before its first key (causal), or masked out
      walk.for_each_skipped(N, [&](int i, int n) { FS_TRACE_EVENT(tr, Kind::Skip, Tensor::S, bh, i, n, key0, n_keys, 0); });
  }
  // dK_j, dV_j → HBM (line 24), in their layouts (addressed here, not held through the loop above)
  float* gdK = span_rows(as<float>(p.dk), p.dk_strides, kv_bh, Hkv, seq.k0);
  float* gdV = span_rows(as<float>(p.dv), p.dv_strides, kv_bh, Hkv, seq.k0);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (key + r >= Nk) continue;
    float4* dst_k = reinterpret_cast<float4*>(gdK + (key + r) * p.dk_strides.row + part * DC);
    float4* dst_v = reinterpret_cast<float4*>(gdV + (key + r) * p.dv_strides.row + part * DC);
#pragma unroll
    for (int c = 0; c < DC; c += 4) {
      dst_k[c / 4] = make_float4(p.scale * dk[r][c], p.scale * dk[r][c + 1], p.scale * dk[r][c + 2], p.scale * dk[r][c + 3]);
      dst_v[c / 4] = make_float4(dv[r][c], dv[r][c + 1], dv[r][c + 2], dv[r][c + 3]);
    }
  }
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::dK, kv_bh, key0, n_keys, 0, D, n_keys * D * kF);
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::dV, kv_bh, key0, n_keys, 0, D, n_keys * D * kF);
}

template <int D, typename T, template <int> class Walk, class TileDropout, class Features, bool kTrace>
__global__ void __launch_bounds__(T::kThreads)
    bwd_dq_kernel(const BwdParams p, const float* __restrict__ gDelta, trace::Slices slices) {
  constexpr int BC = T::kBC, DC = T::kDC, R = T::kRows, kSub = kBwdStage / BC;
  trace::CtaTracer<kTrace> tr(slices);
  extern __shared__ float smem[];  // stage s: K at smem + 2s·stage·D, V after it

  // The CTA's span (SeqSpan), as in bwd_dkdv_kernel.
  const SeqSpan seq = Features::sequence(p.packed, p.shape);
  const int N = seq.n, Nk = seq.nk, shift = seq.shift();
  const std::int64_t bh = blockIdx.y, kv_bh = Features::kv_head(p.shape, bh);
  const int tile = p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;  // causal: longest first
  const int row0 = tile * T::kBR;
  if (Features::kSequences && row0 >= N) return;  // packed: past this sequence's queries (before any barrier)
  const int row = T::first_row(row0), part = T::part();
  const int n_rows = min(T::kBR, N - row0);
  const QueryRows head(p, gDelta, bh, seq);  // the span's rows of Q, dO, dQ, LSE and D
  const float* gK = span_rows(as<float>(p.k), p.k_strides, kv_bh, p.shape.kv_heads(), seq.k0);  // and of K, V
  const float* gV = span_rows(as<float>(p.v), p.v_strides, kv_bh, p.shape.kv_heads(), seq.k0);

  float q[R][DC], dout[R][DC], lse2[R], delta[R];
  load_q_rows<D, R, DC>(head.q, row, N, part, p.scale * kLog2e, q, head.ld_q);
  load_q_rows<D, R, DC>(head.dout, row, N, part, 1.f, dout, head.ld_do);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    lse2[r] = lse_log2(head.lse, row + r, N);
    delta[r] = row + r < N ? head.delta[row + r] : 0.f;
  }
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::Q, bh, row0, n_rows, 0, D, n_rows * D * kF);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::dO, bh, row0, n_rows, 0, D, n_rows * D * kF);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::LSE, bh, row0, n_rows, 0, 1, n_rows * kF);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::D, bh, row0, n_rows, 0, 1, n_rows * kF);

  // The key tiles this CTA visits. Causal: none past its last row's key, last_row + δ; a window:
  // none outside it.
  const int last_row = min(N, row0 + T::kBR) - 1;
  const Features features(p.mods, p.shape, seq, bh);
  const Walk<kBwdStage> walk =
      features.keys(Walk<kBwdStage>::keys_of(p.sparse, Nk, row0, last_row + shift, p.causal), row0, last_row);
  const int n_tiles = walk.size();
  auto k_stage = [&](int s) { return smem + 2 * s * kBwdStage * D; };
  auto v_stage = [&](int s) { return smem + (2 * s + 1) * kBwdStage * D; };
  const TileDropout dropout(p.dropout, bh, seq.q0, seq.k0);

  float dq[R][DC] = {};
  if (n_tiles > 0) {
    load_rows_async<kBwdStage, D, T::kThreads>(k_stage(0), gK, walk.start(0), Nk, p.k_strides.row);
    load_rows_async<kBwdStage, D, T::kThreads>(v_stage(0), gV, walk.start(0), Nk, p.v_strides.row);
    cp_async_commit();
  }
  for (int t = 0; t < n_tiles; ++t) {
    const int s = t & 1, j_stage = walk.start(t), n_k = min(kBwdStage, Nk - j_stage);
    if (t + 1 < n_tiles) {
      load_rows_async<kBwdStage, D, T::kThreads>(k_stage(s ^ 1), gK, walk.start(t + 1), Nk, p.k_strides.row);
      load_rows_async<kBwdStage, D, T::kThreads>(v_stage(s ^ 1), gV, walk.start(t + 1), Nk, p.v_strides.row);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::K, kv_bh, j_stage, n_k, 0, D, n_k * D * kF);
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::V, kv_bh, j_stage, n_k, 0, D, n_k * D * kF);
#pragma unroll 1
    for (int u = 0; u < kSub; ++u) {
      const int j0 = j_stage + u * BC;
      const float* sk = k_stage(s) + u * BC * D;
      const float* sv = v_stage(s) + u * BC * D;
      float pr[R][BC], dp[R][BC];
      row_scores<D, BC, R, DC, T::kSplit>(q, sk, part, pr);
      row_scores<D, BC, R, DC, T::kSplit>(dout, sv, part, dp);
      const auto chain = features.template scores<false, R, BC>(pr, row, j0);
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int c = 0; c < BC; ++c) pr[r][c] = exp2f(pr[r][c] - lse2[r]);
      mask_probs<false, R, BC>(pr, row, j0, N, Nk, shift, p.causal);
      dropout.template keep<false, R, BC>(row, j0).apply(dp);  // dP_ij = (dO_i V_jᵀ) ∘ Z_ij
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int c = 0; c < BC; ++c) dp[r][c] = pr[r][c] * (dp[r][c] - delta[r]);  // dS_ij
      chain.apply(dp);
      accumulate_pv<D, BC, R, DC>(dp, sk, part, dq);  // dQ_i += dS_ij K_j  (τ at the end)
    }
    FS_TRACE_EVENT(tr, Kind::ComputeS, Tensor::S, bh, row0, n_rows, j_stage, n_k, 0);
    FS_TRACE_EVENT(tr, Kind::ComputeDP, Tensor::dP, bh, row0, n_rows, j_stage, n_k, 0);
    FS_TRACE_EVENT(tr, Kind::ComputeDS, Tensor::dS, bh, row0, n_rows, j_stage, n_k, 0);
    FS_TRACE_EVENT(tr, Kind::AccumulateDQ, Tensor::dQ, bh, row0, n_rows, 0, D, 0);
    __syncthreads();
  }
  if constexpr (kTrace)  // the keys this CTA never loaded: past its last row (causal), or masked out
    walk.for_each_skipped(Nk, [&](int j, int n) { FS_TRACE_EVENT(tr, Kind::Skip, Tensor::S, bh, row0, n_rows, j, n, 0); });
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (row + r >= N) continue;
    float4* dst = reinterpret_cast<float4*>(head.dq + (row + r) * head.ld_dq + part * DC);
#pragma unroll
    for (int c = 0; c < DC; c += 4)
      dst[c / 4] = make_float4(p.scale * dq[r][c], p.scale * dq[r][c + 1], p.scale * dq[r][c + 2], p.scale * dq[r][c + 3]);
  }
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::dQ, bh, row0, n_rows, 0, D, n_rows * D * kF);
}

// The backward: preprocess, dK/dV (and dQ with atomics), or dK/dV then dQ (deterministic).
// `delta`: B·H·N floats of workspace. Packed sequences (require_packable, common/packed_check.hpp,
// through step 04's flash_params.hpp) in grid z, each dimension x cut to the longest sequence's
// tiles: a CTA past its own sequence's end leaves at once. The preprocess is row by row and knows no sequences.
template <int D, template <int> class Walk, class TileDropout, class Features = NoFeatures>
void launch_backward(const BwdParams& params, bool atomic_dq, float* delta) {
  using T = BwdTile<D>;
  require_packable<Features>(params, "launch_backward");
  const BwdParams p = with_strides(params, "launch_backward");  // the tensors' layouts (flash_params.hpp)
  const Shape& s = p.shape;
  if (p.trace) p.trace->set_tiles(kBwdStage, T::kBR);
  constexpr bool kTraced = trace::kTracedAt<D>;  // traced twins at the traced runs' d only
  const unsigned pre_grid = static_cast<unsigned>((s.rows() + kPreprocessRows - 1) / kPreprocessRows);
  // An empty grid is an invalid launch: below, a dimension of 0 skips its kernel — packed
  // sequences without a query at all (N = 0), or without a key (no dK/dV CTA).
  if (pre_grid > 0) {
    if (atomic_dq)
      trace::launch<kTraced>(p.trace, "bwd_preprocess_kernel", [](auto tr) { return bwd_preprocess_kernel<true, tr>; },
                             pre_grid, kPreprocessRows * kWarpSize, 0, p.stream, p, delta);
    else
      trace::launch<kTraced>(p.trace, "bwd_preprocess_kernel", [](auto tr) { return bwd_preprocess_kernel<false, tr>; },
                             pre_grid, kPreprocessRows * kWarpSize, 0, p.stream, p, delta);
  }

  // dK/dV: a CTA per tile of keys of each K/V head; dQ: a CTA per tile of query rows of each head
  // (of each sequence).
  const bool packed = p.packed.on();
  const unsigned sequences = packed ? p.packed.count : 1;
  const int keys = packed ? p.packed.max_k : s.keys(), queries = packed ? p.packed.max_q : s.N;
  const dim3 grid((keys + T::kBR - 1) / T::kBR, static_cast<unsigned>(std::int64_t(s.B) * s.kv_heads()), sequences);
  const dim3 dq_grid((queries + T::kBR - 1) / T::kBR, static_cast<unsigned>(s.heads()), sequences);
  if (atomic_dq) {
    if (grid.x == 0) return;  // dQ stays the preprocess's 0
    trace::launch<kTraced>(p.trace, "bwd_dkdv_kernel",
                           [](auto tr) { return bwd_dkdv_kernel<D, T, Walk, TileDropout, Features, true, tr>; }, grid,
                           T::kThreads, DkdvSmem<D, T, true>::floats() * sizeof(float), p.stream, p, delta);
    return;
  }
  if (grid.x > 0)
    trace::launch<kTraced>(p.trace, "bwd_dkdv_kernel",
                           [](auto tr) { return bwd_dkdv_kernel<D, T, Walk, TileDropout, Features, false, tr>; }, grid,
                           T::kThreads, DkdvSmem<D, T, false>::floats() * sizeof(float), p.stream, p, delta);
  if (dq_grid.x == 0) return;
  const std::size_t dq_smem = 2 * 2 * kBwdStage * D * sizeof(float);  // 2 stages × (K, V)
  trace::launch<kTraced>(p.trace, "bwd_dq_kernel",
                         [](auto tr) { return bwd_dq_kernel<D, T, Walk, TileDropout, Features, tr>; }, dq_grid,
                         T::kThreads, dq_smem, p.stream, p, delta);
}

// The backward of p over the tiles Walk visits (step 05: DenseWalk; step 06: BlockListWalk): any
// compiled d, dropout on or off, dQ atomic or deterministic (p.variant, Step05Variant).
template <template <int> class Walk>
void run_backward(const BwdParams& p) {
  float* delta = static_cast<float*>(p.workspace);  // (B, H, N)
  const bool atomic = p.variant == kAtomicDQ;
  dispatch_head_dim(p.shape.d, [&](auto D) {
    if (p.dropout.on())
      launch_backward<D, Walk, PhiloxDropout>(p, atomic, delta);
    else
      launch_backward<D, Walk, NoDropout>(p, atomic, delta);
  });
}

}  // namespace fs
