// What step 08's backward kernels share, and step 09's backward takes too: the workspace's layout,
// P recomputed from LSE as the forward rounded it, the P and dS of a pair of scores, and dK and dV
// out to HBM.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "common/flash_tile.cuh"
#include "common/problem.hpp"
#include "common/tile_policies.cuh"
#include "steps/08_tensor_cores/head_dims.hpp"
#include "steps/08_tensor_cores/mma.cuh"
#include "steps/08_tensor_cores/tc_dropout.cuh"
#include "steps/08_tensor_cores/tc_tiles.cuh"

namespace fs::tc {

// The backward's workspace: D, then the preprocess's copy of LSE (B·H·N floats each, padded to
// 256 bytes), then dQacc (B·H·N rows of the compiled head dimension's floats, tc_dq_acc_cols: a
// kernel of any d adds its zero columns past d there too).
inline __host__ __device__ std::int64_t tc_delta_floats(const Shape& s) {  // of D, and of LSE's copy
  return (std::int64_t(s.B) * s.H * s.N + 63) / 64 * 64;
}
inline std::size_t tc_delta_bytes(const Shape& s) { return 2 * tc_delta_floats(s) * sizeof(float); }
inline std::size_t tc_bwd_workspace_bytes(const Shape& s) {
  return tc_delta_bytes(s) + std::size_t(s.B) * s.H * s.N * tc_dq_acc_cols(s) * sizeof(float);
}

// LSE of row i; a row that saw no key (−inf) or lies past N gets +inf, so that every P of it is
// exactly 0.
__device__ __forceinline__ float tc_lse(const float* lse, int i, int N) {
  if (i >= N) return INFINITY;
  const float x = lse[i];
  return x == -INFINITY ? INFINITY : x;
}

// P = exp(τ s − LSE), the exponent rounded as the forward rounded LSE = fl(τ m) + ln ℓ
// (flash_tc_forward.cuh): two separate roundings, fl(fl(τ s) − LSE), never a fused τ s − LSE.
// Where a row's softmax is one-hot (ℓ = 1: scores far apart, as inputs of magnitude 1e3 give),
// the top score's exponent is then exactly 0 and its P exactly 1, as in the forward. The
// forward's own exp2(τ log2(e) s − τ log2(e) m), recomputed from a stored LSE, would instead be
// off by the roundings of τ m log2(e) and LSE log2(e) — at scores of 1e5 that is 1e-2 in the
// exponent, every row's Σ_j P_ij misses 1 by that much, and dS = P ∘ (dP − D), which relies on
// D_i = Σ_j P_ij dP_ij, is wrong by that much times |D|.
__device__ __forceinline__ float tc_prob(float s, float scale, float lse) {
  return exp2_fast(__fsub_rn(__fmul_rn(s, scale), lse) * kLog2e);
}

// Whether a dK/dV kernel at head dimension D compiles the one-FMA probabilities for a power-of-2 τ
// (tc_p_ds_pair): where the default τ = 1/√d is one (d a power of 4). At d = 128, where it is not,
// the second copy of the loop alone made the kernel 1.7% slower
// (docs/benchmarks/experiments/h200_tc_bwd_candidates.csv, tuneB).
constexpr bool tc_exact_scale_path(int D) { return (D & (D - 1)) == 0 && (D & 0x55555555) != 0; }

// f(std::bool_constant<a>{}) and f(std::bool_constant<a>{}, std::bool_constant<b>{}): a body
// compiled for each value, the branch taken once. The kernels pass whether τ is a power of 2 and
// whether the stage needs a mask, so that the scores of the tiles no causal or tail mask reaches
// carry no test at all: tested at each pair instead, `edge` had put 32 branches into every stage of
// tc_dkdv_smem_kernel at d = 64, and without them the backward took 0.94-0.98× the time
// (docs/benchmarks/experiments/h200_tc_edge.csv, tuneA there).
template <typename F>
__device__ __forceinline__ void with_flag(bool a, F&& f) {
  if (a)
    f(std::true_type{});
  else
    f(std::false_type{});
}
template <typename F>
__device__ __forceinline__ void with_flags(bool a, bool b, F&& f) {
  with_flag(a, [&](auto x) { with_flag(b, [&](auto y) { f(x, y); }); });
}

// P and dS of one key against queries q and q + 1 (q even: the pair a lane holds of a transposed
// tile). On entry s0, s1 are the scores Sᵀ and dp0, dp1 are dPᵀ; on exit s0, s1 are P ∘ Z and
// dp0, dp1 are dS = P ∘ (dP ∘ Z − D). P is 0 where causal hides the key (key > q + δ, δ = Nk − N
// under Features) and for keys past Nk (their rows of K are zero-filled, S = 0, and exp(0 − LSE)
// can overflow when LSE is very negative), and where LSE is +inf (a query past N, or one that saw
// no key). kExactScale: τ is a power of 2, so τs is exact and one FMA rounds τs − LSE exactly as
// tc_prob's two roundings do, an instruction less.
// edge: whether the stage needs the mask at all; the kernels pass a constant (with_flags).
// key and q are counted within the CTA's span (SeqSpan), whose Nk and δ packed sequences take.
template <bool kExactScale, bool kDropout, class Features>
__device__ __forceinline__ void tc_p_ds_pair(float& s0, float& s1, float& dp0, float& dp1, float2 lse, float2 dd,
                                             int key, int q, bool edge, const BwdParams& p, const SeqSpan& seq,
                                             const TcDropout& dropout) {
  float p0, p1;
  if constexpr (kExactScale) {
    p0 = exp2_fast(fmaf(s0, p.scale, -lse.x) * kLog2e);
    p1 = exp2_fast(fmaf(s1, p.scale, -lse.y) * kLog2e);
  } else {
    p0 = tc_prob(s0, p.scale, lse.x);
    p1 = tc_prob(s1, p.scale, lse.y);
  }
  if (edge) {
    // Nk and δ read here, and the two tests written as they are, so that with NoFeatures (Nk = N,
    // δ = 0) nvcc emits the plain kernel's instructions: it orders a comparison's operands by their
    // form, and `key > q + δ` came out as q >= key, which moved ptxas's register allocation.
    const int Nk = Features::kSequences ? seq.nk : Features::kv_len(p.shape);
    const int shift = Features::kSequences ? seq.shift() : Features::shift(p.shape);
    if (key >= Nk || (p.causal && key - shift > q)) p0 = 0.f;
    if (key >= Nk || (p.causal && key > q + 1 + shift)) p1 = 0.f;
  }
  Z2 z{1.f, 1.f};
  if constexpr (kDropout) z = dropout.along_queries(q, key);
  dp0 = p0 * (dp0 * z.z0 - dd.x);
  dp1 = p1 * (dp1 * z.z1 - dd.y);
  s0 = p0 * z.z0;
  s1 = p1 * z.z1;
}

// A lane's accumulator rows of MT 16-row tiles, row0 + 16·mt + g and row0 + 16·mt + g + 8 (mma.cuh's
// C pattern, g = lane / 4), those below `end`: f(mt, h, row) for row h of tile mt. dQ leaves the
// kernels this way (tc_atomic_add_dq, tc_dq_kernel).
template <int MT, class F>
__device__ __forceinline__ void for_each_row_below(int row0, int g, int end, F&& f) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + 16 * mt + g + 8 * h;
      if (row < end) f(mt, h, row);
    }
}

