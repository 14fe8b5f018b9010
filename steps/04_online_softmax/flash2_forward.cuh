// The FlashAttention-2-order forward kernel (step 04's fa2). Later steps instantiate the same
// kernel with their own policy objects (common/tile_policies.cuh), one line each at their use:
//
//   Walk         the key tiles a CTA visits: DenseWalk here; step 06 BlockListWalk, the
//                nonzero blocks of its query block row (Algorithm 5)
//   TileDropout  NoDropout here; step 05 PhiloxDropout, P̃ ∘ Z before P̃V (docs/notation.md, Algorithm 2)
//   ScoreMod     NoFeatures here; FlashFeatures, softcap, ALiBi and a window, K and V of their own
//                shape, packed sequences (common/flash_features.cuh)
//
// With the plain policies the kernel is exactly step 04's: they compile to nothing.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/check.hpp"
#include "common/flash_tile.cuh"
#include "common/tile_policies.cuh"
#include "common/recorder/device.cuh"
#include "common/recorder/launch.cuh"
#include "steps/04_online_softmax/flash_params.hpp"

namespace fs {

// R query rows × DC columns per thread, Bc keys per tile (common/flash_tile.cuh says why).
template <int D>
using Flash2Tile = DefaultRowTile<D>;

template <int D, typename T, bool kCausal, template <int> class Walk, class TileDropout, class Features, bool kTrace>
__global__ void __launch_bounds__(T::kThreads) flash2_forward_kernel(const FwdParams p, trace::Slices slices) {
  constexpr int BC = T::kBC, DC = T::kDC, R = T::kRows;
  trace::CtaTracer<kTrace> tr(slices);
  extern __shared__ float smem[];  // stage s: K tile at smem + 2s·BC·D, V tile after it

  // The CTA's problem (SeqSpan): the whole head, or with packed sequences sequence blockIdx.z's
  // tokens, rows [q0, q0 + N) of the head's queries and [k0, k0 + Nk) of its K/V head's keys.
  // Below, rows and keys are counted within it. N queries; Nk keys of K/V head kv_bh, δ = Nk − N
  // (Features: the head, N, bh and 0 but for FlashFeatures).
  const SeqSpan seq = Features::sequence(p.packed, p.shape);
  const int N = seq.n, Nk = seq.nk, shift = seq.shift();
  const std::int64_t bh = blockIdx.y, kv_bh = Features::kv_head(p.shape, bh);
  // The span's rows: (N, D) of Q and O, (Nk, D) of K and V, rows ld_* floats apart (the tensors'
  // strides, which the launcher filled in); LSE is (B, H, N), contiguous.
  const std::int64_t ld_q = p.q_strides.row, ld_k = p.k_strides.row, ld_v = p.v_strides.row;
  const int Hkv = p.shape.kv_heads();
  const float* gQ = span_rows(as<float>(p.q), p.q_strides, bh, p.shape.H, seq.q0);
  const float* gK = span_rows(as<float>(p.k), p.k_strides, kv_bh, Hkv, seq.k0);
  const float* gV = span_rows(as<float>(p.v), p.v_strides, kv_bh, Hkv, seq.k0);
  // Causal: the last query tiles have the most key tiles; launch them first.
  const int tile = kCausal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int row0 = tile * T::kBR;
  // Packed: the grid has the longest sequence's tiles, and a shorter one's CTAs past its end have
  // nothing to do (they leave before any barrier).
  if (Features::kSequences && row0 >= N) return;
  const int row = T::first_row(row0), part = T::part();
  // For the trace: the CTA's real rows, the real keys of the tile at j0. The sampled row is
  // thread 0's first row, row0.
  const int rows = min(T::kBR, N - row0);
  auto keys = [&](int j0) { return min(BC, Nk - j0); };

  float q[R][DC];
  load_q_rows<D, R, DC>(gQ, row, N, part, p.scale * kLog2e, q, ld_q);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::Q, bh, row0, rows, 0, D, rows * D * kF);

  // The key tiles this CTA visits. Causal: none past its last row's key, last_row + δ; a window:
  // none outside it.
  const int last_row = min(N, row0 + T::kBR) - 1;
  const Features features(p.mods, p.shape, seq, bh);  // NoFeatures here
  const Walk<BC> walk =
      features.keys(Walk<BC>::keys_of(p.sparse, Nk, row0, last_row + shift, kCausal), row0, last_row);
  const int n_tiles = walk.size();
  auto k_tile = [&](int stage) { return smem + 2 * stage * T::kTileFloats; };
  auto v_tile = [&](int stage) { return smem + (2 * stage + 1) * T::kTileFloats; };
  const TileDropout dropout(p.dropout, bh, seq.q0, seq.k0);  // step 05, indexed by token; NoDropout here

  float o[R][DC] = {};
  float m[R], l[R];  // each row's running max (log2 units) and normaliser
#pragma unroll
  for (int r = 0; r < R; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.f;
  }
  if (n_tiles > 0) {
    load_rows_async<BC, D, T::kThreads>(k_tile(0), gK, walk.start(0), Nk, ld_k);
    load_rows_async<BC, D, T::kThreads>(v_tile(0), gV, walk.start(0), Nk, ld_v);
    cp_async_commit();
  }
  for (int t = 0; t < n_tiles; ++t) {
    const int j0 = walk.start(t);
    if (t + 1 < n_tiles) {  // prefetch tile t+1 while tile t is computed
      load_rows_async<BC, D, T::kThreads>(k_tile((t + 1) & 1), gK, walk.start(t + 1), Nk, ld_k);
      load_rows_async<BC, D, T::kThreads>(v_tile((t + 1) & 1), gV, walk.start(t + 1), Nk, ld_v);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // tile t has landed, for every thread's reads below
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::K, kv_bh, j0, keys(j0), 0, D, keys(j0) * D * kF);
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::V, kv_bh, j0, keys(j0), 0, D, keys(j0) * D * kF);

