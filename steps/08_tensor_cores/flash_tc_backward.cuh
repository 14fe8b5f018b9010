// The tensor-core backward of step 08: step 05's recomputation backward (the same algorithm, the
// same order of passes) with its five matrix products on mma.sync, bf16 or fp16 in, fp32
// accumulate.
//
//   tc_bwd_preprocess_kernel  D_i = rowsum(dO_i ∘ O_i), once per row, on the tensor cores as
//                             the dK/dV kernel computes dP (exact cancellation); a copy of LSE
//                             with +inf for a row that saw no key (−inf), so that its P is 0
//                             with no test per score; the atomic variant also zeroes dQacc, a
//                             float32 copy of dQ's shape
//   tc_dkdv_kernel            one CTA per K_j, V_j tile (kKeys keys: 16 per warp), streaming
//                             Q_i, dO_i, LSE_i, D_i tiles through a two-stage cp.async pipeline.
//                             Each warp computes the transposed tiles of its 16 keys,
//                               Sᵀ = K_j Q_iᵀ and dPᵀ = V_j dO_iᵀ      (keys × queries)
//                             so that P_ijᵀ and dS_ijᵀ come out in the accumulator registers of
//                             the very warp that owns those keys' dV and dK rows, and feed
//                               dV_j += (P ∘ Z)ᵀ dO_i,   dK_j += dSᵀ Q_i
//                             as A operands with no data movement — the forward's "P stays in
//                             registers", turned around. Atomic variant: dS goes to shared
//                             memory once (rounded to 16 bits, as every product reads it), and
//                             the warps compute dQ_i's share τ dS_ij K_j, each a 16-row × (d/…)
//                             block, and add it to dQacc with fp32 atomics.
//   tc_dq_kernel              the deterministic dQ: one CTA per Q_i tile streams every K_j,
//                             V_j, recomputes S and dP in the forward's orientation (a warp owns
//                             16 query rows) and sums dQ_i += dS_ij K_j in registers, dS again
//                             straight from the accumulators. Two more matrix products, no
//                             atomics: bit-identical runs.
//   tc_dq_convert_kernel      atomic variant: dQ = τ · dQacc, rounded to the run's element type.
//
// d = 256 does not fit a warp's 16 rows of dK and dV (2 × 16 × 256 floats) in registers beside S
// and dP: its dK/dV CTAs come in pairs (kSplit = 2) that share a key tile, both computing S and
// dP over all of d (their cost doubled) and each accumulating half of dK's, dV's and dQ's columns.
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/cuda_utils.cuh"
#include "common/flash_tile.cuh"
#include "common/problem.hpp"
#include "common/recorder/device.cuh"
#include "common/recorder/launch.cuh"
#include "common/tile_policies.cuh"
#include "steps/08_tensor_cores/flash_tc_forward.cuh"
#include "steps/08_tensor_cores/flash_tc_forward_f32.cuh"
#include "steps/08_tensor_cores/mma.cuh"
#include "steps/08_tensor_cores/tc_dropout.cuh"

