// fp32 attention on the tensor cores: the forward of flash_tc_forward.cuh with fp32 tensors and
// each product as 3×TF32 (mma.cuh, Tf32): every operand split into a TF32 head and rest, three
// m16n8k8 products where one would do, fp32 accumulate — the error of fp32 arithmetic at the
// tensor cores' rate, a third of it. Variant 3xtf32 of step 08; with kPasses = 1 the plain TF32
// product, whose error the lesson measures against fp32's.
//
// The algorithm, the tiles' walk, the masks, dropout and FlashAttention's features are the 16-bit
// forward's (tc_softmax.cuh has the softmax both run): S = QKᵀ's accumulators of m16n8k8 have
// m16n8k16's layout. What differs is how operands reach the products:
//
//   shared memory  fp32 rows of d + 4 floats: the 16 bytes of padding turn every row 4 banks
//                  further, which spreads both reads below over all 32 banks (no swizzle needed)
//   Q, K           ldmatrix, as 16-bit pairs: lane (g, t) of an 8×8 b16 matrix receives row g,
//                  32-bit word t — a float of row g, column t: exactly TF32's A pattern (Q) and
//                  B pattern (K, whose rows are Bᵀ's columns)
//   P              straight from S's accumulators. Lane (g, t) holds keys 2t and 2t + 1 of its
//                  rows, and the A operand wants keys t and t + 4; a sum over keys does not care
//                  about their order, so the product takes key 2t as its k = t and 2t + 1 as
//                  k = t + 4, and V's rows follow the same order:
//   V              b0 = V[8kb + 2t][8dt + g], b1 = V[8kb + 2t + 1][8dt + g]: one 32-bit load each
//                  (ldmatrix has no 32-bit transpose), conflict-free on the padded rows
//
// Each warp splits the fragments it loads into head and rest (an integer add and mask, and a
// subtraction, per element). The schedule, the softmax and the epilogue are the 16-bit forward's
// (query_tile.cuh, tc_softmax.cuh); the 3×TF32 products and the fp32 tiles are tf32.cuh's.
#pragma once

#include <cstddef>

#include "steps/08_tensor_cores/launchers.cuh"
#include "steps/08_tensor_cores/query_tile.cuh"
#include "steps/08_tensor_cores/tc_tiles.cuh"
#include "steps/08_tensor_cores/tf32.cuh"

