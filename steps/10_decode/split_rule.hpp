// How many splits of the keys a decoding run takes (Flash-Decoding): the rule, host code alone, so
// that the tests check it on any machine.
//
// Without splits a decoding step has one CTA per (sequence, K/V head, block of 16 query rows):
// batch 1 with 8 K/V heads is 8 CTAs on a GPU of 132 SMs, each walking the whole cache alone, and
// the GPU's bandwidth is mostly idle. Splitting every sequence's keys into S ranges gives S times
// the CTAs, each reading 1/S of the cache; what it costs is a partial O and LSE per split and row
// written and read back by the combine (decode_workspace_bytes, decode.hpp: d + 1 floats per split and row, a
// row of the cache being 2·d bytes per key and K/V head), and a second kernel.
//
// The rule, measured (docs/lab/10_decode.md: every split count from 1 to 128 at batch 1, 8 and 64
// × caches of 4K, 32K and 128K, on an H100): the fastest runs put about one CTA on every SM, in one
// wave, and no more. Two CTAs per SM (the first rule) read no faster, and a wave and a bit (batch 8:
// 5 splits, 320 CTAs on 132 SMs) was 8-12% slower than 2 splits, its last CTAs streaming alone.
// So, three bounds:
//   one wave      S = ⌊SMs / CTAs⌋ (at least 1): as many CTAs as SMs, never a second wave
//   enough keys   S ≤ cache_len / kMinKeysPerSplit: a split of a few tiles spends more of its time
//                 starting (Q's load, the pipeline's first tiles) and in the merge than streaming
//   a cap         S ≤ kMaxSplits, so that the combine's loop over the splits stays short
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace fs::decoding {

inline constexpr int kMinKeysPerSplit = 512;  // keys a split gets at least (8 tiles of 64 keys)
inline constexpr int kMaxSplits = 128;        // the most splits, given or chosen

// The splits for `batch` sequences of `cache_len` keys (the longest sequence's, or the cache's
// room where the lengths are on the device only), `heads_kv` K/V heads and `row_blocks` CTAs of
// query rows per K/V head (DecodeShape::row_blocks: 1 whenever g · new tokens ≤ 16), on a GPU of
// `sm_count` SMs.
inline int num_splits(int batch, int heads_kv, int cache_len, int sm_count, int row_blocks = 1) {
  const std::int64_t ctas = std::int64_t(batch) * heads_kv * std::max(1, row_blocks);  // CTAs of one split
  const std::int64_t sms = std::max(1, sm_count);
  if (ctas <= 0 || ctas >= sms) return 1;  // a wave already (or nothing to do): no merge to pay for
  const std::int64_t one_wave = sms / ctas;
  const std::int64_t keys_allow = std::max<std::int64_t>(1, cache_len / kMinKeysPerSplit);
  return static_cast<int>(std::clamp<std::int64_t>(std::min(one_wave, keys_allow), 1, kMaxSplits));
}

// The tiles of `tile_keys` keys of a sequence of `keys` keys that split `split` of `splits` walks,
// from the tile of key `first_key` on (a window's first key: the tiles before it are never read):
// the tiles are dealt in runs of ⌈tiles / splits⌉, so the last splits of a short sequence may get
// none (they write an empty partial: O = 0, LSE = −inf, which the merge weighs 0).
struct SplitTiles {
  int first = 0, count = 0;
};
__host__ __device__ inline SplitTiles split_tiles(int keys, int tile_keys, int split, int splits, int first_key = 0) {
  const int t0 = first_key / tile_keys;
  const int tiles = (keys + tile_keys - 1) / tile_keys;
  const int per = (tiles - t0 + splits - 1) / splits;
  const int first = t0 + split * per;
  const int end = first + per < tiles ? first + per : tiles;
  return first < end ? SplitTiles{first, end - first} : SplitTiles{first, 0};
}

}  // namespace fs::decoding