namespace fs::tc {

// The dK/dV kernel's tiles: kKeys keys per CTA, 16 per warp; kQueries queries per pipeline stage;
// the CTA accumulates columns [part·kCols, (part + 1)·kCols) of dK, dV (and, atomic, dQ).
// kKVInRegs: each warp keeps its K and V rows' A fragments in registers for the whole kernel.
template <typename E_, int D_, int kWarps_, int kQueries_, int kSplit_, bool kKVInRegs_, int kDqRowTiles_ = 1>
struct DkdvConfig {
  using E = E_;
  static constexpr int D = D_, kWarps = kWarps_, kQueries = kQueries_, kSplit = kSplit_;
  static constexpr bool kKVInRegs = kKVInRegs_;
  static constexpr bool kSmemPds = false;  // tc_dkdv_kernel: P and dS stay in registers
  static constexpr int kThreads = 32 * kWarps, kKeys = 16 * kWarps, kCols = D / kSplit;
  // The one-FMA probabilities for a power-of-2 τ, compiled where the default τ = 1/√d is one (d a
  // power of 4). At d = 128, where it is not, the second copy of the loop alone made the kernel
  // 1.7% slower (docs/benchmarks/h200_tc_bwd_candidates.csv, tuneB).
  static constexpr bool kExactScalePath = (D & (D - 1)) == 0 && (D & 0x55555555) != 0;
  // dQ's share (atomic): each warp takes 16·kDqRowTiles rows × kDqCols columns of the CTA's
  // columns, kRowGroups × kDqGroups warps.
  static constexpr int kDqRowTiles = kDqRowTiles_;
  static constexpr int kRowGroups = kQueries / (16 * kDqRowTiles), kDqGroups = kWarps / kRowGroups,
                       kDqCols = kCols / kDqGroups;
  static_assert(kQueries % (16 * kDqRowTiles) == 0 && kWarps % kRowGroups == 0 && kCols % (16 * kDqGroups) == 0,
                "every warp takes whole 16-row tiles × a multiple of 16 columns of dQ");
  using KTile = SmemTile<kKeys, D, true>;     // K_j, V_j
  using QTile = SmemTile<kQueries, D, true>;  // Q_i, dO_i: two stages each
  using DsTile = SmemTile<kKeys, kQueries, true>;  // dS_ijᵀ (atomic dQ)
  static constexpr std::size_t smem_bytes(bool atomic) {
    return sizeof(E) * (2 * KTile::kElems + 4 * QTile::kElems + (atomic ? DsTile::kElems : 0)) +
           sizeof(float) * 4 * kQueries;  // LSE, D: two stages each
  }
};

// The dK/dV kernel with FlashAttention-2's warp layout (tc_dkdv_smem_kernel): kKeys keys per CTA,
// kQueries queries per stage, kWarps warps in kKeyGroups rows. Warp w owns keys
// [kWarpKeys·(w mod kKeyGroups), +kWarpKeys) in both of its phases; with the index
// o = w / kKeyGroups it computes Sᵀ and dPᵀ for queries [kWarpQueries·o, +kWarpQueries) and
// accumulates dK and dV for columns [kWarpCols·o, +kWarpCols). P and dS pass through shared memory
// between the two, since a warp's dV rows need every query's P, not only its own.
template <typename E_, int D_, int kKeys_, int kQueries_, int kWarps_, int kKeyGroups_, int kDqRowTiles_>
struct DkdvSmemConfig {
  using E = E_;
  static constexpr int D = D_, kKeys = kKeys_, kQueries = kQueries_, kWarps = kWarps_;
  static constexpr int kSplit = 1, kCols = D;  // as DkdvConfig's, for the launcher and the dQ share
  static constexpr bool kSmemPds = true;       // tc_dkdv_smem_kernel
  static constexpr int kThreads = 32 * kWarps, kKeyGroups = kKeyGroups_, kOthers = kWarps / kKeyGroups;
  static constexpr int kWarpKeys = kKeys / kKeyGroups, kWarpQueries = kQueries / kOthers, kWarpCols = D / kOthers;
  static_assert(kWarps % kKeyGroups == 0 && kWarpKeys % 16 == 0 && kWarpQueries % 16 == 0 && kWarpCols % 16 == 0,
                "every warp takes whole 16-key tiles × 16 queries (Sᵀ) and × 16 columns (dK, dV)");
  static constexpr bool kExactScalePath = (D & (D - 1)) == 0 && (D & 0x55555555) != 0;
  static constexpr int kDqRowTiles = kDqRowTiles_;
  static constexpr int kRowGroups = kQueries / (16 * kDqRowTiles), kDqGroups = kWarps / kRowGroups,
                       kDqCols = kCols / kDqGroups;
  static_assert(kQueries % (16 * kDqRowTiles) == 0 && kWarps % kRowGroups == 0 && kCols % (16 * kDqGroups) == 0,
                "every warp takes whole 16-row tiles × a multiple of 16 columns of dQ");
  using KTile = SmemTile<kKeys, D, true>;          // K_j, V_j
  using QTile = SmemTile<kQueries, D, true>;       // Q_i, dO_i: two stages each
  using DsTile = SmemTile<kKeys, kQueries, true>;  // (P ∘ Z)ᵀ and dSᵀ, (key, query)
  static constexpr std::size_t smem_bytes(bool) {
    return sizeof(E) * (2 * KTile::kElems + 4 * QTile::kElems + 2 * DsTile::kElems) + sizeof(float) * 4 * kQueries;
  }
};

// The deterministic dQ kernel's tiles: kRows query rows per CTA (16·kMTiles per warp), kKeys keys
// per pipeline stage.
template <typename E_, int D_, int kWarps_, int kMTiles_, int kKeys_>
struct DqConfig {
  using E = E_;
  static constexpr int D = D_, kWarps = kWarps_, kMTiles = kMTiles_, kKeys = kKeys_;
  static constexpr int kThreads = 32 * kWarps, kRows = 16 * kMTiles * kWarps;
  static_assert(kKeys % 16 == 0, "mma.sync steps over 16 keys");
  using QTile = SmemTile<kRows, D, true>;   // Q_i, dO_i
  using KVTile = SmemTile<kKeys, D, true>;  // K_j, V_j: two stages each
  static constexpr std::size_t kSmemBytes = sizeof(E) * (2 * QTile::kElems + 4 * KVTile::kElems);
};

// Floats of each per-row array of the workspace (D, the copy of LSE): B·H·N, padded to 256 bytes.
inline __host__ __device__ std::int64_t tc_delta_floats(const Shape& s) {
  return (std::int64_t(s.B) * s.H * s.N + 63) / 64 * 64;
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

// D_i = rowsum(dO_i ∘ O_i) on the tensor cores, 16 rows per warp: the diagonal of O dOᵀ, summed
// over d in the order the dK/dV kernel sums dPᵀ = V_j dO_iᵀ (16 columns of d per mma.sync, from
// 0). Where a row's softmax is one-hot, O_i is exactly the row V_k of its top key, and D_i is then
// the very number the kernel computes for dP_ik, bit for bit: dS_ik = P_ik (dP_ik − D_i) is an
// exact 0, as the fp64 reference has it. Summed by FMAs instead, D_i and dP_ik are two roundings
// of one dot product, and at inputs of magnitude 1e3 (dot products of 1e6) their difference
// times K or Q put errors of tenths into dQ and dK.
constexpr int kTcPreprocessWarps = 4, kTcPreprocessRows = 16 * kTcPreprocessWarps;  // rows per CTA

template <typename E, bool kZeroDQ, bool kTrace>
__global__ void __launch_bounds__(kTcPreprocessWarps * 32)
    tc_bwd_preprocess_kernel(const BwdParams p, float* __restrict__ delta, float* __restrict__ dq_acc,
                             trace::Slices slices) {
  trace::CtaTracer<kTrace> tr(slices);
  const int d = p.shape.d, N = p.shape.N;
  const std::int64_t rows = std::int64_t(p.shape.B) * p.shape.H * N;
  const std::int64_t r0 = std::int64_t(blockIdx.x) * kTcPreprocessRows, r1 = min(rows, r0 + kTcPreprocessRows);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
  const std::int64_t w0 = r0 + 16 * warp;  // the warp's rows: this lane's are w0 + g and w0 + g + 8
  // Row r (of all B·H·N) of a tensor in its layout; rows past the end read as zero.
  auto row_of = [&](const void* base, const Strides& st, std::int64_t r) {
    return r < rows ? as<E>(base) + st.of_head(r / N, p.shape.H) + r % N * st.row : nullptr;
  };
  const E *o_lo = row_of(p.o, p.o_strides, w0 + g), *o_hi = row_of(p.o, p.o_strides, w0 + g + 8);
  const E *do_lo = row_of(p.dout, p.dout_strides, w0 + g), *do_hi = row_of(p.dout, p.dout_strides, w0 + g + 8);
  // A = O (rows w0..w0+15), B = dOᵀ: dO's rows w0..w0+7 (tile lo) and w0+8..w0+15 (tile hi) as columns.
  float lo[4] = {}, hi[4] = {};
  if constexpr (std::is_same_v<E, float>) {
    // fp32 (3xtf32): 8 columns of d per product triple, summed from zero and added (mma_3x), as
    // tc_dkdv_f32_kernel sums dPᵀ; column 8kk + t is k = t, as ldmatrix hands that kernel its rows.
    auto at = [](const float* row, int c) { return row ? row[c] : 0.f; };
    for (int kk = 0; kk < d / 8; ++kk) {
      const int c = 8 * kk + t4;
      const float a[4] = {at(o_lo, c), at(o_hi, c), at(o_lo, c + 4), at(o_hi, c + 4)};
      const float b[4] = {at(do_lo, c), at(do_lo, c + 4), at(do_hi, c), at(do_hi, c + 4)};
      std::uint32_t a_hi[4], a_lo[4], b_hi[4], b_lo[4];
      for (int i = 0; i < 4; ++i) {
        Tf32::split(a[i], a_hi[i], a_lo[i]);
        Tf32::split(b[i], b_hi[i], b_lo[i]);
      }
      mma_3x<3>(lo, a_hi, a_lo, b_hi[0], b_hi[1], b_lo[0], b_lo[1]);
      mma_3x<3>(hi, a_hi, a_lo, b_hi[2], b_hi[3], b_lo[2], b_lo[3]);
    }
  } else {
    auto pair = [](const E* row, int c) -> std::uint32_t {
      return row ? *reinterpret_cast<const std::uint32_t*>(row + c) : 0u;
    };
    for (int kk = 0; kk < d / 16; ++kk) {
      const int c = 16 * kk + 2 * t4;
      const std::uint32_t a[4] = {pair(o_lo, c), pair(o_hi, c), pair(o_lo, c + 8), pair(o_hi, c + 8)};
      Element<E>::mma(lo, a, pair(do_lo, c), pair(do_lo, c + 8));
      Element<E>::mma(hi, a, pair(do_hi, c), pair(do_hi, c + 8));
    }
  }
  // The diagonal: (g, g) is lo's column g, (g + 8, g + 8) hi's column g, both held by lane t4 = g/2.
  if (t4 == g / 2) {
    if (w0 + g < rows) delta[w0 + g] = lo[g % 2];
    if (w0 + g + 8 < rows) delta[w0 + g + 8] = hi[2 + g % 2];
  }
  {  // LSE for the dK/dV kernel, +inf where a row saw no key (−inf): its P is then exactly 0
     // with no test per score there
    float* lse_bwd = delta + tc_delta_floats(p.shape);
    for (std::int64_t i = r0 + threadIdx.x; i < r1; i += blockDim.x) {
      const float x = p.lse[i];
      lse_bwd[i] = x == -INFINITY ? INFINITY : x;
    }
  }
  if constexpr (kZeroDQ) {
    auto* z = reinterpret_cast<float4*>(dq_acc + r0 * d);
    for (std::int64_t i = threadIdx.x; i < (r1 - r0) * d / 4; i += blockDim.x) z[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  if constexpr (kTrace)
    if (tr.records()) {
      constexpr std::int64_t kE = sizeof(E);
      trace::for_each_head(r0, r1, N, [&](std::int64_t bh, std::int64_t i, std::int64_t n) {
        FS_TRACE_EVENT(tr, Kind::Load, Tensor::O, bh, i, n, 0, d, n * d * kE);
        FS_TRACE_EVENT(tr, Kind::Load, Tensor::dO, bh, i, n, 0, d, n * d * kE);
        FS_TRACE_EVENT(tr, Kind::Store, Tensor::D, bh, i, n, 0, 1, n * kF);
        FS_TRACE_EVENT(tr, Kind::Load, Tensor::LSE, bh, i, n, 0, 1, n * kF);   // and its copy, written
        FS_TRACE_EVENT(tr, Kind::Store, Tensor::LSE, bh, i, n, 0, 1, n * kF);  // to the workspace
        if (kZeroDQ) FS_TRACE_EVENT(tr, Kind::Store, Tensor::dQacc, bh, i, n, 0, d, n * d * kF);
      });
    }
}

// dQ = τ · dQacc in the run's element type (dQ in its layout), 8 elements per thread.
template <typename E, bool kTrace>
__global__ void __launch_bounds__(256)
    tc_dq_convert_kernel(const BwdParams p, const float* __restrict__ dq_acc, trace::Slices slices) {
  trace::CtaTracer<kTrace> tr(slices);
  const std::int64_t elems = std::int64_t(p.shape.B) * p.shape.H * p.shape.N * p.shape.d;
  const std::int64_t n8 = elems / 8, i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n8) {
    const float4 a = reinterpret_cast<const float4*>(dq_acc)[2 * i], b = reinterpret_cast<const float4*>(dq_acc)[2 * i + 1];
    const float t = p.scale;
    const int d = p.shape.d, N = p.shape.N;
    const std::int64_t row = 8 * i / d;  // of all B·H·N; dQacc is (B, H, N, d)
    E* dst = as<E>(p.dq) + p.dq_strides.of_head(row / N, p.shape.H) + row % N * p.dq_strides.row + 8 * i % d;
    if constexpr (std::is_same_v<E, float>) {
      reinterpret_cast<float4*>(dst)[0] = make_float4(t * a.x, t * a.y, t * a.z, t * a.w);
      reinterpret_cast<float4*>(dst)[1] = make_float4(t * b.x, t * b.y, t * b.z, t * b.w);
    } else {
      *reinterpret_cast<uint4*>(dst) = {Element<E>::pack(t * a.x, t * a.y), Element<E>::pack(t * a.z, t * a.w),
                                        Element<E>::pack(t * b.x, t * b.y), Element<E>::pack(t * b.z, t * b.w)};
    }
  }
  if constexpr (kTrace)
    if (tr.records()) {  // this CTA's rows: blockDim.x · 8 elements from its first
      const int d = p.shape.d, N = p.shape.N;
      const std::int64_t e0 = std::int64_t(blockIdx.x) * blockDim.x * 8, e1 = min(elems, e0 + blockDim.x * 8);
      trace::for_each_head(e0 / d, (e1 + d - 1) / d, N, [&](std::int64_t bh, std::int64_t row, std::int64_t n) {
        FS_TRACE_EVENT(tr, Kind::Load, Tensor::dQacc, bh, row, n, 0, d, n * d * kF);
        FS_TRACE_EVENT(tr, Kind::Store, Tensor::dQ, bh, row, n, 0, d, n * d * std::int64_t(sizeof(E)));
      });
    }
}

// The pieces both dK/dV kernels share.

// Q_i, dO_i, LSE_i, D_i of one pipeline stage, all by cp.async under one commit (gQ, gdO, gLse
// and gDelta point at the head's row 0; Q's and dO's rows are ld_q and ld_o elements apart). Rows past N are zero-filled: zero Q and dO rows give S = 0,
// P = exp(0 − 0) = 1, dP = 0 and D = 0, hence dS = 0 and nothing added to dK or dV.
template <typename QTile, int kThreads, typename E>
__device__ __forceinline__ void tc_load_bwd_stage(E* sQ, E* sdO, float* sL, float* sD, const E* gQ, const E* gdO,
                                                  std::int64_t ld_q, std::int64_t ld_o, const float* gLse,
                                                  const float* gDelta, int i0, int N) {
  load_tile<QTile, kThreads, /*per-chunk checks*/ true>(sQ, gQ, ld_q, i0, N);
  load_tile<QTile, kThreads, /*per-chunk checks*/ true>(sdO, gdO, ld_o, i0, N);
  for (int i = threadIdx.x; i < QTile::kRows; i += kThreads) {
    const bool valid = i0 + i < N;
    cp_async_4(sL + i, gLse + (valid ? i0 + i : 0), valid);
    cp_async_4(sD + i, gDelta + (valid ? i0 + i : 0), valid);
  }
  cp_async_commit();
}

// f(std::bool_constant<a>{}) and f(std::bool_constant<a>{}, std::bool_constant<b>{}): a body
// compiled for each value, the branch taken once. The kernels pass whether τ is a power of 2 and
// whether the stage needs a mask, so that the scores of the tiles no causal or tail mask reaches
// carry no test at all: tested at each pair instead, `edge` had put 32 branches into every stage of
// tc_dkdv_smem_kernel at d = 64, and without them the backward took 0.94-0.98× the time
// (docs/benchmarks/h200_tc_edge.csv, tuneA there).
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

// dQ_i += dS_ij K_j (τ in the convert kernel), from dS_ijᵀ (keys × queries) and K_j in shared
// memory, once every warp's dS is in: warp w adds rows qr .. qr + 16·kDqRowTiles of the query tile
// × kDqCols columns from cq to dQacc with fp32 atomics. A = dS, read transposed out of the
// (key, query) tile.
template <typename Cfg, typename E>
__device__ __forceinline__ void tc_add_dq_share(const E* sdS, const E* sK, float* dq_acc, std::int64_t head, int i0,
                                                int N, int c0) {
  using DsTile = typename Cfg::DsTile;
  using KTile = typename Cfg::KTile;
  constexpr int D = Cfg::D, BN = Cfg::kKeys, DQT = Cfg::kDqCols / 8, MQ = Cfg::kDqRowTiles;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
  const int qr = 16 * MQ * (warp % Cfg::kRowGroups), cq = c0 + warp / Cfg::kRowGroups * Cfg::kDqCols;
  float dq[MQ][DQT][4] = {};
  // dSᵀ read transposed is dS's A fragment when the lanes point as for K's B fragments (the
  // matrices (keys 0-7, queries 0-7), (0-7, 8-15), (8-15, 0-7), (8-15, 8-15) are a0..a3).
  // (At d = 96 a warp's columns start at chunk 6 or 12, and the XOR form does not hold.)
  static_assert(LaneAddress<DsTile>::apart(2 * MQ, 2 * MQ), "dS: queries of a warp apart from its loads' chunks");
  const auto ds_at = b_k_address<DsTile>(sdS, qr / 8);
  const auto k_at = a_address<KTile, LaneAddress<KTile>::apart(DQT, DQT)>(sK, cq / 8);
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) {
    std::uint32_t a[MQ][4];
#pragma unroll
    for (int mq = 0; mq < MQ; ++mq) ldmatrix_x4_trans(a[mq], ds_at.at(16 * kk, 2 * mq));
#pragma unroll
    for (int ct = 0; ct < DQT; ct += 2) {
      std::uint32_t b[4];
      load_b_v(b, k_at, kk, 8 * ct);
#pragma unroll
      for (int mq = 0; mq < MQ; ++mq) {
        Element<E>::mma(dq[mq][ct], a[mq], b[0], b[1]);
        Element<E>::mma(dq[mq][ct + 1], a[mq], b[2], b[3]);
      }
    }
  }
#pragma unroll
  for (int mq = 0; mq < MQ; ++mq)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = i0 + qr + 16 * mq + g + 8 * h;
      if (row >= N) continue;
      float* dst = dq_acc + (head + row) * D + cq + 2 * t4;
#pragma unroll
      for (int ct = 0; ct < DQT; ++ct) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        atomicAdd(reinterpret_cast<float2*>(dst + 8 * ct), make_float2(dq[mq][ct][2 * h], dq[mq][ct][2 * h + 1]));
#else
        atomicAdd(dst + 8 * ct, dq[mq][ct][2 * h]);
        atomicAdd(dst + 8 * ct + 1, dq[mq][ct][2 * h + 1]);
#endif
      }
    }
}

