// Step 03 — tiling: Q, K and V move through shared memory in tiles, the N×N matrices never
// reach HBM, and the extra memory is O(N) (the LSE).
//
// A CTA owns Br query rows (each held by 1 to 8 adjacent threads, common/flash_tile.cuh) and
// streams the keys in tiles of Bc through shared memory, in the order step 04 will (DenseWalk,
// common/tile_policies.cuh; causal: the heaviest query tiles launch first). The softmax needs
// each row's max before the first exponential, so the keys are streamed twice:
//
//   pass one   for each K_j:        S_ij = τ Q_i K_jᵀ,  m_i = max(m_i, rowmax(S_ij))
//   pass two   for each K_j, V_j:   S_ij again,  P̃_ij = exp(S_ij − m_i),
//                                   ℓ_i += rowsum(P̃_ij),  O_i += P̃_ij V_j
//              O_i /= ℓ_i,  LSE_i = m_i + log ℓ_i
//
// The normaliser ℓ could be found in pass one too, by rescaling a running scalar sum whenever
// the max grows; pass two computes every exp(S − m) anyway, so here it is summed there for
// free. Cost: QKᵀ computed twice (6N²d FLOPs instead of 4N²d) and K read twice. HBM traffic
// per head Θ(N²d/Br): no N² term any more, but K and V are re-read by every query tile.
// Step 04 asks: could one pass keep O right while the max is still changing?
//
// Tracing (--trace): the kernel is a template on kTrace, as step 01's; <false> is the plain
// kernel. A traced CTA records, where each phase ends: its Q rows loaded; in pass one each K
// tile loaded and its S tile computed; in pass two each K and V tile loaded, S computed, the
// softmax (P̃) and the accumulation into O; then its O rows and LSE stored. Nothing is marked
// cached: the IO model (io_tiled_forward) counts every tile each time it is loaded, K twice
// per query tile (both passes read it from HBM as far as the model is concerned). A tile's
// bytes are its real rows × d × 4: the zero-filled rows of a tail tile past N move nothing.
// Causal: the key tiles past the CTA's last row are skipped, one skip event per pass.
#include "steps/03_tiled/tiled.hpp"

#include <cstdint>

#include "common/check.hpp"
#include "common/flash_tile.cuh"
#include "common/tile_policies.cuh"
#include "common/io_model.hpp"
#include "common/recorder/device.cuh"
#include "common/recorder/launch.cuh"

namespace fs {

namespace {

// The tile of the score matrix a CTA works on: the same as step 04's (common/flash_tile.cuh),
// so that the two steps differ only in their algorithm.
template <int D>
using TiledTile = DefaultRowTile<D>;

template <int D, bool kCausal, bool kTrace>
__global__ void __launch_bounds__(TiledTile<D>::kThreads) tiled_forward_kernel(const FwdParams p,
                                                                               trace::Slices slices) {
  using T = TiledTile<D>;
  constexpr int BC = T::kBC, DC = T::kDC, R = T::kRows;
  trace::CtaTracer<kTrace> tr(slices);
  extern __shared__ float smem[];  // stage s: K tile at smem + 2s·BC·D, V tile after it

  const int N = p.shape.N;
  const std::int64_t bh = blockIdx.y, head = bh * N * D;
  const float* gK = as<float>(p.k) + head;  // (N, D)
  const float* gV = as<float>(p.v) + head;  // (N, D)
  // Causal: the last query tiles have the most key tiles; launch them first.
  const int tile = kCausal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int row0 = tile * T::kBR;
  const int row = T::first_row(row0), part = T::part();
  // For the trace: the CTA's real rows, the real keys of the tile at j0.
  const int rows = min(T::kBR, N - row0);
  auto keys = [&](int j0) { return min(BC, N - j0); };

  float q[R][DC];
  load_q_rows<D, R, DC>(as<float>(p.q) + head, row, N, part, p.scale * kLog2e, q);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::Q, bh, row0, rows, 0, D, rows * D * kF);

  // The key tiles this CTA visits. Causal: none past its last row.
  const int last_row = min(N, row0 + T::kBR) - 1;
  const DenseWalk<BC> walk = DenseWalk<BC>::keys_of(p.sparse, N, row0, last_row, kCausal);
  const int n_tiles = walk.size();
  auto k_tile = [&](int stage) { return smem + 2 * stage * T::kTileFloats; };
  auto v_tile = [&](int stage) { return smem + (2 * stage + 1) * T::kTileFloats; };

