// Where the decoding kernels find their rows: a key's row in the cache, a query's row in q, and
// the copy of a tile of such rows into shared memory. The cache is addressed through one function,
// (sequence, K/V head, key) → the address of that key's d elements (k_row, v_row), in one of two
// structs with the same interface: ContiguousCache, and PagedCache (a block table of pages). The
// split kernel takes the struct as a template parameter (flash_decode.cuh), so that the contiguous
// kernel's code is what it was and the paged one is a second instantiation.
#pragma once

#include <cstdint>

#include "common/cuda_utils.cuh"
#include "common/problem.hpp"
#include "steps/08_tensor_cores/mma.cuh"
#include "steps/10_decode/decode.hpp"

namespace fs::decoding {

// Keys that sequence b holds (cache_seqlens[b], or the one length for every sequence), plus the n
// new tokens when the kernels append them (k_new set). Computed here rather than by updating
// cache_seqlens in place: the caller's array is theirs (flash_attn_with_kvcache leaves it as it
// was), and a kernel that wrote it would race with the split kernels reading it and make a second
// run over the same params see different lengths. The append kernel reads the unmodified length
// (append_base) as the first row it writes.
__device__ __forceinline__ int append_base(const DecodeParams& p, int b) {
  return p.cache_seqlens ? p.cache_seqlens[b] : p.cache_len;
}
// An append that overflows the room is the caller's error (append_unsupported; decode_forward can
// check only the one-length form, per-sequence lengths being on the device): the length is then
// clamped to seqlen_cache, so that the split kernel reads no row outside the cache (or the block
// table) even so; the results of such a run mean nothing.
__device__ __forceinline__ int sequence_keys(const DecodeParams& p, int b) {
  const int base = append_base(p, b);
  return p.k_new ? min(base + p.shape.new_tokens, p.shape.seqlen_cache) : base;
}

// The cache's sequence that sequence b reads (and appends to): cache_batch_idx[b], or b.
__device__ __forceinline__ int cache_sequence(const DecodeParams& p, int b) {
  return p.cache_batch_idx ? p.cache_batch_idx[b] : b;
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

// A paged cache, as flash_attn_with_kvcache's block_table defines it: K and V are
// (num_blocks, page_size, heads_kv, d), and key j of sequence b is row j mod page_size of page
// table[b · max_blocks + j / page_size]. A page holds page_size keys of every K/V head, so rows of
// one head are heads_kv·d apart within a page, and a page's next row may be anywhere in memory.
// page_size is a power of two (paging_unsupported, decode_host.cpp): the page and the row within
// it are a shift and a mask, not a division. The table entry is read per row, by every thread that
// copies a chunk of it (TileRows, below): a tile of kBlockN keys may span several pages (64 keys
// over four pages of 16), and per-row addressing needs no assumption on how tiles and pages line
// up. The entries are 4 bytes per page of page_size·heads_kv·d elements; the threads that copy one
// row's chunks are neighbouring lanes of a warp and read the same entry in the same load, once for
// K and V. (On an H100, pages of 256 cost at most 2% against the contiguous cache, pages of 16
// about 4%, 11% on the smallest problem: docs/lab/10_decode.md.)
template <typename E>
struct PagedCache {
  // log2 of a power of two, once per thread (≤ 20 steps; plain code, which the CPU emulation
  // compiles as it is).
  __device__ __forceinline__ static int log2_of(int pow2) {
    int s = 0;
    while ((1 << s) < pow2) ++s;
    return s;
  }

  const E* k;
  const E* v;
  const std::int32_t* table;        // (batch, max_blocks)
  int max_blocks, page_shift, page_mask;
  std::int64_t page_stride, key_stride;  // elements between pages, between keys of a page
  int d;

  __device__ __forceinline__ explicit PagedCache(const DecodeParams& p)
      : k(as<E>(p.k_cache)),
        v(as<E>(p.v_cache)),
        table(p.block_table),
        max_blocks(p.max_blocks_per_seq),
        page_shift(log2_of(p.page_size)),
        page_mask(p.page_size - 1),
        page_stride(std::int64_t(p.page_size) * p.shape.heads_kv * p.shape.d),
        key_stride(std::int64_t(p.shape.heads_kv) * p.shape.d),
        d(p.shape.d) {}

  // The one map from (sequence, K/V head, key) to a row of the cache, in elements: through the
  // block table to the key's page, then its row in the page.
  __device__ __forceinline__ std::int64_t row(int b, int hk, int key) const {
    const std::int64_t page = table[std::int64_t(b) * max_blocks + (key >> page_shift)];
    return page * page_stride + (key & page_mask) * key_stride + std::int64_t(hk) * d;
  }
  __device__ __forceinline__ const E* k_row(int b, int hk, int key) const { return k + row(b, hk, key); }
  __device__ __forceinline__ const E* v_row(int b, int hk, int key) const { return v + row(b, hk, key); }
};

// Rows [0, Tile::kRows) of a tile, row r's Tile::kCols elements at row_of(r) (a pointer, 16-byte
// aligned), into shared memory laid out as Tile (swizzled: mma.cuh, SmemTile), 16 bytes per
// cp.async by all kThreads threads; rows at or past n_rows (≥ 1) are zero-filled, their copy
// reading nothing from row_of(0)'s address (a valid one). Commit and wait before use. Thread i
// copies chunk c = i mod kChunks of rows i / kChunks, + kStep, ...: one row address per chunk,
// since with pages (PagedCache) a tile's rows need not be evenly spaced.
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

// The rows of a K/V tile this thread copies (load_rows' split of the work: chunk c = i mod kChunks
// of rows i / kChunks, + kStep, ...), as element offsets in the cache from its one row map. K and V
// share them (a key's row is at the same offset in both), and the split kernel computes a tile's
// before it waits for the previous one (flash_decode.cuh): with pages each offset is a block
// table entry loaded from memory, whose latency then overlaps the wait instead of stalling the
// copies. Rows at or past n_rows (≥ 1) take row 0's offset and are zero-filled by the copy.
template <typename Tile, int kThreads>
struct TileRows {
  static constexpr int kChunks = Tile::kChunks;
  static constexpr int kStep = kThreads / kChunks;
  static constexpr int kCount = Tile::kRows / kStep;  // rows per thread
  static_assert(kThreads % kChunks == 0 && Tile::kRows % kStep == 0, "every thread copies whole columns of chunks");
  std::int64_t at[kCount];
  int n_rows = 0;

  // Rows [0, n_rows) of the tile are keys key0 .. key0 + n_rows − 1 of (sequence cb, K/V head hk).
  template <class Cache>
  __device__ __forceinline__ TileRows(const Cache& cache, int cb, int hk, int key0, int n)
      : n_rows(n) {
    const int r0 = threadIdx.x / kChunks;
#pragma unroll
    for (int k = 0; k < kCount; ++k) {
      const int r = r0 + k * kStep;
      at[k] = cache.row(cb, hk, key0 + (r < n ? r : 0));
    }
  }
  __device__ __forceinline__ TileRows() : n_rows(0) {}

  // The copies of K's and V's rows into their stages (SmemTile layout), 16 bytes per cp.async.
  template <typename E>
  __device__ __forceinline__ void load(E* sk, E* sv, const E* k, const E* v) const {
    const int r0 = threadIdx.x / kChunks, c = threadIdx.x % kChunks;
#pragma unroll
    for (int i = 0; i < kCount; ++i) {
      const int r = r0 + i * kStep;
      const bool valid = r < n_rows;
      cp_async_16(sk + Tile::offset(r, c), k + at[i] + 8 * c, valid);
      cp_async_16(sv + Tile::offset(r, c), v + at[i] + 8 * c, valid);
    }
  }
};

}  // namespace fs::decoding
