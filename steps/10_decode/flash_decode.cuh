// Step 10's split kernel: Flash-Decoding on step 08's tensor-core helpers. Step 08's forward gives
// a CTA 128 query rows and walks all the keys of its head; a decoding step has 1 to 16 new tokens
// per sequence, so that layout would leave one CTA per head with one row of work, reading the
// whole cache alone. Here instead (decode_cta.cuh has the schedule):
//
//   rows    a CTA's 16 query rows are the g query heads that share a K/V head times the n new
//           tokens (grouped-query attention packed into one m16 tile), so a K/V tile that arrives
//           in shared memory serves the whole group
//   keys    each sequence's keys are split among gridDim.x CTAs (the splits), and inside a CTA
//           among its warps: warp w takes keys [w·WK, (w+1)·WK) of every tile, with its own
//           running max m, ℓ and O over the 16 rows (all warps hold all rows: there are only 16)
//   merge   at the end the warps' (m, ℓ, O) are merged through shared memory (merge_warps), and
//           the CTA writes its split's O and LSE: O itself when there is one split, else a
//           partial O (fp32) and LSE to the workspace, which combine.cuh merges by LSE
//   loads   K and V tiles arrive by cp.async through kStages stages (decode_configs.cuh): a
//           decoding step does 2 flops per byte of cache it reads, so what matters is that the
//           bytes keep coming
//
// Per warp and key tile the algorithm is step 08's (FlashAttention-2's Algorithm 1, lines 8-11):
//   S = Q K_jᵀ (16 × WK), masked; m_new = max(m, rowmax S); P̃ = e^{τ(S − m_new)};
//   ℓ = e^{τ(m − m_new)} ℓ + rowsum P̃; O = e^{τ(m − m_new)} O + P̃ V_j
// with the same lane layout (mma.cuh): lane (g = lane / 4, t4 = lane % 4) holds rows g and g + 8,
// columns 2·t4, 2·t4 + 1 of every 8-column tile of S and of O.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/flash_tile.cuh"
#include "steps/08_tensor_cores/mma.cuh"
#include "steps/08_tensor_cores/tc_softmax.cuh"
#include "steps/08_tensor_cores/tc_tiles.cuh"
#include "steps/10_decode/decode_configs.cuh"
#include "steps/10_decode/decode_cta.cuh"
#include "steps/10_decode/decode_trace.cuh"
#include "steps/10_decode/kv_cache.cuh"

