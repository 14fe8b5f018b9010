// FlashFeatures: the Features policy (common/tile_policies.cuh) of FlashAttention's interface
// beyond the square problem, for the fp32 kernels of steps 04 and 05: the features that change
// the scores — softcapping, ALiBi and a sliding window (ScoreMods, common/problem.hpp) — and K, V
// of their own length Nk and head count Hkv (Shape::Nk, Shape::Hkv: grouped-query attention).
// With Nk ≠ N the masks align to the bottom-right corner: query i's diagonal key is i + δ,
// δ = Nk − N, for the causal mask, the window and ALiBi's distance alike.
//
// The kernels keep scores in log2 units, s = τ log2(e) q·k, so that P = exp2(s − m). In those
// units, with c = softcap · log2(e) and a = slope_h · log2(e):
//
//   softcap   s ← c · tanh(s / c)          (= log2(e) · softcap · tanh(τ q·k / softcap))
//   ALiBi     s ← s − a · |i + δ − j|
//   window    s ← −∞ where j < i + δ − window_left or j > i + δ + window_right
//
// in that order (the reference's, common/reference.cpp), before the causal and tail masks. The
// backward recomputes the same s, and its chain rule takes the softcap's derivative,
// dS_raw = dS ∘ (1 − tanh²), for dQ and dK; ALiBi's bias is a constant and the window a mask.
// Packed sequences (FwdParams::packed) come with it too: each CTA works on one sequence's span
// (SeqSpan, common/tile_policies.cuh), δ and Nk are that sequence's, and a kernel adds the span's
// first query and key to its addresses.
// A window also shortens the walks: the tiles it leaves wholly out are never loaded (a DenseWalk;
// other walks are masked element by element).
#pragma once

#include <cmath>
#include <type_traits>

#include "common/flash_tile.cuh"
#include "common/problem.hpp"
#include "common/tile_policies.cuh"

namespace fs {

// The softcap's derivative at each score of a thread's R × BC tile.
template <int R, int BC>
struct SoftcapChain {
  float g[R][BC];
  __device__ __forceinline__ void apply(float (&ds)[R][BC]) const {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int c = 0; c < BC; ++c) ds[r][c] *= g[r][c];
  }
};

// kSoftcap: whether the scores are capped. Without it the chain rule has nothing to add and the
// kernels hold no derivatives (R·BC registers a thread): FlashFeaturesOf<false> is what a run
// without --softcap launches.
template <bool kSoftcap_>
struct FlashFeaturesOf {
  static constexpr bool kSoftcap = kSoftcap_;
  int left, right;  // the window; −1: unbounded
  float cap;        // softcap · log2(e); 0: none
  float slope;      // this head's ALiBi slope (of its batch or sequence) · log2(e); 0: none
  int delta;        // Nk − N: query i's diagonal key is i + δ (the masks' bottom-right alignment)
  int n_keys;       // Nk

  // `unit`: the scores' unit, s = unit · τ q·k — log2(e) in steps 04/05; 1/τ in step 08, whose
  // scores are the τ-less q·k (steps/08_tensor_cores/tc_features.cuh). `seq`: the CTA's span
  // (sequence()), whose δ and keys the masks and walks take; without one, the whole head. ALiBi's
  // slope is head bh % H's of batch bh / H, or with packed sequences (one batch: bh / H = 0) of the
  // span's sequence seq.index (0 without them): row bh / H + seq.index of (B, H) slopes.
  __device__ FlashFeaturesOf(const ScoreMods& m, const Shape& s, const SeqSpan& seq, long long bh, float unit = kLog2e)
      : left(m.window_left),
        right(m.window_right),
        cap(kSoftcap && m.softcap > 0.f ? m.softcap * unit : 0.f),
        slope(m.alibi_slopes ? m.alibi_slope(bh / s.H + seq.index, int(bh % s.H)) * unit : 0.f),
        delta(seq.shift()),
        n_keys(seq.nk) {}
  __device__ FlashFeaturesOf(const ScoreMods& m, const Shape& s, long long bh, float unit = kLog2e)
      : FlashFeaturesOf(m, s, SeqSpan{0, s.N, 0, s.keys()}, bh, unit) {}

