// The dK/dV kernel of 16-key warps (variant key_warps; fa2's at d = 32, 96 and 256): one CTA per
// K_j, V_j tile (kKeys keys: 16 per warp), streaming Q_i, dO_i, LSE_i, D_i tiles through a two-stage
// cp.async pipeline (key_tile.cuh). Each warp computes the transposed tiles of its 16 keys,
//
//   Sᵀ = K_j Q_iᵀ and dPᵀ = V_j dO_iᵀ      (keys × queries)
//
// so that P_ijᵀ and dS_ijᵀ come out in the accumulator registers of the very warp that owns those
// keys' dV and dK rows, and feed
//
//   dV_j += (P ∘ Z)ᵀ dO_i,   dK_j += dSᵀ Q_i
//
// as A operands with no data movement — the forward's "P stays in registers", turned around.
// Atomic dQ: dS goes to shared memory once (rounded to 16 bits, as every product reads it), and
// the warps compute dQ_i's share τ dS_ij K_j, each a 16-row × (d/…) block, and add it to dQacc with
// fp32 atomics.
//
// d = 256 does not fit a warp's 16 rows of dK and dV (2 × 16 × 256 floats) in registers beside S
// and dP: its dK/dV CTAs come in pairs (kSplit = 2) that share a key tile, both computing S and dP
// over all of d (their cost doubled) and each accumulating half of dK's, dV's and dQ's columns.
#pragma once

#include <cstddef>

#include "steps/08_tensor_cores/key_tile.cuh"
#include "steps/08_tensor_cores/launchers.cuh"

