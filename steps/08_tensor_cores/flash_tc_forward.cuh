// The tensor-core forward of step 08: step 04's FlashAttention-2 kernel with both matrix
// products on mma.sync, bf16 or fp16 in, fp32 accumulate. The algorithm is unchanged — each
// CTA owns a tile of kBlockM query rows, streams K_j, V_j tiles of kBlockN keys, keeps the
// running max m, normaliser ℓ and the output accumulator O on chip, rescales O by
// α = exp(m − m_new) when the max grows and divides by ℓ once at the end — what changes is
// who holds which numbers (mma.cuh):
//
//   warp w of the CTA owns query rows [16·kMTiles·w, 16·kMTiles·(w+1)) of the tile; each lane
//   holds, per 16-row tile, two rows (g and g+8) and two columns of every 8-column group: of
//   S (the scores of its rows against the K tile) and of O. A row's max and sum are reduced
//   over the 4 lanes of a group (two xor shuffles).
//
//   S = Q K_jᵀ   A = Q (16 rows × 16 of d) from shared memory or registers, B = K_j rows
//   O += P V_j   A = P, straight from S's accumulator registers (rounded to bf16/fp16),
//                B = V_j through ldmatrix.trans
//
// The variants are the rungs of the step's ladder (the lesson measures each): 
//   r1_mma        the above with plain row-major shared memory, one stage (load, then compute),
//                 P written to shared memory and read back as an A operand
//   r2_swizzle    + the XOR swizzle: ldmatrix without bank conflicts
//   r3_pipeline   + two stages: K_{j+1}, V_{j+1} arrive (cp.async) while tile j is computed
//   r4_p_in_regs  + P from the accumulators, no shared-memory round trip
//   fa2           + tiles chosen per head dimension, Q's fragments in registers where they fit
//                 (the default)
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/cuda_utils.cuh"
#include "common/flash_tile.cuh"
#include "common/problem.hpp"
#include "common/recorder/device.cuh"
#include "common/recorder/launch.cuh"
#include "common/tile_policies.cuh"
#include "steps/08_tensor_cores/mma.cuh"
#include "steps/08_tensor_cores/tc_dropout.cuh"
#include "steps/08_tensor_cores/tc_features.cuh"
#include "steps/08_tensor_cores/tc_softmax.cuh"