namespace fs::decoding {

// The end of the split kernel: the warps' results merged into the CTA's, for its 16 rows.
// Warp w holds, per row r, its max m_w (of raw scores), ℓ_w and O_w (unnormalised); the CTA's are
//   M = max_w m_w,  ℓ = Σ_w e^{τ(m_w − M)} ℓ_w,  O = Σ_w e^{τ(m_w − M)} O_w / ℓ,  LSE = τM + ln ℓ
// with each weight rounded as the softmax rounds α (tc_softmax.cuh), so that a warp whose max is
// the row's weighs exactly 1. s_merge: the stages' bytes, free now (Kt::kMergeBytes).
// store_o(r, c, x0, x1) writes columns c, c + 1 of row r's O; store_lse(r, x) its LSE; rows < rows.
template <class Kt, int DT, typename StoreO, typename StoreLse>
__device__ __forceinline__ void merge_warps(float* s_merge, const float (&o)[1][DT][4], const float (&m)[1][2],
                                            const float (&l)[1][2], int rows, float scale, StoreO&& store_o,
                                            StoreLse&& store_lse) {
  constexpr int D = Kt::D, R = kRowsPerCta, W = Kt::kWarps;
  float* sO = s_merge;       // W × (16, D): each warp's O
  float* sM = sO + W * R * D;  // W × 16: each warp's max per row
  float* sL = sM + W * R;      // W × 16: each warp's ℓ per row
  float* sF = sL + W * R;      // W × 16: the weight of warp w's O in row r, e^{τ(m_w − M)} / ℓ
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float lr = l[0][h];  // this lane's part of the row's ℓ: summed over the row's 4 lanes
    lr += __shfl_xor_sync(0xffffffffu, lr, 1);
    lr += __shfl_xor_sync(0xffffffffu, lr, 2);
    const int r = g + 8 * h;
    if (t4 == 0) {
      sM[warp * R + r] = m[0][h];
      sL[warp * R + r] = lr;
    }
#pragma unroll
    for (int dt = 0; dt < DT; ++dt)
      *reinterpret_cast<float2*>(sO + (warp * R + r) * D + 8 * dt + 2 * t4) =
          make_float2(o[0][dt][2 * h], o[0][dt][2 * h + 1]);
  }
  __syncthreads();  // every warp's O, m and ℓ are in shared memory
  if (threadIdx.x < R) {
    const int r = threadIdx.x;
    const float scale_log2 = scale * kLog2e;
    float M = -INFINITY;
    for (int w = 0; w < W; ++w) M = fmaxf(M, sM[w * R + r]);
    // A row no warp saw a key of (M = −inf): subtract 0, every weight e^{−inf} = 0, ℓ = 0, never
    // −inf − (−inf). A warp that saw none (m_w = −inf) likewise weighs 0.
    const float m_use = __fmul_rn(M == -INFINITY ? 0.f : M, scale_log2);
    float f[W], lsum = 0.f;
    for (int w = 0; w < W; ++w) {
      f[w] = tc::exp2_fast(__fsub_rn(__fmul_rn(sM[w * R + r], scale_log2), m_use));
      lsum += f[w] * sL[w * R + r];
    }
    const float inv = lsum > 0.f ? 1.f / lsum : 0.f;  // a row that saw no key: O = 0, never 0/0
    for (int w = 0; w < W; ++w) sF[w * R + r] = f[w] * inv;
    if (r < rows) store_lse(r, lsum > 0.f ? __fadd_rn(__fmul_rn(M, scale), logf(lsum)) : -INFINITY);
  }
  __syncthreads();  // the weights are in shared memory
  for (int e = threadIdx.x; e < R * D / 2; e += Kt::kThreads) {  // column pairs of the 16 rows, spread over the CTA
    const int r = e / (D / 2), c = 2 * (e % (D / 2));
    if (r >= rows) break;  // r only grows with e
    float x0 = 0.f, x1 = 0.f;
    for (int w = 0; w < W; ++w) {
      const float2 v = *reinterpret_cast<const float2*>(sO + (w * R + r) * D + c);
      x0 += sF[w * R + r] * v.x;
      x1 += sF[w * R + r] * v.y;
    }
    store_o(r, c, x0, x1);
  }
}

