// Step 10's append: the new tokens' keys and values (DecodeParams::k_new, v_new, as
// flash_attn_with_kvcache's k and v) written into the cache in place, before the split kernel
// attends over them. Token t of sequence b goes to cache key append_base(p, b) + t (the caller's
// length, unmodified: kv_cache.cuh), K/V head hk, through the cache's one map row() — so that a
// paged cache is written through its block table exactly where the split kernel will read it.
//
// One thread per 16 bytes (8 elements) of one row of K or of V: a grid of
// ⌈2 · batch · n · heads_kv · d/8 / kAppendThreads⌉ CTAs. The bytes are few (the new tokens' rows,
// against the cache's), so the kernel is a plain copy; its cost is one more launch. It runs on the
// same stream before the split kernel, so the split kernel's loads see the rows. With a rotary
// embedding it also turns the new keys as it writes them, and writes the turned queries to the
// workspace, from which the split kernel then reads q (decode_launch.cuh).
#pragma once

#include <cstdint>

#include "common/cuda_utils.cuh"
#include "steps/10_decode/decode.hpp"
#include "steps/10_decode/decode_trace.cuh"
#include "steps/10_decode/kv_cache.cuh"
#include "steps/10_decode/rotary.hpp"

namespace fs::decoding {

inline constexpr int kAppendThreads = 256;

// 16-byte chunks the append copies: K's and V's, (batch, n, heads_kv, d / 8) each; with a rotary
// embedding also q's, (batch, n, heads, d / 8), rotated into the workspace.
__host__ __device__ inline std::int64_t append_chunks(const DecodeShape& s, bool rotary = false) {
  return 2 * std::int64_t(s.batch) * s.new_tokens * s.heads_kv * (s.d / 8) + (rotary ? s.q_elems() / 8 : 0);
}

// The 8 elements at src (16 bytes, columns c0 .. c0 + 7 of a row whose column 0 is at row) to dst:
// copied, or with a rotary embedding (p.rotary_dim > 0: rotary.hpp) turned at position pos, each
// column < rotary_dim with its partner (read from the row: it may lie in another chunk), in float,
// rounded to E.
template <typename E>
__device__ __forceinline__ void append_chunk(E* dst, const E* row, int c0, const DecodeParams& p, int pos) {
  const E* src = row + c0;
  if (p.rotary_dim == 0 || c0 >= p.rotary_dim) {
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
    return;
  }
  const int half = p.rotary_dim / 2;
  pos = min(max(pos, 0), p.rotary_len - 1);  // past the tables: the caller's error (rotary_unsupported), kept in bounds
  const E* cos_row = as<E>(p.rotary_cos) + std::int64_t(pos) * half;
  const E* sin_row = as<E>(p.rotary_sin) + std::int64_t(pos) * half;
  alignas(16) E out[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const int c = c0 + e;
    if (c >= p.rotary_dim) {
      out[e] = src[e];
      continue;
    }
    const RotaryPair r = rotary_pair(c, p.rotary_dim, p.rotary_interleaved);
    out[e] = E(rotary_value(float(src[e]), float(row[r.partner]), float(cos_row[r.angle]), float(sin_row[r.angle]),
                            r.first));
  }
  *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(out);
}

// Chunk i of the append (K's, V's, then with a rotary embedding q's).
template <typename E, class Cache>
__device__ __forceinline__ void append_one(const DecodeParams& p, std::int64_t i) {
  const DecodeShape& s = p.shape;
  const std::int64_t half = append_chunks(s) / 2;
  const int chunks = s.d / 8;
  if (i >= 2 * half) {  // a chunk of q, with a rotary embedding: (b, t, h, chunk) in q's order
    std::int64_t c = i - 2 * half;
    if (p.rotary_dim == 0 || c >= s.q_elems() / 8) return;
    const int chunk = static_cast<int>(c % chunks);
    const std::int64_t row = c / chunks * s.d;  // the element offset of row (b, t, h)
    const int t = static_cast<int>(c / chunks / s.heads % s.new_tokens);
    const int b = static_cast<int>(c / chunks / s.heads / s.new_tokens);
    // Causal or windowed: token t at its own position; else every token at the sequence's length
    // (flash_attn_with_kvcache's rule).
    const bool per_token = p.causal || p.mods.window_left >= 0 || p.mods.window_right >= 0;
    const int pos = append_base(p, b) + (per_token ? t : 0);
    E* q_rot = reinterpret_cast<E*>(reinterpret_cast<unsigned char*>(p.workspace) +
                                           rotary_q_offset(s, p.num_splits));
    append_chunk(q_rot + row + 8 * chunk, as<E>(p.q) + row, 8 * chunk, p, pos);
    return;
  }
  const bool is_v = i >= half;
  std::int64_t c = is_v ? i - half : i;  // (b, t, hk, chunk) in k_new's (or v_new's) order
  const int chunk = static_cast<int>(c % chunks);
  c /= chunks;
  const int hk = static_cast<int>(c % s.heads_kv);
  c /= s.heads_kv;
  const int t = static_cast<int>(c % s.new_tokens);
  const int b = static_cast<int>(c / s.new_tokens);
  const int key = append_base(p, b) + t;
  if (key < 0 || key >= s.seqlen_cache) return;  // past the room: refused on the host (append_unsupported); never written
  const Cache cache(p);
  // The cache's rows are the caller's writable memory; Cache gives them as const (the split kernel
  // only reads), so the one row map is reused here and the constness dropped.
  const int cb = cache_sequence(p, b);  // the cache's sequence (cache_batch_idx)
  E* dst = const_cast<E*>(is_v ? cache.v_row(cb, hk, key) : cache.k_row(cb, hk, key)) + 8 * chunk;
  const E* src = as<E>(is_v ? p.v_new : p.k_new) + ((std::int64_t(b) * s.new_tokens + t) * s.heads_kv + hk) * s.d;
  if (is_v) {  // values are not rotated
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src + 8 * chunk);
    return;
  }
  append_chunk(dst, src, 8 * chunk, p, key);  // the key at its position in the sequence
}

// kTrace: the traced twin, whose recording thread describes the CTA's chunks once they are
// copied (decode_trace.cuh; traced runs take no rotary embedding).
template <typename E, class Cache, bool kTrace = false>
__global__ void __launch_bounds__(kAppendThreads) decode_append_kernel(const DecodeParams p, trace::Slices slices) {
  trace::CtaTracer<kTrace> tr(slices);
  const std::int64_t c0 = std::int64_t(blockIdx.x) * kAppendThreads;
  append_one<E, Cache>(p, c0 + threadIdx.x);
  trace_append<decltype(tr), Cache>(tr, p, c0, c0 + kAppendThreads, sizeof(E));
}

}  // namespace fs::decoding
