// The deterministic dQ kernel (variant deterministic): one CTA per Q_i tile streams every K_j, V_j,
// recomputes S and dP in the forward's orientation (a warp owns 16 query rows, as in
// tc_forward_kernel) and sums dQ_i += dS_ij K_j in registers, dS straight from the accumulators.
// Two more matrix products than atomic dQ, and no atomics: bit-identical runs. Its schedule — the
// query tile, the key tiles it meets — is the forward's (query_tile.cuh).
#pragma once

#include <cstddef>

#include "steps/08_tensor_cores/bwd_common.cuh"
#include "steps/08_tensor_cores/launchers.cuh"
#include "steps/08_tensor_cores/query_tile.cuh"
#include "steps/08_tensor_cores/tc_tiles.cuh"

namespace fs::tc {

struct TcDq;

// What a configuration of this kernel (kWarps, kMTiles, kKeys: backward_configs.cuh) implies at
// element type E and head dimension D: kRows query rows per CTA (16·kMTiles per warp), kKeys keys
// per pipeline stage.
template <typename E_, int D_, class Cfg>
struct DqTraits : KernelTraits<E_, D_, Cfg, TcDq> {
  static constexpr int kRows = 16 * Cfg::kMTiles * Cfg::kWarps;
  static_assert(Cfg::kKeys % 16 == 0, "mma.sync steps over 16 keys");
  using QTile = SmemTile<kRows, D_, kSwizzled>;        // Q_i, dO_i
  using KVTile = SmemTile<Cfg::kKeys, D_, kSwizzled>;  // K_j, V_j: two stages each
  static constexpr std::size_t kSmemBytes = sizeof(E_) * (2 * QTile::kElems + 4 * KVTile::kElems);
};

template <typename Kt, bool kDropout, class Features, bool kTrace>
__global__ void __launch_bounds__(Kt::kThreads)
    tc_dq_kernel(const BwdParams p, const float* __restrict__ gDelta, trace::Slices slices) {
  using E = typename Kt::E;
  using QTile = typename Kt::QTile;
  using KVTile = typename Kt::KVTile;
  constexpr int D = Kt::D, BM = Kt::kRows, BN = Kt::kKeys, MT = Kt::kMTiles;
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

  const int cols = head_cols<D, Features>(p.shape);  // d ≤ D: the tiles' columns past d are zero (tc_tiles.cuh)
  load_tile<QTile, Kt::kThreads>(sQ, as<E>(p.q) + p.q_strides.of_head(bh, p.shape.H) + seq.q0 * p.q_strides.row,
                                  p.q_strides.row, row0, N, cols);
  load_tile<QTile, Kt::kThreads>(sdO, as<E>(p.dout) + p.dout_strides.of_head(bh, p.shape.H) + seq.q0 * p.dout_strides.row,
                                  p.dout_strides.row, row0, N, cols);
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

  // The key tiles this CTA visits (query_tile.cuh).
  const KeyWalk<BM, BN, Features> kw(p, seq, bh, row0, shift, p.causal);
  const DenseWalk<BN> walk = kw.walk;
  const int n_tiles = walk.size();
  auto load_kv = [&](int s, int j0) {
    load_tile<KVTile, Kt::kThreads>(sK + s * KVTile::kElems, gK, ld_k, j0, Nk, cols);
    load_tile<KVTile, Kt::kThreads>(sV + s * KVTile::kElems, gV, ld_v, j0, Nk, cols);
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
    tc_next_stage(t, n_tiles, walk, load_kv);  // tile t in; tile t + 1 on its way (tc_tiles.cuh)
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::K, kv_bh, j0, n_k, 0, D, n_k * D * kE);
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::V, kv_bh, j0, n_k, 0, D, n_k * D * kE);
    const int stage_bytes = s * int(kE * KVTile::kElems);
    const auto k_bk = k_bk0 + stage_bytes, v_bk = v_bk0 + stage_bytes, k_bv = k_bv0 + stage_bytes;

    // S = Q_i K_jᵀ and dP = dO_i V_jᵀ, the forward's orientation: rows are this warp's queries.
    float sc[MT][NT][4] = {}, dp[MT][NT][4] = {};
#pragma unroll
    for (int kk = 0; kk < KD; ++kk) {
      mma_row_tiles_2<E>(sc, q_at, dp, o_at, kk, [&](std::uint32_t(&bk)[4], std::uint32_t(&bv)[4], int nt) {
        load_b_k(bk, k_bk, 8 * nt, kk);
        load_b_k(bv, v_bk, 8 * nt, kk);
      });
    }
    FS_TRACE_EVENT(tr, Kind::ComputeS, Tensor::S, bh, row0, n_rows, j0, n_k, 0);
    FS_TRACE_EVENT(tr, Kind::ComputeDP, Tensor::dP, bh, row0, n_rows, j0, n_k, 0);

    // Softcap, ALiBi, the window on S (here nothing). dS = P ∘ (dP ∘ Z − D), in sc, times the
    // softcap's derivative; P = 0 where causal hides the key (past the query's diagonal key
    // row + δ) and for keys past Nk.
    TcChain<Features, NT> chain[MT];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) chain[mt] = tc_scores<Rows::kQueries>(kw.features, sc[mt], row0 + wrow0 + 16 * mt, j0);
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

    // dQ_i += dS_ij K_j (τ at the end), dS straight from the accumulators as the A operand
    // (mma.cuh, pack_a).
#pragma unroll
    for (int kk = 0; kk < KN; ++kk) {
      std::uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) pack_a<E>(a[mt], sc[mt][2 * kk], sc[mt][2 * kk + 1]);
      mma_row_tiles<E>(dq, a, [&](std::uint32_t(&b)[4], int dt) { load_b_v(b, k_bv, kk, 8 * dt); });
    }
    FS_TRACE_EVENT(tr, Kind::AccumulateDQ, Tensor::dQ, bh, row0, n_rows, 0, D, 0);
  }
  kw.trace_skipped(tr, bh, row0, n_rows, Nk);
  if (n_tiles == 0) cp_async_wait<0>();
  E* gdQ = as<E>(p.dq) + p.dq_strides.of_head(bh, p.shape.H) + seq.q0 * p.dq_strides.row;
  for_each_row_below<MT>(row0 + wrow0, g, N, [&](int mt, int h, int row) {
    E* dst = gdQ + row * p.dq_strides.row + 2 * t4;
#pragma unroll
    for (int dt = 0; dt < DT; ++dt)  // columns past d not stored
      store_pair<D>(dst + 8 * dt, 8 * dt + 2 * t4, p.scale * dq[mt][dt][2 * h], p.scale * dq[mt][dt][2 * h + 1], cols);
  });
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::dQ, bh, row0, n_rows, 0, D, n_rows * D * kE);
}

// The kernel as a family the launcher takes (backward_launch.cuh).
struct TcDq {
  static constexpr const char* kName = "tc_dq_kernel";
  template <class Kt, bool kDropout, class Features, bool kTrace>
  static constexpr auto kernel = tc_dq_kernel<Kt, kDropout, Features, kTrace>;
};

}  // namespace fs::tc
