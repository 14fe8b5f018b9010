// What step 10's kernels record when traced (common/recorder/device.cuh: one thread per CTA writes an
// event at the end of each phase). A decoding trace names the cache's rows by slot (common/trace/
// trace.hpp, KvCache): slot = cache sequence · seqlen_cache + key when contiguous, page · page_size +
// key mod page_size when paged, so that a tile of 64 keys over pages of 16 is four loads of rows
// that lie anywhere in the cache, as the block table scatters them. The IO model (decode_io.cpp)
// counts the same bytes from the shape alone; the trace validator checks that they agree.
//
// Each function here is called by every thread and does its work on the recording thread alone
// (tr.records()); with tracing off the tracer records nothing and the calls compile to nothing.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/recorder/device.cuh"
#include "steps/10_decode/decode.hpp"
#include "steps/10_decode/decode_cta.cuh"
#include "steps/10_decode/kv_cache.cuh"

namespace fs::decoding {

// The slot of key `key` of cache sequence cb: its row among one K/V head's rows of the cache.
template <class Cache>
__device__ __forceinline__ std::int64_t cache_slot(const Cache& cache, int cb, int key) {
  return cache.row(cb, 0, key) / cache.key_stride;
}

// f(slot0, n) for each run of consecutive slots that keys [key0, key0 + n_keys) of sequence cb
// occupy: one run for a contiguous cache, one per page (or run of neighbouring pages) when paged.
template <class Cache, typename F>
__device__ void for_each_slot_run(const Cache& cache, int cb, int key0, int n_keys, F&& f) {
  std::int64_t run0 = 0;
  int run = 0;
  for (int k = 0; k < n_keys; ++k) {
    const std::int64_t slot = cache_slot(cache, cb, key0 + k);
    if (run > 0 && slot == run0 + run) {
      ++run;
      continue;
    }
    if (run > 0) f(run0, run);
    run0 = slot;
    run = 1;
  }
  if (run > 0) f(run0, run);
}

// f(bh, row0, rows) for the CTA's query rows as runs of one head's consecutive tokens: (b·H + h,
// token, count). With g = 1 a row block is one head's tokens; with more heads its rows alternate
// heads, one row each.
template <typename F>
__device__ void for_each_query_run(const DecodeCta& cta, const DecodeShape& s, F&& f) {
  int r = 0;
  while (r < cta.rows) {
    int end = r + 1;
    while (end < cta.rows && cta.head(end) == cta.head(r) && cta.token(end) == cta.token(end - 1) + 1) ++end;
    f(std::int64_t(cta.b) * s.heads + cta.head(r), cta.token(r), end - r);
    r = end;
  }
}

// The split kernel's Q (once per CTA: every split loads its rows).
template <class Tracer>
__device__ void trace_q(Tracer& tr, const DecodeCta& cta, const DecodeShape& s, int elem_bytes) {
  if (!tr.records()) return;
  for_each_query_run(cta, s, [&](std::int64_t bh, int t0, int n) {
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::Q, bh, t0, n, 0, s.d, std::int64_t(n) * s.d * elem_bytes);
  });
}

// One tile of keys [j0, j0 + n_keys): K's and V's rows, each run of slots an event.
template <class Tracer, class Cache>
__device__ void trace_kv_tile(Tracer& tr, const Cache& cache, const DecodeCta& cta, int d, int j0, int n_keys,
                              int elem_bytes) {
  if (!tr.records()) return;
  for (const trace::Tensor t : {trace::Tensor::K, trace::Tensor::V})
    for_each_slot_run(cache, cta.cb, j0, n_keys, [&](std::int64_t slot0, int n) {
      tr.event(trace::Kind::Load, t, cta.hk, slot0, n, 0, d, std::int64_t(n) * d * elem_bytes);
    });
}

// The tile's scores and its P̃V: S of the K/V head's group rows (trace.hpp: S is (B, H_kv, g·n,
// seqlen_cache)) against the tile's keys.
template <class Tracer>
__device__ void trace_compute(Tracer& tr, const DecodeCta& cta, const DecodeShape& s, int j0, int n_keys) {
  if (!tr.records()) return;
  const std::int64_t bh = std::int64_t(cta.b) * s.heads_kv + cta.hk;
  FS_TRACE_EVENT(tr, Kind::ComputeS, Tensor::S, bh, cta.rb * kRowsPerCta, cta.rows, j0, n_keys, 0);
  FS_TRACE_EVENT(tr, Kind::AccumulateO, Tensor::None, bh, cta.rb * kRowsPerCta, cta.rows, 0, s.d, 0);
}