// One CTA: split blockIdx.x of the keys of K/V head blockIdx.y / row_blocks of sequence blockIdx.z,
// for its 16 query rows (decode_cta.cuh). Kt: DecodeTraits (decode_configs.cuh). Cache: where the
// keys' rows are (kv_cache.cuh), ContiguousCache<E> or PagedCache<E>. A template parameter, not a
// runtime branch or pointer: the contiguous kernel's code stays what it was (no table to test for
// in its loads), and the paged kernel is a second instantiation whose only difference is the
// row() it calls per key (the block table's entry, a shift and a mask). The cost is compile time:
// twice the split kernels per element type and head dimension. kTrace: the traced twin, which
// records each phase's end (decode_trace.cuh) into `slices`; off, the calls compile to nothing.
template <class Kt, bool kCausal, class Cache = ContiguousCache<typename Kt::E>, bool kTrace = false>
__global__ void __launch_bounds__(Kt::kThreads) decode_split_kernel(const DecodeParams p, trace::Slices slices) {
  using E = typename Kt::E;
  using QTile = typename Kt::QTile;
  using KVTile = typename Kt::KVTile;
  constexpr int D = Kt::D, BN = Kt::kBlockN, WK = Kt::kWarpKeys, ST = Kt::kStages;
  constexpr int NT = WK / 8;   // 8-key tiles of S per warp and key tile
  constexpr int KD = D / 16;   // 16-wide steps over d (S = QKᵀ)
  constexpr int KN = WK / 16;  // 16-wide steps over the warp's keys (O += P̃V)
  constexpr int DT = D / 8;    // 8-column tiles of O
  constexpr int kStageBytes = sizeof(E) * KVTile::kElems;
  extern __shared__ __align__(128) unsigned char smem[];
  E* sQ = reinterpret_cast<E*>(smem);   // (16, D): the CTA's query rows
  E* sK = sQ + QTile::kElems;           // ST × (BN, D): the stages
  E* sV = sK + ST * KVTile::kElems;     // ST × (BN, D)

  grid_dependents_launch();  // the combine (its dependent) may launch now; it waits for this grid to finish
  trace::CtaTracer<kTrace> tr(slices);
  const DecodeCta cta(p, BN, kCausal);
  const Cache cache(p);  // contiguous or paged: one row address per key, either way
  const int warp = threadIdx.x / 32;
  const int wk0 = warp * WK;  // the warp's keys in every tile: [wk0, wk0 + WK)

  // The rows of tile t of the split (keys j0 .. j0 + BN of the sequence) that this thread copies,
  // as offsets in the cache (kv_cache.cuh, TileRows): row by row, since with pages a tile's keys may
  // lie in several pages (64 keys over pages of 16); none past the split's last tile.
  using Rows = TileRows<KVTile, Kt::kThreads>;
  auto rows_of = [&](int t) {
    if (t >= cta.tiles.count) return Rows();
    const int j0 = (cta.tiles.first + t) * BN;
    return Rows(cache, cta.cb, cta.hk, j0, min(BN, cta.key_end - j0));
  };
  // Those rows of K and V into stage `stage` under one commit; past the split's last tile an empty
  // commit, so that every iteration below waits for the same count of groups.
  auto load_kv = [&](int stage, const Rows& rows) {
    if (rows.n_rows > 0) rows.load(sK + stage * KVTile::kElems, sV + stage * KVTile::kElems, cache.k, cache.v);
    cp_async_commit();
  };

  // Q's 16 rows: row r is token cta.token(r) of query head cta.head(r); rows past the group's are
  // zero-filled. Then the pipeline's first ST − 1 tiles, in flight together with Q.
  const E* gQ = as<E>(p.q);
  load_rows<QTile, Kt::kThreads>(sQ, [&](int r) { return gQ + cta.q_row(p.shape, r); }, cta.rows);
  cp_async_commit();
  for (int t = 0; t < ST - 1; ++t) load_kv(t, rows_of(t));
  [[maybe_unused]] std::uint32_t qf[1][Kt::kQInRegs ? KD : 1][4];  // Q's A fragments, where kept in registers
  const auto q_at = tc::a_address<QTile, false>(sQ);  // Q's reads: the offset at each load, as step 08's
  const auto k_at0 = tc::b_k_address<KVTile>(sK), v_at0 = tc::a_address<KVTile>(sV);
  if constexpr (Kt::kQInRegs) {
    cp_async_wait<ST - 1>();  // Q (committed before the ST − 1 tiles) has landed for this thread,
    __syncthreads();         // for every warp
#pragma unroll
    for (int kk = 0; kk < KD; ++kk) tc::load_a(qf[0][kk], q_at, 0, kk);
  }

  float o[1][DT][4] = {};  // the warp's O: rows g, g + 8, columns 8dt + 2·t4, +1
  float m[1][2], l[1][2];  // the running max (raw scores) and this lane's part of ℓ, rows g and g + 8
  tc::tc_softmax_start(m, l);

  for (int t = 0; t < cta.tiles.count; ++t) {
    const Rows next = rows_of(t + ST - 1);  // its offsets first: a block table's loads overlap the wait
    cp_async_wait<ST - 2>();  // tile t (and what was committed before it) has landed for this thread,
    __syncthreads();         // for every warp; and every warp is done with tile t − 1, whose stage
    load_kv((t + ST - 1) % ST, next);  // tile t + ST − 1 refills: in flight while t is computed
    const int stage = t % ST, j0 = (cta.tiles.first + t) * BN;
    if (t == 0) trace_q(tr, cta, p.shape, sizeof(E));  // Q landed with (or before) the first tile
    trace_kv_tile(tr, cache, cta, D, j0, min(BN, cta.key_end - j0), sizeof(E));
    const auto k_at = k_at0 + stage * kStageBytes;
    const auto v_at = v_at0 + stage * kStageBytes;

    // S = Q K_jᵀ for the warp's keys: (16 rows) × (WK keys), fp32 accumulators.
    float s[1][NT][4] = {};
#pragma unroll
    for (int kk = 0; kk < KD; ++kk) {
      std::uint32_t a[1][4];
      tc::a_fragments<Kt::kQInRegs>(a, qf, q_at, kk);
      tc::mma_row_tiles<E>(s, a, [&](std::uint32_t(&b)[4], int nt) { tc::load_b_k(b, k_at, wk0 + 8 * nt, kk); });
    }
    if (p.mods.softcap > 0.f || p.mods.alibi_slopes) decode_scores(s, cta, p, j0 + wk0);
    decode_mask<kCausal>(s, cta, j0 + wk0);  // keys past L, and (causal) past a row's diagonal: −inf

    // The online softmax (step 08's): m, ℓ and O updated, S replaced by P̃.
    tc::tc_online_softmax<Kt::kLazyRescale>(s, m, l, o, p.scale * kLog2e);

    // O += P̃ V_j: P̃'s A fragment of keys [16kk, 16kk + 16) is S's accumulators of the 8-key tiles
    // 2kk and 2kk + 1 (mma.cuh, pack_a); V's B fragments from the warp's keys of the stage.
#pragma unroll
    for (int kk = 0; kk < KN; ++kk) {
      std::uint32_t a[1][4];
      tc::pack_a<E>(a[0], s[0][2 * kk], s[0][2 * kk + 1]);
      tc::mma_row_tiles<E>(o, a, [&](std::uint32_t(&b)[4], int dt) { tc::load_b_v(b, v_at, wk0 / 16 + kk, 8 * dt); });
    }
    trace_compute(tr, cta, p.shape, j0, min(BN, cta.key_end - j0));
  }

  cp_async_wait<0>();  // nothing is in flight (the groups past the last tile are empty)
  __syncthreads();     // every warp is done with the stages: the merge reuses their bytes
  if (cta.tiles.count == 0) trace_q(tr, cta, p.shape, sizeof(E));  // a split with no keys loads Q all the same
  if (p.num_splits == 1) {  // the CTA's O is the result: rounded to E, and LSE
    E* gO = as<E>(p.o);
    merge_warps<Kt>(
        reinterpret_cast<float*>(sK), o, m, l, cta.rows, p.scale,
        [&](int r, int c, float x0, float x1) {
          *reinterpret_cast<std::uint32_t*>(gO + cta.q_row(p.shape, r) + c) = tc::Element<E>::pack(x0, x1);
        },
        [&](int r, float x) { p.lse[cta.lse_row(p.shape, r)] = x; });
  } else {  // the split's partial O (fp32) and LSE, to the workspace: (rows, splits, d), (rows, splits)
    const int splits = p.num_splits;
    float* o_part = p.workspace;
    float* lse_part = o_part + p.shape.rows() * splits * D;
    merge_warps<Kt>(
        reinterpret_cast<float*>(sK), o, m, l, cta.rows, p.scale,
        [&](int r, int c, float x0, float x1) {
          float* row = o_part + (cta.lse_row(p.shape, r) * splits + cta.split) * D;
          *reinterpret_cast<float2*>(row + c) = make_float2(x0, x1);
        },
        [&](int r, float x) { lse_part[cta.lse_row(p.shape, r) * splits + cta.split] = x; });
  }
  trace_split_result(tr, cta, p.shape, p.num_splits, sizeof(E));
}

}  // namespace fs::decoding
