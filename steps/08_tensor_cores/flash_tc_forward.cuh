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
// A configuration (forward_configs.cuh: the ladder's rungs and fa2's tiles per head dimension)
// says which techniques are on; the kernel below is every rung's:
//   kSwizzle      the XOR swizzle: ldmatrix without bank conflicts
//   kStages = 2   K_{j+1}, V_{j+1} arrive (cp.async) while tile j is computed
//   kPInRegs      P from the accumulators, no shared-memory round trip
//   kQInRegs      Q's fragments in registers for the whole kernel
//   kLazyRescale  O rescaled by α only in the tiles where some row of the warp has a new max
#pragma once

#include <cstddef>

#include "steps/08_tensor_cores/launchers.cuh"
#include "steps/08_tensor_cores/query_tile.cuh"
#include "steps/08_tensor_cores/tc_tiles.cuh"

namespace fs::tc {

struct Tc16Forward;

// What a forward configuration Cfg (kBlockM, kBlockN, kWarps, kSwizzle, kStages, kPInRegs,
// kQInRegs, kLazyRescale: forward_configs.cuh) implies at element type E and head dimension D.
template <typename E_, int D_, class Cfg>
struct FwdTraits : KernelTraits<E_, D_, Cfg, Tc16Forward> {
  static constexpr int kMTiles = Cfg::kBlockM / (16 * Cfg::kWarps);  // 16-row tiles per warp
  static_assert(kMTiles >= 1 && Cfg::kBlockM == 16 * kMTiles * Cfg::kWarps, "every warp owns whole 16-row tiles");
  static_assert(D_ % 16 == 0 && Cfg::kBlockN % 16 == 0, "mma.sync m16n8k16 steps over 16 of d and 16 keys");
  static_assert(Cfg::kStages == 1 || Cfg::kStages == 2, "K and V in one stage, or two");
  using QTile = SmemTile<Cfg::kBlockM, D_, Cfg::kSwizzle>;   // Q_i
  using KVTile = SmemTile<Cfg::kBlockN, D_, Cfg::kSwizzle>;  // K_j, V_j: one per stage each
  using PTile = SmemTile<Cfg::kBlockM, Cfg::kBlockN, Cfg::kSwizzle && !Cfg::kPInRegs>;  // P, when it goes through shared memory
  static constexpr std::size_t kSmemBytes =
      sizeof(E_) * (QTile::kElems + 2 * Cfg::kStages * KVTile::kElems + (Cfg::kPInRegs ? 0 : PTile::kElems));
};

template <class Kt, bool kCausal, bool kDropout, class Features, bool kTrace>
__global__ void __launch_bounds__(Kt::kThreads) tc_forward_kernel(const FwdParams p, trace::Slices slices) {
  using E = typename Kt::E;
  using QTile = typename Kt::QTile;
  using KVTile = typename Kt::KVTile;
  using PTile = typename Kt::PTile;
  constexpr int D = Kt::D, BM = Kt::kBlockM, BN = Kt::kBlockN, MT = Kt::kMTiles;
  constexpr int NT = BN / 8;   // 8-key tiles of S per row tile
  constexpr int KD = D / 16;   // 16-wide steps over d (S = QKᵀ)
  constexpr int KN = BN / 16;  // 16-wide steps over the keys (O += PV)
  constexpr int DT = D / 8;    // 8-column tiles of O
  constexpr std::int64_t kE = sizeof(E);
  trace::CtaTracer<kTrace> tr(slices);
  extern __shared__ __align__(128) unsigned char smem[];
  E* sQ = reinterpret_cast<E*>(smem);                       // (BM, D)
  E* sK = sQ + QTile::kElems;                               // kStages × (BN, D)
  E* sV = sK + Kt::kStages * KVTile::kElems;               // kStages × (BN, D)
  [[maybe_unused]] E* sP = sV + Kt::kStages * KVTile::kElems;  // (BM, BN), P through shared memory

  // The CTA's problem (SeqSpan): the whole head, or with packed sequences sequence blockIdx.z's
  // tokens, rows [q0, q0 + N) of the head's queries and [k0, k0 + Nk) of its K/V head's keys. Below,
  // rows and keys are counted within it. N queries; Nk keys of K/V head kv_bh, δ = Nk − N
  // (Features: the head, N, bh and 0 but for FlashFeatures).
  const SeqSpan seq = Features::sequence(p.packed, p.shape);
  const int N = seq.n, Nk = seq.nk, shift = seq.shift();
  const std::int64_t bh = blockIdx.y, kv_bh = Features::kv_head(p.shape, bh);
  const int Hkv = p.shape.kv_heads();
  const int cols = head_cols<D, Features>(p.shape);  // d ≤ D: the tiles' columns past d are zero (tc_tiles.cuh)
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
  const FwdLane<BM, MT> w(p, N, row0);
  const int g = w.g, t4 = w.t4, wrow0 = w.wrow0, rows = w.rows;
  auto keys = [&](int j0) { return min(BN, Nk - j0); };  // for the trace: the real keys of the tile at j0
  // The key tiles this CTA visits, and the features' policy (query_tile.cuh).
  const KeyWalk<BM, BN, Features> kw(p, seq, bh, row0, shift, kCausal);
  const DenseWalk<BN> walk = kw.walk;
  const int n_tiles = walk.size();
  [[maybe_unused]] const TcDropout dropout(p.dropout, bh, seq.q0, seq.k0);  // indexed by token
  // K_j and V_j into a stage, under one commit.
  auto load_kv = [&](int stage, int j0) {
    load_tile<KVTile, Kt::kThreads>(sK + stage * KVTile::kElems, gK, ld_k, j0, Nk, cols);
    load_tile<KVTile, Kt::kThreads>(sV + stage * KVTile::kElems, gV, ld_v, j0, Nk, cols);
    cp_async_commit();
  };

  load_tile<QTile, Kt::kThreads>(sQ, as<E>(p.q) + p.q_strides.of_head(bh, p.shape.H) + seq.q0 * ld_q, ld_q, row0, N,
                                 cols);
  cp_async_commit();
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::Q, bh, row0, rows, 0, D, rows * D * kE);
  if (Kt::kStages == 2 && n_tiles > 0) load_kv(0, walk.start(0));  // tile 0 under way while Q's fragments load
  [[maybe_unused]] std::uint32_t qf[Kt::kQInRegs ? MT : 1][Kt::kQInRegs ? KD : 1][4];  // Q's A fragments
  // Where this lane reads stage 0 of K and V, and the warp's rows of Q (mma.cuh, LaneAddress). Q's
  // reads, once per tile at d = 128, compute their offset at each load: that is the form measured
  // (docs/benchmarks/experiments/h200_tc_lane_address.csv); every other read has its address made here.
  constexpr bool kHoistQ = false;
  const auto q_at = a_address<QTile, kHoistQ>(sQ + wrow0 * D);
  const auto k_at0 = b_k_address<KVTile>(sK), v_at0 = a_address<KVTile>(sV);
  if constexpr (Kt::kQInRegs) {
    if (Kt::kStages == 2 && n_tiles > 0) cp_async_wait<1>(); else cp_async_wait<0>();
    __syncthreads();  // Q has landed for every warp
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int kk = 0; kk < KD; ++kk) load_a(qf[mt][kk], q_at, 16 * mt, kk);
  }
  [[maybe_unused]] const auto p_at = a_address<PTile>(sP + wrow0 * BN);  // P through shared memory

  float o[MT][DT][4] = {};  // O accumulators: rows g, g+8 of each row tile, columns 2·t4, +1
  float m[MT][2], l[MT][2];  // running max (of τ-less scores) and this lane's part of ℓ, per row
  tc_softmax_start(m, l);

  for (int t = 0; t < n_tiles; ++t) {
    const int j0 = walk.start(t);
    const int stage = Kt::kStages == 2 ? t & 1 : 0;
    if constexpr (Kt::kStages == 2) {
      tc_next_stage(t, n_tiles, walk, load_kv);  // tile t in; tile t + 1 on its way (tc_tiles.cuh)
    } else {  // one stage: load tile t, then compute it
      load_kv(0, j0);
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
      a_fragments<Kt::kQInRegs>(a, qf, q_at, kk);
      mma_row_tiles<E>(s, a, [&](std::uint32_t(&b)[4], int nt) { load_b_k(b, k_at, 8 * nt, kk); });
    }
    // Softcap, ALiBi, the window (here nothing); then keys past Nk, and (causal) keys after the
    // query's diagonal key row + δ, get -inf: only in the tiles that need it.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) tc_scores<Rows::kQueries>(kw.features, s[mt], row0 + wrow0 + 16 * mt, j0);
    tc_mask_tile<kCausal, BN>(s, row0, wrow0, j0, Nk, shift);
    FS_TRACE_EVENT(tr, Kind::ComputeS, Tensor::S, bh, row0, rows, j0, keys(j0), 0);

    // The online softmax (tc_softmax.cuh): m, ℓ and O updated, S replaced by P̃.
    tc_online_softmax<Kt::kLazyRescale>(s, m, l, o, w.scale_log2);
    if constexpr (kDropout) tc_dropout_tile(s, dropout, row0 + wrow0, j0);  // P̃ ∘ Z for P̃V
    trace_softmax(tr, m, l, p.scale, bh, row0, rows, j0, keys, D);

    // P̃ rounded to the input type, as the A operand of P̃V. In registers, the A fragment of keys
    // [16kk, 16kk + 16) is S's accumulators of the 8-key tiles 2kk and 2kk + 1 (mma.cuh): no
    // data moves, and S's fp32 registers are free from here on. Through shared memory, each warp
    // writes its rows and reads them back with ldmatrix.
    [[maybe_unused]] std::uint32_t pf[Kt::kPInRegs ? MT : 1][Kt::kPInRegs ? KN : 1][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      if constexpr (Kt::kPInRegs) {
#pragma unroll
        for (int kk = 0; kk < KN; ++kk) pack_a<E>(pf[mt][kk], s[mt][2 * kk], s[mt][2 * kk + 1]);
      } else {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int h = 0; h < 2; ++h)  // keys 8nt + 2t4, +1 of row g + 8h: in chunk nt of the row
            *reinterpret_cast<std::uint32_t*>(sP + PTile::offset(wrow0 + 16 * mt + g + 8 * h, nt) + 2 * t4) =
                Element<E>::pack(s[mt][nt][2 * h], s[mt][nt][2 * h + 1]);
      }
    }
    if constexpr (!Kt::kPInRegs) __syncwarp();  // each warp reads back only its own rows

    // O += P̃ V_j.
