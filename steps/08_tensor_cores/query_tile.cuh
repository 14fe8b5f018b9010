// The schedule of the kernels whose CTA owns a tile of query rows — the 16-bit forward
// (flash_tc_forward.cuh), the fp32 one (flash_tc_forward_f32.cuh) and the deterministic dQ kernel
// (tc_dq_kernel.cuh): which rows, of which head and sequence, and which key tiles the CTA visits.
// Written once here, so that the kernels differ only in what they compute on each key tile.
#pragma once

#include <cstdint>

#include "common/flash_tile.cuh"
#include "common/problem.hpp"
#include "common/recorder/device.cuh"
#include "common/tile_policies.cuh"
#include "steps/08_tensor_cores/tc_dropout.cuh"
#include "steps/08_tensor_cores/tc_features.cuh"
#include "steps/08_tensor_cores/tc_softmax.cuh"

namespace fs::tc {

// The forward's CTA: query tile blockIdx.x (causal: counted from the end, so that the last tiles,
// which have the most key tiles, launch first) of head blockIdx.y in its span (CtaSpan,
// tc_features.cuh), and the K/V head it reads, kv_bh (Features: the head but for FlashFeatures).
template <typename E, int kBlockM, bool kCausal, class Features>
struct FwdCta : CtaSpan<Features> {
  std::int64_t bh, kv_bh;
  int Hkv;
  std::int64_t ld_q, ld_k, ld_v;  // the span's rows: (N, D) of Q and O, (Nk, D) of K and V, ld_* apart
  const E* gK;
  const E* gV;
  int row0;  // the CTA's first query row

  __device__ __forceinline__ explicit FwdCta(const FwdParams& p)
      : CtaSpan<Features>(p),
        bh(blockIdx.y),
        kv_bh(Features::kv_head(p.shape, bh)),
        Hkv(p.shape.kv_heads()),
        ld_q(p.q_strides.row),
        ld_k(p.k_strides.row),
        ld_v(p.v_strides.row),
        gK(as<E>(p.k) + p.k_strides.of_head(kv_bh, Hkv) + this->seq.k0 * ld_k),
        gV(as<E>(p.v) + p.v_strides.of_head(kv_bh, Hkv) + this->seq.k0 * ld_v),
        row0(static_cast<int>(kCausal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * kBlockM) {}

  // Packed: the grid has the longest sequence's tiles, and a shorter one's CTAs past its end have
  // nothing to do (they leave before any barrier).
  __device__ __forceinline__ bool idle() const { return Features::kSequences && row0 >= this->N; }
  // Q's rows of the span.
  __device__ __forceinline__ const E* q(const FwdParams& p) const {
    return as<E>(p.q) + p.q_strides.of_head(bh, p.shape.H) + this->seq.q0 * ld_q;
  }
};

// A forward lane's place in the CTA's tile (mma.cuh): g, its row group, and t4, its column pair; the
// warp owns kMTiles 16-row tiles from wrow0.
template <int kBlockM, int kMTiles>
struct FwdLane {
  int warp, lane, g, t4, wrow0;
  int rows;          // for the trace: the CTA's real rows
  float scale_log2;  // exp(τ s) = exp2(τ log2(e) s); τ > 0

  __device__ __forceinline__ FwdLane(const FwdParams& p, int N, int row0)
      : warp(threadIdx.x / 32),
        lane(threadIdx.x % 32),
        g(lane / 4),
        t4(lane % 4),
        wrow0(warp * 16 * kMTiles),
        rows(min(kBlockM, N - row0)),
        scale_log2(p.scale * kLog2e) {}
};

// The key tiles of kBlockN keys that the query rows [row0, last_row] meet; causal, none past the
// last row's key, last_row + δ; a window, none outside it.
template <int kBlockN, class Features, class Params>
__device__ __forceinline__ DenseWalk<kBlockN> tc_key_walk(const Features& features, const Params& p, int Nk, int row0,
                                                          int last_row, int shift, bool causal) {
  return features.keys(DenseWalk<kBlockN>::keys_of(p.sparse, Nk, row0, last_row + shift, causal), row0, last_row);
}

// The key tiles a tile of query rows [row0, row0 + kBlockM) meets (tc_key_walk), and the features'
// policy they come with (NoFeatures, or FlashFeatures without τ: tc_features.cuh).
template <int kBlockM, int kBlockN, class Features>
struct KeyWalk {
  int last_row;
  Features features;
  DenseWalk<kBlockN> walk;

