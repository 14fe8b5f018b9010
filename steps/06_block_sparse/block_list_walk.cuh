// Step 06's whole addition to the kernels of steps 04 and 05: a tile walk (the policy object of
// common/tile_policies.cuh) that visits only the nonzero blocks of a block mask (Algorithm 5),
// where DenseWalk visits every tile.
//
//   forward, dQ   the CTA of query block row i walks the key blocks col_idx[row_ptr[i] ..
//                 row_ptr[i+1]) (the mask's rows in CSR form)
//   dK/dV         the CTA of key block column j walks the query blocks row_idx[col_ptr[j] ..
//                 col_ptr[j+1]) (its columns in CSC form)
//
// Blocks are block_r × block_c elements, whole multiples of the kernels' tiles, so a block is
// `per_block` consecutive tiles of the walk. The lists come from the dense 0/1 mask once per run
// (common/block_mask.hpp, to_lists), with the blocks above the diagonal dropped when causal.
// Blocks left out cost nothing: no load, no FLOP, no branch.
#pragma once

#include <cuda_runtime.h>

#include "common/problem.hpp"

namespace fs {

template <int BC>
struct BlockListWalk {
  const int* idx = nullptr;  // the list, ascending block indices: idx[first .. last)
  int first = 0, last = 0;
  int count = 0;             // tiles of BC elements, up to element n
  int per_block = 1, block_elems = 0;
  int end_block = 0;         // for the trace: blocks [0, end_block) are the candidates

  __device__ int size() const { return count; }
  __device__ int start(int t) const { return idx[first + t / per_block] * block_elems + (t % per_block) * BC; }

  // Block row (or column) b of a list in CSR form, ptr (T + 1) and idx (nonzeros), whose blocks
  // hold block_elems elements each, up to element n (N): the last block may end past N, and its
  // tiles there are left out.
  static __device__ BlockListWalk list(const int* ptr, const int* idx, int b, int block_elems, int n, int end_block) {
    BlockListWalk w;
    w.idx = idx;
    w.first = ptr[b];
    w.last = ptr[b + 1];
    w.per_block = block_elems / BC;
    w.block_elems = block_elems;
    w.end_block = end_block;
    w.count = (w.last - w.first) * w.per_block;
    if (w.last > w.first) {  // ascending: only the last block listed can reach past n
      const int in_last = (n - idx[w.last - 1] * block_elems + BC - 1) / BC;
      if (in_last < w.per_block) w.count -= w.per_block - in_last;
    }
    return w;
  }
  // The key tiles of the CTA that owns query rows [row0, last_row] of N.
  static __device__ BlockListWalk keys_of(BlockSparse sp, int N, int row0, int last_row, bool causal) {
    return list(sp.row_ptr, sp.col_idx, row0 / sp.block_r, sp.block_c, N, causal ? last_row / sp.block_c + 1 : sp.Tc);
  }
  // The query tiles of the CTA that owns the keys from key0 (causal: the lists left out the
  // blocks above the diagonal already).
  static __device__ BlockListWalk queries_of(BlockSparse sp, int N, int key0, bool /*causal*/) {
    return list(sp.col_ptr, sp.row_idx, key0 / sp.block_c, sp.block_r, N, sp.Tr);
  }

  // For the trace: f(first, count) for each run of elements in blocks [0, end_block) that the
  // list leaves out, [0, N) being everything there is.
  template <typename F>
  __device__ void for_each_skipped(int N, F f) const {
    int next = 0;  // the first block not yet accounted for
    for (int e = first; e <= last; ++e) {
      const int blk = e < last ? min(idx[e], end_block) : end_block;
      if (blk > next) f(next * block_elems, min(N, blk * block_elems) - next * block_elems);
      next = max(next, blk + 1);
    }
  }
};

}  // namespace fs
