// Step 07 — SMYRF (Daras et al., NeurIPS 2020): attention inside balanced clusters that
// asymmetric LSH finds, a drop-in for dense attention at O(N log N) (common/smyrf.hpp says what
// it computes; docs/notation.md has the notation).
//
// What changes from steps 04-05: which (query, key) pairs are computed. Dense attention scores
// all N² of them; SMYRF scores, in each of `hashes` rounds, each cluster's C_q queries against
// its C_k keys — hashes·N·C_k scores in all — and merges the rounds by their LSE.
//   HBM traffic   Θ(Nd + N²d²/M) (step 04) → Θ(hashes·N·d) per pass, plus the sort
//   FLOPs         4·N²·d → 4·hashes·N·C_k·d
//
// The pass, in launches (schedule.cuh; the kernels in hash.cuh, cluster_forward.cuh, cluster_backward.cuh):
//   forward   norms → hashes → CUB's segmented radix sort (the clusters, kept in the workspace)
//             → one round kernel per round, each gathering its cluster's rows and merging into O, LSE
//   backward  step 05's preprocess (D, zeroed dQ) → per round: dK/dV over key slots, dQ over a
//             cluster's query slots, each adding its round's part to the gradients
#include "steps/07_smyrf/smyrf.hpp"

#include <cub/device/device_segmented_radix_sort.cuh>

#include <algorithm>
#include <initializer_list>
#include <string>

#include "common/check.hpp"
#include "common/flash_tile.cuh"
#include "common/recorder/launch.cuh"
#include "common/smyrf.hpp"
#include "steps/07_smyrf/schedule.cuh"

