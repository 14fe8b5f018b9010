// Step 05 — the recomputation backward (docs/notation.md, Algorithm 4), with dropout.
//
// The forward is step 04's fa2 kernel (steps/04_online_softmax/flash2_forward.cuh); with
// dropout on, the same kernel instantiated with PhiloxDropout (dropout.cuh) multiplies P̃ by the
// mask Z before P̃V. It leaves O and LSE: all the backward needs besides Q, K, V and dO.
//
// The backward's kernels are in backward.cuh (step 06 instantiates them again, with its walk), and
// launch.cuh chooses among their instantiations at each head dimension (one translation unit each):
//   atomic         preprocess (D = rowsum(dO ∘ O), dQ = 0), then one kernel over K/V tiles
//                  that adds dQ_i += τ dS_ij K_j with atomics: 5 matmuls of N²d per head, but
//                  the order the adds land in changes run to run, and so do dQ's last bits.
//   deterministic  preprocess, the same dK/dV kernel without dQ, then a dQ kernel over Q
//                  tiles that recomputes S and dP and sums dS K in a fixed order: 7 matmuls,
//                  no atomics, bit-identical runs.
#include "steps/05_recompute_backward/backward.hpp"

#include <algorithm>
#include <functional>

#include "common/flash_tile.cuh"
#include "common/io_model.hpp"
#include "steps/04_online_softmax/flash.hpp"
#include "steps/05_recompute_backward/backward.cuh"