// The split's result: O and LSE with one split; else its partial O (fp32) and LSE, row
// t·splits + split of o_part and lse_part.
template <class Tracer>
__device__ void trace_split_result(Tracer& tr, const DecodeCta& cta, const DecodeShape& s, int splits,
                                   int elem_bytes) {
  if (!tr.records()) return;
  if (splits == 1) {
    for_each_query_run(cta, s, [&](std::int64_t bh, int t0, int n) {
      FS_TRACE_EVENT(tr, Kind::Store, Tensor::O, bh, t0, n, 0, s.d, std::int64_t(n) * s.d * elem_bytes);
      FS_TRACE_EVENT(tr, Kind::Store, Tensor::LSE, bh, t0, n, 0, 1, std::int64_t(n) * kF);
    });
    return;
  }
  for (int r = 0; r < cta.rows; ++r) {
    const std::int64_t bh = std::int64_t(cta.b) * s.heads + cta.head(r);
    const int row = cta.token(r) * splits + cta.split;
    FS_TRACE_EVENT(tr, Kind::Store, Tensor::OPart, bh, row, 1, 0, s.d, s.d * kF);
    FS_TRACE_EVENT(tr, Kind::Store, Tensor::LSEPart, bh, row, 1, 0, 1, kF);
  }
}

// The append of one CTA's chunks [c0, c1) of K's and V's (append.cuh: (b, t, hk, chunk) in k_new's
// order, K's then V's): per row of k_new (or v_new) its chunks' columns, loaded, and stored at the
// key's slot. Rows past the cache's room are neither (the kernel skips them).
template <class Tracer, class Cache>
__device__ void trace_append(Tracer& tr, const DecodeParams& p, std::int64_t c0, std::int64_t c1, int elem_bytes) {
  if (!tr.records()) return;
  const DecodeShape& s = p.shape;
  const int chunks = s.d / 8;
  const std::int64_t half = std::int64_t(s.batch) * s.new_tokens * s.heads_kv * chunks;
  const Cache cache(p);
  for (std::int64_t c = c0; c < c1 && c < 2 * half;) {
    const bool is_v = c >= half;
    const std::int64_t i = is_v ? c - half : c;
    const int chunk = static_cast<int>(i % chunks);
    const std::int64_t row = i / chunks;  // (b, t, hk)
    const std::int64_t part_end = is_v ? 2 * half : half, end = c1 < part_end ? c1 : part_end;
    const int n = static_cast<int>(end - c < chunks - chunk ? end - c : chunks - chunk);  // this row's chunks here
    const int hk = static_cast<int>(row % s.heads_kv), t = static_cast<int>(row / s.heads_kv % s.new_tokens);
    const int b = static_cast<int>(row / s.heads_kv / s.new_tokens);
    const int key = append_base(p, b) + t;
    c += n;
    if (key < 0 || key >= s.seqlen_cache) continue;
    const trace::Tensor src = is_v ? trace::Tensor::VNew : trace::Tensor::KNew;
    const trace::Tensor dst = is_v ? trace::Tensor::V : trace::Tensor::K;
    const std::int64_t bytes = std::int64_t(n) * 8 * elem_bytes;
    tr.event(trace::Kind::Load, src, std::int64_t(b) * s.heads_kv + hk, t, 1, 8 * chunk, 8 * n, bytes);
    tr.event(trace::Kind::Store, dst, hk, cache_slot(cache, cache_sequence(p, b), key), 1, 8 * chunk, 8 * n, bytes);
  }
}

// The combine of the CTA's rows (combine.cuh: one warp per row (b, h, t), in LSE's order): each
// row's LSEs of its splits, their partial O's where some split saw a key (a row that saw none reads
// no O: its LSE is −inf), and O's row and LSE written.
template <class Tracer>
__device__ void trace_combine(Tracer& tr, const DecodeParams& p, std::int64_t row0, int rows_per_cta, int elem_bytes) {
  if (!tr.records()) return;
  const DecodeShape& s = p.shape;
  const int splits = p.num_splits;
  for (int w = 0; w < rows_per_cta; ++w) {
    const std::int64_t row = row0 + w;
    if (row >= s.rows()) break;
    const std::int64_t bh = row / s.new_tokens;
    const int t = static_cast<int>(row % s.new_tokens);
    const float* lse_part = p.workspace + s.rows() * splits * s.d + row * splits;
    bool any = false;  // the combine's own test: the largest LSE of the splits is finite
    for (int i = 0; i < splits; ++i) any = any || lse_part[i] != -INFINITY;
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::LSEPart, bh, t * splits, splits, 0, 1, splits * kF);
    if (any) FS_TRACE_EVENT(tr, Kind::Load, Tensor::OPart, bh, t * splits, splits, 0, s.d, std::int64_t(splits) * s.d * kF);
    FS_TRACE_EVENT(tr, Kind::Store, Tensor::O, bh, t, 1, 0, s.d, std::int64_t(s.d) * elem_bytes);
    FS_TRACE_EVENT(tr, Kind::Store, Tensor::LSE, bh, t, 1, 0, 1, kF);
  }
}

}  // namespace fs::decoding