// dK = τ dK and dV of a lane's two rows of a 16-key tile (keys key0 + g, key0 + g + 8 of the span
// seq) × CT 8-column tiles from c0, to HBM in the run's element type and dK's and dV's layouts;
// keys past Nk and columns past d (head_cols) are not stored. kv_bh: the K/V head.
template <typename E, int D, class Features, int CT>
__device__ __forceinline__ void tc_store_dkdv(const BwdParams& p, const SeqSpan& seq, const float (&dk)[CT][4],
                                              const float (&dv)[CT][4], std::int64_t kv_bh, int key0, int c0) {
  const int Hkv = p.shape.kv_heads();
  E* gdK = as<E>(p.dk) + p.dk_strides.of_head(kv_bh, Hkv) + seq.k0 * p.dk_strides.row;
  E* gdV = as<E>(p.dv) + p.dv_strides.of_head(kv_bh, Hkv) + seq.k0 * p.dv_strides.row;
  const int Nk = Features::kSequences ? seq.nk : Features::kv_len(p.shape);
  const int cols = head_cols<D, Features>(p.shape);
  const int lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int key = key0 + g + 8 * h;
    if (key >= Nk) continue;
    E* dst_k = gdK + key * p.dk_strides.row + c0 + 2 * t4;
    E* dst_v = gdV + key * p.dv_strides.row + c0 + 2 * t4;
#pragma unroll
    for (int ct = 0; ct < CT; ++ct) {
      const int col = c0 + 2 * t4 + 8 * ct;
      store_pair<D>(dst_k + 8 * ct, col, p.scale * dk[ct][2 * h], p.scale * dk[ct][2 * h + 1], cols);
      store_pair<D>(dst_v + 8 * ct, col, dv[ct][2 * h], dv[ct][2 * h + 1], cols);
    }
  }
}

}  // namespace fs::tc
