// Step 06 — block-sparse FlashAttention (docs/notation.md, Algorithm 5): Algorithms 2 and 4
// unchanged, except that tile (i, j) is skipped when the block mask says 0.
//
// What the step adds to the kernels is one policy object, BlockListWalk (block_list_walk.cuh):
// step 04's forward kernel and step 05's backward kernels, instantiated with it, walk the
// nonzero blocks of the mask where DenseWalk walks every tile. The rest of this file is the host
// side: which masks the kernels' tiles allow, and the IO model of a pass over the mask's lists.
// A row whose every block is masked sees no key: O = 0, LSE = −inf, and its gradients are 0 (the
// backward's P = exp(S − LSE) is 0 there).
#include "steps/06_block_sparse/block_sparse.hpp"

#include <numeric>
#include <string>
#include <utility>

#include "common/check.hpp"
#include "common/flash_tile.cuh"
#include "steps/04_online_softmax/flash.hpp"
#include "steps/04_online_softmax/flash2_forward.cuh"
#include "steps/05_recompute_backward/backward.cuh"
#include "steps/05_recompute_backward/backward.hpp"
#include "steps/06_block_sparse/block_list_walk.cuh"

namespace fs {

// ===========================================================================================
// The kernels: step 04's and step 05's, walking the mask's lists
// ===========================================================================================

void block_sparse_forward(const FwdParams& p) {
  if (!is_compiled_head_dim(p.shape.d) || !p.sparse.on())
    throw CudaError(cudaErrorInvalidValue, "block_sparse_forward: unsupported d, or no block mask");
  dispatch_head_dim(p.shape.d, [&](auto D) {
    if (p.dropout.on())
      launch_flash2<D, Flash2Tile<D>, BlockListWalk, PhiloxDropout>(p);
    else
      launch_flash2<D, Flash2Tile<D>, BlockListWalk, NoDropout>(p);
  });
}

void block_sparse_backward(const BwdParams& p) {
  if (!is_compiled_head_dim(p.shape.d) || !p.sparse.on())
    throw CudaError(cudaErrorInvalidValue, "block_sparse_backward: unsupported d, or no block mask");
  run_backward<BlockListWalk>(p);
}

// ===========================================================================================
// Host side: which masks fit the kernels' tiles, and the IO model over a mask
// ===========================================================================================

namespace {

// The block sizes (queries, keys) every block must be a multiple of at head dimension d.
std::pair<int, int> tile_multiples(int d) {
  const Flash2Tiles f = flash2_tiles(d);
  const BwdTiles b = backward_tiles(d);
  return {std::lcm(std::lcm(f.Br, b.keys), b.stage), std::lcm(std::lcm(f.Bc, b.keys), b.stage)};
}

// The tiles (of `stage` elements, starting below n) of block row or column b of a list, as
// BlockListWalk visits them.
template <typename F>
void list_tiles(const std::vector<int>& ptr, const std::vector<int>& idx, int b, int block, int stage, int n, F f) {
  for (int e = ptr[b]; e < ptr[b + 1]; ++e)
    for (int u = 0; u < block / stage; ++u)
      if (idx[e] * block + u * stage < n) f(idx[e] * block + u * stage);
}

std::size_t bwd_ws_bytes(const Shape& s, const PassSettings&) { return s.rows() * sizeof(float); }  // D

std::string unsupported(const Shape& s, const PassSettings& settings) {
  if (std::string why = tiled_unsupported(s); !why.empty()) return why;
  return settings.mask ? mask_unsupported(s, *settings.mask) : std::string();
}

// The mask a pass runs over: the settings', or every block at the default size.
BlockMask pass_mask(const Shape& s, const PassSettings& settings) {
  return settings.mask ? *settings.mask : pattern_dense(s.N, default_mask_block(s.d));
}

IoCount io_forward(const Shape& s, const PassSettings& settings) {
  const BlockMask m = pass_mask(s, settings);
  return io_block_sparse_forward(s, m, to_lists(m, settings.causal));
}

IoCount io_backward(const Shape& s, const PassSettings& settings) {
  const BlockMask m = pass_mask(s, settings);
  const BlockLists l = to_lists(m, settings.causal);
  const BwdTiles t = backward_tiles(s.d);
  auto query_tiles = [&](int key0, const TileVisit& visit) {
    list_tiles(l.col_ptr, l.row_idx, key0 / m.block_c, m.block_r, t.stage, s.N, visit);
  };
  auto key_tiles = [&](int row0, const TileVisit& visit) {
    list_tiles(l.row_ptr, l.col_idx, row0 / m.block_r, m.block_c, t.stage, s.N, visit);
  };
  return io_backward_walk(s, settings.variant == kAtomicDQ, t, query_tiles, key_tiles);
}

}  // namespace

int default_mask_block(int d) {
  if (!is_compiled_head_dim(d)) return 128;
  const auto [r, c] = tile_multiples(d);
  const int l = std::lcm(r, c);
  return (128 + l - 1) / l * l;  // at d = 64: 128; at d = 16 and 32: 256 (the forward's CTA rows)
}

std::string mask_unsupported(const Shape& s, const BlockMask& m) {
  if (!is_compiled_head_dim(s.d)) return "unsupported d";
  if (m.Tr != (s.N + m.block_r - 1) / m.block_r || m.Tc != (s.N + m.block_c - 1) / m.block_c)
    return "the mask's grid " + std::to_string(m.Tr) + " × " + std::to_string(m.Tc) + " does not cover N = " +
           std::to_string(s.N) + " with blocks of " + std::to_string(m.block_r) + " × " + std::to_string(m.block_c);
  const Flash2Tiles f = flash2_tiles(s.d);
  const BwdTiles b = backward_tiles(s.d);
  const auto [need_r, need_c] = tile_multiples(s.d);
  if (m.block_r % need_r || m.block_c % need_c)
    return "the mask's blocks (" + std::to_string(m.block_r) + " × " + std::to_string(m.block_c) +
           ") must be multiples of the kernels' tiles at d = " + std::to_string(s.d) + ": " + std::to_string(need_r) +
           " query rows (forward CTA " + std::to_string(f.Br) + ", backward CTA " + std::to_string(b.keys) +
           ", stage " + std::to_string(b.stage) + ") × " + std::to_string(need_c) + " keys (forward tile " +
           std::to_string(f.Bc) + ", backward CTA " + std::to_string(b.keys) + ", stage " + std::to_string(b.stage) +
           "); try --block " + std::to_string(default_mask_block(s.d));
  return {};
}

IoCount io_block_sparse_forward(const Shape& s, const BlockMask& m, const BlockLists& l) {
  const int block_r = m.block_r, block_c = m.block_c;
  const Flash2Tiles t = flash2_tiles(s.d);
  const std::int64_t N = s.N, d = s.d;
  std::int64_t reads = 0, writes = 0;
  for (int row0 = 0; row0 < N; row0 += t.Br) {
    const std::int64_t rows = std::min<std::int64_t>(t.Br, N - row0);
    reads += rows * d;             // Q_i
    writes += rows * d + rows;     // O_i, LSE_i
    list_tiles(l.row_ptr, l.col_idx, row0 / block_r, block_c, t.Bc, s.N,
               [&](int j0) { reads += 2 * std::min<std::int64_t>(t.Bc, N - j0) * d; });
  }
  const std::int64_t f = sizeof(float);
  return {reads * s.heads() * f, writes * s.heads() * f};
}

StepInfo step06_info() {
  StepInfo s;
  s.id = "06_block_sparse";
  s.title = "block-sparse FlashAttention: forward and backward skip the masked blocks (Algorithm 5)";
  s.variants = {"atomic", "deterministic"};
  s.forward = block_sparse_forward;
  s.backward = block_sparse_backward;
  s.bwd_workspace_bytes = bwd_ws_bytes;
  s.unsupported = unsupported;
  s.untraced = untraced_head_dim;  // traced kernels at d = 64 only (trace::kTracedAt)
  s.io_forward = io_forward;
  s.io_backward = io_backward;
  s.mask_block = default_mask_block;
  s.dropout = true;
  s.block_sparse = true;
  s.order_dependent = {"atomic"};
  s.memory_note = "Its extra memory is O(B·H·N) plus the mask's lists, whatever the mask";
  return s;
}

}  // namespace fs