namespace fs {

namespace {

constexpr std::size_t kAlign = 256;
std::size_t align_up(std::size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// Temporary storage of one call of the sort over `segments` segments of N keys, double-buffered
// (the keys and values ping-pong between two buffers of ours, so the sort's own storage is
// small). Asking CUB needs a GPU; without one (a CPU build's memory estimate) 1 MiB is ample.
std::size_t sort_temp_bytes(int segments, int N) {
  std::size_t bytes = 0;
  cub::DoubleBuffer<float> keys(nullptr, nullptr);
  cub::DoubleBuffer<std::int32_t> values(nullptr, nullptr);
  const int* offsets = nullptr;
  if (cub::DeviceSegmentedRadixSort::SortPairs(nullptr, bytes, keys, values, segments * N, segments, offsets,
                                               offsets + 1) != cudaSuccess) {
    (void)cudaGetLastError();  // the query failed (no device): clear it
    return std::size_t(1) << 20;
  }
  return std::max<std::size_t>(bytes, 1);
}

}  // namespace

SmyrfWorkspace smyrf_workspace(const Shape& s, const SmyrfParams& p) {
  SmyrfWorkspace w;
  w.segments = 2 * s.heads() * p.hashes;
  const std::size_t items = std::size_t(w.segments) * s.N;
  w.batch = static_cast<int>(std::min<std::int64_t>(w.segments, 0x7fffffff / s.N));
  std::size_t at = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t start = at;
    at = align_up(at + bytes);
    return start;
  };
  w.orders = take(items * sizeof(std::int32_t));
  w.norms = take(2 * std::size_t(s.heads()) * sizeof(unsigned long long));
  w.keys0 = take(items * sizeof(float));
  w.keys1 = take(items * sizeof(float));
  w.values1 = take(items * sizeof(std::int32_t));
  w.offsets = take((std::size_t(w.batch) + 1) * sizeof(int));
  w.temp_bytes = sort_temp_bytes(w.batch, s.N);
  w.temp = take(w.temp_bytes);
  w.total = at;
  return w;
}

SmyrfTiles smyrf_tiles(int d, const SmyrfParams& p) {
  SmyrfTiles t;
  t.fwd_rows = smyrf_cta_rows(p.q_cluster);
  t.fwd_keys = d == 128 ? SmyrfRowShape<128>::BC : SmyrfRowShape<64>::BC;
  t.dkdv_keys = smyrf_bwd_rows(p.k_cluster, d);
  t.dq_rows = smyrf_bwd_rows(p.q_cluster, d);
  t.stage = kBwdStage;
  return t;
}

// ===========================================================================================
// The passes: the kernels in schedule.cuh, and around them the memsets and CUB's sort
// ===========================================================================================

namespace {

template <int D>
void cluster_on_gpu(const FwdParams& p, const SmyrfWorkspace& w, unsigned char* ws) {
  const int N = p.shape.N;
  auto* orders = reinterpret_cast<std::int32_t*>(ws + w.orders);
  auto* norms = reinterpret_cast<unsigned long long*>(ws + w.norms);
  auto* keys0 = reinterpret_cast<float*>(ws + w.keys0);
  auto* keys1 = reinterpret_cast<float*>(ws + w.keys1);
  auto* values1 = reinterpret_cast<std::int32_t*>(ws + w.values1);
  auto* offsets = reinterpret_cast<int*>(ws + w.offsets);
  const nvtx::Range range("cluster: norms, hashes, sort");  // the sort's own launches are CUB's
  FS_CUDA_CHECK(cudaMemsetAsync(norms, 0, 2 * std::size_t(p.shape.heads()) * sizeof(unsigned long long), p.stream));
  launch_hashes<D>(p, norms, keys0, orders);
  trace::launch_untraced("smyrf_offsets_kernel", smyrf_offsets_kernel, (w.batch + 256) / 256, 256, 0, p.stream, offsets,
                         w.batch, N);
  // The sort, in calls of at most w.batch segments (CUB counts items in an int).
  for (std::int64_t first = 0; first < w.segments; first += w.batch) {
    const int n = static_cast<int>(std::min<std::int64_t>(w.batch, w.segments - first));
    const std::int64_t at = first * N;
    cub::DoubleBuffer<float> keys(keys0 + at, keys1 + at);
    cub::DoubleBuffer<std::int32_t> values(orders + at, values1 + at);
    std::size_t temp = w.temp_bytes;
    FS_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(ws + w.temp, temp, keys, values, n * N, n, offsets,
                                                           offsets + 1, 0, 32, p.stream));
    // The sorted values end in one of the two buffers, by the number of passes: the orders' is kept.
    if (values.Current() != orders + at)
      FS_CUDA_CHECK(cudaMemcpyAsync(orders + at, values.Current(), std::size_t(n) * N * sizeof(std::int32_t),
                                    cudaMemcpyDeviceToDevice, p.stream));
  }
}

// The clusters' kernels read contiguous (B, H, N, d) tensors only (StepInfo::strides is off): every
// Strides left at zero. Throws CudaError (invalid value) otherwise.
void require_contiguous(std::initializer_list<const Strides*> strides, const char* who) {
  for (const Strides* st : strides)
    if (!st->dense()) throw CudaError(cudaErrorInvalidValue, std::string(who) + ": contiguous tensors only (strides left at zero)");
}

}  // namespace

void smyrf_forward(const FwdParams& p) {
  if (!is_compiled_head_dim(p.shape.d) || !p.smyrf.on() || p.dtype != DType::fp32 || p.causal)
    throw CudaError(cudaErrorInvalidValue, "smyrf_forward: fp32, d in {16, 32, 64, 128}, not causal, clusters on");
  require_contiguous({&p.q_strides, &p.k_strides, &p.v_strides, &p.o_strides}, "smyrf_forward");
  const SmyrfWorkspace w = smyrf_workspace(p.shape, p.smyrf);
  auto* ws = static_cast<unsigned char*>(p.workspace);
  auto* orders = reinterpret_cast<std::int32_t*>(ws + w.orders);
  dispatch_head_dim(p.shape.d, [&](auto D) {
    if (p.smyrf_orders)  // given clusters (--load): the workspace holds them as if hashed here
      FS_CUDA_CHECK(cudaMemcpyAsync(orders, p.smyrf_orders, w.segments * p.shape.N * sizeof(std::int32_t),
                                    cudaMemcpyDeviceToDevice, p.stream));
    else
      cluster_on_gpu<D>(p, w, ws);
    launch_forward_rounds<D>(p, orders);
  });
}

