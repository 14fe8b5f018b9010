// The FlashAttention-2-order forward kernel (step 04's fa2), as a template that the later
// steps instantiate with their additions switched on:
//
//   kDropout  step 05: P̃ ∘ Z before P̃V, Z regenerated from Philox (docs/notation.md, Algorithm 2);
//             ℓ and LSE stay the softmax's, before dropout.
//   kSparse   step 06: the CTA walks the nonzero key blocks of its query block row
//             (FwdParams::sparse) instead of every key tile (Algorithm 5).
//
// Step 04 compiles it with both off, which is the kernel its lesson describes; `if constexpr`
// removes what is off, so step 04's machine code does not change.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/check.hpp"
#include "common/flash_tile.cuh"
#include "common/trace/device.cuh"
#include "common/trace/launch.cuh"

namespace fs {

// R query rows × DC columns per thread, Bc keys per tile (common/flash_tile.cuh says why).
template <int D>
using Flash2Tile = DefaultRowTile<D>;

template <int D, typename T, bool kCausal, bool kDropout, bool kSparse, bool kTrace>
__global__ void __launch_bounds__(T::kThreads) flash2_forward_kernel(const FwdParams p, trace::Slices slices) {
  constexpr int BC = T::kBC, DC = T::kDC, R = T::kRows;
  constexpr std::int64_t kF = sizeof(float);
  trace::CtaTracer<kTrace> tr(slices);
  extern __shared__ float smem[];  // stage s: K tile at smem + 2s·BC·D, V tile after it

  const int N = p.shape.N;
  const std::int64_t head = std::int64_t(blockIdx.y) * N * D;
  const float* gK = p.k + head;  // (N, D)
  const float* gV = p.v + head;  // (N, D)
  // Causal: the last query tiles have the most key tiles; launch them first.
  const int tile = kCausal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int row0 = tile * T::kBR;
  const int row = T::first_row(row0), part = T::part();
  // For the trace: the head, the CTA's real rows, the real keys of the tile at j0. The
  // sampled row is thread 0's first row, row0 (its r = 0, part 0).
  const std::int64_t bh = blockIdx.y;
  const int rows = min(T::kBR, N - row0);
  auto keys = [&](int j0) { return min(BC, N - j0); };

  float q[R][DC];
  load_q_rows<D, R, DC>(p.q + head, row, N, part, p.scale * kLog2e, q);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::Q, bh, row0, rows, 0, D, rows * D * kF);

  // The key tiles this CTA visits. Causal: none past its last row.
  const int last_row = min(N, row0 + T::kBR) - 1;
  TileWalk<BC> walk;
  if constexpr (kSparse)
    walk = TileWalk<BC>::sparse(p.sparse.row_ptr, p.sparse.col_idx, row0 / p.sparse.block_r, p.sparse.block_c, N);
  else
    walk = TileWalk<BC>::dense(0, kCausal ? last_row + 1 : N);
  const int n_tiles = walk.size();
  auto k_tile = [&](int stage) { return smem + 2 * stage * T::kTileFloats; };
  auto v_tile = [&](int stage) { return smem + (2 * stage + 1) * T::kTileFloats; };
  [[maybe_unused]] unsigned drop_threshold = 0;
  [[maybe_unused]] float drop_scale = 1.f;
  if constexpr (kDropout) {
    drop_threshold = dropout_threshold(p.dropout.p);
    drop_scale = 1.f / (1.f - p.dropout.p);
  }

  float o[R][DC] = {};
  float m[R], l[R];  // each row's running max (log2 units) and normaliser
#pragma unroll
  for (int r = 0; r < R; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.f;
  }
  if (n_tiles > 0) {
    load_rows_async<BC, D, T::kThreads>(k_tile(0), gK, walk.start(0), N);
    load_rows_async<BC, D, T::kThreads>(v_tile(0), gV, walk.start(0), N);
    cp_async_commit();
  }
  for (int t = 0; t < n_tiles; ++t) {
    const int j0 = walk.start(t);
    if (t + 1 < n_tiles) {  // prefetch tile t+1 while tile t is computed
      load_rows_async<BC, D, T::kThreads>(k_tile((t + 1) & 1), gK, walk.start(t + 1), N);
      load_rows_async<BC, D, T::kThreads>(v_tile((t + 1) & 1), gV, walk.start(t + 1), N);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // tile t has landed, for every thread's reads below
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::K, bh, j0, keys(j0), 0, D, keys(j0) * D * kF);
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::V, bh, j0, keys(j0), 0, D, keys(j0) * D * kF);