// dK = τ dK and dV of a lane's two rows of a 16-key tile (keys key0 + g, key0 + g + 8 of the span
// seq) × CT 8-column tiles from c0, to HBM in the run's element type and dK's and dV's layouts;
// keys past Nk are not stored. kv_bh: the K/V head.
template <typename E, int D, class Features, int CT>
__device__ __forceinline__ void tc_store_dkdv(const BwdParams& p, const SeqSpan& seq, const float (&dk)[CT][4],
                                              const float (&dv)[CT][4], std::int64_t kv_bh, int key0, int c0) {
  const int Hkv = p.shape.kv_heads();
  E* gdK = as<E>(p.dk) + p.dk_strides.of_head(kv_bh, Hkv) + seq.k0 * p.dk_strides.row;
  E* gdV = as<E>(p.dv) + p.dv_strides.of_head(kv_bh, Hkv) + seq.k0 * p.dv_strides.row;
  const int Nk = Features::kSequences ? seq.nk : Features::kv_len(p.shape);
  const int lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int key = key0 + g + 8 * h;
    if (key >= Nk) continue;
    E* dst_k = gdK + key * p.dk_strides.row + c0 + 2 * t4;
    E* dst_v = gdV + key * p.dv_strides.row + c0 + 2 * t4;
#pragma unroll
    for (int ct = 0; ct < CT; ++ct) {
      *reinterpret_cast<std::uint32_t*>(dst_k + 8 * ct) =
          Element<E>::pack(p.scale * dk[ct][2 * h], p.scale * dk[ct][2 * h + 1]);
      *reinterpret_cast<std::uint32_t*>(dst_v + 8 * ct) = Element<E>::pack(dv[ct][2 * h], dv[ct][2 * h + 1]);
    }
  }
}