namespace fs::tc {

struct TcF32Forward;

// What an fp32 forward configuration Cfg (kBlockM, kBlockN, kWarps, kLazyRescale:
// forward_configs.cuh) implies at head dimension D, with kPasses TF32 products per product: 3 for
// 3×TF32, 1 for plain TF32.
template <int D_, class Cfg, int kPasses_>
struct F32Traits : KernelTraits<float, D_, Cfg, TcF32Forward> {
  static constexpr int kPasses = kPasses_;
  static constexpr int kMTiles = Cfg::kBlockM / (16 * Cfg::kWarps);
  static constexpr int kStride = D_ + 4;  // floats per row in shared memory (tf32.cuh)
  static_assert(kPasses == 1 || kPasses == 3, "one TF32 product, or three");
  static_assert(kMTiles >= 1 && Cfg::kBlockM == 16 * kMTiles * Cfg::kWarps, "every warp owns whole 16-row tiles");
  static_assert(D_ % 16 == 0 && Cfg::kBlockN % 16 == 0, "ldmatrix.x4 covers 16 keys × 8 of d");
  static constexpr std::size_t kSmemBytes =
      sizeof(float) * kStride * (Cfg::kBlockM + 2 * 2 * Cfg::kBlockN);  // Q; 2 stages of K, V
};

template <class Kt, bool kCausal, bool kDropout, class Features, bool kTrace>
__global__ void __launch_bounds__(Kt::kThreads) tc_forward_f32_kernel(const FwdParams p, trace::Slices slices) {
  constexpr int D = Kt::D, BM = Kt::kBlockM, BN = Kt::kBlockN, MT = Kt::kMTiles, S = Kt::kStride;
  constexpr int NT = BN / 8;  // 8-key tiles of S per row tile, and 8-key steps of P̃V
  constexpr int KD = D / 8;   // 8-wide steps over d (S = QKᵀ)
  constexpr int DT = D / 8;   // 8-column tiles of O
  constexpr std::int64_t kE = sizeof(float);
  trace::CtaTracer<kTrace> tr(slices);
  extern __shared__ __align__(128) unsigned char smem[];
  float* sQ = reinterpret_cast<float*>(smem);  // (BM, S)
  float* sK = sQ + BM * S;                     // 2 stages × (BN, S)
  float* sV = sK + 2 * BN * S;                 // 2 stages × (BN, S)

  // The schedule, as in tc_forward_kernel (query_tile.cuh).
  const FwdCta<float, BM, kCausal, Features> cta(p);
  if (cta.idle()) return;
  const FwdLane<BM, MT> w(p, cta.N, cta.row0);
  const int lane = w.lane, g = w.g, t4 = w.t4, wrow0 = w.wrow0, row0 = cta.row0;
  auto keys = [&](int j0) { return min(BN, cta.Nk - j0); };
  const KeyWalk<BM, BN, Features> kw(p, cta.seq, cta.bh, row0, cta.shift, kCausal);
  const DenseWalk<BN> walk = kw.walk;
  [[maybe_unused]] const TcDropout dropout(p.dropout, cta.bh, cta.seq.q0, cta.seq.k0);
  auto load_kv = [&](int stage, int j0) {
    load_f32_tile<Kt, BN>(sK + stage * BN * S, cta.gK, cta.ld_k, j0, cta.Nk);
    load_f32_tile<Kt, BN>(sV + stage * BN * S, cta.gV, cta.ld_v, j0, cta.Nk);
    cp_async_commit();
  };

  load_f32_tile<Kt, BM>(sQ, cta.q(p), cta.ld_q, row0, cta.N);
  cp_async_commit();
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::Q, cta.bh, row0, w.rows, 0, D, w.rows * D * kE);
  if (walk.size() > 0) load_kv(0, walk.start(0));
  // This lane's addresses. Q's A fragment (16 rows × 8 of d): lane l points at row l mod 16, float
  // 4·(l / 16) — matrices (rows 0-7, d 0-3), (8-15, 0-3), (0-7, 4-7), (8-15, 4-7). K's B fragments
  // of two 8-key tiles: row (l mod 8) + 8·(l / 16), float 4·((l / 8) mod 2) — (keys 0-7, d 0-3),
  // (0-7, 4-7), (8-15, 0-3), (8-15, 4-7). V: key 2·t4, column g (above).
  const std::uint32_t q_at = smem_address(sQ + (wrow0 + (lane & 15)) * S + 4 * (lane >> 4));
  const std::uint32_t k_at0 = smem_address(sK + ((lane & 7) + ((lane >> 4) << 3)) * S + 4 * ((lane >> 3) & 1));
  const float* v_at0 = sV + 2 * t4 * S + g;

  float o[MT][DT][4] = {};
  float m[MT][2], l[MT][2];
  tc_softmax_start(m, l);

  for (int t = 0; t < walk.size(); ++t) {
    const int j0 = walk.start(t);
    const int stage = t & 1;
    tc_next_stage(t, walk.size(), walk, load_kv);  // tile t in; tile t + 1 on its way (tc_tiles.cuh)
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::K, cta.kv_bh, j0, keys(j0), 0, D, keys(j0) * D * kE);
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::V, cta.kv_bh, j0, keys(j0), 0, D, keys(j0) * D * kE);
    const std::uint32_t k_at = k_at0 + stage * int(kE * BN * S);
    const float* v_at = v_at0 + stage * BN * S;

    // S = Q K_jᵀ, 8 of d at a time: Q's A fragments of the warp's row tiles, split; then K's B
    // fragments, two 8-key tiles per ldmatrix.x4, split and used by every row tile.
    float s[MT][NT][4] = {};
