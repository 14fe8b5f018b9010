// FlashAttention's interface features (common/flash_features.cuh: softcap, ALiBi, a sliding window;
// K and V of their own length and heads) on the tensor cores' accumulator tiles. The policy is the
// one steps 04/05 take — NoFeatures compiles to nothing, FlashFeaturesOf<kSoftcap> carries the
// features — and what differs is where a lane's scores sit (mma.cuh): element e of 8-column tile nt
// of a 16-row tile is row g + 8(e / 2), column 8nt + 2·t4 + e mod 2.
//
// Step 08 keeps its scores τ-less, s = q·k (the exponent is rounded as fl(τ log2(e) s) − fl(τ
// log2(e) m), flash_tc_forward.cuh), so the features are applied in those units: the policy is made
// with unit 1/τ, and s ← (c/τ) tanh(τ s / c), s ← s − (slope/τ)|i + δ − j|. Everything after the
// scores — the max, the exponent's roundings, LSE, the backward's recomputed P — is then the
// kernels' as it was, and the forward and the backward modify each score by the same instructions.
#pragma once

#include <type_traits>

#include "common/flash_features.cuh"
#include "common/tile_policies.cuh"

namespace fs::tc {

// The softcap's derivative at a lane's elements of a 16-row tile: dS ∘ (1 − tanh²), for dK and dQ.
template <int NT>
struct TcSoftcapChain {
  float g[NT][4];
  __device__ __forceinline__ void apply(float (&ds)[NT][4]) const {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) ds[nt][e] *= g[nt][e];
  }
  // Elements e, e + 1 of tile nt (e even): a pair tc_p_ds_pair computes.
  __device__ __forceinline__ void apply(float& ds0, float& ds1, int nt, int e) const {
    ds0 *= g[nt][e];
    ds1 *= g[nt][e + 1];
  }
};
// Without a softcap: nothing to add.
struct TcNoChain {
  template <int NT>
  __device__ __forceinline__ void apply(float (&)[NT][4]) const {}
  __device__ __forceinline__ void apply(float&, float&, int, int) const {}
};

// What a tile's rows are: queries (S, as the forwards and the dQ kernel hold it), or keys and the
// columns queries (Sᵀ, in the dK/dV kernels).
enum class Rows { kQueries, kKeys };

// The scores of one 16-row accumulator tile, modified by the features in place: rows row0 + g,
// row0 + g + 8, columns col0 + 8nt + 2·t4 (+1). Returns what the backward's chain rule needs.
template <Rows kRows, bool kSoftcap, int NT>
__device__ __forceinline__ std::conditional_t<kSoftcap, TcSoftcapChain<NT>, TcNoChain> tc_scores(
    const FlashFeaturesOf<kSoftcap>& f, float (&s)[NT][4], int row0, int col0) {
  std::conditional_t<kSoftcap, TcSoftcapChain<NT>, TcNoChain> chain;
  constexpr bool kKeyRows = kRows == Rows::kKeys;
  const int lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = row0 + g + 8 * (e >> 1), col = col0 + 8 * nt + 2 * t4 + (e & 1);
      float x = s[nt][e];
      if constexpr (kSoftcap) {  // braced: see FlashFeaturesOf::scores
        x = f.capped(x, chain.g[nt][e]);
      }
      s[nt][e] = f.biased(x, kKeyRows ? col : row, kKeyRows ? row : col);
    }
  return chain;
}
// NoFeatures: nothing.
template <Rows kRows, int NT>
__device__ __forceinline__ TcNoChain tc_scores(const NoFeatures&, float (&)[NT][4], int /*row0*/, int /*col0*/) {
  return {};
}

// The problem a CTA's tile belongs to (SeqSpan): the head, or with packed sequences sequence
// blockIdx.z's tokens — N queries and Nk keys, counted within it, δ = Nk − N (Features: the head's
// N, N and 0 but for FlashFeatures).
template <class Features>
struct CtaSpan {
  SeqSpan seq;
  int N, Nk, shift;

  template <class Params>
  __device__ __forceinline__ explicit CtaSpan(const Params& p)
      : seq(Features::sequence(p.packed, p.shape)), N(seq.n), Nk(seq.nk), shift(seq.shift()) {}
};

// The chain rule's type for a tile of NT 8-column tiles under Features.
template <class Features, int NT>
using TcChain = decltype(tc_scores<Rows::kQueries>(std::declval<const Features&>(), std::declval<float (&)[NT][4]>(), 0, 0));

}  // namespace fs::tc