void smyrf_backward(const BwdParams& params) {
  if (!is_compiled_head_dim(params.shape.d) || !params.smyrf.on() || params.dtype != DType::fp32 || params.causal)
    throw CudaError(cudaErrorInvalidValue, "smyrf_backward: fp32, d in {16, 32, 64, 128}, not causal, clusters on");
  require_contiguous({&params.q_strides, &params.k_strides, &params.v_strides, &params.o_strides, &params.dout_strides,
                      &params.dq_strides, &params.dk_strides, &params.dv_strides},
                     "smyrf_backward");
  const BwdParams& p = params;
  const Shape& s = p.shape;
  const SmyrfWorkspace w = smyrf_workspace(s, p.smyrf);
  const auto* orders = reinterpret_cast<const std::int32_t*>(static_cast<const unsigned char*>(p.fwd_workspace) + w.orders);
  FS_CUDA_CHECK(cudaMemsetAsync(p.dk, 0, s.elems() * sizeof(float), p.stream));  // every round adds to dK, dV
  FS_CUDA_CHECK(cudaMemsetAsync(p.dv, 0, s.elems() * sizeof(float), p.stream));
  dispatch_head_dim(s.d, [&](auto D) { launch_backward_rounds<D>(p, static_cast<float*>(p.workspace), orders); });
}

// ===========================================================================================
// Host side: what the kernels take, the workspace, the IO model
// ===========================================================================================

namespace {

std::size_t fwd_ws_bytes(const Shape& s, const PassSettings& settings) {
  return settings.smyrf.on() ? smyrf_workspace(s, settings.smyrf).total : 0;
}
std::size_t bwd_ws_bytes(const Shape& s, const PassSettings&) { return s.rows() * sizeof(float); }  // D

const std::int32_t* cluster_orders(const void* ws, const Shape& s, const PassSettings& settings) {
  return reinterpret_cast<const std::int32_t*>(static_cast<const unsigned char*>(ws) +
                                               smyrf_workspace(s, settings.smyrf).orders);
}

std::string unsupported(const Shape& s, const PassSettings& settings) {
  if (std::string why = tiled_unsupported(s); !why.empty()) return why;
  if (2 * s.heads() > 65535) return "B·H must be at most 32767 (the clustering's grid y is 2·B·H)";
  if (settings.causal)
    return "SMYRF has no causal form: a cluster holds keys from before and after its queries (the paper's has "
           "none either)";
  if (std::string why = smyrf_params_error(s, settings.smyrf); !why.empty()) return why;
  if (settings.clusters && (settings.clusters->hashes != settings.smyrf.hashes || settings.clusters->N != s.N))
    return "the given clusters are for another shape or number of rounds";
  return {};
}

IoCount io_forward(const Shape& s, const PassSettings& settings) {
  return io_smyrf_forward(s, settings.smyrf, settings.clusters != nullptr);
}
IoCount io_backward(const Shape& s, const PassSettings& settings) { return io_smyrf_backward(s, settings.smyrf); }

// What no event of a trace records, counted as io_smyrf_forward/backward count it: the sort
// (CUB's kernels), or the copy of given orders; the memsets of dK and dV.
std::vector<UntracedIo> untraced_io(const Shape& s, const PassSettings& settings, const std::string& pass) {
  const std::int64_t rows = 2 * settings.smyrf.hashes * std::int64_t(s.N) * s.heads();  // sort items
  const std::int64_t f = sizeof(float), idx = sizeof(std::int32_t);
  if (pass == "bwd") return {{"cudaMemsetAsync: dK, dV = 0", 0, 2 * s.elems() * f, {"dK", "dV"}}};
  if (settings.clusters) return {{"cudaMemcpyAsync: the given orders", rows * idx, rows * idx, {"order"}}};
  return {{"cub::DeviceSegmentedRadixSort::SortPairs", rows * (f + idx), rows * idx, {"order"}}};
}

}  // namespace