template <typename Cfg, bool kDropout, bool kAtomicDQ, class Features, bool kTrace>
__global__ void __launch_bounds__(Cfg::kThreads)
    tc_dkdv_kernel(const BwdParams p, const float* __restrict__ gDelta, float* __restrict__ dq_acc, trace::Slices slices) {
  using E = typename Cfg::E;
  using KTile = typename Cfg::KTile;
  using QTile = typename Cfg::QTile;
  using DsTile = typename Cfg::DsTile;
  constexpr int D = Cfg::D, BN = Cfg::kKeys, BM = Cfg::kQueries, DP = Cfg::kCols;
  constexpr int NT = BM / 8;   // 8-query tiles of a warp's Sᵀ
  constexpr int KD = D / 16;   // 16-wide steps over d (Sᵀ, dPᵀ)
  constexpr int KQ = BM / 16;  // 16-wide steps over the queries (dV, dK)
  constexpr int CT = DP / 8;   // 8-column tiles of the warp's dK, dV rows
  constexpr std::int64_t kE = sizeof(E);
  trace::CtaTracer<kTrace> tr(slices);
  extern __shared__ __align__(128) unsigned char smem[];
  E* sK = reinterpret_cast<E*>(smem);  // (BN, D)
  E* sV = sK + KTile::kElems;          // (BN, D)
  E* sQ = sV + KTile::kElems;          // 2 stages × (BM, D)
  E* sdO = sQ + 2 * QTile::kElems;     // 2 stages × (BM, D)
  E* sdS = sdO + 2 * QTile::kElems;    // (BN, BM), atomic dQ only
  float* sL = reinterpret_cast<float*>(sdS + (kAtomicDQ ? DsTile::kElems : 0));  // 2 stages × BM: LSE
  float* sD = sL + 2 * BM;                                                        // 2 stages × BM: D

  // N queries; the Nk keys of K/V head kv_bh, δ = Nk − N, read by the G query heads of its group
  // (Features: N, 0 and G = 1 but for FlashFeatures). With packed sequences, those of sequence
  // blockIdx.z (SeqSpan): keys and queries are counted within it, and q0, k0 added to addresses.
  const SeqSpan seq = Features::sequence(p.packed, p.shape);
  const int N = seq.n, Nk = seq.nk, shift = seq.shift();
  const std::int64_t kv_bh = blockIdx.y;
  const int key0 = blockIdx.x / Cfg::kSplit * BN, c0 = blockIdx.x % Cfg::kSplit * DP;
  if (Features::kSequences && key0 >= Nk) return;  // packed: past this sequence's keys
  const int n_keys = min(BN, Nk - key0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
  const int wkey = 16 * warp;  // the warp's first key in the tile
  const float* gLse = gDelta + tc_delta_floats(p.shape);  // the preprocess's copy of LSE, (B, H, N)

  load_tile<KTile, Cfg::kThreads, /*per-chunk checks*/ true>(
      sK, as<E>(p.k) + p.k_strides.of_head(kv_bh, p.shape.kv_heads()) + seq.k0 * p.k_strides.row, p.k_strides.row,
      key0, Nk);
  load_tile<KTile, Cfg::kThreads, /*per-chunk checks*/ true>(
      sV, as<E>(p.v) + p.v_strides.of_head(kv_bh, p.shape.kv_heads()) + seq.k0 * p.v_strides.row, p.v_strides.row,
      key0, Nk);
  cp_async_commit();
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::K, kv_bh, key0, n_keys, 0, D, n_keys * D * kE);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::V, kv_bh, key0, n_keys, 0, D, n_keys * D * kE);

  [[maybe_unused]] std::uint32_t kf[Cfg::kKVInRegs ? KD : 1][4], vf[Cfg::kKVInRegs ? KD : 1][4];
  float dk[CT][4] = {}, dv[CT][4] = {};  // this warp's 16 keys × the CTA's DP columns
  // Where this lane reads (mma.cuh, LaneAddress): the warp's keys of K and V as A fragments;
  // stage 0 of Q and dO as B fragments, for Sᵀ and dPᵀ (K's pattern) and for dK and dV (V's).
  const auto k_at = a_address<KTile>(sK + wkey * D), v_at = a_address<KTile>(sV + wkey * D);
  const auto q_bk0 = b_k_address<QTile>(sQ), o_bk0 = b_k_address<QTile>(sdO);
  static_assert(Cfg::kSplit == 1 || LaneAddress<QTile>::apart(CT, CT), "the CTA's columns apart from its loads' chunks");
  const auto q_bv0 = a_address<QTile>(sQ, c0 / 8), o_bv0 = a_address<QTile>(sdO, c0 / 8);
  [[maybe_unused]] const LaneAddress<DsTile> ds_st(sdS, wkey + g, 0, 2 * t4);  // dSᵀ's elements (atomic dQ)

  // dK_j, dV_j add up over the group's query heads (grouped-query attention); one head here.
  for (int gq = 0; gq < Features::group(p.shape); ++gq) {
    // The query head, the span's first row in LSE, D and dQacc, which are (B, H, N), and its Q and dO.
    const std::int64_t bh = Features::query_head(p.shape, kv_bh, gq), head = bh * p.shape.N + seq.q0;
    const E* gQ = as<E>(p.q) + p.q_strides.of_head(bh, p.shape.H) + seq.q0 * p.q_strides.row;
    const E* gdO = as<E>(p.dout) + p.dout_strides.of_head(bh, p.shape.H) + seq.q0 * p.dout_strides.row;
    // The query tiles this CTA visits. Causal: none before the first whose diagonal key, i + δ,
    // reaches key0; a window: none outside it.
    const Features features(p.mods, p.shape, seq, bh, 1.f / p.scale);  // NoFeatures, or τ-less FlashFeatures
    const DenseWalk<BM> walk =
        features.queries(DenseWalk<BM>::queries_of(p.sparse, N, key0 - shift, p.causal), key0, key0 + n_keys - 1);
    const int n_tiles = walk.size();
    auto load_stage = [&](int s, int i0) {
      tc_load_bwd_stage<QTile, Cfg::kThreads>(sQ + s * QTile::kElems, sdO + s * QTile::kElems, sL + s * BM, sD + s * BM,
                                              gQ, gdO, p.q_strides.row, p.dout_strides.row, gLse + head, gDelta + head, i0, N);
    };
    if (gq > 0) __syncthreads();  // every warp is done with the last head's stages and dS before they are refilled
    if (n_tiles > 0) load_stage(0, walk.start(0));
    [[maybe_unused]] const TcDropout dropout(p.dropout, bh, seq.q0, seq.k0);  // indexed by token

    for (int t = 0; t < n_tiles; ++t) {
      const int s = t & 1, i0 = walk.start(t), n_q = min(BM, N - i0);
      cp_async_wait<0>();  // stage t (and, the first time, K_j and V_j) has landed for this thread,
      __syncthreads();     // for everyone; and everyone is done with stage t − 1 and its dS
      if (t + 1 < n_tiles) load_stage(s ^ 1, walk.start(t + 1));  // in flight while t is computed
      FS_TRACE_EVENT(tr, Kind::Load, Tensor::Q, bh, i0, n_q, 0, D, n_q * D * kE);
      FS_TRACE_EVENT(tr, Kind::Load, Tensor::dO, bh, i0, n_q, 0, D, n_q * D * kE);
      FS_TRACE_EVENT(tr, Kind::Load, Tensor::LSE, bh, i0, n_q, 0, 1, n_q * kF);
      FS_TRACE_EVENT(tr, Kind::Load, Tensor::D, bh, i0, n_q, 0, 1, n_q * kF);
      if constexpr (Cfg::kKVInRegs) {
        if (t == 0)
#pragma unroll
          for (int kk = 0; kk < KD; ++kk) {
            load_a(kf[kk], k_at, 0, kk);
            load_a(vf[kk], v_at, 0, kk);
          }
      }
      const int stage_bytes = s * int(kE * QTile::kElems);
      const auto q_bk = q_bk0 + stage_bytes, o_bk = o_bk0 + stage_bytes;
      const auto q_bv = q_bv0 + stage_bytes, o_bv = o_bv0 + stage_bytes;
      const float* sLs = sL + s * BM;
      const float* sDs = sD + s * BM;

      // Sᵀ = K_j Q_iᵀ and dPᵀ = V_j dO_iᵀ: the warp's 16 keys × BM queries.
      float st[NT][4] = {}, dpt[NT][4] = {};
#pragma unroll
      for (int kk = 0; kk < KD; ++kk) {
        std::uint32_t ak[4], av[4];
        if constexpr (Cfg::kKVInRegs) {
#pragma unroll
          for (int i = 0; i < 4; ++i) ak[i] = kf[kk][i], av[i] = vf[kk][i];
        } else {
          load_a(ak, k_at, 0, kk);
          load_a(av, v_at, 0, kk);
        }
#pragma unroll
        for (int nt = 0; nt < NT; nt += 2) {
          std::uint32_t bq[4], bo[4];
          load_b_k(bq, q_bk, 8 * nt, kk);
          load_b_k(bo, o_bk, 8 * nt, kk);
          Element<E>::mma(st[nt], ak, bq[0], bq[1]);
          Element<E>::mma(st[nt + 1], ak, bq[2], bq[3]);
          Element<E>::mma(dpt[nt], av, bo[0], bo[1]);
          Element<E>::mma(dpt[nt + 1], av, bo[2], bo[3]);
        }
      }
      FS_TRACE_EVENT(tr, Kind::ComputeS, Tensor::S, bh, i0, n_q, key0, n_keys, 0);
      FS_TRACE_EVENT(tr, Kind::ComputeDP, Tensor::dP, bh, i0, n_q, key0, n_keys, 0);

      // Softcap, ALiBi, the window on Sᵀ (here nothing). P = exp(S − LSE) and dS = P ∘ (dP ∘ Z − D)
      // (tc_p_ds_pair): st becomes P ∘ Z and dpt dS, times the softcap's derivative. Element e of
      // tile nt: key g + 8(e/2) of the warp, query 8nt + 2t4 + e%2. Queries past N add nothing
      // (zero-filled: see tc_load_bwd_stage).
      const auto chain = tc_scores<true>(features, st, key0 + wkey, i0);
      const bool edge = (p.causal && key0 + BN - 1 > i0 + shift) || key0 + BN > Nk;  // the tiles that need a mask
      // Where τ is a power of 2 (the default τ = 1/√d at d = 64 and 256), τs is exact and one FMA
      // rounds τs − LSE exactly as tc_prob's two roundings do, an instruction less per score. Both
      // branches are taken once per tile, around the whole loop (with_flags).
      const bool pow2_scale = Cfg::kExactScalePath && (__float_as_uint(p.scale) & 0x7fffffu) == 0;
      with_flags(pow2_scale, edge, [&](auto exact_scale, auto masked) {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const float2 lse = *reinterpret_cast<const float2*>(sLs + 8 * nt + 2 * t4);  // +inf: P = 0
          const float2 dd = *reinterpret_cast<const float2*>(sDs + 8 * nt + 2 * t4);
#pragma unroll
          for (int h = 0; h < 2; ++h)
            tc_p_ds_pair<decltype(exact_scale)::value, kDropout, Features>(
                st[nt][2 * h], st[nt][2 * h + 1], dpt[nt][2 * h], dpt[nt][2 * h + 1], lse, dd, key0 + wkey + g + 8 * h,
                i0 + 8 * nt + 2 * t4, decltype(masked)::value, p, seq, dropout);
        }
      });
      chain.apply(dpt);  // the softcap's derivative, for dK and dQ
      FS_TRACE_EVENT(tr, Kind::ComputeDS, Tensor::dS, bh, i0, n_q, key0, n_keys, 0);

      // dV_j += (P ∘ Z)ᵀ dO_i and dK_j += dSᵀ Q_i: the A fragment of queries [16kq, 16kq + 16) is
      // the accumulators of the 8-query tiles 2kq and 2kq + 1 (mma.cuh), rounded to 16 bits.
#pragma unroll
      for (int kq = 0; kq < KQ; ++kq) {
        std::uint32_t ap[4], ads[4];
        ap[0] = Element<E>::pack(st[2 * kq][0], st[2 * kq][1]);
        ap[1] = Element<E>::pack(st[2 * kq][2], st[2 * kq][3]);
        ap[2] = Element<E>::pack(st[2 * kq + 1][0], st[2 * kq + 1][1]);
        ap[3] = Element<E>::pack(st[2 * kq + 1][2], st[2 * kq + 1][3]);
        ads[0] = Element<E>::pack(dpt[2 * kq][0], dpt[2 * kq][1]);
        ads[1] = Element<E>::pack(dpt[2 * kq][2], dpt[2 * kq][3]);
        ads[2] = Element<E>::pack(dpt[2 * kq + 1][0], dpt[2 * kq + 1][1]);
        ads[3] = Element<E>::pack(dpt[2 * kq + 1][2], dpt[2 * kq + 1][3]);
        if constexpr (kAtomicDQ) {  // dSᵀ to shared memory, as dQ's products read it: (key, query)
#pragma unroll
          for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int half = 0; half < 2; ++half)
              st_shared_u32(ds_st.at(8 * h, 2 * kq + half), ads[2 * half + h]);
        }
#pragma unroll
        for (int ct = 0; ct < CT; ct += 2) {
          std::uint32_t bo[4], bq[4];
          load_b_v(bo, o_bv, kq, 8 * ct);
          load_b_v(bq, q_bv, kq, 8 * ct);
          Element<E>::mma(dv[ct], ap, bo[0], bo[1]);
          Element<E>::mma(dv[ct + 1], ap, bo[2], bo[3]);
          Element<E>::mma(dk[ct], ads, bq[0], bq[1]);
          Element<E>::mma(dk[ct + 1], ads, bq[2], bq[3]);
        }
      }
      FS_TRACE_EVENT(tr, Kind::AccumulateDV, Tensor::dV, kv_bh, key0, n_keys, c0, DP, 0);
      FS_TRACE_EVENT(tr, Kind::AccumulateDK, Tensor::dK, kv_bh, key0, n_keys, c0, DP, 0);

      if constexpr (kAtomicDQ) {
        __syncthreads();  // every warp's dS rows are in
        tc_add_dq_share<Cfg>(sdS, sK, dq_acc, head, i0, N, c0);
        // An atomic add reads and writes the dQ_i tile (Algorithm 4, lines 10 and 21).
        FS_TRACE_EVENT(tr, Kind::Load, Tensor::dQacc, bh, i0, n_q, c0, DP, n_q * DP * kF);
        FS_TRACE_EVENT(tr, Kind::AccumulateDQ, Tensor::dQacc, bh, i0, n_q, c0, DP, 0);
        FS_TRACE_EVENT(tr, Kind::Store, Tensor::dQacc, bh, i0, n_q, c0, DP, n_q * DP * kF);
      }
    }
    if constexpr (kTrace)  // the queries this CTA never loaded: before its first key (causal), or outside the window
      walk.for_each_skipped(N, [&](int i, int n) {
        FS_TRACE_EVENT(tr, Kind::Skip, Tensor::S, bh, i, n, key0, n_keys, 0);
      });
    if (n_tiles == 0) cp_async_wait<0>();  // K_j, V_j were loaded for nothing: let the copies land
  }

  // dK_j = τ dK, dV_j → HBM (line 24).
  tc_store_dkdv<E, D, Features>(p, seq, dk, dv, kv_bh, key0 + wkey, c0);
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::dK, kv_bh, key0, n_keys, c0, DP, n_keys * DP * kE);
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::dV, kv_bh, key0, n_keys, c0, DP, n_keys * DP * kE);
}