namespace fs::tc {

// One rung of the ladder at one head dimension: the tile sizes and which techniques are on.
template <typename E_, int D_, int kBlockM_, int kBlockN_, int kWarps_, bool kSwizzle_, int kStages_, bool kPInRegs_,
          bool kQInRegs_, bool kLazyRescale_ = false>
struct FwdConfig {
  // O rescaled by α only in the tiles where some row of the warp has a new max (below).
  static constexpr bool kLazyRescale = kLazyRescale_;
  using E = E_;
  static constexpr int D = D_;
  static constexpr int kBlockM = kBlockM_, kBlockN = kBlockN_, kWarps = kWarps_;
  static constexpr bool kSwizzle = kSwizzle_, kPInRegs = kPInRegs_, kQInRegs = kQInRegs_;
  static constexpr int kStages = kStages_;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kMTiles = kBlockM / (16 * kWarps);  // 16-row tiles per warp
  static_assert(kMTiles >= 1 && kBlockM == 16 * kMTiles * kWarps, "every warp owns whole 16-row tiles");
  static_assert(D % 16 == 0 && kBlockN % 16 == 0, "mma.sync m16n8k16 steps over 16 of d and 16 keys");
  using QTile = SmemTile<kBlockM, D, kSwizzle>;   // Q_i
  using KVTile = SmemTile<kBlockN, D, kSwizzle>;  // K_j, V_j: one per stage each
  using PTile = SmemTile<kBlockM, kBlockN, kSwizzle && !kPInRegs>;  // P, when it goes through shared memory
  static constexpr std::size_t kSmemBytes =
      sizeof(E) * (QTile::kElems + 2 * kStages * KVTile::kElems + (kPInRegs ? 0 : PTile::kElems));
};

// Rows [row0, row0 + kRows) of an (n_rows, kCols) matrix whose rows are `ld` elements apart
// (kCols when the tensor is (B, H, N, d) contiguous; FwdParams::q_strides and the others say) into
// a tile, 16 bytes per cp.async, all threads; rows at or past n_rows are zero-filled. Commit and
// wait before use. Thread i copies chunks i, i + kThreads, ... of the tile: chunk i is chunk
// i mod kChunks of the tile's row i / kChunks.
//
// kPerChunkChecks = false (the forward's K and V): when kThreads is a multiple of a row's chunks,
// a thread's chunks are chunk c = i mod kChunks of rows r0 = i / kChunks, r0 + kStep, ..., so its
// addresses, global and (the swizzle repeating every 8 rows) shared, are one of each plus
// constants; and only a tile that runs past n_rows (the last, when N is not a multiple of the
// tile) checks rows, in a branch of its own. Written as one index i per chunk with a check in
// every copy, the same loop made ptxas keep a pointer per chunk across the key loop and spill
// them (the lesson, "Against PyTorch on the same GPU", has the profiles). true (the backward's
// tiles): that form, which measured faster there (docs/benchmarks/h200_tc_bwd_candidates.csv).
template <typename Tile, int kThreads, bool kPerChunkChecks = false, typename E>
__device__ __forceinline__ void load_tile(E* s, const E* g, std::int64_t ld, int row0, int n_rows) {
  constexpr int kChunks = Tile::kChunks, kPerThread = Tile::kElems / 8 / kThreads;
  static_assert(Tile::kElems / 8 % kThreads == 0, "every thread copies the same number of chunks");
  if constexpr (kPerChunkChecks || kThreads % kChunks != 0) {
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int i = threadIdx.x + k * kThreads, r = i / kChunks, c = i % kChunks;
      const bool valid = row0 + r < n_rows;
      cp_async_16(s + Tile::offset(r, c), g + (valid ? row0 + r : 0) * ld + 8 * c, valid);
    }
  } else {
    constexpr int kStep = kThreads / kChunks;  // rows between a thread's chunks
    const int r0 = threadIdx.x / kChunks, c = threadIdx.x % kChunks;
    const E* src = g + (row0 + r0) * ld + 8 * c;
    const std::int64_t step = kStep * ld;  // between a thread's chunks
    if (row0 + Tile::kRows <= n_rows) {
#pragma unroll
      for (int k = 0; k < kPerThread; ++k) cp_async_16(s + Tile::offset(r0 + k * kStep, c), src + k * step, true);
    } else {
#pragma unroll
      for (int k = 0; k < kPerThread; ++k) {
        const bool valid = row0 + r0 + k * kStep < n_rows;  // else zero-filled, from an address that is valid
        cp_async_16(s + Tile::offset(r0 + k * kStep, c), valid ? src + k * step : g, valid);
      }
    }
  }
}

// The fragment reads of step 08, each in two parts: the lane's address in a tile, made once
// (mma.cuh, LaneAddress), and the loads, each that address with a constant. The HMMA instruction
// takes an A operand as 4 consecutive registers and a B operand as 2, so the four matrices of an
// ldmatrix.x4 must come in the order the products use them: A fragments and V's B fragments
// (transposed) in one lane pattern, K's B fragments in another.
//
// A fragments, and V's: lane l points at row l mod 16, chunk c0 + l / 16 of a 16-row block, the
// matrices (rows 0-7, chunk 0), (rows 8-15, 0), (rows 0-7, 1), (rows 8-15, 1).
template <typename Tile, bool kH = true>
__device__ __forceinline__ LaneAddress<Tile, kH> a_address(const void* tile, int c0 = 0) {
  const int lane = threadIdx.x % 32;
  return LaneAddress<Tile, kH>(tile, lane & 15, c0 + (lane >> 4));
}
// K's B fragments: lane l points at row l mod 8 + 8·(l / 16), chunk (l / 8) mod 2, the matrices
// (keys 0-7, chunk 0), (keys 0-7, 1), (keys 8-15, 0), (keys 8-15, 1).
template <typename Tile, bool kH = true>
__device__ __forceinline__ LaneAddress<Tile, kH> b_k_address(const void* tile, int c0 = 0) {
  const int lane = threadIdx.x % 32;
  return LaneAddress<Tile, kH>(tile, (lane & 7) + ((lane >> 4) << 3), c0 + ((lane >> 3) & 1));
}

