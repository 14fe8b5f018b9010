// Where the decoding kernels find their rows: a key's row in the cache, a query's row in q, and
// the copy of a tile of such rows into shared memory. The cache is addressed through one function,
// (sequence, K/V head, key) → the address of that key's d elements (ContiguousCache::k_row), so
// that a paged cache (phase 2: a block table of pages) replaces this struct and nothing else.
#pragma once

#include <cstdint>

#include "common/cuda_utils.cuh"
#include "common/problem.hpp"
#include "steps/08_tensor_cores/mma.cuh"
#include "steps/10_decode/decode.hpp"

namespace fs::decoding {

// Keys that sequence b holds (cache_seqlens[b], or the one length for every sequence).
__device__ __forceinline__ int sequence_keys(const DecodeParams& p, int b) {
  return p.cache_seqlens ? p.cache_seqlens[b] : p.cache_len;
}

// A contiguous cache, (batch, seqlen_cache, heads_kv, d): key j of sequence b, K/V head hk is the
// row at b·seqlen_cache·heads_kv·d + j·heads_kv·d + hk·d. Rows of one head are heads_kv·d apart.
template <typename E>
struct ContiguousCache {
  const E* k;
  const E* v;
  std::int64_t seq_stride, key_stride;  // elements between sequences, between keys
  int d;

  __device__ __forceinline__ explicit ContiguousCache(const DecodeParams& p)
      : k(as<E>(p.k_cache)),
        v(as<E>(p.v_cache)),
        seq_stride(std::int64_t(p.shape.seqlen_cache) * p.shape.heads_kv * p.shape.d),
        key_stride(std::int64_t(p.shape.heads_kv) * p.shape.d),
        d(p.shape.d) {}

  // The one map from (sequence, K/V head, key) to a row of the cache, in elements.
  __device__ __forceinline__ std::int64_t row(int b, int hk, int key) const {
    return b * seq_stride + key * key_stride + std::int64_t(hk) * d;
  }
  __device__ __forceinline__ const E* k_row(int b, int hk, int key) const { return k + row(b, hk, key); }
  __device__ __forceinline__ const E* v_row(int b, int hk, int key) const { return v + row(b, hk, key); }
};

// Rows [0, Tile::kRows) of a tile, row r's Tile::kCols elements at row_of(r) (a pointer, 16-byte
// aligned), into shared memory laid out as Tile (swizzled: mma.cuh, SmemTile), 16 bytes per
// cp.async by all kThreads threads; rows at or past n_rows (≥ 1) are zero-filled, their copy
// reading nothing from row_of(0)'s address (a valid one). Commit and wait before use. Thread i
// copies chunk c = i mod kChunks of rows i / kChunks, + kStep, ...: one row address per chunk,
// since with pages (phase 2) a tile's rows need not be evenly spaced.
template <typename Tile, int kThreads, typename E, typename RowOf>
__device__ __forceinline__ void load_rows(E* s, RowOf&& row_of, int n_rows) {
  constexpr int kChunks = Tile::kChunks;       // 16-byte chunks per row
  constexpr int kStep = kThreads / kChunks;    // rows between a thread's chunks
  static_assert(kThreads % kChunks == 0 && Tile::kRows % kStep == 0, "every thread copies whole columns of chunks");
  const int r0 = threadIdx.x / kChunks, c = threadIdx.x % kChunks;
#pragma unroll
  for (int k = 0; k < Tile::kRows / kStep; ++k) {
    const int r = r0 + k * kStep;
    const bool valid = r < n_rows;
    cp_async_16(s + Tile::offset(r, c), row_of(valid ? r : 0) + 8 * c, valid);
  }
}

}  // namespace fs::decoding