// dK/dV with FlashAttention-2's warp layout (DkdvSmemConfig): the same passes, stages and
// arithmetic as tc_dkdv_kernel, every product summed in the same order, so dK and dV come out bit
// for bit the same; what changes is the warp tiles. There, a warp's 16 keys against all BM
// queries read every Q_i and dO_i row once per 16 keys; here a warp's kWarpKeys (32) keys meet
// kWarpQueries of them, and each element read from shared memory feeds twice the products. The
// price is P and dS through shared memory, and a barrier between Sᵀ and dK, dV.
template <typename Cfg, bool kDropout, bool kAtomicDQ, class Features, bool kTrace>
__global__ void __launch_bounds__(Cfg::kThreads)
    tc_dkdv_smem_kernel(const BwdParams p, const float* __restrict__ gDelta, float* __restrict__ dq_acc,
                        trace::Slices slices) {
  using E = typename Cfg::E;
  using KTile = typename Cfg::KTile;
  using QTile = typename Cfg::QTile;
  using PTile = typename Cfg::DsTile;
  constexpr int D = Cfg::D, BN = Cfg::kKeys, BM = Cfg::kQueries;
  constexpr int MT = Cfg::kWarpKeys / 16;     // 16-key tiles of a warp
  constexpr int NT = Cfg::kWarpQueries / 8;   // 8-query tiles of a warp's Sᵀ
  constexpr int KD = D / 16;                  // 16-wide steps over d (Sᵀ, dPᵀ)
  constexpr int KQ = BM / 16;                 // 16-wide steps over the queries (dV, dK)
  constexpr int CT = Cfg::kWarpCols / 8;      // 8-column tiles of the warp's dK, dV
  constexpr std::int64_t kE = sizeof(E);
  trace::CtaTracer<kTrace> tr(slices);
  extern __shared__ __align__(128) unsigned char smem[];
  E* sK = reinterpret_cast<E*>(smem);  // (BN, D)
  E* sV = sK + KTile::kElems;          // (BN, D)
  E* sQ = sV + KTile::kElems;          // 2 stages × (BM, D)
  E* sdO = sQ + 2 * QTile::kElems;     // 2 stages × (BM, D)
  E* sP = sdO + 2 * QTile::kElems;     // (BN, BM): (P ∘ Z)ᵀ
  E* sdS = sP + PTile::kElems;         // (BN, BM): dSᵀ
  float* sL = reinterpret_cast<float*>(sdS + PTile::kElems);  // 2 stages × BM: LSE
  float* sD = sL + 2 * BM;                                    // 2 stages × BM: D

  // N queries; the Nk keys of K/V head kv_bh, δ = Nk − N, read by the G query heads of its group
  // (Features: N, 0 and G = 1 but for FlashFeatures). With packed sequences, those of sequence
  // blockIdx.z (SeqSpan): keys and queries are counted within it, and q0, k0 added to addresses.
  const SeqSpan seq = Features::sequence(p.packed, p.shape);
  const int N = seq.n, Nk = seq.nk, shift = seq.shift();
  const std::int64_t kv_bh = blockIdx.y;
  const int key0 = blockIdx.x * BN;
  if (Features::kSequences && key0 >= Nk) return;  // packed: past this sequence's keys
  const int n_keys = min(BN, Nk - key0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
  const int wkey = Cfg::kWarpKeys * (warp % Cfg::kKeyGroups);  // the warp's first key in the tile
  const int other = warp / Cfg::kKeyGroups;
  const int wq = Cfg::kWarpQueries * other, wc = Cfg::kWarpCols * other;  // its queries (Sᵀ), columns (dK, dV)
  const float* gLse = gDelta + tc_delta_floats(p.shape);  // the preprocess's copy of LSE, (B, H, N)

  load_tile<KTile, Cfg::kThreads, /*per-chunk checks*/ true>(
      sK, as<E>(p.k) + p.k_strides.of_head(kv_bh, p.shape.kv_heads()) + seq.k0 * p.k_strides.row, p.k_strides.row,
      key0, Nk);
  load_tile<KTile, Cfg::kThreads, /*per-chunk checks*/ true>(
      sV, as<E>(p.v) + p.v_strides.of_head(kv_bh, p.shape.kv_heads()) + seq.k0 * p.v_strides.row, p.v_strides.row,
      key0, Nk);
  cp_async_commit();
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::K, kv_bh, key0, n_keys, 0, D, n_keys * D * kE);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::V, kv_bh, key0, n_keys, 0, D, n_keys * D * kE);

  float dk[MT][CT][4] = {}, dv[MT][CT][4] = {};  // the warp's keys × its kWarpCols columns
  // Where this lane reads (mma.cuh, LaneAddress): the warp's keys of K and V, P and dS as A
  // fragments; stage 0 of the warp's queries of Q and dO as B fragments for Sᵀ and dPᵀ (K's
  // pattern), and of its columns of Q and dO for dK and dV (V's).
  const auto k_at = a_address<KTile>(sK + wkey * D), v_at = a_address<KTile>(sV + wkey * D);
  const auto p_at = a_address<PTile>(sP + wkey * BM), ds_at = a_address<PTile>(sdS + wkey * BM);
  const auto q_bk0 = b_k_address<QTile>(sQ + wq * D), o_bk0 = b_k_address<QTile>(sdO + wq * D);
  static_assert(LaneAddress<QTile>::apart(CT, CT) && LaneAddress<PTile>::apart(NT, NT),
                "a warp's columns and queries apart from its loads' chunks");
  const auto q_bv0 = a_address<QTile>(sQ, wc / 8), o_bv0 = a_address<QTile>(sdO, wc / 8);
  // And where it writes P's and dS's elements (key wkey + g, query wq + 2·t4, plus constants).
  const LaneAddress<PTile> pds_at(sP, wkey + g, wq / 8, 2 * t4);

  // dK_j, dV_j add up over the group's query heads (grouped-query attention); one head here.
  for (int gq = 0; gq < Features::group(p.shape); ++gq) {
    // The query head, the span's first row in LSE, D and dQacc, which are (B, H, N), and its Q and dO.
    const std::int64_t bh = Features::query_head(p.shape, kv_bh, gq), head = bh * p.shape.N + seq.q0;
    const E* gQ = as<E>(p.q) + p.q_strides.of_head(bh, p.shape.H) + seq.q0 * p.q_strides.row;
    const E* gdO = as<E>(p.dout) + p.dout_strides.of_head(bh, p.shape.H) + seq.q0 * p.dout_strides.row;
    // The query tiles this CTA visits. Causal: none before the first whose diagonal key, i + δ,
    // reaches key0; a window: none outside it.
    const Features features(p.mods, p.shape, seq, bh, 1.f / p.scale);  // NoFeatures, or τ-less FlashFeatures
    const DenseWalk<BM> walk =
        features.queries(DenseWalk<BM>::queries_of(p.sparse, N, key0 - shift, p.causal), key0, key0 + n_keys - 1);
    const int n_tiles = walk.size();
    auto load_stage = [&](int s, int i0) {
      tc_load_bwd_stage<QTile, Cfg::kThreads>(sQ + s * QTile::kElems, sdO + s * QTile::kElems, sL + s * BM, sD + s * BM,
                                              gQ, gdO, p.q_strides.row, p.dout_strides.row, gLse + head, gDelta + head, i0, N);
    };
    if (gq > 0) __syncthreads();  // every warp is done with the last head's stages, P and dS before they are refilled
    if (n_tiles > 0) load_stage(0, walk.start(0));
    [[maybe_unused]] const TcDropout dropout(p.dropout, bh, seq.q0, seq.k0);  // indexed by token

    for (int t = 0; t < n_tiles; ++t) {
      const int s = t & 1, i0 = walk.start(t), n_q = min(BM, N - i0);
      cp_async_wait<0>();  // stage t (and, the first time, K_j and V_j) has landed for this thread,
      __syncthreads();     // for everyone; and everyone is done with stage t − 1, its P and its dS
      if (t + 1 < n_tiles) load_stage(s ^ 1, walk.start(t + 1));  // in flight while t is computed
      FS_TRACE_EVENT(tr, Kind::Load, Tensor::Q, bh, i0, n_q, 0, D, n_q * D * kE);
      FS_TRACE_EVENT(tr, Kind::Load, Tensor::dO, bh, i0, n_q, 0, D, n_q * D * kE);
      FS_TRACE_EVENT(tr, Kind::Load, Tensor::LSE, bh, i0, n_q, 0, 1, n_q * kF);
      FS_TRACE_EVENT(tr, Kind::Load, Tensor::D, bh, i0, n_q, 0, 1, n_q * kF);
      const int stage_bytes = s * int(kE * QTile::kElems);
      const auto q_bk = q_bk0 + stage_bytes, o_bk = o_bk0 + stage_bytes;
      const auto q_bv = q_bv0 + stage_bytes, o_bv = o_bv0 + stage_bytes;
      const float* sLs = sL + s * BM;
      const float* sDs = sD + s * BM;

      {  // Sᵀ = K_j Q_iᵀ, dPᵀ = V_j dO_iᵀ for the warp's keys × queries; then P and dS to shared memory
        float st[MT][NT][4] = {}, dpt[MT][NT][4] = {};
#pragma unroll
        for (int kk = 0; kk < KD; ++kk) {
          std::uint32_t bq[NT / 2][4], bo[NT / 2][4];
#pragma unroll
          for (int j = 0; j < NT / 2; ++j) {
            load_b_k(bq[j], q_bk, 16 * j, kk);
            load_b_k(bo[j], o_bk, 16 * j, kk);
          }
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            std::uint32_t ak[4], av[4];
            load_a(ak, k_at, 16 * mt, kk);
            load_a(av, v_at, 16 * mt, kk);
#pragma unroll
            for (int j = 0; j < NT / 2; ++j) {
              Element<E>::mma(st[mt][2 * j], ak, bq[j][0], bq[j][1]);
              Element<E>::mma(st[mt][2 * j + 1], ak, bq[j][2], bq[j][3]);
              Element<E>::mma(dpt[mt][2 * j], av, bo[j][0], bo[j][1]);
              Element<E>::mma(dpt[mt][2 * j + 1], av, bo[j][2], bo[j][3]);
            }
          }
        }
        FS_TRACE_EVENT(tr, Kind::ComputeS, Tensor::S, bh, i0, n_q, key0, n_keys, 0);
        FS_TRACE_EVENT(tr, Kind::ComputeDP, Tensor::dP, bh, i0, n_q, key0, n_keys, 0);

        // Softcap, ALiBi, the window on Sᵀ (here nothing). P and dS (tc_p_ds_pair), dS times the
        // softcap's derivative, element e of tile (mt, nt): key wkey + 16mt + g + 8(e/2), query
        // wq + 8nt + 2t4 + e%2; rounded to 16 bits as the products read them, each pair one 4-byte
        // store. The 8 groups g write 8 rows of one chunk column, which the swizzle puts in 8
        // different bank groups.
        TcChain<Features, NT> chain[MT];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) chain[mt] = tc_scores<true>(features, st[mt], key0 + wkey + 16 * mt, i0 + wq);
        const bool edge = (p.causal && key0 + BN - 1 > i0 + shift) || key0 + BN > Nk;
        const bool pow2_scale = Cfg::kExactScalePath && (__float_as_uint(p.scale) & 0x7fffffu) == 0;
        with_flags(pow2_scale, edge, [&](auto exact_scale, auto masked) {
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const int q = wq + 8 * nt + 2 * t4;
            const float2 lse = *reinterpret_cast<const float2*>(sLs + q);  // +inf: P = 0
            const float2 dd = *reinterpret_cast<const float2*>(sDs + q);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                const int key = wkey + 16 * mt + g + 8 * h;
                tc_p_ds_pair<decltype(exact_scale)::value, kDropout, Features>(
                    st[mt][nt][2 * h], st[mt][nt][2 * h + 1], dpt[mt][nt][2 * h], dpt[mt][nt][2 * h + 1], lse, dd,
                    key0 + key, i0 + q, decltype(masked)::value, p, seq, dropout);
                chain[mt].apply(dpt[mt][nt][2 * h], dpt[mt][nt][2 * h + 1], nt, 2 * h);
                const std::uint32_t at = pds_at.at(16 * mt + 8 * h, nt);  // sdS: the same place, a tile on
                st_shared_u32(at, Element<E>::pack(st[mt][nt][2 * h], st[mt][nt][2 * h + 1]));
                st_shared_u32(at + kE * PTile::kElems, Element<E>::pack(dpt[mt][nt][2 * h], dpt[mt][nt][2 * h + 1]));
              }
          }
        });
        FS_TRACE_EVENT(tr, Kind::ComputeDS, Tensor::dS, bh, i0, n_q, key0, n_keys, 0);
      }
      __syncthreads();  // every warp's P and dS are in

      // dV_j += (P ∘ Z)ᵀ dO_i and dK_j += dSᵀ Q_i: the warp's keys × its columns, over all BM queries.
