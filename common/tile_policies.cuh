// The policy objects a tiled kernel takes for what later steps add, in the manner of
// FlashAttention's own `Mask` and `Dropout` helpers: one line at each use in the kernel, and
// the plain ones here compile to exactly the code the kernel would have without them.
//
//   Walk<BC>     which tiles of BC keys (or queries) a CTA's inner loop visits
//                  DenseWalk   every tile; causal: only those on or below the diagonal
//                  step 06: BlockListWalk, the nonzero blocks of a block mask (its own file)
//   TileDropout  what happens to a thread's tile of probabilities before they are used
//                  NoDropout   nothing
//                  step 05: PhiloxDropout, P ∘ Z with Z regenerated from a seed (its own file)
//   Features     FlashAttention's interface beyond the square problem: what happens to a thread's
//                tile of scores before the softmax, which tiles a window leaves out of a walk,
//                and K and V of their own length and head count
//                  NoFeatures     nothing: K and V like Q
//                  FlashFeatures  softcap, ALiBi, a sliding window; Nk ≠ N, grouped K/V heads;
//                                 packed sequences (SeqSpan)
//                                 (common/flash_features.cuh)
//
// A kernel that takes them:
//
//   template <int D, typename T, bool kCausal, template <int> class Walk, class TileDropout, bool kTrace>
//   __global__ void flash2_forward_kernel(const FwdParams p, trace::Slices slices) {
//     const Walk<BC> walk = Walk<BC>::keys_of(p.sparse, N, row0, last_row, kCausal);  // key tiles
//     const TileDropout dropout(p.dropout, bh);
//     for (int t = 0; t < walk.size(); ++t) {
//       const int j0 = walk.start(t);
//       ...
//       dropout.template keep<false, R, BC>(row, j0).apply(s);   // step 05: P̃ ∘ Z; here nothing
//     }
//     walk.for_each_skipped(N, [&](int first, int count) { ...a trace event... });
//   }
#pragma once

#include <cuda_runtime.h>

#include "common/problem.hpp"

namespace fs {

// Every BC-element tile of [first, end). The CTA that owns query rows [row0, last_row] visits
// the keys [0, N) — causal: [0, last_row] —, the CTA that owns keys from key0 the queries
// [0, N) — causal: from the tile of key0 on (queries before it see none of its keys).
template <int BC>
struct DenseWalk {
  int first = 0, count = 0;

  __device__ int size() const { return count; }
  __device__ int start(int t) const { return first + t * BC; }

  static __device__ DenseWalk range(int first, int end) { return {first, (end - first + BC - 1) / BC}; }
  // The key tiles of the CTA that owns query rows [row0, last_row] of N. (The block mask is
  // for walks that take one; every argument is a value, so that no kernel parameter's address
  // is taken.)
  static __device__ DenseWalk keys_of(BlockSparse /*mask*/, int N, int /*row0*/, int last_row, bool causal) {
    return range(0, causal ? last_row + 1 : N);
  }
  // The query tiles of the CTA that owns the keys from key0.
  static __device__ DenseWalk queries_of(BlockSparse /*mask*/, int N, int key0, bool causal) {
    return range(causal ? key0 / BC * BC : 0, N);
  }