// The A fragment of rows [R, R + 16) × columns [16kk, 16kk + 16) of a tile (Q, or P); at: a_address.
template <typename Tile, bool kH>
__device__ __forceinline__ void load_a(std::uint32_t (&a)[4], const LaneAddress<Tile, kH>& at, int R, int kk) {
  ldmatrix_x4(a, at.at(R, 2 * kk));
}

// B fragments of two 8-key tiles of K, keys [R, R + 16), × columns [16kk, 16kk + 16): b[0], b[1]
// for keys R.., b[2], b[3] for keys R + 8...; at: b_k_address.
template <typename Tile, bool kH>
__device__ __forceinline__ void load_b_k(std::uint32_t (&b)[4], const LaneAddress<Tile, kH>& at, int R, int kk) {
  ldmatrix_x4(b, at.at(R, 2 * kk));
}

// B fragments of V for keys [16kk, 16kk + 16) × two 8-column tiles of d from c (a multiple of 16
// past a_address' c0): b[0], b[1] for the first 8 columns, b[2], b[3] for the next 8, transposed
// on the way in.
template <typename Tile, bool kH>
__device__ __forceinline__ void load_b_v(std::uint32_t (&b)[4], const LaneAddress<Tile, kH>& at, int kk, int c) {
  ldmatrix_x4_trans(b, at.at(16 * kk, c / 8));
}