#pragma unroll
      for (int kq = 0; kq < KQ; ++kq) {
        std::uint32_t ap[MT][4], ads[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          load_a(ap[mt], p_at, 16 * mt, kq);
          load_a(ads[mt], ds_at, 16 * mt, kq);
        }
#pragma unroll
        for (int ct = 0; ct < CT; ct += 2) {
          std::uint32_t bo[4], bq[4];
          load_b_v(bo, o_bv, kq, 8 * ct);
          load_b_v(bq, q_bv, kq, 8 * ct);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            Element<E>::mma(dv[mt][ct], ap[mt], bo[0], bo[1]);
            Element<E>::mma(dv[mt][ct + 1], ap[mt], bo[2], bo[3]);
            Element<E>::mma(dk[mt][ct], ads[mt], bq[0], bq[1]);
            Element<E>::mma(dk[mt][ct + 1], ads[mt], bq[2], bq[3]);
          }
        }
      }
      FS_TRACE_EVENT(tr, Kind::AccumulateDV, Tensor::dV, kv_bh, key0, n_keys, 0, D, 0);
      FS_TRACE_EVENT(tr, Kind::AccumulateDK, Tensor::dK, kv_bh, key0, n_keys, 0, D, 0);

      if constexpr (kAtomicDQ) {
        tc_add_dq_share<Cfg>(sdS, sK, dq_acc, head, i0, N, 0);
        // An atomic add reads and writes the dQ_i tile (Algorithm 4, lines 10 and 21).
        FS_TRACE_EVENT(tr, Kind::Load, Tensor::dQacc, bh, i0, n_q, 0, D, n_q * D * kF);
        FS_TRACE_EVENT(tr, Kind::AccumulateDQ, Tensor::dQacc, bh, i0, n_q, 0, D, 0);
        FS_TRACE_EVENT(tr, Kind::Store, Tensor::dQacc, bh, i0, n_q, 0, D, n_q * D * kF);
      }
    }
    if constexpr (kTrace)  // the queries this CTA never loaded: before its first key (causal), or outside the window
      walk.for_each_skipped(N, [&](int i, int n) {
        FS_TRACE_EVENT(tr, Kind::Skip, Tensor::S, bh, i, n, key0, n_keys, 0);
      });
    if (n_tiles == 0) cp_async_wait<0>();  // K_j, V_j were loaded for nothing: let the copies land
  }

  // dK_j = τ dK, dV_j → HBM (line 24).
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) tc_store_dkdv<E, D, Features>(p, seq, dk[mt], dv[mt], kv_bh, key0 + wkey + 16 * mt, wc);
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::dK, kv_bh, key0, n_keys, 0, D, n_keys * D * kE);
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::dV, kv_bh, key0, n_keys, 0, D, n_keys * D * kE);
}

