// The schedule of the kernels whose CTA owns a tile of keys — the dK/dV kernels, tc_dkdv_kernel
// (tc_dkdv_kernel.cuh), tc_dkdv_smem_kernel (flash_tc_backward.cuh) and tc_dkdv_f32_kernel
// (flash_tc_backward_f32.cuh) — written once: which keys, of which K/V head and sequence; the loop
// over the query heads of its group and their query tiles, streamed through two stages; and dQ's
// share, added to dQacc with atomics.
#pragma once

#include <cstdint>

#include "common/cuda_utils.cuh"
#include "common/problem.hpp"
#include "common/recorder/device.cuh"
#include "common/tile_policies.cuh"
#include "steps/08_tensor_cores/bwd_common.cuh"
#include "steps/08_tensor_cores/mma.cuh"
#include "steps/08_tensor_cores/tc_dropout.cuh"
#include "steps/08_tensor_cores/tc_features.cuh"
#include "steps/08_tensor_cores/tc_tiles.cuh"

namespace fs::tc {

// The dK/dV CTA: key tile blockIdx.x / kSplit of K/V head blockIdx.y in its span (CtaSpan,
// tc_features.cuh), columns [c0, c0 + kCols) of dK, dV (and dQ's share) — a key tile's columns split
// over kSplit CTAs. Its keys are read by the G query heads of the K/V head's group (Features: G = 1
// but for FlashFeatures); with packed sequences, q0 and k0 are added to addresses.
template <int kKeys, int kSplit, int kCols, class Features>
struct DkdvCta : CtaSpan<Features> {
  std::int64_t kv_bh;
  int key0, c0;

  __device__ __forceinline__ explicit DkdvCta(const BwdParams& p)
      : CtaSpan<Features>(p), kv_bh(blockIdx.y), key0(blockIdx.x / kSplit * kKeys), c0(blockIdx.x % kSplit * kCols) {}

  // Packed: past this sequence's keys.
  __device__ __forceinline__ bool idle() const { return Features::kSequences && key0 >= this->Nk; }
  __device__ __forceinline__ int n_keys() const { return min(kKeys, this->Nk - key0); }
  // Whether a stage of queries from i0 needs the causal or the tail mask at all (tc_p_ds_pair).
  __device__ __forceinline__ bool edge(const BwdParams& p, int i0) const {
    return (p.causal && key0 + kKeys - 1 > i0 + this->shift) || key0 + kKeys > this->Nk;
  }

  // K_j and V_j into sK, sV under one commit, by load(s, g, ld, row0, n_rows) (load_tile's form);
  // rows past Nk zero-filled.
  template <int D, bool kTrace, typename E, typename Load>
  __device__ __forceinline__ void load_kv(const BwdParams& p, trace::CtaTracer<kTrace>& tr, E* sK, E* sV,
                                          int n_keys, Load&& load) const {
    load(sK, as<E>(p.k) + p.k_strides.of_head(kv_bh, p.shape.kv_heads()) + this->seq.k0 * p.k_strides.row,
         p.k_strides.row, key0, this->Nk);
    load(sV, as<E>(p.v) + p.v_strides.of_head(kv_bh, p.shape.kv_heads()) + this->seq.k0 * p.v_strides.row,
         p.v_strides.row, key0, this->Nk);
    cp_async_commit();
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::K, kv_bh, key0, n_keys, 0, D, n_keys * D * std::int64_t(sizeof(E)));
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::V, kv_bh, key0, n_keys, 0, D, n_keys * D * std::int64_t(sizeof(E)));
  }
};

// The 16-bit dK/dV kernels' shared memory: K_j, V_j (KTile each); two stages of Q_i and dO_i (QTile
// each); then `kept` elements the kernel keeps beside them (dSᵀ, P ∘ Z); then two stages of LSE_i
// and D_i (kQueries floats each).
template <typename E, class KTile, class QTile>
struct DkdvSmemLayout {
  E* sK;   // (BN, D)
  E* sV;   // (BN, D)
  E* sQ;   // 2 stages × (BM, D)
  E* sdO;  // 2 stages × (BM, D)
  E* kept;
  float* sL;  // 2 stages × BM: LSE
  float* sD;  // 2 stages × BM: D

