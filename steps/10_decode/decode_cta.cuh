// The split kernel's schedule: which query rows a CTA holds, which keys it walks, and which of
// them each row may see. Grid (splits, K/V heads × row blocks, batch):
//
//   blockIdx.z  sequence b
//   blockIdx.y  K/V head hk and block rb of its query rows: the g = H / H_kv query heads that read
//               K/V head hk, times the n new tokens, are g·n rows, 16 to a CTA (one m16 tile of
//               the mma; g·n ≤ 16, the usual decode, is one block, so each K/V tile is read once
//               for the whole group). Row R = t·g + j of the group is token t of query head hk·g + j.
//   blockIdx.x  split s: tiles [first, first + count) of the keys the CTA's rows see
//               (split_rule.hpp, split_tiles)
//
// Causal, aligned to the bottom-right corner: token t of n sees keys j ≤ L − n + t, L the
// sequence's keys; the last token sees them all, the first n − 1 fewer. A window (DecodeParams::
// mods) bounds both sides around that diagonal key; its keys before the first row's lower bound
// are never read (the splits are dealt the tiles from there on). key_range.hpp has the rule, which
// the IO model shares.
#pragma once

#include <cmath>

#include "steps/10_decode/decode.hpp"
#include "steps/10_decode/key_range.hpp"
#include "steps/10_decode/kv_cache.cuh"
#include "steps/10_decode/split_rule.hpp"

namespace fs::decoding {

struct DecodeCta {
  int split, b, hk, rb;
  int cb;         // the cache's sequence that b reads: cache_batch_idx[b], or b (kv_cache.cuh)
  int g, n;       // query heads per K/V head, new tokens
  int keys;       // L: keys the sequence holds
  bool causal;
  int left, right;  // the window (DecodeParams::mods); −1: that side unbounded
  // Its rows and the keys they see (key_range.hpp): rows, the real ones (the rest of its 16 are
  // zero-filled and never written); [key_begin, key_end), the keys any of them sees; first_end,
  // its first row's end (tiles past it need a mask); last_begin, its last row's first key (tiles
  // before it need a mask).
  int rows, key_begin, key_end, first_end, last_begin;
  SplitTiles tiles;

  __device__ __forceinline__ DecodeCta(const DecodeParams& p, int tile_keys, bool causal_)
      : split(blockIdx.x),
        b(blockIdx.z),
        hk(blockIdx.y / p.shape.row_blocks()),
        rb(blockIdx.y % p.shape.row_blocks()),
        cb(cache_sequence(p, blockIdx.z)),
        g(p.shape.group()),
        n(p.shape.new_tokens),
        keys(sequence_keys(p, blockIdx.z)),
        causal(causal_),
        left(p.mods.window_left),
        right(p.mods.window_right) {
    const CtaKeys k(p.shape, rb, keys, causal, left, right);
    rows = k.rows;
    key_begin = k.key_begin;
    key_end = k.key_end;
    first_end = k.first_end;
    last_begin = k.last_begin;
    tiles = k.tiles(tile_keys, split, p.num_splits);
  }

  // Row r of the CTA (0 ≤ r < 16): its new token t and query head h.
  __device__ __forceinline__ int token(int r) const { return (rb * kRowsPerCta + r) / g; }
  __device__ __forceinline__ int head(int r) const { return hk * g + (rb * kRowsPerCta + r) % g; }
  // The keys token t sees: [visible_begin(t), visible_end(t)), within [0, L] (key_range.hpp).
  __device__ __forceinline__ int visible_end(int t) const { return decoding::visible_end(keys, n, t, causal, right); }
  __device__ __forceinline__ int visible_begin(int t) const { return decoding::visible_begin(keys, n, t, left); }
  // Row r's index in LSE's order, (batch, heads, new_tokens): the workspace's rows too.
  __device__ __forceinline__ std::int64_t lse_row(const DecodeShape& s, int r) const {
    return (std::int64_t(b) * s.heads + head(r)) * s.new_tokens + token(r);
  }
  // Row r's offset in q and o, (batch, new_tokens, heads, d), in elements.
  __device__ __forceinline__ std::int64_t q_row(const DecodeShape& s, int r) const {
    return ((std::int64_t(b) * s.new_tokens + token(r)) * s.heads + head(r)) * s.d;
  }
};

// A warp's scores S (16 rows × 8·NT keys from key k0, the mma's accumulator layout: element e of
// 8-key tile nt is row g + 8(e / 2), key k0 + 8nt + 2·t4 + e mod 2): keys a row does not see
// (visible_begin, visible_end: past L, past its diagonal when causal, outside its window) get
// −inf, in the tiles that reach past what the CTA's first row sees or before what its last row
// sees (the others need nothing).
template <bool kCausal, int NT>
__device__ __forceinline__ void decode_mask(float (&s)[1][NT][4], const DecodeCta& cta, int k0) {
  if (k0 + 8 * NT <= cta.first_end && k0 >= cta.last_begin) return;
  const int lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = g + 8 * (e >> 1), key = k0 + 8 * nt + 2 * t4 + (e & 1), t = cta.token(row);
      if (key >= cta.visible_end(t) || key < cta.visible_begin(t)) s[0][nt][e] = -INFINITY;
    }
}

// Softcap and ALiBi (DecodeParams::mods) on a warp's raw scores q·k (the softmax multiplies by τ
// later): cap c = softcap / τ, s ← c · tanh(s / c); ALiBi's bias in the same units,
// s ← s − (slope / τ) · |L − n + t − j|, the slope of the row's head h (and, for (batch, heads)
// slopes, of the CTA's sequence b). Before the masks, as the reference orders them.
template <int NT>
__device__ __forceinline__ void decode_scores(float (&s)[1][NT][4], const DecodeCta& cta, const DecodeParams& p, int k0) {
  const int lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
  const float cap = p.mods.softcap > 0.f ? p.mods.softcap / p.scale : 0.f;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int row = g + 8 * (e >> 1);
    const float slope = p.mods.alibi_slopes ? p.mods.alibi_slope(cta.b, cta.head(row)) / p.scale : 0.f;
    const int diag = cta.keys - cta.n + cta.token(row);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      float x = s[0][nt][e];
      if (cap > 0.f) x = cap * tanhf(x / cap);
      const int key = k0 + 8 * nt + 2 * t4 + (e & 1);
      s[0][nt][e] = x - slope * float(abs(diag - key));
    }
  }
}

}  // namespace fs::decoding