template <typename Cfg, bool kDropout, class Features, bool kTrace>
__global__ void __launch_bounds__(Cfg::kThreads)
    tc_dq_kernel(const BwdParams p, const float* __restrict__ gDelta, trace::Slices slices) {
  using E = typename Cfg::E;
  using QTile = typename Cfg::QTile;
  using KVTile = typename Cfg::KVTile;
  constexpr int D = Cfg::D, BM = Cfg::kRows, BN = Cfg::kKeys, MT = Cfg::kMTiles;
  constexpr int NT = BN / 8, KD = D / 16, KN = BN / 16, DT = D / 8;
  constexpr std::int64_t kE = sizeof(E);
  trace::CtaTracer<kTrace> tr(slices);
  extern __shared__ __align__(128) unsigned char smem[];
  E* sQ = reinterpret_cast<E*>(smem);  // (BM, D)
  E* sdO = sQ + QTile::kElems;         // (BM, D)
  E* sK = sdO + QTile::kElems;         // 2 stages × (BN, D)
  E* sV = sK + 2 * KVTile::kElems;     // 2 stages × (BN, D)

  // N queries; Nk keys of K/V head kv_bh, δ = Nk − N (Features: N, bh and 0 but for FlashFeatures);
  // with packed sequences, sequence blockIdx.z's (SeqSpan, as in the forward).
  const SeqSpan seq = Features::sequence(p.packed, p.shape);
  const int N = seq.n, Nk = seq.nk, shift = seq.shift();
  // The query head bh (the span's first row in LSE and D, which are (B, H, N): head) and K/V head kv_bh.
  const std::int64_t bh = blockIdx.y, head = bh * p.shape.N + seq.q0, kv_bh = Features::kv_head(p.shape, bh);
  const int tile = p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;  // causal: longest first
  const int row0 = tile * BM;
  if (Features::kSequences && row0 >= N) return;  // packed: past this sequence's queries
  const int n_rows = min(BM, N - row0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
  const int wrow0 = warp * 16 * MT;
  const std::int64_t ld_k = p.k_strides.row, ld_v = p.v_strides.row;
  const E* gK = as<E>(p.k) + p.k_strides.of_head(kv_bh, p.shape.kv_heads()) + seq.k0 * ld_k;
  const E* gV = as<E>(p.v) + p.v_strides.of_head(kv_bh, p.shape.kv_heads()) + seq.k0 * ld_v;

  load_tile<QTile, Cfg::kThreads>(sQ, as<E>(p.q) + p.q_strides.of_head(bh, p.shape.H) + seq.q0 * p.q_strides.row,
                                  p.q_strides.row, row0, N);
  load_tile<QTile, Cfg::kThreads>(sdO, as<E>(p.dout) + p.dout_strides.of_head(bh, p.shape.H) + seq.q0 * p.dout_strides.row,
                                  p.dout_strides.row, row0, N);
  cp_async_commit();
  float lse[MT][2], delta[MT][2];  // rows g and g + 8 of each row tile
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + wrow0 + 16 * mt + g + 8 * h;
      lse[mt][h] = tc_lse(p.lse + head, row, N);
      delta[mt][h] = row < N ? gDelta[head + row] : 0.f;
    }
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::Q, bh, row0, n_rows, 0, D, n_rows * D * kE);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::dO, bh, row0, n_rows, 0, D, n_rows * D * kE);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::LSE, bh, row0, n_rows, 0, 1, n_rows * kF);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::D, bh, row0, n_rows, 0, 1, n_rows * kF);

  // The key tiles this CTA visits. Causal: none past its last row's key, last_row + δ; a window:
  // none outside it.
  const int last_row = min(N, row0 + BM) - 1;
  const Features features(p.mods, p.shape, seq, bh, 1.f / p.scale);  // NoFeatures, or τ-less FlashFeatures
  const DenseWalk<BN> walk =
      features.keys(DenseWalk<BN>::keys_of(p.sparse, Nk, row0, last_row + shift, p.causal), row0, last_row);
  const int n_tiles = walk.size();
  auto load_kv = [&](int s, int j0) {
    load_tile<KVTile, Cfg::kThreads>(sK + s * KVTile::kElems, gK, ld_k, j0, Nk);
    load_tile<KVTile, Cfg::kThreads>(sV + s * KVTile::kElems, gV, ld_v, j0, Nk);
    cp_async_commit();
  };
  if (n_tiles > 0) load_kv(0, walk.start(0));
  [[maybe_unused]] const TcDropout dropout(p.dropout, bh, seq.q0, seq.k0);  // indexed by token

  float dq[MT][DT][4] = {};
  // Where this lane reads (mma.cuh, LaneAddress): the warp's rows of Q and dO as A fragments;
  // stage 0 of K and V as B fragments (S, dP), and of K as dQ's (V's pattern).
  const auto q_at = a_address<QTile>(sQ + wrow0 * D), o_at = a_address<QTile>(sdO + wrow0 * D);
  const auto k_bk0 = b_k_address<KVTile>(sK), v_bk0 = b_k_address<KVTile>(sV);
  const auto k_bv0 = a_address<KVTile>(sK);
  for (int t = 0; t < n_tiles; ++t) {
    const int s = t & 1, j0 = walk.start(t), n_k = min(BN, Nk - j0);
    cp_async_wait<0>();  // tile t has landed for this thread,
    __syncthreads();     // for everyone; and everyone is done with tile t − 1's stage
    if (t + 1 < n_tiles) load_kv(s ^ 1, walk.start(t + 1));  // in flight while t is computed
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::K, kv_bh, j0, n_k, 0, D, n_k * D * kE);
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::V, kv_bh, j0, n_k, 0, D, n_k * D * kE);
    const int stage_bytes = s * int(kE * KVTile::kElems);
    const auto k_bk = k_bk0 + stage_bytes, v_bk = v_bk0 + stage_bytes, k_bv = k_bv0 + stage_bytes;

    // S = Q_i K_jᵀ and dP = dO_i V_jᵀ, the forward's orientation: rows are this warp's queries.
    float sc[MT][NT][4] = {}, dp[MT][NT][4] = {};
#pragma unroll
    for (int kk = 0; kk < KD; ++kk) {
      std::uint32_t aq[MT][4], ao[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        load_a(aq[mt], q_at, 16 * mt, kk);
        load_a(ao[mt], o_at, 16 * mt, kk);
      }
#pragma unroll
      for (int nt = 0; nt < NT; nt += 2) {
        std::uint32_t bk[4], bv[4];
        load_b_k(bk, k_bk, 8 * nt, kk);
        load_b_k(bv, v_bk, 8 * nt, kk);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          Element<E>::mma(sc[mt][nt], aq[mt], bk[0], bk[1]);
          Element<E>::mma(sc[mt][nt + 1], aq[mt], bk[2], bk[3]);
          Element<E>::mma(dp[mt][nt], ao[mt], bv[0], bv[1]);
          Element<E>::mma(dp[mt][nt + 1], ao[mt], bv[2], bv[3]);
        }
      }
    }
    FS_TRACE_EVENT(tr, Kind::ComputeS, Tensor::S, bh, row0, n_rows, j0, n_k, 0);
    FS_TRACE_EVENT(tr, Kind::ComputeDP, Tensor::dP, bh, row0, n_rows, j0, n_k, 0);

    // Softcap, ALiBi, the window on S (here nothing). dS = P ∘ (dP ∘ Z − D), in sc, times the
    // softcap's derivative; P = 0 where causal hides the key (past the query's diagonal key
    // row + δ) and for keys past Nk.
    TcChain<Features, NT> chain[MT];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) chain[mt] = tc_scores<false>(features, sc[mt], row0 + wrow0 + 16 * mt, j0);
    const bool edge = (p.causal && j0 + BN - 1 > row0 + shift) || j0 + BN > Nk;
    with_flag(edge, [&](auto masked) {  // the mask compiled in or out, the branch taken once per tile
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            // The query, its diagonal key row + δ (computed here, not in the test below: there nvcc laid
            // out the plain kernel's masking branches differently even with δ the constant 0), the key.
            const int row = row0 + wrow0 + 16 * mt + g + 8 * h, diag = row + shift, col = j0 + 8 * nt + 2 * t4;
            float p0 = tc_prob(sc[mt][nt][2 * h], p.scale, lse[mt][h]);
            float p1 = tc_prob(sc[mt][nt][2 * h + 1], p.scale, lse[mt][h]);
            if constexpr (decltype(masked)::value) {
              if (col >= Nk || (p.causal && col > diag)) p0 = 0.f;
              if (col + 1 >= Nk || (p.causal && col + 1 > diag)) p1 = 0.f;
            }
            Z2 z{1.f, 1.f};
            if constexpr (kDropout) z = dropout.along_keys(row, col);
            sc[mt][nt][2 * h] = p0 * (dp[mt][nt][2 * h] * z.z0 - delta[mt][h]);
            sc[mt][nt][2 * h + 1] = p1 * (dp[mt][nt][2 * h + 1] * z.z1 - delta[mt][h]);
            chain[mt].apply(sc[mt][nt][2 * h], sc[mt][nt][2 * h + 1], nt, 2 * h);
          }
    });
    FS_TRACE_EVENT(tr, Kind::ComputeDS, Tensor::dS, bh, row0, n_rows, j0, n_k, 0);

    // dQ_i += dS_ij K_j (τ at the end), dS straight from the accumulators as the A operand.