namespace fs {

namespace {

std::size_t bwd_ws_bytes(const Shape& s, const PassSettings&) { return s.rows() * sizeof(float); }  // D

IoCount io_forward(const Shape& s, const PassSettings& settings) {
  const Flash2Tiles t = flash2_tiles(s.d);
  const ScoreFeatures& f = settings.features;
  return io_flash2_forward(s, settings.causal, t.Br, t.Bc, 4, clamp_reach(f.window_left, s.N, s.keys()),
                           clamp_reach(f.window_right, s.N, s.keys()));
}

IoCount io_backward(const Shape& s, const PassSettings& settings) {
  const ScoreFeatures& f = settings.features;
  return io_recompute_backward(s, settings.causal, settings.variant == kAtomicDQ, clamp_reach(f.window_left, s.N, s.keys()),
                               clamp_reach(f.window_right, s.N, s.keys()));
}

}  // namespace

BwdTiles backward_tiles(int d) {
  if (!is_compiled_head_dim(d)) return {};
  return dispatch_head_dim(d, [](auto D) {
    using T = BwdTile<D>;
    return BwdTiles{T::kBR, kBwdStage, T::kRows, T::kSplit};
  });
}

IoCount io_recompute_backward(const Shape& s, bool causal, bool atomic_dq, int window_left, int window_right) {
  const BwdTiles t = backward_tiles(s.d);
  // Dense: a dK/dV CTA visits the query tiles from the first whose diagonal key i + δ reaches
  // its first key (causal) or all; a dQ CTA the key tiles up to its last row's diagonal key
  // (causal) or all. A window clips both to the tiles it reaches (window_lo, window_end), as the
  // kernels' FlashFeatures does; so does δ ≠ 0, whose causal bounds can fall outside [0, Nk).
  const int Nk = s.keys(), delta = Nk - s.N;
  const bool clipped = !s.square() || window_left >= 0 || window_right >= 0;
  auto visit_run = [&](int first, int end, int lo, int hi, const TileVisit& visit) {
    const int count = (end - first + t.stage - 1) / t.stage;
    const TileRun run = clipped ? clip_tiles(first, count, t.stage, lo, hi) : TileRun{first, count};
    for (int c = 0; c < run.count; ++c) visit(run.first + c * t.stage);
  };
  auto query_tiles = [&](int key0, const TileVisit& visit) {
    const int last_key = std::min(Nk, key0 + t.keys) - 1;
    visit_run(causal ? (key0 - delta) / t.stage * t.stage : 0, s.N, window_lo(key0 - delta, window_right),
              window_end(last_key - delta, window_left), visit);
  };
  auto key_tiles = [&](int row0, const TileVisit& visit) {
    const int last_row = std::min(s.N, row0 + t.keys) - 1;
    visit_run(0, causal ? last_row + delta + 1 : Nk, window_lo(row0 + delta, window_left),
              std::min(Nk, window_end(last_row + delta, window_right)), visit);
  };
  return io_backward_walk(s, atomic_dq, t, query_tiles, key_tiles);
}

IoCount io_backward_walk(const Shape& s, bool atomic_dq, const BwdTiles& t, const TileLister& query_tiles,
                         const TileLister& key_tiles) {
  // Per query head (q_*) and per K/V head (kv_*): a K/V head's dK/dV CTAs visit the query tiles
  // of each of the G = H / Hkv query heads of its group.
  const std::int64_t N = s.N, Nk = s.keys(), d = s.d, G = s.H / s.kv_heads();
  auto real = [&](std::int64_t start, std::int64_t n, std::int64_t end) {
    return std::max<std::int64_t>(0, std::min(n, end - start));
  };
  std::int64_t q_reads = 2 * N * d, q_writes = N;  // preprocess: O, dO; D
  std::int64_t kv_reads = 0, kv_writes = 0;
  if (atomic_dq) q_writes += N * d;                // dQ = 0
  for (int key0 = 0; key0 < Nk; key0 += t.keys) {
    const std::int64_t keys = real(key0, t.keys, Nk);
    kv_reads += 2 * keys * d;   // K_j, V_j
    kv_writes += 2 * keys * d;  // dK_j, dV_j
    query_tiles(key0, [&](int i0) {  // for each query head of the group
      const std::int64_t q = real(i0, t.stage, N);
      q_reads += 2 * q * d + 2 * q;  // Q_i, dO_i, LSE_i, D_i
      if (atomic_dq) {
        q_reads += q * d;   // dQ_i, read and written by the atomic adds
        q_writes += q * d;
      }
    });
  }
  if (!atomic_dq)
    for (int row0 = 0; row0 < N; row0 += t.keys) {
      const std::int64_t rows = real(row0, t.keys, N);
      q_reads += 2 * rows * d + 2 * rows;  // Q_i, dO_i, LSE_i, D_i
      q_writes += rows * d;                // dQ_i
      key_tiles(row0, [&](int j0) { q_reads += 2 * real(j0, t.stage, Nk) * d; });  // K_j, V_j
    }
  const std::int64_t q_heads = s.heads(), kv_heads = q_heads / G, f = sizeof(float);
  return {(q_reads * q_heads + kv_reads * kv_heads) * f, (q_writes * q_heads + kv_writes * kv_heads) * f};
}

void recompute_forward(const FwdParams& p) {
  if (!is_compiled_head_dim(p.shape.d)) throw CudaError(cudaErrorInvalidValue, "recompute_forward: unsupported d");
  if (!p.dropout.on()) {  // exactly step 04's fa2
    FwdParams q = p;
    q.variant = kFlash2;
    flash_forward(q);
    return;
  }
  switch (p.shape.d) {  // launch.cuh, compiled per d (backward_instance.cu.in)
    case 16: return recompute_forward_d16(p);
    case 32: return recompute_forward_d32(p);
    case 64: return recompute_forward_d64(p);
    default: return recompute_forward_d128(p);
  }
}

void recompute_backward(const BwdParams& p) {
  if (!is_compiled_head_dim(p.shape.d)) throw CudaError(cudaErrorInvalidValue, "recompute_backward: unsupported d");
  switch (p.shape.d) {
    case 16: return recompute_backward_d16(p);
    case 32: return recompute_backward_d32(p);
    case 64: return recompute_backward_d64(p);
    default: return recompute_backward_d128(p);
  }
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
  s.untraced = untraced_head_dim;  // traced kernels at d = 64 only (trace::kTracedAt)
  s.io_forward = io_forward;
  s.io_backward = io_backward;
  s.dropout = true;
  s.score_mods = true;
  s.kv_shapes = true;
  s.packed = true;  // both variants' (the forward is step 04's fa2)
  s.strides = true;  // every kernel's
  s.order_dependent = {"atomic"};
  return s;
}

}  // namespace fs
