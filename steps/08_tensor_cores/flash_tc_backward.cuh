// The dK/dV kernel of fa2 at d = 64 and 128 (tc_dkdv_smem_kernel): step 05's recomputation
// backward on mma.sync with FlashAttention-2's warp layout. The same passes, stages and arithmetic
// as tc_dkdv_kernel (tc_dkdv_kernel.cuh, variant key_warps), every product summed in the same
// order, so dK and dV come out bit for bit the same; what changes is the warp tiles. There, a
// warp's 16 keys against all BM queries read every Q_i and dO_i row once per 16 keys; here a warp's
// kWarpKeys (32) keys meet kWarpQueries of them, and each element read from shared memory feeds
// twice the products. The price is P and dS through shared memory, and a barrier between Sᵀ and
// dK, dV.
//
// The backward's kernels, each in its file:
//   tc_bwd_preprocess_kernel  D_i = rowsum(dO_i ∘ O_i) and a copy of LSE; zeroes dQacc
//                             (preprocess_convert.cuh)
//   tc_dkdv_smem_kernel       this file: dK, dV per key tile, and with atomic dQ dQ's share
//   tc_dkdv_kernel            the same with 16-key warps (key_warps; fa2 at d = 32, 96, 256)
//   tc_dq_kernel              deterministic: dQ per query tile, no atomics (tc_dq_kernel.cuh)
//   tc_dq_convert_kernel      atomic dQ: dQ = τ · dQacc in the run's type (preprocess_convert.cuh)
//   tc_dkdv_f32_kernel        3xtf32's dK/dV (flash_tc_backward_f32.cuh)
// What they share is bwd_common.cuh's and key_tile.cuh's. (Step 09's backward includes this file
// for the preprocess, the convert and bwd_common.cuh's pieces.)
#pragma once

#include <cstddef>

#include "common/problem.hpp"
#include "common/recorder/device.cuh"
#include "common/recorder/launch.cuh"
#include "steps/08_tensor_cores/bwd_common.cuh"
#include "steps/08_tensor_cores/key_tile.cuh"
#include "steps/08_tensor_cores/launchers.cuh"
#include "steps/08_tensor_cores/preprocess_convert.cuh"