// Features: NoFeatures, or FlashFeaturesOf (tc_features.cuh): FlashAttention's softcap, ALiBi and
// window, and K, V of their own length and heads.
template <typename Cfg, bool kCausal, bool kDropout, class Features, bool kTrace>
__global__ void __launch_bounds__(Cfg::kThreads) tc_forward_kernel(const FwdParams p, trace::Slices slices) {
  using E = typename Cfg::E;
  using QTile = typename Cfg::QTile;
  using KVTile = typename Cfg::KVTile;
  using PTile = typename Cfg::PTile;
  constexpr int D = Cfg::D, BM = Cfg::kBlockM, BN = Cfg::kBlockN, MT = Cfg::kMTiles;
  constexpr int NT = BN / 8;   // 8-key tiles of S per row tile
  constexpr int KD = D / 16;   // 16-wide steps over d (S = QKᵀ)
  constexpr int KN = BN / 16;  // 16-wide steps over the keys (O += PV)
  constexpr int DT = D / 8;    // 8-column tiles of O
  constexpr std::int64_t kE = sizeof(E);
  trace::CtaTracer<kTrace> tr(slices);
  extern __shared__ __align__(128) unsigned char smem[];
  E* sQ = reinterpret_cast<E*>(smem);                       // (BM, D)
  E* sK = sQ + QTile::kElems;                               // kStages × (BN, D)
  E* sV = sK + Cfg::kStages * KVTile::kElems;               // kStages × (BN, D)
  [[maybe_unused]] E* sP = sV + Cfg::kStages * KVTile::kElems;  // (BM, BN), P through shared memory

  // The CTA's problem (SeqSpan): the whole head, or with packed sequences sequence blockIdx.z's
  // tokens, rows [q0, q0 + N) of the head's queries and [k0, k0 + Nk) of its K/V head's keys. Below,
  // rows and keys are counted within it. N queries; Nk keys of K/V head kv_bh, δ = Nk − N
  // (Features: the head, N, bh and 0 but for FlashFeatures).
  const SeqSpan seq = Features::sequence(p.packed, p.shape);
  const int N = seq.n, Nk = seq.nk, shift = seq.shift();
  const std::int64_t bh = blockIdx.y, kv_bh = Features::kv_head(p.shape, bh);
  const int Hkv = p.shape.kv_heads();
  // The span's rows: (N, D) of Q and O, (Nk, D) of K and V, rows ld_* elements apart.
  const std::int64_t ld_q = p.q_strides.row, ld_k = p.k_strides.row, ld_v = p.v_strides.row;
  const E* gK = as<E>(p.k) + p.k_strides.of_head(kv_bh, Hkv) + seq.k0 * ld_k;
  const E* gV = as<E>(p.v) + p.v_strides.of_head(kv_bh, Hkv) + seq.k0 * ld_v;
  // Causal: the last query tiles have the most key tiles; launch them first.
  const int tile = kCausal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int row0 = tile * BM;
  // Packed: the grid has the longest sequence's tiles, and a shorter one's CTAs past its end have
  // nothing to do (they leave before any barrier).
  if (Features::kSequences && row0 >= N) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t4 = lane % 4;  // this lane's row group and column pair (mma.cuh)
  const int wrow0 = warp * 16 * MT;       // the warp's first row in the tile
  // For the trace: the CTA's real rows, the real keys of the tile at j0. The sampled row is
  // the tile's first, held by lane 0 of warp 0.
  const int rows = min(BM, N - row0);
  auto keys = [&](int j0) { return min(BN, Nk - j0); };
  const float scale_log2 = p.scale * kLog2e;  // exp(τ s) = exp2(τ log2(e) s); τ > 0

  // The key tiles this CTA visits. Causal: none past its last row's key, last_row + δ; a window:
  // none outside it.
  const int last_row = min(N, row0 + BM) - 1;
  const Features features(p.mods, p.shape, seq, bh, 1.f / p.scale);  // NoFeatures, or τ-less FlashFeatures
  const DenseWalk<BN> walk =
      features.keys(DenseWalk<BN>::keys_of(p.sparse, Nk, row0, last_row + shift, kCausal), row0, last_row);
  const int n_tiles = walk.size();
  auto k_tile = [&](int stage) { return sK + stage * KVTile::kElems; };
  [[maybe_unused]] const TcDropout dropout(p.dropout, bh, seq.q0, seq.k0);  // indexed by token
  auto v_tile = [&](int stage) { return sV + stage * KVTile::kElems; };

  load_tile<QTile, Cfg::kThreads>(sQ, as<E>(p.q) + p.q_strides.of_head(bh, p.shape.H) + seq.q0 * ld_q, ld_q, row0, N);
  cp_async_commit();
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::Q, bh, row0, rows, 0, D, rows * D * kE);
  if (Cfg::kStages == 2 && n_tiles > 0) {  // tile 0 is under way while Q's fragments load
    load_tile<KVTile, Cfg::kThreads>(k_tile(0), gK, ld_k, walk.start(0), Nk);
    load_tile<KVTile, Cfg::kThreads>(v_tile(0), gV, ld_v, walk.start(0), Nk);
    cp_async_commit();
  }
  [[maybe_unused]] std::uint32_t qf[Cfg::kQInRegs ? MT : 1][Cfg::kQInRegs ? KD : 1][4];  // Q's A fragments
  // Where this lane reads stage 0 of K and V, and the warp's rows of Q (mma.cuh, LaneAddress). Q's
  // reads, once per tile at d = 128, compute their offset at each load: that is the form measured
  // (docs/benchmarks/h200_tc_lane_address.csv); every other read has its address made here.
  const auto q_at = a_address<QTile, /*hoisted*/ false>(sQ + wrow0 * D);
  const auto k_at0 = b_k_address<KVTile>(sK), v_at0 = a_address<KVTile>(sV);
  if constexpr (Cfg::kQInRegs) {
    if (Cfg::kStages == 2 && n_tiles > 0) cp_async_wait<1>(); else cp_async_wait<0>();
    __syncthreads();  // Q has landed for every warp
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int kk = 0; kk < KD; ++kk) load_a(qf[mt][kk], q_at, 16 * mt, kk);
  }
  [[maybe_unused]] const auto p_at = a_address<PTile>(sP + wrow0 * BN);  // P through shared memory

  float o[MT][DT][4] = {};  // O accumulators: rows g, g+8 of each row tile, columns 2·t4, +1
  float m[MT][2], l[MT][2];  // running max (of τ-less scores) and this lane's part of ℓ, per row
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      m[mt][h] = -INFINITY;
      l[mt][h] = 0.f;
    }

  for (int t = 0; t < n_tiles; ++t) {
    const int j0 = walk.start(t);
    const int stage = Cfg::kStages == 2 ? t & 1 : 0;
    if constexpr (Cfg::kStages == 2) {
      cp_async_wait<0>();  // tile t (issued one tile ago; and Q) has landed for this thread,
      __syncthreads();     // for every warp; and every warp is done with tile t − 1's stage
      if (t + 1 < n_tiles) {  // so tile t + 1 can go there, in flight while tile t is computed
        load_tile<KVTile, Cfg::kThreads>(k_tile(stage ^ 1), gK, ld_k, walk.start(t + 1), Nk);
        load_tile<KVTile, Cfg::kThreads>(v_tile(stage ^ 1), gV, ld_v, walk.start(t + 1), Nk);
        cp_async_commit();
      }
    } else {  // one stage: load tile t, then compute it
      load_tile<KVTile, Cfg::kThreads>(k_tile(0), gK, ld_k, j0, Nk);
      load_tile<KVTile, Cfg::kThreads>(v_tile(0), gV, ld_v, j0, Nk);
      cp_async_commit();
      cp_async_wait<0>();
      __syncthreads();  // tile t (and Q) have landed, for every warp's reads below
    }
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::K, kv_bh, j0, keys(j0), 0, D, keys(j0) * D * kE);
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::V, kv_bh, j0, keys(j0), 0, D, keys(j0) * D * kE);
    const auto k_at = k_at0 + stage * int(kE * KVTile::kElems);
    const auto v_at = v_at0 + stage * int(kE * KVTile::kElems);

    // S = Q K_jᵀ: (16·MT rows of this warp) × (BN keys), fp32 accumulators. Per 16 columns of d,
    // the warp's A fragments of Q, then K's B fragments one ldmatrix.x4 (two 8-key tiles) at a
    // time, each used by MT row tiles.
    float s[MT][NT][4] = {};