  template <class Params>
  __device__ __forceinline__ KeyWalk(const Params& p, const SeqSpan& seq, std::int64_t bh, int row0, int shift,
                                     bool causal)
      : last_row(min(seq.n, row0 + kBlockM) - 1),
        features(p.mods, p.shape, seq, bh, 1.f / p.scale),
        walk(tc_key_walk<kBlockN>(features, p, seq.nk, row0, last_row, shift, causal)) {}

  // For the trace: the keys this CTA never loaded, past its last row (causal) or outside the window.
  template <bool kTrace>
  __device__ __forceinline__ void trace_skipped(trace::CtaTracer<kTrace>& tr, std::int64_t bh, int row0, int rows,
                                                int Nk) const {
    if constexpr (kTrace)
      walk.for_each_skipped(Nk, [&](int j, int n) { FS_TRACE_EVENT(tr, Kind::Skip, Tensor::S, bh, row0, rows, j, n, 0); });
  }
};

// The trace of one key tile's softmax: the sampled row's m (natural log, with τ) and whole ℓ. The
// sampled row is the tile's first, held by lane 0 of warp 0 (m[0][0], this lane's part of ℓ);
// keys(j0): the real keys of the tile at j0.
template <bool kTrace, int MT, typename Keys>
__device__ __forceinline__ void trace_softmax(trace::CtaTracer<kTrace>& tr, const float (&m)[MT][2],
                                              const float (&l)[MT][2], float scale, std::int64_t bh, int row0,
                                              int rows, int j0, Keys&& keys, int D) {
  if constexpr (kTrace) {
    float l_row = l[0][0];
    l_row += __shfl_xor_sync(0xffffffffu, l_row, 1);
    l_row += __shfl_xor_sync(0xffffffffu, l_row, 2);
    FS_TRACE_STATS(tr, Kind::Softmax, Tensor::P, bh, row0, rows, j0, keys(j0), m[0][0] * scale, l_row, row0);
    FS_TRACE_STATS(tr, Kind::Rescale, Tensor::O, bh, row0, rows, 0, D, m[0][0] * scale, l_row, row0);
  }
}

// The forwards' epilogue: O = O / ℓ and LSE (tc_softmax.cuh) for the warp's rows from
// cta.row0 + wrow0; store(gO, ld_o, row, dt, x0, x1) writes columns 8dt + 2·t4, +1 of O's row,
// rounded to the run's type.
template <int D, typename E, int kBlockM, bool kCausal, class Features, bool kTrace, int MT, int DT,
          typename Store>
__device__ __forceinline__ void fwd_epilogue(const FwdParams& p, const FwdCta<E, kBlockM, kCausal, Features>& cta,
                                             trace::CtaTracer<kTrace>& tr, const float (&o)[MT][DT][4],
                                             const float (&m)[MT][2], const float (&l)[MT][2], int wrow0, int rows,
                                             Store&& store) {
  constexpr std::int64_t kE = sizeof(E);
  const std::int64_t ld_o = p.o_strides.row;
  E* gO = as<E>(p.o) + p.o_strides.of_head(cta.bh, p.shape.H) + cta.seq.q0 * ld_o;
  float* gLse = p.lse + cta.bh * p.shape.N + cta.seq.q0;  // LSE is (B, H, N): the span's rows of head bh
  tc_finish_rows(o, m, l, cta.row0 + wrow0, cta.N, p.scale, gLse,
                 [&](int row, int dt, float x0, float x1) { store(gO, ld_o, row, dt, x0, x1); });
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::O, cta.bh, cta.row0, rows, 0, D, rows * D * kE);
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::LSE, cta.bh, cta.row0, rows, 0, 1, rows * std::int64_t(sizeof(float)));
}

}  // namespace fs::tc