IoCount io_smyrf_forward(const Shape& s, const SmyrfParams& p, bool given_orders) {
  const std::int64_t N = s.N, d = s.d, R = p.hashes, f = sizeof(float), idx = sizeof(std::int32_t);
  const SmyrfGeometry g = smyrf_geometry(s.N, p);
  const SmyrfTiles t = smyrf_tiles(s.d, p);
  std::int64_t reads = 0, writes = 0;  // bytes per head
  if (given_orders) {                        // the given orders copied into the workspace
    reads += 2 * R * N * idx;
    writes += 2 * R * N * idx;
  } else {
    reads += 2 * N * d * f;                  // norms: Q, K
    reads += 2 * N * d * f;                  // hashes: Q, K (and the two norms, 16 bytes)
    writes += 2 * R * N * (f + idx);         // a key and a value per row and round
    reads += 2 * R * N * (f + idx);          // the sort: its input once ...
    writes += 2 * R * N * idx;               // ... and the orders out
  }
  for (std::int64_t round = 0; round < R; ++round)
    for (int c = 0; c < g.clusters(); ++c) {
      const std::int64_t keys = g.key_end(c) - g.key_begin(c);
      for (int row0 = g.query_begin(c); row0 < g.query_end(c); row0 += t.fwd_rows) {
        const std::int64_t rows = std::min<std::int64_t>(t.fwd_rows, g.query_end(c) - row0);
        reads += rows * (idx + d * f) + keys * (idx + 2 * d * f);  // gathered Q rows; K, V of the cluster
        if (round > 0) reads += rows * (d + 1) * f;                 // the merge reads O, LSE ...
        writes += rows * (d + 1) * f;                               // ... and writes them
      }
    }
  return {reads * s.heads(), writes * s.heads()};
}

IoCount io_smyrf_backward(const Shape& s, const SmyrfParams& p) {
  const std::int64_t N = s.N, d = s.d, R = p.hashes, f = sizeof(float), idx = sizeof(std::int32_t);
  const SmyrfGeometry g = smyrf_geometry(s.N, p);
  const SmyrfTiles t = smyrf_tiles(s.d, p);
  std::int64_t reads = 0, writes = 0;
  reads += 2 * N * d * f;               // preprocess: O, dO
  writes += N * f + 3 * N * d * f;      // D; dQ, dK, dV zeroed
  for (std::int64_t round = 0; round < R; ++round) {
    // dK/dV: each CTA's keys, then every cluster meeting them: its queries' Q, dO, LSE, D.
    for (int key0 = 0; key0 < N; key0 += t.dkdv_keys) {
      const int key_end = static_cast<int>(std::min<std::int64_t>(N, key0 + t.dkdv_keys));
      int first = 0, last = 0;
      g.clusters_of_keys(key0, key_end, &first, &last);
      if (first > last) continue;
      const std::int64_t keys = key_end - key0;
      reads += keys * (idx + 2 * d * f);
      for (int c = first; c <= last; ++c) reads += (g.query_end(c) - g.query_begin(c)) * (idx + 2 * d * f + 2 * f);
      reads += keys * 2 * d * f;  // dK, dV read, added to ...
      writes += keys * 2 * d * f;  // ... and written
    }
    // dQ: each CTA's queries (Q, dO, LSE, D), its cluster's K, V; dQ read and written.
    for (int c = 0; c < g.clusters(); ++c) {
      const std::int64_t keys = g.key_end(c) - g.key_begin(c);
      for (int row0 = g.query_begin(c); row0 < g.query_end(c); row0 += t.dq_rows) {
        const std::int64_t rows = std::min<std::int64_t>(t.dq_rows, g.query_end(c) - row0);
        reads += rows * (idx + 2 * d * f + 2 * f) + keys * (idx + 2 * d * f) + rows * d * f;
        writes += rows * d * f;
      }
    }
  }
  return {reads * s.heads(), writes * s.heads()};
}

StepInfo step07_info() {
  StepInfo s;
  s.id = "07_smyrf";
  s.title = "SMYRF: attention inside asymmetric-LSH clusters, rounds merged by their LSE (approximate)";
  s.variants = {"clusters"};
  s.forward = smyrf_forward;
  s.backward = smyrf_backward;
  s.fwd_workspace_bytes = fwd_ws_bytes;
  s.bwd_workspace_bytes = bwd_ws_bytes;
  s.unsupported = unsupported;
  s.untraced = untraced_head_dim;  // traced kernels at d = 64 only (trace::kTracedAt)
  s.io_forward = io_forward;
  s.io_backward = io_backward;
  s.clustered = true;
  s.cluster_orders = cluster_orders;
  s.untraced_io = untraced_io;
  s.memory_note = "Its extra memory is O(B·H·hashes·N): the clusters and the sort's buffers";
  return s;
}

}  // namespace fs