namespace fs::tc {

struct TcDkdvSmem;

// What a configuration of this kernel (kKeys, kQueries, kWarps, kKeyGroups, kDqRowTiles:
// backward_configs.cuh) implies at element type E and head dimension D: kKeys keys per CTA,
// kQueries queries per stage, kWarps warps in kKeyGroups rows. Warp w owns keys
// [kWarpKeys·(w mod kKeyGroups), +kWarpKeys) in both of its phases; with the index
// o = w / kKeyGroups it computes Sᵀ and dPᵀ for queries [kWarpQueries·o, +kWarpQueries) and
// accumulates dK and dV for columns [kWarpCols·o, +kWarpCols). P and dS pass through shared memory
// between the two, since a warp's dV rows need every query's P, not only its own.
template <typename E_, int D_, class Cfg>
struct DkdvSmemTraits : KernelTraits<E_, D_, Cfg, TcDkdvSmem>,
                        DqShare<Cfg::kQueries, Cfg::kWarps, D_, Cfg::kDqRowTiles> {
  static constexpr int kSplit = 1, kCols = D_;  // as DkdvTraits', for the launcher and the dQ share
  static constexpr int kOthers = Cfg::kWarps / Cfg::kKeyGroups;
  static constexpr int kWarpKeys = Cfg::kKeys / Cfg::kKeyGroups, kWarpQueries = Cfg::kQueries / kOthers,
                       kWarpCols = D_ / kOthers;
  static_assert(Cfg::kWarps % Cfg::kKeyGroups == 0 && kWarpKeys % 16 == 0 && kWarpQueries % 16 == 0 &&
                    kWarpCols % 16 == 0,
                "every warp takes whole 16-key tiles × 16 queries (Sᵀ) and × 16 columns (dK, dV)");
  static constexpr bool kExactScalePath = tc_exact_scale_path(D_);
  using KTile = SmemTile<Cfg::kKeys, D_, kSwizzled>;              // K_j, V_j
  using QTile = SmemTile<Cfg::kQueries, D_, kSwizzled>;           // Q_i, dO_i: two stages each
  using DsTile = SmemTile<Cfg::kKeys, Cfg::kQueries, kSwizzled>;  // (P ∘ Z)ᵀ and dSᵀ, (key, query)
  static constexpr std::size_t smem_bytes(bool) {
    return sizeof(E_) * (2 * KTile::kElems + 4 * QTile::kElems + 2 * DsTile::kElems) +
           sizeof(float) * 4 * Cfg::kQueries;
  }
};

template <typename Kt, bool kDropout, bool kAtomicDQ, class Features, bool kTrace>
__global__ void __launch_bounds__(Kt::kThreads)
    tc_dkdv_smem_kernel(const BwdParams p, const float* __restrict__ gDelta, float* __restrict__ dq_acc,
                        trace::Slices slices) {
  using E = typename Kt::E;
  using KTile = typename Kt::KTile;
  using QTile = typename Kt::QTile;
  using PTile = typename Kt::DsTile;
  constexpr int D = Kt::D, BN = Kt::kKeys, BM = Kt::kQueries;
  constexpr int MT = Kt::kWarpKeys / 16;     // 16-key tiles of a warp
  constexpr int NT = Kt::kWarpQueries / 8;   // 8-query tiles of a warp's Sᵀ
  constexpr int KD = D / 16;                  // 16-wide steps over d (Sᵀ, dPᵀ)
  constexpr int KQ = BM / 16;                 // 16-wide steps over the queries (dV, dK)
  constexpr int CT = Kt::kWarpCols / 8;      // 8-column tiles of the warp's dK, dV
  constexpr std::int64_t kE = sizeof(E);
  trace::CtaTracer<kTrace> tr(slices);
  extern __shared__ __align__(128) unsigned char smem[];
  // K, V, two stages of Q and dO, LSE and D as tc_dkdv_kernel lays them out (key_tile.cuh); what it
  // keeps between them here: (P ∘ Z)ᵀ and dSᵀ, (BN, BM) each.
  static_assert(QTile::kRows == BM, "LSE and D: a float per query row of a stage");
  const DkdvSmemLayout<E, KTile, QTile> sm(smem, 2 * PTile::kElems);
  E *sK = sm.sK, *sV = sm.sV, *sQ = sm.sQ, *sdO = sm.sdO;
  E *sP = sm.kept, *sdS = sm.kept + PTile::kElems;
  float *sL = sm.sL, *sD = sm.sD;

  // The schedule (key_tile.cuh): the CTA's keys, K/V head and span — N queries, keys and queries
  // counted within it — and below, the query heads of the K/V head's group and their query tiles.
  const DkdvCta<BN, Kt::kSplit, D, Features> cta(p);
  if (cta.idle()) return;
  const SeqSpan& seq = cta.seq;
  const int N = cta.N, key0 = cta.key0;
  const std::int64_t kv_bh = cta.kv_bh;
  const int n_keys = cta.n_keys();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
  const int wkey = Kt::kWarpKeys * (warp % Kt::kKeyGroups);  // the warp's first key in the tile
  const int other = warp / Kt::kKeyGroups;
  const int wq = Kt::kWarpQueries * other, wc = Kt::kWarpCols * other;  // its queries (Sᵀ), columns (dK, dV)
  const float* gLse = gDelta + tc_delta_floats(p.shape);  // the preprocess's copy of LSE, (B, H, N)
  const int cols = head_cols<D, Features>(p.shape);  // d ≤ D: the tiles' columns past d are zero (tc_tiles.cuh)
  cta.template load_kv<D>(p, tr, sK, sV, n_keys, [cols](E* s, const E* g_, std::int64_t ld, int row0, int n_rows) {
    load_tile<KTile, Kt::kThreads, RowChecks::kPerChunk>(s, g_, ld, row0, n_rows, cols);
  });

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

  // dK_j, dV_j add up over the group's query heads, each head's query tiles through two stages
  // (key_tile.cuh, DkdvHead).
  for (int gq = 0; gq < Features::group(p.shape); ++gq) {
    const DkdvHead<E, BM, Features> h(p, cta, gq, n_keys);
    auto load_stage = [&](int s, int i0) {
      tc_load_bwd_stage<QTile, Kt::kThreads>(sQ + s * QTile::kElems, sdO + s * QTile::kElems, sL + s * BM, sD + s * BM,
                                             h.gQ, h.gdO, p.q_strides.row, p.dout_strides.row, gLse + h.head,
                                             gDelta + h.head, i0, N, cols);
    };
    h.start(gq, load_stage);
    [[maybe_unused]] const TcDropout dropout(p.dropout, h.bh, seq.q0, seq.k0);  // indexed by token

    for (int t = 0; t < h.n_tiles; ++t) {
      const int s = t & 1, i0 = h.walk.start(t), n_q = min(BM, N - i0);
      h.template next<D>(t, load_stage, tr, i0, n_q);
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
        FS_TRACE_EVENT(tr, Kind::ComputeS, Tensor::S, h.bh, i0, n_q, key0, n_keys, 0);
        FS_TRACE_EVENT(tr, Kind::ComputeDP, Tensor::dP, h.bh, i0, n_q, key0, n_keys, 0);

        // Softcap, ALiBi, the window on Sᵀ (here nothing). P and dS (tc_p_ds_pair), dS times the
        // softcap's derivative, element e of tile (mt, nt): key wkey + 16mt + g + 8(e/2), query
        // wq + 8nt + 2t4 + e%2; rounded to 16 bits as the products read them, each pair one 4-byte
        // store. The 8 groups g write 8 rows of one chunk column, which the swizzle puts in 8
        // different bank groups.
        TcChain<Features, NT> chain[MT];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) chain[mt] = tc_scores<Rows::kKeys>(h.features, st[mt], key0 + wkey + 16 * mt, i0 + wq);
        const bool edge = cta.edge(p, i0);
        with_flags(tc_pow2_scale<Kt::kExactScalePath>(p.scale), edge, [&](auto exact_scale, auto masked) {
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
        FS_TRACE_EVENT(tr, Kind::ComputeDS, Tensor::dS, h.bh, i0, n_q, key0, n_keys, 0);
      }
      __syncthreads();  // every warp's P and dS are in

      // dV_j += (P ∘ Z)ᵀ dO_i and dK_j += dSᵀ Q_i: the warp's keys × its columns, over all BM queries.
#pragma unroll
      for (int kq = 0; kq < KQ; ++kq)
        mma_row_tiles_2<E>(dv, p_at, dk, ds_at, kq, [&](std::uint32_t(&bo)[4], std::uint32_t(&bq)[4], int ct) {
          load_b_v(bo, o_bv, kq, 8 * ct);
          load_b_v(bq, q_bv, kq, 8 * ct);
        });
      trace_dkdv_accumulated(tr, kv_bh, key0, n_keys, 0, D);

      if constexpr (kAtomicDQ) {
        tc_add_dq_share<Kt>(sdS, sK, dq_acc, h.head, i0, N, 0);
        trace_dq_share(tr, h.bh, i0, n_q, 0, D);
      }
    }
    h.finish(tr, cta, n_keys);
  }

  // dK_j = τ dK, dV_j → HBM (line 24).
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) tc_store_dkdv<E, D, Features>(p, seq, dk[mt], dv[mt], kv_bh, key0 + wkey + 16 * mt, wc);
  trace_dkdv_stored(tr, kv_bh, key0, n_keys, 0, D, kE);
}

// The kernel as a family the launcher takes (backward_launch.cuh).
struct TcDkdvSmem {
  static constexpr const char* kName = "tc_dkdv_smem_kernel";
  template <class Kt, bool kDropout, bool kAtomicDQ, class Features, bool kTrace>
  static constexpr auto kernel = tc_dkdv_smem_kernel<Kt, kDropout, kAtomicDQ, Features, kTrace>;
};

}  // namespace fs::tc