#pragma unroll
    for (int kk = 0; kk < KD; ++kk) {
      std::uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if constexpr (Cfg::kQInRegs) {
#pragma unroll
          for (int i = 0; i < 4; ++i) a[mt][i] = qf[mt][kk][i];
        } else {
          load_a(a[mt], q_at, 16 * mt, kk);
        }
      }
#pragma unroll
      for (int nt = 0; nt < NT; nt += 2) {
        std::uint32_t b[4];
        load_b_k(b, k_at, 8 * nt, kk);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          Element<E>::mma(s[mt][nt], a[mt], b[0], b[1]);
          Element<E>::mma(s[mt][nt + 1], a[mt], b[2], b[3]);
        }
      }
    }
    // Softcap, ALiBi, the window (here nothing); then keys past Nk, and (causal) keys after the
    // query's diagonal key row + δ, get -inf: only in the tiles that need it.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) tc_scores<false>(features, s[mt], row0 + wrow0 + 16 * mt, j0);
    tc_mask_tile<kCausal, BN>(s, row0, wrow0, j0, Nk, shift);
    FS_TRACE_EVENT(tr, Kind::ComputeS, Tensor::S, bh, row0, rows, j0, keys(j0), 0);

    // The online softmax (tc_softmax.cuh): m, ℓ and O updated, S replaced by P̃.
    tc_online_softmax<Cfg::kLazyRescale>(s, m, l, o, scale_log2);
    if constexpr (kDropout) tc_dropout_tile(s, dropout, row0 + wrow0, j0);  // P̃ ∘ Z for P̃V
    if constexpr (kTrace) {  // the sampled row's m (natural log, with τ) and whole ℓ
      float l_row = l[0][0];
      l_row += __shfl_xor_sync(0xffffffffu, l_row, 1);
      l_row += __shfl_xor_sync(0xffffffffu, l_row, 2);
      FS_TRACE_STATS(tr, Kind::Softmax, Tensor::P, bh, row0, rows, j0, keys(j0), m[0][0] * p.scale, l_row, row0);
      FS_TRACE_STATS(tr, Kind::Rescale, Tensor::O, bh, row0, rows, 0, D, m[0][0] * p.scale, l_row, row0);
    }

    // P̃ rounded to the input type, as the A operand of P̃V. In registers, the A fragment of keys
    // [16kk, 16kk + 16) is S's accumulators of the 8-key tiles 2kk and 2kk + 1 (mma.cuh): no
    // data moves, and S's fp32 registers are free from here on. Through shared memory, each warp
    // writes its rows and reads them back with ldmatrix.
    [[maybe_unused]] std::uint32_t pf[Cfg::kPInRegs ? MT : 1][Cfg::kPInRegs ? KN : 1][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      if constexpr (Cfg::kPInRegs) {
#pragma unroll
        for (int kk = 0; kk < KN; ++kk) {
          pf[mt][kk][0] = Element<E>::pack(s[mt][2 * kk][0], s[mt][2 * kk][1]);          // row g,   keys 2t4, +1
          pf[mt][kk][1] = Element<E>::pack(s[mt][2 * kk][2], s[mt][2 * kk][3]);          // row g+8
          pf[mt][kk][2] = Element<E>::pack(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);  // row g,   keys 8+2t4, +1
          pf[mt][kk][3] = Element<E>::pack(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);  // row g+8
        }
      } else {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int h = 0; h < 2; ++h)  // keys 8nt + 2t4, +1 of row g + 8h: in chunk nt of the row
            *reinterpret_cast<std::uint32_t*>(sP + PTile::offset(wrow0 + 16 * mt + g + 8 * h, nt) + 2 * t4) =
                Element<E>::pack(s[mt][nt][2 * h], s[mt][nt][2 * h + 1]);
      }
    }
    if constexpr (!Cfg::kPInRegs) __syncwarp();  // each warp reads back only its own rows

    // O += P̃ V_j.
