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
// The rule, three bounds:
//   enough CTAs   S ≥ ⌈kCtasPerSm · SMs / CTAs⌉, about kCtasPerSm CTAs on every SM, so that every
//                 SM keeps loads in flight (the cache's bytes do not shrink; only who reads them)
//   enough keys   S ≤ cache_len / kMinKeysPerSplit: a split of a few tiles spends more of its time
//                 starting (Q's load, the pipeline's first tiles) and in the merge than streaming
//   a cap         S ≤ kMaxSplits, so that the combine's loop over the splits stays short
// The constants are a first choice, not yet measured (phase 2 times the rule against its
// neighbours on the H200 and the lesson will quote that).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace fs::decoding {

inline constexpr int kCtasPerSm = 2;          // CTAs the rule puts on each SM
inline constexpr int kMinKeysPerSplit = 256;  // keys a split gets at least (4 tiles of 64 keys)
inline constexpr int kMaxSplits = 128;        // the most splits, given or chosen

// The splits for `batch` sequences of `cache_len` keys (the cache's room: the launcher cannot read
// per-sequence lengths on the device without a synchronisation, and flash_attn_with_kvcache also
// decides from the cache's length), `heads_kv` K/V heads and `row_blocks` CTAs of query rows per
// K/V head (DecodeShape::row_blocks: 1 whenever g · new tokens ≤ 16), on a GPU of `sm_count` SMs.
inline int num_splits(int batch, int heads_kv, int cache_len, int sm_count, int row_blocks = 1) {
  const std::int64_t ctas = std::int64_t(batch) * heads_kv * std::max(1, row_blocks);  // CTAs of one split
  const std::int64_t slots = std::int64_t(kCtasPerSm) * std::max(1, sm_count);           // CTAs the GPU holds
  if (ctas <= 0 || ctas >= slots) return 1;  // already full (or nothing to do): no merge to pay for
  const std::int64_t enough = (slots + ctas - 1) / ctas;
  const std::int64_t keys_allow = std::max<std::int64_t>(1, cache_len / kMinKeysPerSplit);
  return static_cast<int>(std::clamp<std::int64_t>(std::min(enough, keys_allow), 1, kMaxSplits));
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