  // For the trace: f(first, count) for each run of elements the walk leaves out, [0, N) being
  // everything there is. A dense walk leaves out at most its two ends.
  template <typename F>
  __device__ void for_each_skipped(int N, F f) const {
    if (first > 0) f(0, first);
    const int stop = min(N, first + count * BC);
    if (stop < N) f(stop, N - stop);
  }
};

// The result of TileDropout::keep for a thread's R × BC tile: which scores survive. NoDropout's
// keeps all, and apply() is nothing.
struct KeepAll {
  template <int R, int BC>
  __device__ __forceinline__ void apply(float (&)[R][BC]) const {}
};

struct NoDropout {
  __device__ NoDropout(const Dropout&, long long /*bh*/, int /*q0*/ = 0, int /*k0*/ = 0) {}  // q0, k0: SeqSpan's
  template <bool kKeyRows, int R, int BC>
  __device__ __forceinline__ KeepAll keep(int /*row*/, int /*col0*/) const { return {}; }
};

// The result of Features::scores for a thread's R × BC tile: what the backward's chain rule needs
// from the modified scores (the softcap's derivative). NoFeatures's is nothing.
struct NoChain {
  template <int R, int BC>
  __device__ __forceinline__ void apply(float (&)[R][BC]) const {}
};

// The queries and keys of the problem one CTA works on: the head's rows [q0, q0 + n) of Q (and O,
// dO, dQ, LSE) and [k0, k0 + nk) of K (and V, dK, dV). The whole head, or with packed sequences
// (FwdParams::packed) sequence blockIdx.z of it. A kernel indexes its tiles, masks and walks
// within the span, as if it were the whole problem, and adds q0, k0 where it addresses memory
// and the dropout mask (which is indexed by token).
struct SeqSpan {
  int q0 = 0, n = 0, k0 = 0, nk = 0;
  int index = 0;  // packed sequences: the sequence's (blockIdx.z), ALiBi's batch for (B, H) slopes; else 0
  __host__ __device__ int shift() const { return nk - n; }  // δ: the masks' bottom-right alignment
};

struct NoFeatures {
  // Packed sequences come with FlashFeatures only; here the span is always the whole square head.
  static constexpr bool kSequences = false;
  // The head dimension is the kernel's own (step 08's FlashFeatures kernels take any d ≤ theirs).
  static constexpr bool kAnyHeadDim = false;
  static __device__ __forceinline__ SeqSpan sequence(const Packed&, const Shape& s) { return {0, s.N, 0, s.N}; }
  __device__ NoFeatures(const ScoreMods&, const Shape&, long long /*bh*/, float /*unit*/ = 1.f) {}
  __device__ NoFeatures(const ScoreMods&, const Shape&, const SeqSpan&, long long /*bh*/, float /*unit*/ = 1.f) {}
  // K and V: their length, δ = Nk − N (the causal mask's offset), the K/V head of query head bh,
  // and the G query heads of K/V head kv_bh (g < G). Here K and V are like Q.
  static __device__ __forceinline__ int kv_len(const Shape& s) { return s.N; }
  static __device__ __forceinline__ int shift(const Shape&) { return 0; }
  static __device__ __forceinline__ long long kv_head(const Shape&, long long bh) { return bh; }
  // The first row of K/V head kv_bh, kv_bh · Nk: here the query head's own first row, `q_rows`
  // (passed in, so that the kernel's code is what it was before K and V had shapes of their own).
  static __device__ __forceinline__ long long kv_rows(const Shape&, long long /*kv_bh*/, long long q_rows) {
    return q_rows;
  }
  static __device__ __forceinline__ int group(const Shape&) { return 1; }
  static __device__ __forceinline__ long long query_head(const Shape&, long long kv_bh, int /*g*/) { return kv_bh; }
  // The scores (log2 units) of a thread's tile, modified in place: rows row + r, columns col0 + c
  // (kKeyRows: the rows are keys and the columns queries, as in the dK/dV kernel).
  template <bool kKeyRows, int R, int BC>
  __device__ __forceinline__ NoChain scores(float (&)[R][BC], int /*row*/, int /*col0*/) const { return {}; }
  // A walk over the keys of query rows [row0, last_row], or over the queries of keys
  // [key0, last_key], less the tiles the window leaves out.
  template <class W>
  __device__ __forceinline__ W keys(W walk, int /*row0*/, int /*last_row*/) const { return walk; }
  template <class W>
  __device__ __forceinline__ W queries(W walk, int /*key0*/, int /*last_key*/) const { return walk; }
};

}  // namespace fs