#pragma unroll
    for (int kk = 0; kk < KN; ++kk) {
      std::uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if constexpr (Cfg::kPInRegs) {
#pragma unroll
          for (int i = 0; i < 4; ++i) a[mt][i] = pf[mt][kk][i];
        } else {
          load_a(a[mt], p_at, 16 * mt, kk);
        }
      }
#pragma unroll
      for (int dt = 0; dt < DT; dt += 2) {
        std::uint32_t b[4];
        load_b_v(b, v_at, kk, 8 * dt);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          Element<E>::mma(o[mt][dt], a[mt], b[0], b[1]);
          Element<E>::mma(o[mt][dt + 1], a[mt], b[2], b[3]);
        }
      }
    }
    FS_TRACE_EVENT(tr, Kind::AccumulateO, Tensor::O, bh, row0, rows, 0, D, 0);
    // One stage: every warp is done with it before it is refilled. (Two: the barrier at the
    // top of the next tile says so, before the prefetch that refills it.)
    if constexpr (Cfg::kStages == 1) __syncthreads();
  }
  if constexpr (kTrace)  // the keys this CTA never loaded: past its last row (causal), or outside the window
    walk.for_each_skipped(Nk, [&](int j, int n) { FS_TRACE_EVENT(tr, Kind::Skip, Tensor::S, bh, row0, rows, j, n, 0); });

  // O = O / ℓ, rounded to the input type, and LSE (tc_softmax.cuh).
  const std::int64_t ld_o = p.o_strides.row;
  E* gO = as<E>(p.o) + p.o_strides.of_head(bh, p.shape.H) + seq.q0 * ld_o;
  float* gLse = p.lse + bh * p.shape.N + seq.q0;  // LSE is (B, H, N): the span's rows of head bh
  tc_finish_rows(o, m, l, row0 + wrow0, N, p.scale, gLse, [&](int row, int dt, float x0, float x1) {
    *reinterpret_cast<std::uint32_t*>(gO + row * ld_o + 8 * dt + 2 * t4) = Element<E>::pack(x0, x1);
  });
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::O, bh, row0, rows, 0, D, rows * D * kE);
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::LSE, bh, row0, rows, 0, 1, rows * std::int64_t(sizeof(float)));
}