  __device__ __forceinline__ DkdvSmemLayout(unsigned char* smem, int kept_elems)
      : sK(reinterpret_cast<E*>(smem)),
        sV(sK + KTile::kElems),
        sQ(sV + KTile::kElems),
        sdO(sQ + 2 * QTile::kElems),
        kept(sdO + 2 * QTile::kElems),
        sL(reinterpret_cast<float*>(kept + kept_elems)),
        sD(sL + 2 * QTile::kRows) {}
};

// Whether τ is a power of 2 (the default τ = 1/√d at d = 64 and 256), where a kernel compiled with
// the exact-scale path (tc_exact_scale_path) takes it: τs is exact there, and one FMA rounds
// τs − LSE exactly as tc_prob's two roundings do, an instruction less per score.
template <bool kExactScalePath>
__device__ __forceinline__ bool tc_pow2_scale(float scale) {
  return kExactScalePath && (__float_as_uint(scale) & 0x7fffffu) == 0;
}

// The query tiles of kBlockQ queries that the keys [key0, last_key] meet; causal, none before the
// first whose diagonal key, i + δ, reaches key0; a window, none outside it.
template <int kBlockQ, class Features>
__device__ __forceinline__ DenseWalk<kBlockQ> tc_query_walk(const Features& features, const BwdParams& p, int N,
                                                            int key0, int last_key, int shift) {
  return features.queries(DenseWalk<kBlockQ>::queries_of(p.sparse, N, key0 - shift, p.causal), key0, last_key);
}

// One query head of the K/V head's group as the dK/dV CTA walks it — the head bh, its span's first
// row in LSE, D and dQacc, which are (B, H, N), its Q and dO, the query tiles the CTA visits — and
// the steps of that walk that every dK/dV kernel takes alike: dK_j, dV_j add up over the group's
// heads (grouped-query attention; one head here), each head's query tiles through two stages.
template <typename E, int kBlockQ, class Features>
struct DkdvHead {
  std::int64_t bh, head;
  const E* gQ;
  const E* gdO;
  Features features;  // NoFeatures, or τ-less FlashFeatures
  DenseWalk<kBlockQ> walk;
  int n_tiles;

  template <class Cta>
  __device__ __forceinline__ DkdvHead(const BwdParams& p, const Cta& cta, int gq, int n_keys)
      : bh(Features::query_head(p.shape, cta.kv_bh, gq)),
        head(bh * p.shape.N + cta.seq.q0),
        gQ(as<E>(p.q) + p.q_strides.of_head(bh, p.shape.H) + cta.seq.q0 * p.q_strides.row),
        gdO(as<E>(p.dout) + p.dout_strides.of_head(bh, p.shape.H) + cta.seq.q0 * p.dout_strides.row),
        features(p.mods, p.shape, cta.seq, bh, 1.f / p.scale),
        walk(tc_query_walk<kBlockQ>(features, p, cta.N, cta.key0, cta.key0 + n_keys - 1, cta.shift)),
        n_tiles(walk.size()) {}

  // Before head gq's first tile: its stage 0 under way (load(stage, i0) issues a stage's copies).
  template <typename Load>
  __device__ __forceinline__ void start(int gq, Load&& load) const {
    if (gq > 0) __syncthreads();  // every warp is done with the last head's stages (and its P, dS) before they are refilled
    if (n_tiles > 0) load(0, walk.start(0));
  }
  // The top of tile t (queries from i0, n_q of them): stage t in (the first time, K_j and V_j too),
  // tile t + 1 on its way (tc_tiles.cuh).
  template <int D, bool kTrace, typename Load>
  __device__ __forceinline__ void next(int t, Load&& load, trace::CtaTracer<kTrace>& tr, int i0, int n_q) const {
    constexpr std::int64_t kE = sizeof(E);
    tc_next_stage(t, n_tiles, walk, load);
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::Q, bh, i0, n_q, 0, D, n_q * D * kE);
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::dO, bh, i0, n_q, 0, D, n_q * D * kE);
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::LSE, bh, i0, n_q, 0, 1, n_q * kF);
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::D, bh, i0, n_q, 0, 1, n_q * kF);
  }
  // After the head's last tile: the queries this CTA never loaded, for the trace (before its first
  // key, causal, or outside the window); and with no tile at all, the copies of K_j and V_j let land.
  template <bool kTrace, class Cta>
  __device__ __forceinline__ void finish(trace::CtaTracer<kTrace>& tr, const Cta& cta, int n_keys) const {
    if constexpr (kTrace)
      walk.for_each_skipped(cta.N, [&](int i, int n) { FS_TRACE_EVENT(tr, Kind::Skip, Tensor::S, bh, i, n, cta.key0, n_keys, 0); });
    if (n_tiles == 0) cp_async_wait<0>();
  }
};