#pragma unroll
    for (int kk = 0; kk < KN; ++kk) {
      std::uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        a[mt][0] = Element<E>::pack(sc[mt][2 * kk][0], sc[mt][2 * kk][1]);
        a[mt][1] = Element<E>::pack(sc[mt][2 * kk][2], sc[mt][2 * kk][3]);
        a[mt][2] = Element<E>::pack(sc[mt][2 * kk + 1][0], sc[mt][2 * kk + 1][1]);
        a[mt][3] = Element<E>::pack(sc[mt][2 * kk + 1][2], sc[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dt = 0; dt < DT; dt += 2) {
        std::uint32_t b[4];
        load_b_v(b, k_bv, kk, 8 * dt);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          Element<E>::mma(dq[mt][dt], a[mt], b[0], b[1]);
          Element<E>::mma(dq[mt][dt + 1], a[mt], b[2], b[3]);
        }
      }
    }
    FS_TRACE_EVENT(tr, Kind::AccumulateDQ, Tensor::dQ, bh, row0, n_rows, 0, D, 0);
  }
  if constexpr (kTrace)  // the keys this CTA never loaded: past its last row (causal), or outside the window
    walk.for_each_skipped(Nk, [&](int j, int n) { FS_TRACE_EVENT(tr, Kind::Skip, Tensor::S, bh, row0, n_rows, j, n, 0); });
  if (n_tiles == 0) cp_async_wait<0>();
  E* gdQ = as<E>(p.dq) + p.dq_strides.of_head(bh, p.shape.H) + seq.q0 * p.dq_strides.row;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + wrow0 + 16 * mt + g + 8 * h;
      if (row >= N) continue;
      E* dst = gdQ + row * p.dq_strides.row + 2 * t4;
#pragma unroll
      for (int dt = 0; dt < DT; ++dt)
        *reinterpret_cast<std::uint32_t*>(dst + 8 * dt) =
            Element<E>::pack(p.scale * dq[mt][dt][2 * h], p.scale * dq[mt][dt][2 * h + 1]);
    }
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::dQ, bh, row0, n_rows, 0, D, n_rows * D * kE);
}

// The backward's workspace: D, then the preprocess's copy of LSE (B·H·N floats each, padded to
// 256 bytes), then dQacc (B·H·N·d floats).
inline std::size_t tc_delta_bytes(const Shape& s) { return 2 * tc_delta_floats(s) * sizeof(float); }
inline std::size_t tc_bwd_workspace_bytes(const Shape& s) {
  return tc_delta_bytes(s) + s.elems() * sizeof(float);
}

// The dK/dV kernel of a configuration: P and dS in registers (DkdvConfig) or through shared
// memory (DkdvSmemConfig); fp32's names its own (DkdvF32Config, flash_tc_backward_f32.cuh).
template <typename Cfg, bool kDropout, bool kAtomicDQ, class Features, bool kTrace>
constexpr auto tc_dkdv_kernel_of() {
  if constexpr (std::is_same_v<typename Cfg::E, float>)
    return Cfg::template kernel<kDropout, kAtomicDQ, Features, kTrace>();
  else if constexpr (Cfg::kSmemPds)
    return tc_dkdv_smem_kernel<Cfg, kDropout, kAtomicDQ, Features, kTrace>;
  else
    return tc_dkdv_kernel<Cfg, kDropout, kAtomicDQ, Features, kTrace>;
}

// The backward: preprocess, dK/dV with atomic dQ and the convert, or (deterministic) preprocess,
// dK/dV, then the dQ kernel.
template <typename Dkdv, typename Dq, bool kDropout, class Features>
void launch_tc_backward_as(const BwdParams& p, bool atomic_dq) {
  using E = typename Dkdv::E;
  const Shape& s = p.shape;
  float* delta = static_cast<float*>(p.workspace);
  float* dq_acc = reinterpret_cast<float*>(static_cast<unsigned char*>(p.workspace) + tc_delta_bytes(s));
  if (p.trace) p.trace->set_tiles(Dkdv::kQueries, Dkdv::kKeys);
  constexpr bool kF32 = std::is_same_v<E, float>;
  const char* dkdv_name = kF32 ? "tc_dkdv_f32_kernel" : Dkdv::kSmemPds ? "tc_dkdv_smem_kernel" : "tc_dkdv_kernel";
  const unsigned pre_grid = static_cast<unsigned>((s.rows() + kTcPreprocessRows - 1) / kTcPreprocessRows);
  // dK/dV: CTAs per tile of keys of each K/V head; dQ: a CTA per tile of query rows of each head.
  // Packed sequences: the tiles of the longest sequence's keys (queries), for each sequence (z).
  const Packed& pk = p.packed;
  const unsigned seqs = pk.on() ? pk.count : 1;
  const int keys = pk.on() ? pk.max_k : s.keys(), rows = pk.on() ? pk.max_q : s.N;
  const dim3 grid(static_cast<unsigned>((keys + Dkdv::kKeys - 1) / Dkdv::kKeys * Dkdv::kSplit),
                  static_cast<unsigned>(std::int64_t(s.B) * s.kv_heads()), seqs);
  // A pass of no CTAs is skipped (a launch of none is an error): packed sequences may have no query
  // or no key at all, and then dK, dV are still written (zeros) and dQ has no rows. Traced twins
  // at the traced runs' head dimension only (trace::kTracedAt).
  constexpr bool kTraced = trace::kTracedAt<Dkdv::D>;
  auto launch = [&](const char* name, auto kernel_of, dim3 g, int threads, std::size_t smem, auto... args) {
    if (g.x > 0) trace::launch<kTraced>(p.trace, name, kernel_of, g, threads, smem, p.stream, p, args...);
  };
  if (atomic_dq) {
    launch("tc_bwd_preprocess_kernel", [](auto tr) { return tc_bwd_preprocess_kernel<E, true, tr>; }, dim3(pre_grid),
           kTcPreprocessWarps * 32, 0, delta, dq_acc);
    launch(dkdv_name, [](auto tr) { return tc_dkdv_kernel_of<Dkdv, kDropout, true, Features, tr>(); }, grid,
           Dkdv::kThreads, Dkdv::smem_bytes(true), static_cast<const float*>(delta), dq_acc);
    const unsigned cvt_grid = static_cast<unsigned>((s.elems() / 8 + 255) / 256);
    launch("tc_dq_convert_kernel", [](auto tr) { return tc_dq_convert_kernel<E, tr>; }, dim3(cvt_grid), 256, 0,
           static_cast<const float*>(dq_acc));
    return;
  }
  if constexpr (!kF32) {  // deterministic: dQ by a kernel of its own (3xtf32 has the atomic dQ only)
    launch("tc_bwd_preprocess_kernel", [](auto tr) { return tc_bwd_preprocess_kernel<E, false, tr>; }, dim3(pre_grid),
           kTcPreprocessWarps * 32, 0, delta, dq_acc);
    launch(dkdv_name, [](auto tr) { return tc_dkdv_kernel_of<Dkdv, kDropout, false, Features, tr>(); }, grid,
           Dkdv::kThreads, Dkdv::smem_bytes(false), static_cast<const float*>(delta), dq_acc);
    const dim3 dq_grid(static_cast<unsigned>((rows + Dq::kRows - 1) / Dq::kRows), static_cast<unsigned>(s.heads()), seqs);
    launch("tc_dq_kernel", [](auto tr) { return tc_dq_kernel<Dq, kDropout, Features, tr>; }, dq_grid, Dq::kThreads,
           Dq::kSmemBytes, static_cast<const float*>(delta));
  }
}

template <typename Dkdv, typename Dq, bool kDropout, bool kWithFeatures>
void launch_tc_backward_with(const BwdParams& p, bool atomic_dq) {
  if constexpr (kWithFeatures)
    with_features(p.mods, p.shape, p.packed, [&](auto* features) {
      launch_tc_backward_as<Dkdv, Dq, kDropout, std::remove_pointer_t<decltype(features)>>(p, atomic_dq);
    });
  else
    launch_tc_backward_as<Dkdv, Dq, kDropout, NoFeatures>(p, atomic_dq);
}

// kWithFeatures: also compiled with the interface features (fa2's and deterministic's; key_warps,
// the dK/dV kernel's rung, refuses them).
template <typename Dkdv, typename Dq, bool kWithFeatures = true>
void launch_tc_backward(const BwdParams& p, bool atomic_dq) {
  if (p.dropout.on())
    launch_tc_backward_with<Dkdv, Dq, true, kWithFeatures>(p, atomic_dq);
  else
    launch_tc_backward_with<Dkdv, Dq, false, kWithFeatures>(p, atomic_dq);
}

}  // namespace fs::tc