// The 16-bit forward as a family the launchers below take (flash_tc_forward_f32.cuh has the fp32 one).
struct Tc16Forward {
  static constexpr const char* kName = "tc_forward_kernel";
  template <typename Cfg, bool kCausal, bool kDropout, class Features, bool kTrace>
  static constexpr auto kernel = tc_forward_kernel<Cfg, kCausal, kDropout, Features, kTrace>;
};

// Grid (query tiles, B·H), and with packed sequences (query tiles of the longest, H, sequences).
template <typename Cfg, bool kDropout, class Features, class Family = Tc16Forward>
void launch_tc_forward_as(const FwdParams& p) {
  const int rows = p.packed.on() ? p.packed.max_q : p.shape.N;
  const dim3 grid((rows + Cfg::kBlockM - 1) / Cfg::kBlockM, static_cast<unsigned>(p.shape.heads()),
                  p.packed.on() ? p.packed.count : 1);
  if (grid.x == 0) return;  // packed sequences without a query
  if (p.trace) p.trace->set_tiles(Cfg::kBlockM, Cfg::kBlockN);
  constexpr bool kTraced = trace::kTracedAt<Cfg::D>;  // traced twins at the traced runs' d only
  if (p.causal)
    trace::launch<kTraced>(p.trace, Family::kName,
                           [](auto tr) { return Family::template kernel<Cfg, true, kDropout, Features, tr>; }, grid,
                           Cfg::kThreads, Cfg::kSmemBytes, p.stream, p);
  else
    trace::launch<kTraced>(p.trace, Family::kName,
                           [](auto tr) { return Family::template kernel<Cfg, false, kDropout, Features, tr>; }, grid,
                           Cfg::kThreads, Cfg::kSmemBytes, p.stream, p);
}

// FlashAttention's features, as steps 04/05 choose them: FlashFeatures with a softcap,
// FlashFeaturesNoCap for the others (a window, ALiBi, Nk ≠ N, grouped K/V heads, packed
// sequences), else NoFeatures.
template <typename F>
void with_features(const ScoreMods& mods, const Shape& s, const Packed& packed, F&& f) {
  if (mods.softcap > 0.f)
    f(static_cast<FlashFeatures*>(nullptr));
  else if (mods.on() || !s.square() || packed.on())
    f(static_cast<FlashFeaturesNoCap*>(nullptr));
  else
    f(static_cast<NoFeatures*>(nullptr));
}

template <typename Cfg, bool kDropout, bool kWithFeatures, class Family>
void launch_tc_forward_with(const FwdParams& p) {
  if constexpr (kWithFeatures)
    with_features(p.mods, p.shape, p.packed, [&](auto* features) {
      launch_tc_forward_as<Cfg, kDropout, std::remove_pointer_t<decltype(features)>, Family>(p);
    });
  else
    launch_tc_forward_as<Cfg, kDropout, NoFeatures, Family>(p);
}

// kWithDropout, kWithFeatures: the configuration is also compiled with dropout and with the
// interface features (fa2's; the rungs refuse them).
template <typename Cfg, bool kWithDropout = false, bool kWithFeatures = false, class Family = Tc16Forward>
void launch_tc_forward(const FwdParams& p) {
  if constexpr (kWithDropout)
    if (p.dropout.on()) return launch_tc_forward_with<Cfg, true, kWithFeatures, Family>(p);
  launch_tc_forward_with<Cfg, false, kWithFeatures, Family>(p);
}

}  // namespace fs::tc