// Q_i, dO_i, LSE_i, D_i of one pipeline stage, all by cp.async under one commit (gQ, gdO, gLse
// and gDelta point at the head's row 0; Q's and dO's rows are ld_q and ld_o elements apart, `cols`
// columns each: head_cols). Rows past N are zero-filled: zero Q and dO rows give S = 0, P = exp(0 − 0) = 1, dP = 0 and D = 0,
// hence dS = 0 and nothing added to dK or dV.
template <typename QTile, int kThreads, typename E>
__device__ __forceinline__ void tc_load_bwd_stage(E* sQ, E* sdO, float* sL, float* sD, const E* gQ, const E* gdO,
                                                  std::int64_t ld_q, std::int64_t ld_o, const float* gLse,
                                                  const float* gDelta, int i0, int N, int cols = QTile::kCols) {
  load_tile<QTile, kThreads, RowChecks::kPerChunk>(sQ, gQ, ld_q, i0, N, cols);
  load_tile<QTile, kThreads, RowChecks::kPerChunk>(sdO, gdO, ld_o, i0, N, cols);
  for (int i = threadIdx.x; i < QTile::kRows; i += kThreads) {
    const bool valid = i0 + i < N;
    cp_async_4(sL + i, gLse + (valid ? i0 + i : 0), valid);
    cp_async_4(sD + i, gDelta + (valid ? i0 + i : 0), valid);
  }
  cp_async_commit();
}

// How a dK/dV CTA of kWarps warps splits dQ's share of a stage (atomic dQ): each warp takes
// 16·kDqRowTiles query rows × kDqCols of the CTA's kCols columns, kRowGroups × kDqGroups warps.
template <int kQueries, int kWarps, int kCols, int kDqRowTiles>
struct DqShare {
  static constexpr int kRowGroups = kQueries / (16 * kDqRowTiles), kDqGroups = kWarps / kRowGroups,
                       kDqCols = kCols / kDqGroups;
  static_assert(kQueries % (16 * kDqRowTiles) == 0 && kWarps % kRowGroups == 0 && kCols % (16 * kDqGroups) == 0,
                "every warp takes whole 16-row tiles × a multiple of 16 columns of dQ");
};

// A warp's share of dQ_i, rows i0 + qr + 16·mq + g (+8) × 8-column tiles from cq, added to dQacc
// ((B, H, N, D) floats, D the compiled head dimension: tc_dq_acc_cols; head: the span's first row)
// by fp32 atomics; rows past N are not added.
template <int D, int MQ, int DQT>
__device__ __forceinline__ void tc_atomic_add_dq(const float (&dq)[MQ][DQT][4], float* dq_acc, std::int64_t head,
                                                 int i0, int qr, int N, int cq) {
  const int lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
  for_each_row_below<MQ>(i0 + qr, g, N, [&](int mq, int h, int row) {
    float* dst = dq_acc + (head + row) * D + cq + 2 * t4;
#pragma unroll
    for (int ct = 0; ct < DQT; ++ct) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      atomicAdd(reinterpret_cast<float2*>(dst + 8 * ct), make_float2(dq[mq][ct][2 * h], dq[mq][ct][2 * h + 1]));
#else
      atomicAdd(dst + 8 * ct, dq[mq][ct][2 * h]);
      atomicAdd(dst + 8 * ct + 1, dq[mq][ct][2 * h + 1]);
#endif
    }
  });
}

