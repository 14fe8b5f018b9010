// The keys a decoding row sees and the keys a CTA of the split kernel walks: one definition for the
// kernel (decode_cta.cuh), the IO model that counts what it reads (decode_io.cpp) and the tests, so
// that the bytes a trace records and the bytes the model predicts follow the same rule.
//
// A sequence of L keys (after any append) and n new tokens: token t's diagonal key is L − n + t
// (bottom-right aligned). It sees keys [visible_begin, visible_end):
//   causal          none after its diagonal
//   window (l, r)   none before diagonal − l, none after diagonal + r (−1: that side unbounded)
// A CTA holds query rows [rb·16, rb·16 + rows) of its group, row R being token R / g: its first row
// sees the fewest keys on the right and its last row the most (and the reverse on the left), so
// the CTA walks [key_begin, key_end): from its first row's first key to its last row's last.
#pragma once

#include <cuda_runtime.h>

#include "steps/10_decode/decode.hpp"
#include "steps/10_decode/split_rule.hpp"

namespace fs::decoding {

__host__ __device__ inline int visible_end(int keys, int n, int t, bool causal, int right) {
  const int diag = keys - n + t;
  int end = keys;
  if (causal && diag + 1 < end) end = diag + 1;
  if (right >= 0 && diag + right + 1 < end) end = diag + right + 1;
  return end > 0 ? end : 0;
}

__host__ __device__ inline int visible_begin(int keys, int n, int t, int left) {
  if (left < 0) return 0;
  const int lo = keys - n + t - left;
  return lo < 0 ? 0 : (lo < keys ? lo : keys);
}

// What CTA (row block rb) of a sequence of `keys` keys walks, for a shape's group of g·n rows.
struct CtaKeys {
  int rows;       // its real rows (≤ 16)
  int key_begin;  // the first key any of its rows sees (≤ key_end)
  int key_end;    // one past the last key any of its rows sees
  int first_end;  // one past its first row's last key (tiles past it need a mask)
  int last_begin; // its last row's first key (tiles before it need a mask)

  __host__ __device__ CtaKeys(const DecodeShape& s, int rb, int keys, bool causal, int left, int right) {
    const int g = s.group(), n = s.new_tokens;
    const int rest = s.group_rows() - rb * kRowsPerCta;
    rows = rest < kRowsPerCta ? rest : kRowsPerCta;
    const int t_first = rb * kRowsPerCta / g, t_last = (rb * kRowsPerCta + rows - 1) / g;
    key_end = visible_end(keys, n, t_last, causal, right);
    first_end = visible_end(keys, n, t_first, causal, right);
    const int begin = visible_begin(keys, n, t_first, left);
    key_begin = begin < key_end ? begin : key_end;
    last_begin = visible_begin(keys, n, t_last, left);
  }

  // The tiles of tile_keys keys that split `split` of `splits` walks (split_rule.hpp).
  __host__ __device__ SplitTiles tiles(int tile_keys, int split, int splits) const {
    return split_tiles(key_end, tile_keys, split, splits, key_begin);
  }
};

}  // namespace fs::decoding