    float s[R][BC];  // S_ij for this thread's rows, log2 units
    row_scores<D, BC, R, DC, T::kSplit>(q, k_tile(t & 1), part, s);
    features.template scores<false, R, BC>(s, row, j0);  // softcap, ALiBi, window; here nothing
    if (j0 + BC > Nk || (kCausal && j0 + BC - 1 > row0 + shift)) mask_scores<R, BC>(s, j0, Nk, row + shift, kCausal);
    FS_TRACE_EVENT(tr, Kind::ComputeS, Tensor::S, bh, row0, rows, j0, keys(j0), 0);

#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float m_new = fmaxf(m[r], row_max<BC>(s[r]));
      // Still -inf: every key so far is masked for this row, and exp2(-inf - (-inf)) would
      // be NaN. Subtracting 0 instead gives P̃ = 0: O and ℓ stay 0.
      const float m_use = m_new == -INFINITY ? 0.f : m_new;
      const float alpha = exp2f(m[r] - m_use);  // e^{m − m_new}; 0 on the first visible tile
      l[r] *= alpha;
#pragma unroll
      for (int c = 0; c < DC; ++c) o[r][c] *= alpha;
#pragma unroll
      for (int j = 0; j < BC; ++j) {
        s[r][j] = exp2f(s[r][j] - m_use);  // P̃_ij, relative to the new max
        l[r] += s[r][j];
      }
      m[r] = m_new;
    }
    dropout.template keep<false, R, BC>(row, j0).apply(s);  // step 05: P̃ ∘ Z, after ℓ took P̃ whole
    // The sampled row's m (natural log: m is kept in log2 units) and ℓ after this tile.
    FS_TRACE_STATS(tr, Kind::Softmax, Tensor::P, bh, row0, rows, j0, keys(j0), m[0] * kLn2, l[0], row);
    FS_TRACE_STATS(tr, Kind::Rescale, Tensor::O, bh, row0, rows, 0, D, m[0] * kLn2, l[0], row);
    accumulate_pv<D, BC, R, DC>(s, v_tile(t & 1), part, o);
    FS_TRACE_EVENT(tr, Kind::AccumulateO, Tensor::O, bh, row0, rows, 0, D, 0);
    __syncthreads();  // everyone is done with stage t&1 before tile t+2 overwrites it
  }
  if constexpr (kTrace)  // the keys this CTA never loaded: past its last row (causal), or masked out
    walk.for_each_skipped(Nk, [&](int j, int n) { FS_TRACE_EVENT(tr, Kind::Skip, Tensor::S, bh, row0, rows, j, n, 0); });
  float* gO = span_rows(as<float>(p.o), p.o_strides, bh, p.shape.H, seq.q0);
  float* gLse = p.lse + bh * p.shape.N + seq.q0;
#pragma unroll
  for (int r = 0; r < R; ++r) store_row<D, DC>(gO, gLse, row + r, N, part, o[r], m[r], l[r], p.o_strides.row);
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::O, bh, row0, rows, 0, D, rows * D * kF);
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::LSE, bh, row0, rows, 0, 1, rows * kF);
}

// Grid (query tiles, B·H), 2 stages × (K, V) tiles of shared memory; with packed sequences
// (query tiles of the longest, H, sequences): CTA (x, h, b) owns tile x of sequence b of head h.
// The tensors in any layout whose rows start on 16-byte boundaries (Strides; contiguous where left
// at zero, as step 06 leaves them).
template <int D, typename T, template <int> class Walk, class TileDropout, class Features = NoFeatures>
void launch_flash2(const FwdParams& params) {
  require_packable<Features>(params, "launch_flash2");
  const FwdParams p = with_strides(params, "launch_flash2");
  const std::size_t smem = 2 * 2 * T::kTileFloats * sizeof(float);  // 2 stages × (K, V)
  const int rows = p.packed.on() ? p.packed.max_q : p.shape.N;
  const dim3 grid((rows + T::kBR - 1) / T::kBR, static_cast<unsigned>(p.shape.heads()),
                  p.packed.on() ? p.packed.count : 1);
  if (grid.x == 0) return;  // packed sequences without a query
  if (p.trace) p.trace->set_tiles(T::kBR, T::kBC);
  constexpr bool kTraced = trace::kTracedAt<D>;  // traced twins at the traced runs' d only
  if (p.causal)
    trace::launch<kTraced>(p.trace, "flash2_forward_kernel",
                           [](auto tr) { return flash2_forward_kernel<D, T, true, Walk, TileDropout, Features, tr>; },
                           grid, T::kThreads, smem, p.stream, p);
  else
    trace::launch<kTraced>(p.trace, "flash2_forward_kernel",
                           [](auto tr) { return flash2_forward_kernel<D, T, false, Walk, TileDropout, Features, tr>; },
                           grid, T::kThreads, smem, p.stream, p);
}

}  // namespace fs
