// Step 05 — the recomputation backward (docs/notation.md, Algorithm 4), with dropout.
//
// The forward is step 04's fa2 kernel (steps/04_online_softmax/flash2_forward.cuh); with
// dropout on, the same kernel instantiated with PhiloxDropout (dropout.cuh) multiplies P̃ by the
// mask Z before P̃V. It leaves O and LSE: all the backward needs besides Q, K, V and dO.
//
// The backward's kernels are in backward.cuh (step 06 instantiates them again, with its walk):
//   atomic         preprocess (D = rowsum(dO ∘ O), dQ = 0), then one kernel over K/V tiles
//                  that adds dQ_i += τ dS_ij K_j with atomics: 5 matmuls of N²d per head, but
//                  the order the adds land in changes run to run, and so do dQ's last bits.
//   deterministic  preprocess, the same dK/dV kernel without dQ, then a dQ kernel over Q
//                  tiles that recomputes S and dP and sums dS K in a fixed order: 7 matmuls,
//                  no atomics, bit-identical runs.
#include "steps/05_recompute_backward/backward.hpp"

#include <algorithm>
#include <functional>

#include "common/io_model.hpp"
#include "common/flash_tile.cuh"
#include "steps/04_online_softmax/flash.hpp"
#include "steps/04_online_softmax/flash2_forward.cuh"
#include "steps/05_recompute_backward/backward.cuh"

namespace fs {

namespace {

std::size_t bwd_ws_bytes(const Shape& s, const PassSettings&) { return s.rows() * sizeof(float); }  // D

IoCount io_forward(const Shape& s, const PassSettings& settings) {
  const Flash2Tiles t = flash2_tiles(s.d);
  return io_flash2_forward(s, settings.causal, t.Br, t.Bc);
}

IoCount io_backward(const Shape& s, const PassSettings& settings) {
  return io_recompute_backward(s, settings.causal, settings.variant == kAtomicDQ);
}

}  // namespace

BwdTiles backward_tiles(int d) {
  if (!is_compiled_head_dim(d)) return {};
  return dispatch_head_dim(d, [](auto D) {
    using T = BwdTile<D>;
    return BwdTiles{T::kBR, kBwdStage, T::kRows, T::kSplit};
  });
}

IoCount io_recompute_backward(const Shape& s, bool causal, bool atomic_dq) {
  const BwdTiles t = backward_tiles(s.d);
  // Dense: a dK/dV CTA visits the query tiles from its first key on (causal) or all; a dQ CTA
  // the key tiles up to its last row (causal) or all.
  auto query_tiles = [&](int key0, const TileVisit& visit) {
    for (int i0 = causal ? key0 / t.stage * t.stage : 0; i0 < s.N; i0 += t.stage) visit(i0);
  };
  auto key_tiles = [&](int row0, const TileVisit& visit) {
    const int end = causal ? std::min(s.N, row0 + t.keys) : s.N;
    for (int j0 = 0; j0 < end; j0 += t.stage) visit(j0);
  };
  return io_backward_walk(s, atomic_dq, t, query_tiles, key_tiles);
}

IoCount io_backward_walk(const Shape& s, bool atomic_dq, const BwdTiles& t, const TileLister& query_tiles,
                         const TileLister& key_tiles) {
  const std::int64_t N = s.N, d = s.d;
  auto real = [&](std::int64_t start, std::int64_t n) { return std::max<std::int64_t>(0, std::min(n, N - start)); };
  std::int64_t reads = 2 * N * d, writes = N;  // preprocess: O, dO; D
  if (atomic_dq) writes += N * d;              // dQ = 0
  for (int key0 = 0; key0 < N; key0 += t.keys) {
    const std::int64_t keys = real(key0, t.keys);
    reads += 2 * keys * d;   // K_j, V_j
    writes += 2 * keys * d;  // dK_j, dV_j
    query_tiles(key0, [&](int i0) {
      const std::int64_t q = real(i0, t.stage);
      reads += 2 * q * d + 2 * q;  // Q_i, dO_i, LSE_i, D_i
      if (atomic_dq) {
        reads += q * d;   // dQ_i, read and written by the atomic adds
        writes += q * d;
      }
    });
  }
  if (!atomic_dq)
    for (int row0 = 0; row0 < N; row0 += t.keys) {
      const std::int64_t rows = real(row0, t.keys);
      reads += 2 * rows * d + 2 * rows;  // Q_i, dO_i, LSE_i, D_i
      writes += rows * d;                // dQ_i
      key_tiles(row0, [&](int j0) { reads += 2 * real(j0, t.stage) * d; });  // K_j, V_j
    }
  const std::int64_t heads = s.heads(), f = sizeof(float);
  return {reads * heads * f, writes * heads * f};
}

void recompute_forward(const FwdParams& p) {
  if (!is_compiled_head_dim(p.shape.d)) throw CudaError(cudaErrorInvalidValue, "recompute_forward: unsupported d");
  if (!p.dropout.on()) {  // exactly step 04's fa2
    FwdParams q = p;
    q.variant = kFlash2;
    flash_forward(q);
    return;
  }
  dispatch_head_dim(p.shape.d, [&](auto D) { launch_flash2<D, Flash2Tile<D>, DenseWalk, PhiloxDropout>(p); });
}

void recompute_backward(const BwdParams& p) {
  if (!is_compiled_head_dim(p.shape.d)) throw CudaError(cudaErrorInvalidValue, "recompute_backward: unsupported d");
  run_backward<DenseWalk>(p);
}

StepInfo step05_info() {
  StepInfo s;
  s.id = "05_recompute_backward";
  s.title = "the recomputation backward: gradients from O and LSE, no N×N matrix (Algorithm 4), dropout";
  s.variants = {"atomic", "deterministic"};
  s.forward = recompute_forward;
  s.backward = recompute_backward;
  s.bwd_workspace_bytes = bwd_ws_bytes;
  s.unsupported = tiled_unsupported;
  s.io_forward = io_forward;
  s.io_backward = io_backward;
  s.dropout = true;
  s.order_dependent = {"atomic"};
  return s;
}

}  // namespace fs
