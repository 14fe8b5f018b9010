// fp32 attention's backward on the tensor cores (variant 3xtf32): tc_dkdv_kernel's algorithm — a
// warp owns 16 keys, computes Sᵀ = K_j Q_iᵀ and dPᵀ = V_j dO_iᵀ for them, and feeds P and dS from
// its accumulators into dV_j += (P ∘ Z)ᵀ dO_i and dK_j += dSᵀ Q_i — with fp32 tensors and every
// product as 3×TF32 (mma.cuh, Tf32), as the fp32 forward (flash_tc_forward_f32.cuh) takes them. dQ
// goes by fp32 atomics into dQacc; the preprocess (D_i, 3×TF32 in dPᵀ's order) and dQ = τ·dQacc are
// preprocess_convert.cuh's, in fp32. The schedule is key_tile.cuh's, as the 16-bit dK/dV kernels'.
//
// The operands reach the products by the forward's three paths, on fp32 rows of d + 4 floats:
//
//   K, V (A of Sᵀ, dPᵀ)   ldmatrix as 16-bit pairs: a 32-bit word per lane, the A pattern (the
//                          forward's Q)
//   Q, dO (B of Sᵀ, dPᵀ)   the same, the B pattern (the forward's K)
//   P, dS (A of dV, dK)    straight from the accumulators of Sᵀ and dPᵀ, queries 2t, 2t + 1 taken
//                          as k = t, t + 4 (the forward's P̃), and dO's, Q's rows in the same order
//                          by 32-bit loads (the forward's V)
//   dS, K (dQ's share)     dSᵀ through shared memory (keys × queries, rows of BM + 4 floats): A =
//                          dS read transposed, keys 2t, 2t + 1 as k = t, t + 4; K's rows likewise
//
// The tensor cores truncate each product's sum (mma.cuh, emu_mma::mma_tf32): S and dP are summed
// 8 columns of d at a time from zero and added in fp32 (mma_3x); dK and dV a stage's queries at a
// time in accumulators of their own, then added; a CTA's share of dQ from zero over its keys, then
// added by the atomics. No running sum takes more than one stage's truncations.
#pragma once

#include <cstddef>

#include "steps/08_tensor_cores/key_tile.cuh"
#include "steps/08_tensor_cores/launchers.cuh"
#include "steps/08_tensor_cores/tf32.cuh"