    float s[R][BC];  // S_ij for this thread's rows, log2 units
    row_scores<D, BC, R, DC, T::kSplit>(q, k_tile(t & 1), part, s);
    if (j0 + BC > N || (kCausal && j0 + BC - 1 > row0)) mask_scores<R, BC>(s, j0, N, row, kCausal);
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
    if constexpr (kDropout) {  // Algorithm 2, line 14: P̃ ← dropout(P̃), after ℓ took it whole
      const unsigned keep = dropout_keep_bits<false, R, BC>(p.dropout, drop_threshold, bh, row, j0);
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int j = 0; j < BC; ++j) s[r][j] = (keep >> (r * BC + j)) & 1u ? s[r][j] * drop_scale : 0.f;
    }
    // The sampled row's m (natural log: m is kept in log2 units) and ℓ after this tile.
    FS_TRACE_STATS(tr, Kind::Softmax, Tensor::P, bh, row0, rows, j0, keys(j0), m[0] * kLn2, l[0], row);
    FS_TRACE_STATS(tr, Kind::Rescale, Tensor::O, bh, row0, rows, 0, D, m[0] * kLn2, l[0], row);
    accumulate_pv<D, BC, R, DC>(s, v_tile(t & 1), part, o);
    FS_TRACE_EVENT(tr, Kind::AccumulateO, Tensor::O, bh, row0, rows, 0, D, 0);
    __syncthreads();  // everyone is done with stage t&1 before tile t+2 overwrites it
  }
  if constexpr (kTrace && kSparse) {  // the key blocks of this block row the mask leaves out
    const BlockSparse& sp = p.sparse;
    const int end = kCausal ? last_row / sp.block_c + 1 : sp.Tc;
    for_each_gap(sp.row_ptr, sp.col_idx, row0 / sp.block_r, end, [&](int b, int n) {
      const int c0 = b * sp.block_c, c1 = min(N, (b + n) * sp.block_c);
      FS_TRACE_EVENT(tr, Kind::Skip, Tensor::S, bh, row0, rows, c0, c1 - c0, 0);
    });
  } else if constexpr (kTrace && kCausal) {  // the key tiles past the CTA's last row, never loaded
    if (n_tiles * BC < N) FS_TRACE_EVENT(tr, Kind::Skip, Tensor::S, bh, row0, rows, n_tiles * BC, N - n_tiles * BC, 0);
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
    store_row<D, DC>(p.o + head, p.lse + std::int64_t(blockIdx.y) * N, row + r, N, part, o[r], m[r], l[r]);
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::O, bh, row0, rows, 0, D, rows * D * kF);
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::LSE, bh, row0, rows, 0, 1, rows * kF);
}

// Grid (query tiles, B·H), 2 stages × (K, V) tiles of shared memory.
template <int D, typename T, bool kDropout, bool kSparse>
void launch_flash2(const FwdParams& p) {
  const std::size_t smem = 2 * 2 * T::kTileFloats * sizeof(float);  // 2 stages × (K, V)
  const dim3 grid((p.shape.N + T::kBR - 1) / T::kBR, static_cast<unsigned>(p.shape.heads()));
  auto kernel = p.causal ? flash2_forward_kernel<D, T, true, kDropout, kSparse, false>
                         : flash2_forward_kernel<D, T, false, kDropout, kSparse, false>;
  auto traced = p.causal ? flash2_forward_kernel<D, T, true, kDropout, kSparse, true>
                         : flash2_forward_kernel<D, T, false, kDropout, kSparse, true>;
  if (smem > 48 * 1024) {
    FS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    FS_CUDA_CHECK(cudaFuncSetAttribute(traced, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  }
  if (p.trace) p.trace->set_tiles(T::kBR, T::kBC);
  trace::launch(p.trace, "flash2_forward_kernel", kernel, traced, grid, T::kThreads, smem, p.stream, p);
}

}  // namespace fs