// dQ_i += dS_ij K_j (τ in the convert kernel), from dS_ijᵀ (keys × queries) and K_j in shared
// memory, once every warp's dS is in: warp w adds rows qr .. qr + 16·kDqRowTiles of the query tile
// × kDqCols columns from cq to dQacc with fp32 atomics. A = dS, read transposed out of the
// (key, query) tile.
template <typename Kt, typename E>
__device__ __forceinline__ void tc_add_dq_share(const E* sdS, const E* sK, float* dq_acc, std::int64_t head, int i0,
                                                int N, int c0) {
  using DsTile = typename Kt::DsTile;
  using KTile = typename Kt::KTile;
  constexpr int D = Kt::D, BN = Kt::kKeys, DQT = Kt::kDqCols / 8, MQ = Kt::kDqRowTiles;
  const int warp = threadIdx.x / 32;
  const int qr = 16 * MQ * (warp % Kt::kRowGroups), cq = c0 + warp / Kt::kRowGroups * Kt::kDqCols;
  float dq[MQ][DQT][4] = {};
  // dSᵀ read transposed is dS's A fragment when the lanes point as for K's B fragments (the
  // matrices (keys 0-7, queries 0-7), (0-7, 8-15), (8-15, 0-7), (8-15, 8-15) are a0..a3).
  // (At d = 96 a warp's columns start at chunk 6 or 12, and the XOR form does not hold.)
  static_assert(LaneAddress<DsTile>::apart(2 * MQ, 2 * MQ), "dS: queries of a warp apart from its loads' chunks");
  const auto ds_at = b_k_address<DsTile>(sdS, qr / 8);
  const auto k_at = a_address<KTile, LaneAddress<KTile>::apart(DQT, DQT)>(sK, cq / 8);
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) {
    std::uint32_t a[MQ][4];
#pragma unroll
    for (int mq = 0; mq < MQ; ++mq) ldmatrix_x4_trans(a[mq], ds_at.at(16 * kk, 2 * mq));
    mma_row_tiles<E>(dq, a, [&](std::uint32_t(&b)[4], int ct) { load_b_v(b, k_at, kk, 8 * ct); });
  }
  tc_atomic_add_dq<D>(dq, dq_acc, head, i0, qr, N, cq);
}

// For the trace: an atomic add reads and writes the dQ_i tile (Algorithm 4, lines 10 and 21), the
// CTA's cols columns from c0.
template <bool kTrace>
__device__ __forceinline__ void trace_dq_share(trace::CtaTracer<kTrace>& tr, std::int64_t bh, int i0, int n_q, int c0,
                                               int cols) {
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::dQacc, bh, i0, n_q, c0, cols, n_q * cols * kF);
  FS_TRACE_EVENT(tr, Kind::AccumulateDQ, Tensor::dQacc, bh, i0, n_q, c0, cols, 0);
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::dQacc, bh, i0, n_q, c0, cols, n_q * cols * kF);
}

// For the trace: a stage's products added to dV_j and dK_j, the CTA's cols columns from c0; at the
// end, dK_j and dV_j stored, kE bytes an element.
template <bool kTrace>
__device__ __forceinline__ void trace_dkdv_accumulated(trace::CtaTracer<kTrace>& tr, std::int64_t kv_bh, int key0,
                                                       int n_keys, int c0, int cols) {
  FS_TRACE_EVENT(tr, Kind::AccumulateDV, Tensor::dV, kv_bh, key0, n_keys, c0, cols, 0);
  FS_TRACE_EVENT(tr, Kind::AccumulateDK, Tensor::dK, kv_bh, key0, n_keys, c0, cols, 0);
}
template <bool kTrace>
__device__ __forceinline__ void trace_dkdv_stored(trace::CtaTracer<kTrace>& tr, std::int64_t kv_bh, int key0,
                                                  int n_keys, int c0, int cols, std::int64_t kE) {
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::dK, kv_bh, key0, n_keys, c0, cols, n_keys * cols * kE);
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::dV, kv_bh, key0, n_keys, c0, cols, n_keys * cols * kE);
}

}  // namespace fs::tc