namespace fs::tc {

struct TcDkdv;

// What a configuration of this kernel (kWarps, kQueries, kSplit, kKVInRegs, kDqRowTiles:
// backward_configs.cuh) implies at element type E and head dimension D: kKeys keys per CTA, 16 per
// warp; kQueries queries per pipeline stage; the CTA accumulates columns [part·kCols,
// (part + 1)·kCols) of dK, dV (and, atomic, dQ). kKVInRegs: each warp keeps its K and V rows'
// A fragments in registers for the whole kernel.
template <typename E_, int D_, class Cfg>
struct DkdvTraits : KernelTraits<E_, D_, Cfg, TcDkdv>,
                    DqShare<Cfg::kQueries, Cfg::kWarps, D_ / Cfg::kSplit, Cfg::kDqRowTiles> {
  static constexpr int kKeys = 16 * Cfg::kWarps, kCols = D_ / Cfg::kSplit;
  static constexpr bool kExactScalePath = tc_exact_scale_path(D_);
  using KTile = SmemTile<kKeys, D_, kSwizzled>;              // K_j, V_j
  using QTile = SmemTile<Cfg::kQueries, D_, kSwizzled>;      // Q_i, dO_i: two stages each
  using DsTile = SmemTile<kKeys, Cfg::kQueries, kSwizzled>;  // dS_ijᵀ (atomic dQ)
  static constexpr std::size_t smem_bytes(bool atomic) {
    return sizeof(E_) * (2 * KTile::kElems + 4 * QTile::kElems + (atomic ? DsTile::kElems : 0)) +
           sizeof(float) * 4 * Cfg::kQueries;  // LSE, D_: two stages each
  }
};

template <typename Kt, bool kDropout, bool kAtomicDQ, class Features, bool kTrace>
__global__ void __launch_bounds__(Kt::kThreads)
    tc_dkdv_kernel(const BwdParams p, const float* __restrict__ gDelta, float* __restrict__ dq_acc, trace::Slices slices) {
  using E = typename Kt::E;
  using KTile = typename Kt::KTile;
  using QTile = typename Kt::QTile;
  using DsTile = typename Kt::DsTile;
  constexpr int D = Kt::D, BN = Kt::kKeys, BM = Kt::kQueries, DP = Kt::kCols;
  constexpr int NT = BM / 8;   // 8-query tiles of a warp's Sᵀ
  constexpr int KD = D / 16;   // 16-wide steps over d (Sᵀ, dPᵀ)
  constexpr int KQ = BM / 16;  // 16-wide steps over the queries (dV, dK)
  constexpr int CT = DP / 8;   // 8-column tiles of the warp's dK, dV rows
  constexpr std::int64_t kE = sizeof(E);
  trace::CtaTracer<kTrace> tr(slices);
  extern __shared__ __align__(128) unsigned char smem[];
  const DkdvSmemLayout<E, KTile, QTile> sm(smem, kAtomicDQ ? DsTile::kElems : 0);  // key_tile.cuh
  E *sK = sm.sK, *sV = sm.sV, *sQ = sm.sQ, *sdO = sm.sdO, *sdS = sm.kept;  // sdS: (BN, BM), atomic dQ only
  float *sL = sm.sL, *sD = sm.sD;

  // The CTA's keys and columns, K/V head and span (key_tile.cuh).
  const DkdvCta<BN, Kt::kSplit, DP, Features> cta(p);
  if (cta.idle()) return;
  const int n_keys = cta.n_keys(), key0 = cta.key0, c0 = cta.c0;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
  const int wkey = 16 * warp;  // the warp's first key in the tile
  const float* gLse = gDelta + tc_delta_floats(p.shape);  // the preprocess's copy of LSE, (B, H, N)
  const int cols = head_cols<D, Features>(p.shape);  // d ≤ D: the tiles' columns past d are zero (tc_tiles.cuh)
  cta.template load_kv<D>(p, tr, sK, sV, n_keys, [cols](E* s, const E* g_, std::int64_t ld, int row0, int n_rows) {
    load_tile<KTile, Kt::kThreads, RowChecks::kPerChunk>(s, g_, ld, row0, n_rows, cols);
  });

  [[maybe_unused]] std::uint32_t kf[Kt::kKVInRegs ? KD : 1][4], vf[Kt::kKVInRegs ? KD : 1][4];
  float dk[CT][4] = {}, dv[CT][4] = {};  // this warp's 16 keys × the CTA's DP columns
  // Where this lane reads (mma.cuh, LaneAddress): the warp's keys of K and V as A fragments;
  // stage 0 of Q and dO as B fragments, for Sᵀ and dPᵀ (K's pattern) and for dK and dV (V's).
  const auto k_at = a_address<KTile>(sK + wkey * D), v_at = a_address<KTile>(sV + wkey * D);
  const auto q_bk0 = b_k_address<QTile>(sQ), o_bk0 = b_k_address<QTile>(sdO);
  static_assert(Kt::kSplit == 1 || LaneAddress<QTile>::apart(CT, CT), "the CTA's columns apart from its loads' chunks");
  const auto q_bv0 = a_address<QTile>(sQ, c0 / 8), o_bv0 = a_address<QTile>(sdO, c0 / 8);
  [[maybe_unused]] const LaneAddress<DsTile> ds_st(sdS, wkey + g, 0, 2 * t4);  // dSᵀ's elements (atomic dQ)

  // dK_j, dV_j add up over the group's query heads, each head's query tiles through two stages
  // (key_tile.cuh, DkdvHead).
  for (int gq = 0; gq < Features::group(p.shape); ++gq) {
    const DkdvHead<E, BM, Features> h(p, cta, gq, n_keys);
    auto load_stage = [&](int s, int i0) {
      tc_load_bwd_stage<QTile, Kt::kThreads>(sQ + s * QTile::kElems, sdO + s * QTile::kElems, sL + s * BM, sD + s * BM,
                                             h.gQ, h.gdO, p.q_strides.row, p.dout_strides.row, gLse + h.head,
                                             gDelta + h.head, i0, cta.N, cols);
    };
    h.start(gq, load_stage);
    [[maybe_unused]] const TcDropout dropout(p.dropout, h.bh, cta.seq.q0, cta.seq.k0);  // indexed by token

    for (int t = 0; t < h.n_tiles; ++t) {
      const int s = t & 1, i0 = h.walk.start(t), n_q = min(BM, cta.N - i0);
      h.template next<D>(t, load_stage, tr, i0, n_q);
      if constexpr (Kt::kKVInRegs) {
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
        if constexpr (Kt::kKVInRegs) {
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
      FS_TRACE_EVENT(tr, Kind::ComputeS, Tensor::S, h.bh, i0, n_q, key0, n_keys, 0);
      FS_TRACE_EVENT(tr, Kind::ComputeDP, Tensor::dP, h.bh, i0, n_q, key0, n_keys, 0);

      // Softcap, ALiBi, the window on Sᵀ (here nothing). P = exp(S − LSE) and dS = P ∘ (dP ∘ Z − D)
      // (tc_p_ds_pair): st becomes P ∘ Z and dpt dS, times the softcap's derivative. Element e of
      // tile nt: key g + 8(e/2) of the warp, query 8nt + 2t4 + e%2. Queries past N add nothing
      // (zero-filled: see tc_load_bwd_stage). The mask and τ's power-of-2 path are compiled in or
      // out, the branches taken once per tile around the whole loop (with_flags).
      const auto chain = tc_scores<Rows::kKeys>(h.features, st, key0 + wkey, i0);
      const bool edge = cta.edge(p, i0);  // the tiles that need a mask
      with_flags(tc_pow2_scale<Kt::kExactScalePath>(p.scale), edge, [&](auto exact_scale, auto masked) {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const float2 lse = *reinterpret_cast<const float2*>(sLs + 8 * nt + 2 * t4);  // +inf: P = 0
          const float2 dd = *reinterpret_cast<const float2*>(sDs + 8 * nt + 2 * t4);
#pragma unroll
          for (int hf = 0; hf < 2; ++hf)
            tc_p_ds_pair<decltype(exact_scale)::value, kDropout, Features>(
                st[nt][2 * hf], st[nt][2 * hf + 1], dpt[nt][2 * hf], dpt[nt][2 * hf + 1], lse, dd,
                key0 + wkey + g + 8 * hf, i0 + 8 * nt + 2 * t4, decltype(masked)::value, p, cta.seq, dropout);
        }
      });
      chain.apply(dpt);  // the softcap's derivative, for dK and dQ
      FS_TRACE_EVENT(tr, Kind::ComputeDS, Tensor::dS, h.bh, i0, n_q, key0, n_keys, 0);

      // dV_j += (P ∘ Z)ᵀ dO_i and dK_j += dSᵀ Q_i: the A fragment of queries [16kq, 16kq + 16) is
      // the accumulators of the 8-query tiles 2kq and 2kq + 1 (mma.cuh, pack_a), rounded to 16 bits.
#pragma unroll
      for (int kq = 0; kq < KQ; ++kq) {
        std::uint32_t ap[4], ads[4];
        pack_a<E>(ap, st[2 * kq], st[2 * kq + 1]);
        pack_a<E>(ads, dpt[2 * kq], dpt[2 * kq + 1]);
        if constexpr (kAtomicDQ) {  // dSᵀ to shared memory, as dQ's products read it: (key, query)
#pragma unroll
          for (int hf = 0; hf < 2; ++hf)
#pragma unroll
            for (int half = 0; half < 2; ++half) st_shared_u32(ds_st.at(8 * hf, 2 * kq + half), ads[2 * half + hf]);
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
      trace_dkdv_accumulated(tr, cta.kv_bh, key0, n_keys, c0, DP);

      if constexpr (kAtomicDQ) {
        __syncthreads();  // every warp's dS rows are in
        tc_add_dq_share<Kt>(sdS, sK, dq_acc, h.head, i0, cta.N, c0);
        trace_dq_share(tr, h.bh, i0, n_q, c0, DP);
      }
    }
    h.finish(tr, cta, n_keys);
  }

  // dK_j = τ dK, dV_j → HBM (line 24).
  tc_store_dkdv<E, D, Features>(p, cta.seq, dk, dv, cta.kv_bh, key0 + wkey, c0);
  trace_dkdv_stored(tr, cta.kv_bh, key0, n_keys, c0, DP, kE);
}

// The kernel as a family the launcher takes (backward_launch.cuh).
struct TcDkdv {
  static constexpr const char* kName = "tc_dkdv_kernel";
  template <class Kt, bool kDropout, bool kAtomicDQ, class Features, bool kTrace>
  static constexpr auto kernel = tc_dkdv_kernel<Kt, kDropout, kAtomicDQ, Features, kTrace>;
};

}  // namespace fs::tc
