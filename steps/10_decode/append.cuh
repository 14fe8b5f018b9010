// Step 10's append: the new tokens' keys and values (DecodeParams::k_new, v_new, as
// flash_attn_with_kvcache's k and v) written into the cache in place, before the split kernel
// attends over them. Token t of sequence b goes to cache key append_base(p, b) + t (the caller's
// length, unmodified: kv_cache.cuh), K/V head hk, through the cache's one map row() — so that a
// paged cache is written through its block table exactly where the split kernel will read it.
//
// One thread per 16 bytes (8 elements) of one row of K or of V: a grid of
// ⌈2 · batch · n · heads_kv · d/8 / kAppendThreads⌉ CTAs. The bytes are few (the new tokens' rows,
// against the cache's), so the kernel is a plain copy; its cost is one more launch. It runs on the
// same stream before the split kernel, so the split kernel's loads see the rows.
#pragma once

#include <cstdint>

#include "common/cuda_utils.cuh"
#include "steps/10_decode/decode.hpp"
#include "steps/10_decode/kv_cache.cuh"

namespace fs::decoding {

inline constexpr int kAppendThreads = 256;

// 16-byte chunks the append copies: K's and V's, (batch, n, heads_kv, d / 8) each.
__host__ __device__ inline std::int64_t append_chunks(const DecodeShape& s) {
  return 2 * std::int64_t(s.batch) * s.new_tokens * s.heads_kv * (s.d / 8);
}

template <typename E, class Cache>
__global__ void __launch_bounds__(kAppendThreads) decode_append_kernel(const DecodeParams p) {
  const DecodeShape& s = p.shape;
  const std::int64_t i = std::int64_t(blockIdx.x) * kAppendThreads + threadIdx.x;
  const std::int64_t half = append_chunks(s) / 2;
  if (i >= 2 * half) return;
  const bool is_v = i >= half;
  std::int64_t c = is_v ? i - half : i;  // (b, t, hk, chunk) in k_new's (or v_new's) order
  const int chunks = s.d / 8;
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
  E* dst = const_cast<E*>(is_v ? cache.v_row(b, hk, key) : cache.k_row(b, hk, key)) + 8 * chunk;
  const E* src = as<E>(is_v ? p.v_new : p.k_new) +
                 ((std::int64_t(b) * s.new_tokens + t) * s.heads_kv + hk) * s.d + 8 * chunk;
  *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
}

}  // namespace fs::decoding