  // Pass one: the row max m (log2 units), K tiles only, double-buffered.
  float m[R];
#pragma unroll
  for (int r = 0; r < R; ++r) m[r] = -INFINITY;
  if (n_tiles > 0) {
    load_rows_async<BC, D, T::kThreads>(k_tile(0), gK, walk.start(0), N);
    cp_async_commit();
  }
  for (int t = 0; t < n_tiles; ++t) {
    const int j0 = walk.start(t);
    if (t + 1 < n_tiles) {  // prefetch tile t+1 while tile t is computed
      load_rows_async<BC, D, T::kThreads>(k_tile((t + 1) & 1), gK, walk.start(t + 1), N);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // tile t has landed, for every thread's reads below
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::K, bh, j0, keys(j0), 0, D, keys(j0) * D * kF);

    float s[R][BC];  // S_ij for this thread's rows, log2 units
    row_scores<D, BC, R, DC, T::kSplit>(q, k_tile(t & 1), part, s);
    if (j0 + BC > N || (kCausal && j0 + BC - 1 > row0)) mask_scores<R, BC>(s, j0, N, row, kCausal);
#pragma unroll
    for (int r = 0; r < R; ++r) m[r] = fmaxf(m[r], row_max<BC>(s[r]));
    FS_TRACE_EVENT(tr, Kind::ComputeS, Tensor::S, bh, row0, rows, j0, keys(j0), 0);
    __syncthreads();  // everyone is done with stage t&1 before tile t+2 overwrites it
  }
  if constexpr (kTrace)  // the key tiles past the CTA's last row (causal), never loaded
    walk.for_each_skipped(N, [&](int j, int n) { FS_TRACE_EVENT(tr, Kind::Skip, Tensor::S, bh, row0, rows, j, n, 0); });

  // Pass two: ℓ and O with the final max, K and V tiles.
  // A row with every key masked has m = -inf; exp2(-inf - (-inf)) would be NaN. Subtracting 0
  // instead leaves exp2(-inf) = 0 for all its entries: ℓ = 0, and store_row writes O = 0.
  float m_safe[R];
#pragma unroll
  for (int r = 0; r < R; ++r) m_safe[r] = m[r] == -INFINITY ? 0.f : m[r];
  float o[R][DC] = {};
  float l[R] = {};
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
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int j = 0; j < BC; ++j) {
        s[r][j] = exp2f(s[r][j] - m_safe[r]);  // P̃_ij, relative to the final max
        l[r] += s[r][j];
      }
    FS_TRACE_EVENT(tr, Kind::Softmax, Tensor::P, bh, row0, rows, j0, keys(j0), 0);
    accumulate_pv<D, BC, R, DC>(s, v_tile(t & 1), part, o);
    FS_TRACE_EVENT(tr, Kind::AccumulateO, Tensor::O, bh, row0, rows, 0, D, 0);
    __syncthreads();  // everyone is done with stage t&1 before tile t+2 overwrites it
  }
  if constexpr (kTrace)
    walk.for_each_skipped(N, [&](int j, int n) { FS_TRACE_EVENT(tr, Kind::Skip, Tensor::S, bh, row0, rows, j, n, 0); });
#pragma unroll
  for (int r = 0; r < R; ++r)
    store_row<D, DC>(as<float>(p.o) + head, p.lse + bh * N, row + r, N, part, o[r], m[r], l[r]);
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::O, bh, row0, rows, 0, D, rows * D * kF);
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::LSE, bh, row0, rows, 0, 1, rows * kF);
}

template <int D>
void launch(const FwdParams& p) {
  using T = TiledTile<D>;
  const std::size_t smem = 2 * 2 * T::kTileFloats * sizeof(float);  // 2 stages × (K, V)
  const dim3 grid((p.shape.N + T::kBR - 1) / T::kBR, static_cast<unsigned>(p.shape.heads()));
  if (p.trace) p.trace->set_tiles(T::kBR, T::kBC);
  if (p.causal)
    trace::launch(p.trace, "tiled_forward_kernel", [](auto tr) { return tiled_forward_kernel<D, true, tr>; }, grid,
                  T::kThreads, smem, p.stream, p);
  else
    trace::launch(p.trace, "tiled_forward_kernel", [](auto tr) { return tiled_forward_kernel<D, false, tr>; }, grid,
                  T::kThreads, smem, p.stream, p);
}

IoCount io_forward(const Shape& s, const PassSettings& settings) {
  const TileSizes t = tiled_tile_sizes(s.d);
  return io_tiled_forward(s, settings.causal, t.Br, t.Bc);
}

}  // namespace

TileSizes tiled_tile_sizes(int d) {
  if (!is_compiled_head_dim(d)) return {};
  return dispatch_head_dim(d, [](auto D) { return TileSizes{TiledTile<D>::kBR, TiledTile<D>::kBC}; });
}

void tiled_forward(const FwdParams& p) {
  if (!is_compiled_head_dim(p.shape.d)) throw CudaError(cudaErrorInvalidValue, "tiled_forward: unsupported d");
  dispatch_head_dim(p.shape.d, [&](auto D) { launch<D>(p); });
}

StepInfo step03_info() {
  StepInfo s;
  s.id = "03_tiled";
  s.title = "tiling: K streamed twice (row max, then O), no N×N matrix in HBM";
  s.variants = {"two_pass"};
  s.forward = tiled_forward;
  s.unsupported = tiled_unsupported;
  s.io_forward = io_forward;
  return s;
}

}  // namespace fs