namespace fs::tc {

struct TcDkdvF32;

// 3xtf32's dK/dV tiles: kWarps warps of 16 keys, kQueries queries per stage, and dQ's share split
// over the warps as kDqRowTiles 16-row tiles × the rest of the columns each (a configuration's
// fields: backward_configs.cuh). A lane holds d floats of dK and dV, kQueries / 2 of Sᵀ and dPᵀ and
// as many words of their TF32 heads and rests: at d = 128 and 32 queries, 224 registers of the 255.
template <int D_, class Cfg>
struct DkdvF32Traits : KernelTraits<float, D_, Cfg, TcDkdvF32> {
  static constexpr int kSplit = 1, kCols = D_;
  static constexpr int kKeys = 16 * Cfg::kWarps;
  static constexpr int kStride = D_ + 4;                // floats per row of K, V, Q, dO (tf32.cuh)
  static constexpr int kDsStride = Cfg::kQueries + 4;  // of dSᵀ: rows 4 banks apart, its transposed reads spread
  static constexpr bool kExactScalePath = tc_exact_scale_path(D_);
  static constexpr int kDqRowGroups = Cfg::kQueries / (16 * Cfg::kDqRowTiles);
  static constexpr int kDqColTiles = D_ / 8 / (Cfg::kWarps / kDqRowGroups);
  static_assert(Cfg::kQueries % 32 == 0 && D_ % 32 == 0, "rows of d + 4 and kQueries + 4 floats: 4 banks apart");
  static_assert(Cfg::kQueries % (16 * Cfg::kDqRowTiles) == 0 && Cfg::kWarps % kDqRowGroups == 0 &&
                    kDqColTiles * 8 * (Cfg::kWarps / kDqRowGroups) == D_,
                "every warp takes whole 16-row tiles × whole 8-column tiles of dQ's share");
  static constexpr std::size_t smem_bytes(bool) {
    return sizeof(float) * (2 * kKeys * kStride + 4 * Cfg::kQueries * kStride + kKeys * kDsStride + 4 * Cfg::kQueries);
  }
};

template <typename Kt, bool kDropout, bool kAtomicDQ, class Features, bool kTrace>
__global__ void __launch_bounds__(Kt::kThreads)
    tc_dkdv_f32_kernel(const BwdParams p, const float* __restrict__ gDelta, float* __restrict__ dq_acc,
                       trace::Slices slices) {
  static_assert(kAtomicDQ, "3xtf32's dQ goes by atomics");
  constexpr int D = Kt::D, BN = Kt::kKeys, BM = Kt::kQueries, S = Kt::kStride, SD = Kt::kDsStride;
  constexpr int NT = BM / 8;  // 8-query tiles of a warp's Sᵀ; 8-query steps of dV, dK
  constexpr int KD = D / 8;   // 8-wide steps over d (Sᵀ, dPᵀ)
  constexpr int CT = D / 8;   // 8-column tiles of the warp's dK, dV
  constexpr std::int64_t kE = sizeof(float);
  trace::CtaTracer<kTrace> tr(slices);
  extern __shared__ __align__(128) unsigned char smem[];
  float* sK = reinterpret_cast<float*>(smem);  // (BN, S)
  float* sV = sK + BN * S;                     // (BN, S)
  float* sQ = sV + BN * S;                     // 2 stages × (BM, S)
  float* sdO = sQ + 2 * BM * S;                // 2 stages × (BM, S)
  float* sdS = sdO + 2 * BM * S;               // (BN, SD): dSᵀ
  float* sL = sdS + BN * SD;                   // 2 stages × BM: LSE
  float* sD = sL + 2 * BM;                     // 2 stages × BM: D

  const DkdvCta<BN, Kt::kSplit, D, Features> cta(p);
  if (cta.idle()) return;
  const SeqSpan& seq = cta.seq;
  const int N = cta.N, Nk = cta.Nk, shift = cta.shift, key0 = cta.key0;
  const std::int64_t kv_bh = cta.kv_bh;
  const int n_keys = cta.n_keys();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
  const int wkey = 16 * warp;  // the warp's first key in the tile
  const float* gLse = gDelta + tc_delta_floats(p.shape);  // the preprocess's copy of LSE, (B, H, N)
  const int Hkv = p.shape.kv_heads();
  load_f32_tile<Kt, BN>(sK, as<float>(p.k) + p.k_strides.of_head(kv_bh, Hkv) + seq.k0 * p.k_strides.row,
                         p.k_strides.row, key0, Nk);
  load_f32_tile<Kt, BN>(sV, as<float>(p.v) + p.v_strides.of_head(kv_bh, Hkv) + seq.k0 * p.v_strides.row,
                         p.v_strides.row, key0, Nk);
  cp_async_commit();
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::K, kv_bh, key0, n_keys, 0, D, n_keys * D * kE);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::V, kv_bh, key0, n_keys, 0, D, n_keys * D * kE);

  float dk[CT][4] = {}, dv[CT][4] = {};  // this warp's 16 keys × d
  // This lane's addresses (the forward's patterns, flash_tc_forward_f32.cuh). A fragments of the
  // warp's 16 keys of K and V: row l mod 16, float 4·(l / 16). B fragments of two 8-query tiles of
  // Q and dO: row (l mod 8) + 8·(l / 16), float 4·((l / 8) mod 2). dO's and Q's rows for dV and
  // dK: query 2·t4, column g. dSᵀ's elements: key wkey + g, query 2·t4.
  const std::uint32_t k_at = smem_address(sK + (wkey + (lane & 15)) * S + 4 * (lane >> 4));
  const std::uint32_t v_at = smem_address(sV + (wkey + (lane & 15)) * S + 4 * (lane >> 4));
  const int b_off = ((lane & 7) + ((lane >> 4) << 3)) * S + 4 * ((lane >> 3) & 1);
  const std::uint32_t q_bk0 = smem_address(sQ + b_off), o_bk0 = smem_address(sdO + b_off);
  const int v_off = 2 * t4 * S + g;
  float* const ds_st = sdS + (wkey + g) * SD + 2 * t4;

  // dQ's share: warp w adds rows qr .. qr + 16·MQ of the query tile × DQT 8-column tiles from cq.
  constexpr int MQ = Kt::kDqRowTiles, DQT = Kt::kDqColTiles;
  const int qr = 16 * MQ * (warp % Kt::kDqRowGroups), cq = 8 * DQT * (warp / Kt::kDqRowGroups);

  for (int gq = 0; gq < Features::group(p.shape); ++gq) {
    const std::int64_t bh = Features::query_head(p.shape, kv_bh, gq), head = bh * p.shape.N + seq.q0;
    const float* gQ = as<float>(p.q) + p.q_strides.of_head(bh, p.shape.H) + seq.q0 * p.q_strides.row;
    const float* gdO = as<float>(p.dout) + p.dout_strides.of_head(bh, p.shape.H) + seq.q0 * p.dout_strides.row;
    const Features features(p.mods, p.shape, seq, bh, 1.f / p.scale);
    const DenseWalk<BM> walk =
        features.queries(DenseWalk<BM>::queries_of(p.sparse, N, key0 - shift, p.causal), key0, key0 + n_keys - 1);
    const int n_tiles = walk.size();
    // Q_i, dO_i, LSE_i, D_i of a stage under one commit; rows past N zero-filled (tc_load_bwd_stage).
    auto load_stage = [&](int s, int i0) {
      load_f32_tile<Kt, BM>(sQ + s * BM * S, gQ, p.q_strides.row, i0, N);
      load_f32_tile<Kt, BM>(sdO + s * BM * S, gdO, p.dout_strides.row, i0, N);
      for (int i = threadIdx.x; i < BM; i += Kt::kThreads) {
        const bool valid = i0 + i < N;
        cp_async_4(sL + s * BM + i, gLse + head + (valid ? i0 + i : 0), valid);
        cp_async_4(sD + s * BM + i, gDelta + head + (valid ? i0 + i : 0), valid);
      }
      cp_async_commit();
    };
    if (gq > 0) __syncthreads();  // every warp is done with the last head's stages and dS
    if (n_tiles > 0) load_stage(0, walk.start(0));
    [[maybe_unused]] const TcDropout dropout(p.dropout, bh, seq.q0, seq.k0);

    for (int t = 0; t < n_tiles; ++t) {
      const int s = t & 1, i0 = walk.start(t), n_q = min(BM, N - i0);
      cp_async_wait<0>();  // stage t (and, the first time, K_j and V_j) has landed for this thread,
      __syncthreads();     // for everyone; and everyone is done with stage t − 1 and its dS
      if (t + 1 < n_tiles) load_stage(s ^ 1, walk.start(t + 1));
      FS_TRACE_EVENT(tr, Kind::Load, Tensor::Q, bh, i0, n_q, 0, D, n_q * D * kE);
      FS_TRACE_EVENT(tr, Kind::Load, Tensor::dO, bh, i0, n_q, 0, D, n_q * D * kE);
      FS_TRACE_EVENT(tr, Kind::Load, Tensor::LSE, bh, i0, n_q, 0, 1, n_q * kF);
      FS_TRACE_EVENT(tr, Kind::Load, Tensor::D, bh, i0, n_q, 0, 1, n_q * kF);
      const std::uint32_t stage_bytes = s * std::uint32_t(kE * BM * S);
      const float* sQs = sQ + s * BM * S;
      const float* sdOs = sdO + s * BM * S;

      // Sᵀ = K_j Q_iᵀ and dPᵀ = V_j dO_iᵀ, 8 of d at a time (mma_3x: from zero, then added — the
      // order the preprocess sums D_i in, so that a one-hot row's dS is an exact 0).
      float st[NT][4] = {}, dpt[NT][4] = {};
#pragma unroll
      for (int kk = 0; kk < KD; ++kk) {
        std::uint32_t a[4], ak_hi[4], ak_lo[4], av_hi[4], av_lo[4];
        ldmatrix_x4(a, k_at + kE * 8 * kk);
#pragma unroll
        for (int i = 0; i < 4; ++i) Tf32::split(Tf32::as_float(a[i]), ak_hi[i], ak_lo[i]);
        ldmatrix_x4(a, v_at + kE * 8 * kk);
#pragma unroll
        for (int i = 0; i < 4; ++i) Tf32::split(Tf32::as_float(a[i]), av_hi[i], av_lo[i]);
#pragma unroll
        for (int nt = 0; nt < NT; nt += 2) {
          std::uint32_t b[4], bq_hi[4], bq_lo[4], bo_hi[4], bo_lo[4];
          ldmatrix_x4(b, q_bk0 + stage_bytes + kE * (8 * nt * S + 8 * kk));
#pragma unroll
          for (int i = 0; i < 4; ++i) Tf32::split(Tf32::as_float(b[i]), bq_hi[i], bq_lo[i]);
          ldmatrix_x4(b, o_bk0 + stage_bytes + kE * (8 * nt * S + 8 * kk));
#pragma unroll
          for (int i = 0; i < 4; ++i) Tf32::split(Tf32::as_float(b[i]), bo_hi[i], bo_lo[i]);
          mma_3x<3>(st[nt], ak_hi, ak_lo, bq_hi[0], bq_hi[1], bq_lo[0], bq_lo[1]);
          mma_3x<3>(st[nt + 1], ak_hi, ak_lo, bq_hi[2], bq_hi[3], bq_lo[2], bq_lo[3]);
          mma_3x<3>(dpt[nt], av_hi, av_lo, bo_hi[0], bo_hi[1], bo_lo[0], bo_lo[1]);
          mma_3x<3>(dpt[nt + 1], av_hi, av_lo, bo_hi[2], bo_hi[3], bo_lo[2], bo_lo[3]);
        }
      }
      FS_TRACE_EVENT(tr, Kind::ComputeS, Tensor::S, bh, i0, n_q, key0, n_keys, 0);
      FS_TRACE_EVENT(tr, Kind::ComputeDP, Tensor::dP, bh, i0, n_q, key0, n_keys, 0);

      // P and dS, as tc_dkdv_kernel computes them (tc_p_ds_pair); element e of tile nt: key
      // g + 8(e/2) of the warp, query 8nt + 2t4 + e%2.
      const auto chain = tc_scores<Rows::kKeys>(features, st, key0 + wkey, i0);
      const bool edge = cta.edge(p, i0);
      with_flags(tc_pow2_scale<Kt::kExactScalePath>(p.scale), edge, [&](auto exact_scale, auto masked) {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const float2 lse = *reinterpret_cast<const float2*>(sL + s * BM + 8 * nt + 2 * t4);
          const float2 dd = *reinterpret_cast<const float2*>(sD + s * BM + 8 * nt + 2 * t4);
#pragma unroll
          for (int h = 0; h < 2; ++h)
            tc_p_ds_pair<decltype(exact_scale)::value, kDropout, Features>(
                st[nt][2 * h], st[nt][2 * h + 1], dpt[nt][2 * h], dpt[nt][2 * h + 1], lse, dd, key0 + wkey + g + 8 * h,
                i0 + 8 * nt + 2 * t4, decltype(masked)::value, p, seq, dropout);
        }
      });
      chain.apply(dpt);
      FS_TRACE_EVENT(tr, Kind::ComputeDS, Tensor::dS, bh, i0, n_q, key0, n_keys, 0);

      // dSᵀ to shared memory for dQ's share: (key, query), two floats per store.
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          *reinterpret_cast<float2*>(ds_st + 8 * h * SD + 8 * nt) = make_float2(dpt[nt][2 * h], dpt[nt][2 * h + 1]);

      // dV_j += (P ∘ Z)ᵀ dO_i and dK_j += dSᵀ Q_i: P's and dS's A fragments of 8-query step kb
      // from the accumulators (queries 2t, 2t + 1 as k = t, t + 4), split once; then, column tile
      // by column tile, the stage's products summed from zero and added.
      std::uint32_t p_hi[NT][4], p_lo[NT][4], ds_hi[NT][4], ds_lo[NT][4];
#pragma unroll
      for (int kb = 0; kb < NT; ++kb)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int e = (i & 1) * 2 + (i >> 1);  // a0..a3 = elements 0, 2, 1, 3
          Tf32::split(st[kb][e], p_hi[kb][i], p_lo[kb][i]);
          Tf32::split(dpt[kb][e], ds_hi[kb][i], ds_lo[kb][i]);
        }