#pragma unroll
    for (int kk = 0; kk < KN; ++kk) {
      std::uint32_t a[MT][4];
      a_fragments<Kt::kPInRegs>(a, pf, p_at, kk);
      mma_row_tiles<E>(o, a, [&](std::uint32_t(&b)[4], int dt) { load_b_v(b, v_at, kk, 8 * dt); });
    }
    FS_TRACE_EVENT(tr, Kind::AccumulateO, Tensor::O, bh, row0, rows, 0, D, 0);
    // One stage: every warp is done with it before it is refilled. (Two: the barrier at the
    // top of the next tile says so, before the prefetch that refills it.)
    if constexpr (Kt::kStages == 1) __syncthreads();
  }
  kw.trace_skipped(tr, bh, row0, rows, Nk);

  // O = O / ℓ, rounded to the input type, and LSE (tc_softmax.cuh).
  const std::int64_t ld_o = p.o_strides.row;
  E* gO = as<E>(p.o) + p.o_strides.of_head(bh, p.shape.H) + seq.q0 * ld_o;
  float* gLse = p.lse + bh * p.shape.N + seq.q0;  // LSE is (B, H, N): the span's rows of head bh
  tc_finish_rows(o, m, l, row0 + wrow0, N, p.scale, gLse, [&](int row, int dt, float x0, float x1) {
    store_pair<D>(gO + row * ld_o + 8 * dt + 2 * t4, 8 * dt + 2 * t4, x0, x1, cols);  // columns past d not stored
  });
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::O, bh, row0, rows, 0, D, rows * D * kE);
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::LSE, bh, row0, rows, 0, 1, rows * std::int64_t(sizeof(float)));
}

// The 16-bit forward as a family the launcher takes (forward_launch.cuh; flash_tc_forward_f32.cuh
// has the fp32 one).
struct Tc16Forward {
  static constexpr const char* kName = "tc_forward_kernel";
  template <class Kt, bool kCausal, bool kDropout, class Features, bool kTrace>
  static constexpr auto kernel = tc_forward_kernel<Kt, kCausal, kDropout, Features, kTrace>;
};

}  // namespace fs::tc