#pragma unroll
    for (int kk = 0; kk < KD; ++kk) {
      std::uint32_t a_hi[MT][4], a_lo[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        std::uint32_t a[4];
        ldmatrix_x4(a, q_at + kE * (16 * mt * S + 8 * kk));
#pragma unroll
        for (int i = 0; i < 4; ++i) Tf32::split(Tf32::as_float(a[i]), a_hi[mt][i], a_lo[mt][i]);
      }
#pragma unroll
      for (int nt = 0; nt < NT; nt += 2) {
        std::uint32_t b[4], b_hi[4], b_lo[4];
        ldmatrix_x4(b, k_at + kE * (8 * nt * S + 8 * kk));
#pragma unroll
        for (int i = 0; i < 4; ++i) Tf32::split(Tf32::as_float(b[i]), b_hi[i], b_lo[i]);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_3x<Kt::kPasses>(s[mt][nt], a_hi[mt], a_lo[mt], b_hi[0], b_hi[1], b_lo[0], b_lo[1]);
          mma_3x<Kt::kPasses>(s[mt][nt + 1], a_hi[mt], a_lo[mt], b_hi[2], b_hi[3], b_lo[2], b_lo[3]);
        }
      }
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) tc_scores<Rows::kQueries>(kw.features, s[mt], row0 + wrow0 + 16 * mt, j0);
    tc_mask_tile<kCausal, BN>(s, row0, wrow0, j0, cta.Nk, cta.shift);
    FS_TRACE_EVENT(tr, Kind::ComputeS, Tensor::S, cta.bh, row0, w.rows, j0, keys(j0), 0);

    tc_online_softmax<Kt::kLazyRescale>(s, m, l, o, w.scale_log2);
    if constexpr (kDropout) tc_dropout_tile(s, dropout, row0 + wrow0, j0);
    trace_softmax(tr, m, l, p.scale, cta.bh, row0, w.rows, j0, keys, D);

    // O += P̃ V_j, 8 keys at a time: P̃'s A fragment is S's accumulators of 8-key tile kb, keys
    // 2t, 2t + 1 taken as k = t, t + 4 (a0 row g key 2t, a1 row g+8 key 2t, a2 row g key 2t+1,
    // a3 row g+8 key 2t+1), V's B fragment the same two keys at column g.
    // This tile's P̃V, summed from zero (mma_3x_in_place), then added to O by an add of its own:
    // left to itself the compiler may fuse O's rescale by α (tc_online_softmax) into that add in one
    // instantiation and not in another, and the traced kernel would round O differently.
    float pv[MT][DT][4] = {};
#pragma unroll
    for (int kb = 0; kb < NT; ++kb) {
      std::uint32_t p_hi[MT][4], p_lo[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        Tf32::split(s[mt][kb][0], p_hi[mt][0], p_lo[mt][0]);
        Tf32::split(s[mt][kb][2], p_hi[mt][1], p_lo[mt][1]);
        Tf32::split(s[mt][kb][1], p_hi[mt][2], p_lo[mt][2]);
        Tf32::split(s[mt][kb][3], p_hi[mt][3], p_lo[mt][3]);
      }
#pragma unroll
      for (int dt = 0; dt < DT; ++dt) {
        std::uint32_t v_hi[2], v_lo[2];
        Tf32::split(v_at[8 * kb * S + 8 * dt], v_hi[0], v_lo[0]);
        Tf32::split(v_at[(8 * kb + 1) * S + 8 * dt], v_hi[1], v_lo[1]);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
          mma_3x_in_place<Kt::kPasses>(pv[mt][dt], p_hi[mt], p_lo[mt], v_hi[0], v_hi[1], v_lo[0], v_lo[1]);
      }
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int dt = 0; dt < DT; ++dt)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[mt][dt][e] = __fadd_rn(o[mt][dt][e], pv[mt][dt][e]);
    FS_TRACE_EVENT(tr, Kind::AccumulateO, Tensor::O, cta.bh, row0, w.rows, 0, D, 0);
  }
  kw.trace_skipped(tr, cta.bh, row0, w.rows, cta.Nk);

  fwd_epilogue<D>(p, cta, tr, o, m, l, wrow0, w.rows, [&](float* gO, std::int64_t ld_o, int row, int dt, float x0, float x1) {
    *reinterpret_cast<float2*>(gO + row * ld_o + 8 * dt + 2 * t4) = make_float2(x0, x1);
  });
}

struct TcF32Forward {
  static constexpr const char* kName = "tc_forward_f32_kernel";
  template <class Kt, bool kCausal, bool kDropout, class Features, bool kTrace>
  static constexpr auto kernel = tc_forward_f32_kernel<Kt, kCausal, kDropout, Features, kTrace>;
};

}  // namespace fs::tc