#pragma unroll
      for (int ct = 0; ct < CT; ++ct) {
        float tv[4] = {}, tk[4] = {};
#pragma unroll
        for (int kb = 0; kb < NT; ++kb) {
          std::uint32_t o_hi[2], o_lo[2], q_hi[2], q_lo[2];
          Tf32::split(sdOs[v_off + 8 * kb * S + 8 * ct], o_hi[0], o_lo[0]);
          Tf32::split(sdOs[v_off + (8 * kb + 1) * S + 8 * ct], o_hi[1], o_lo[1]);
          Tf32::split(sQs[v_off + 8 * kb * S + 8 * ct], q_hi[0], q_lo[0]);
          Tf32::split(sQs[v_off + (8 * kb + 1) * S + 8 * ct], q_hi[1], q_lo[1]);
          mma_3x_in_place<3>(tv, p_hi[kb], p_lo[kb], o_hi[0], o_hi[1], o_lo[0], o_lo[1]);
          mma_3x_in_place<3>(tk, ds_hi[kb], ds_lo[kb], q_hi[0], q_hi[1], q_lo[0], q_lo[1]);
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          dv[ct][e] += tv[e];
          dk[ct][e] += tk[e];
        }
      }
      trace_dkdv_accumulated(tr, kv_bh, key0, n_keys, 0, D);

      // dQ_i += dS_ij K_j (τ in the convert kernel), once every warp's dSᵀ is in: summed from zero
      // over the CTA's keys, then added to dQacc by fp32 atomics.
      __syncthreads();
      {
        float dq[MQ][DQT][4] = {};
#pragma unroll 2
        for (int kb = 0; kb < BN / 8; ++kb) {
          std::uint32_t a_hi[MQ][4], a_lo[MQ][4];
          const float* ds_at = sdS + (8 * kb + 2 * t4) * SD + qr + g;
#pragma unroll
          for (int mq = 0; mq < MQ; ++mq) {
            Tf32::split(ds_at[16 * mq], a_hi[mq][0], a_lo[mq][0]);
            Tf32::split(ds_at[16 * mq + 8], a_hi[mq][1], a_lo[mq][1]);
            Tf32::split(ds_at[SD + 16 * mq], a_hi[mq][2], a_lo[mq][2]);
            Tf32::split(ds_at[SD + 16 * mq + 8], a_hi[mq][3], a_lo[mq][3]);
          }
          const float* k_rows = sK + (8 * kb + 2 * t4) * S + cq + g;
#pragma unroll
          for (int ct = 0; ct < DQT; ++ct) {
            std::uint32_t b_hi[2], b_lo[2];
            Tf32::split(k_rows[8 * ct], b_hi[0], b_lo[0]);
            Tf32::split(k_rows[S + 8 * ct], b_hi[1], b_lo[1]);
#pragma unroll
            for (int mq = 0; mq < MQ; ++mq)
              mma_3x_in_place<3>(dq[mq][ct], a_hi[mq], a_lo[mq], b_hi[0], b_hi[1], b_lo[0], b_lo[1]);
          }
        }
        tc_atomic_add_dq<D>(dq, dq_acc, head, i0, qr, N, cq);
      }
      trace_dq_share(tr, bh, i0, n_q, 0, D);
    }
    if constexpr (kTrace)
      walk.for_each_skipped(N, [&](int i, int n) { FS_TRACE_EVENT(tr, Kind::Skip, Tensor::S, bh, i, n, key0, n_keys, 0); });
    if (n_tiles == 0) cp_async_wait<0>();  // K_j, V_j were loaded for nothing: let the copies land
  }

  // dK_j = τ dK, dV_j → HBM, keys past Nk not stored.
  float* gdK = as<float>(p.dk) + p.dk_strides.of_head(kv_bh, Hkv) + seq.k0 * p.dk_strides.row;
  float* gdV = as<float>(p.dv) + p.dv_strides.of_head(kv_bh, Hkv) + seq.k0 * p.dv_strides.row;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int key = key0 + wkey + g + 8 * h;
    if (key >= Nk) continue;
    float* dst_k = gdK + key * p.dk_strides.row + 2 * t4;
    float* dst_v = gdV + key * p.dv_strides.row + 2 * t4;
#pragma unroll
    for (int ct = 0; ct < CT; ++ct) {
      *reinterpret_cast<float2*>(dst_k + 8 * ct) = make_float2(p.scale * dk[ct][2 * h], p.scale * dk[ct][2 * h + 1]);
      *reinterpret_cast<float2*>(dst_v + 8 * ct) = make_float2(dv[ct][2 * h], dv[ct][2 * h + 1]);
    }
  }
  trace_dkdv_stored(tr, kv_bh, key0, n_keys, 0, D, kE);
}

// The kernel as a family the launcher takes (backward_launch.cuh).
struct TcDkdvF32 {
  static constexpr const char* kName = "tc_dkdv_f32_kernel";
  template <class Kt, bool kDropout, bool kAtomicDQ, class Features, bool kTrace>
  static constexpr auto kernel = tc_dkdv_f32_kernel<Kt, kDropout, kAtomicDQ, Features, kTrace>;
};

}  // namespace fs::tc