  // The span of the CTA's problem: with packed sequences sequence blockIdx.z's tokens (a sequence
  // shorter than the grid's tiles leaves the CTAs past it nothing to do), else the whole head.
  static constexpr bool kSequences = true;
  // Step 08's kernels with these features take any head dimension d up to the one they are compiled
  // at, D, their tiles zero past d (steps/08_tensor_cores/tc_tiles.cuh, head_cols).
  static constexpr bool kAnyHeadDim = true;
  static __device__ __forceinline__ SeqSpan sequence(const Packed& pk, const Shape& s) {
    if (!pk.on()) return {0, s.N, 0, s.keys()};
    const int b = blockIdx.z, q0 = pk.cu_q[b], k0 = pk.cu_k[b];
    return {q0, pk.cu_q[b + 1] - q0, k0, pk.cu_k[b + 1] - k0, b};
  }

  // K and V of (B, Hkv, Nk, d): query head h of a batch reads K/V head h / G, G = H / Hkv.
  static __device__ __forceinline__ int kv_len(const Shape& s) { return s.keys(); }
  static __device__ __forceinline__ int shift(const Shape& s) { return s.keys() - s.N; }
  static __device__ __forceinline__ int group(const Shape& s) { return s.H / s.kv_heads(); }
  static __device__ __forceinline__ long long kv_head(const Shape& s, long long bh) {
    return bh / s.H * s.kv_heads() + bh % s.H / group(s);
  }
  static __device__ __forceinline__ long long kv_rows(const Shape& s, long long kv_bh, long long /*q_rows*/) {
    return kv_bh * s.keys();
  }
  static __device__ __forceinline__ long long query_head(const Shape& s, long long kv_bh, int g) {
    return kv_bh / s.kv_heads() * s.H + kv_bh % s.kv_heads() * group(s) + g;
  }

  // One pass over the tile for ALiBi and the window, without branches: with a branch around
  // each (skipping ALiBi at slope 0, the mask on tiles inside the window whole) ptxas spilled
  // the dK/dV kernel's accumulators to local memory, 6 KB a thread at d = 64.
  template <bool kKeyRows, int R, int BC>
  __device__ __forceinline__ std::conditional_t<kSoftcap, SoftcapChain<R, BC>, NoChain> scores(float (&s)[R][BC],
                                                                                             int row, int col0) const {
    std::conditional_t<kSoftcap, SoftcapChain<R, BC>, NoChain> chain;
    if constexpr (kSoftcap) {  // braced: nvcc 13.0 took a `#pragma unroll` after an unbraced `if
                               // constexpr` for its body, and dropped what followed (the return)
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int c = 0; c < BC; ++c) s[r][c] = capped(s[r][c], chain.g[r][c]);
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int c = 0; c < BC; ++c)  // the query is the row, or the column with kKeyRows
        s[r][c] = biased(s[r][c], kKeyRows ? col0 + c : row + r, kKeyRows ? row + r : col0 + c);
    return chain;
  }

  // One score, for kernels whose tiles are laid out otherwise (step 08's accumulator fragments):
  // the softcap c·tanh(s / c), its derivative 1 − tanh² in g; then ALiBi and the window of query i
  // and key j, whose diagonal key is q = i + δ.
  __device__ __forceinline__ float capped(float s, float& g) const {
    const float t = tanhf(s / cap);
    g = 1.f - t * t;
    return cap * t;
  }
  __device__ __forceinline__ float biased(float s, int i, int k) const {
    const int q = i + delta;
    const float x = s - slope * fabsf(float(q - k));
    return (left >= 0 && k < q - left) || (right >= 0 && k > q + right) ? -INFINITY : x;
  }

  // The keys query rows [row0, last_row] can see, the queries that see keys [key0, last_key]
  // (window_lo, window_end: common/problem.hpp, which the IO models share), in [0, Nk) and
  // [0, N): a walk the causal offset δ took below 0 or past the end is cut back here.
  template <int BC>
  __device__ DenseWalk<BC> keys(DenseWalk<BC> w, int row0, int last_row) const {
    return clip(w, window_lo(row0 + delta, left), min(n_keys, window_end(last_row + delta, right)));
  }
  template <int BC>
  __device__ DenseWalk<BC> queries(DenseWalk<BC> w, int key0, int last_key) const {
    return clip(w, window_lo(key0 - delta, right), window_end(last_key - delta, left));
  }
  template <class W>
  __device__ W keys(W w, int, int) const { return w; }
  template <class W>
  __device__ W queries(W w, int, int) const { return w; }

 private:
  template <int BC>
  static __device__ DenseWalk<BC> clip(DenseWalk<BC> w, int lo, int end) {
    const TileRun r = clip_tiles(w.first, w.count, BC, lo, end);
    return {r.first, r.count};
  }
};

using FlashFeatures = FlashFeaturesOf<true>;          // softcap, ALiBi, a window, K/V shapes
using FlashFeaturesNoCap = FlashFeaturesOf<false>;    // the same without the softcap

}  // namespace fs
