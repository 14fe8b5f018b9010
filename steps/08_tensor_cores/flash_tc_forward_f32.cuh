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
// subtraction, per element).
#pragma once

#include <cstdint>

#include "steps/08_tensor_cores/flash_tc_forward.cuh"

namespace fs::tc {

// kPasses: 3 for 3×TF32, 1 for plain TF32.
template <int D_, int kBlockM_, int kBlockN_, int kWarps_, int kPasses_ = 3, bool kLazyRescale_ = false>
struct F32Config {
  static constexpr int D = D_;
  static constexpr int kBlockM = kBlockM_, kBlockN = kBlockN_, kWarps = kWarps_;
  static constexpr int kPasses = kPasses_;
  static constexpr bool kLazyRescale = kLazyRescale_;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kMTiles = kBlockM / (16 * kWarps);
  static constexpr int kStride = D + 4;  // floats per row in shared memory
  static_assert(kPasses == 1 || kPasses == 3, "one TF32 product, or three");
  static_assert(kMTiles >= 1 && kBlockM == 16 * kMTiles * kWarps, "every warp owns whole 16-row tiles");
  static_assert(D % 16 == 0 && kBlockN % 16 == 0, "ldmatrix.x4 covers 16 keys × 8 of d");
  static constexpr std::size_t kSmemBytes = sizeof(float) * kStride * (kBlockM + 2 * 2 * kBlockN);  // Q; 2 stages of K, V
};

// Rows [row0, row0 + kRows) of an (n_rows, D) fp32 matrix whose rows are `ld` floats apart into a
// padded tile, 16 bytes per cp.async; rows past n_rows zero-filled. Commit and wait before use.
template <typename Cfg, int kRows>
__device__ __forceinline__ void load_f32_tile(float* s, const float* g, std::int64_t ld, int row0, int n_rows) {
  constexpr int kChunks = Cfg::D / 4, kPerThread = kRows * kChunks / Cfg::kThreads;
  static_assert(kRows * kChunks % Cfg::kThreads == 0, "every thread copies the same number of chunks");
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int i = threadIdx.x + k * Cfg::kThreads, r = i / kChunks, c = i % kChunks;
    const bool valid = row0 + r < n_rows;
    cp_async_16(s + r * Cfg::kStride + 4 * c, g + (valid ? row0 + r : 0) * ld + 4 * c, valid);
  }
}

// d += a·b in Cfg::kPasses TF32 products, from a's and b's heads and rests (the small ones first),
// summed by the tensor cores from zero and added to d by an fp32 add. The tensor cores round each
// result toward zero, always the same way: accumulated in d itself, every one of the d/8 · 3
// products of S = QKᵀ would cut d by up to an ulp of its running sum. Summed from zero, the
// truncation is an ulp of 8 columns' sum, and the add rounds to nearest.
template <int kPasses>
__device__ __forceinline__ void mma_3x(float (&d)[4], const std::uint32_t (&a_hi)[4], const std::uint32_t (&a_lo)[4],
                                      std::uint32_t b0_hi, std::uint32_t b1_hi, std::uint32_t b0_lo,
                                      std::uint32_t b1_lo) {
  float t[4] = {0.f, 0.f, 0.f, 0.f};
  if constexpr (kPasses == 3) {
    Tf32::mma(t, a_lo, b0_hi, b1_hi);
    Tf32::mma(t, a_hi, b0_lo, b1_lo);
  }
  Tf32::mma(t, a_hi, b0_hi, b1_hi);
#pragma unroll
  for (int i = 0; i < 4; ++i) d[i] += t[i];
}

// d += a·b in place, Cfg::kPasses TF32 products (the small ones first): for a sum that starts from
// zero nearby. P̃V: each key tile's products are summed in accumulators of their own, pv, and
// added to O once per tile. Accumulated in O itself, every one of the N/8 · 3 products would
// truncate O's running sum, and the drift reached 3.1e-6 at d = 64, N = 1025 on the H200, over the
// fp32 rule's 2.0e-6; summed from zero per tile, the truncations are ulps of one tile's share, and
// the add to O rounds to nearest. (mma_3x's sum per 8 keys is as accurate, and took 1.07-1.28× the
// time of the tile sum: an fp32 add per mma triple, waiting on the third product.)
template <int kPasses>
__device__ __forceinline__ void mma_3x_in_place(float (&d)[4], const std::uint32_t (&a_hi)[4],
                                                const std::uint32_t (&a_lo)[4], std::uint32_t b0_hi,
                                                std::uint32_t b1_hi, std::uint32_t b0_lo, std::uint32_t b1_lo) {
  if constexpr (kPasses == 3) {
    Tf32::mma(d, a_lo, b0_hi, b1_hi);
    Tf32::mma(d, a_hi, b0_lo, b1_lo);
  }
  Tf32::mma(d, a_hi, b0_hi, b1_hi);
}

template <typename Cfg, bool kCausal, bool kDropout, class Features, bool kTrace>
__global__ void __launch_bounds__(Cfg::kThreads) tc_forward_f32_kernel(const FwdParams p, trace::Slices slices) {
  constexpr int D = Cfg::D, BM = Cfg::kBlockM, BN = Cfg::kBlockN, MT = Cfg::kMTiles, S = Cfg::kStride;
  constexpr int NT = BN / 8;  // 8-key tiles of S per row tile, and 8-key steps of P̃V
  constexpr int KD = D / 8;   // 8-wide steps over d (S = QKᵀ)
  constexpr int DT = D / 8;   // 8-column tiles of O
  constexpr std::int64_t kE = sizeof(float);
  trace::CtaTracer<kTrace> tr(slices);
  extern __shared__ __align__(128) unsigned char smem[];
  float* sQ = reinterpret_cast<float*>(smem);  // (BM, S)
  float* sK = sQ + BM * S;                     // 2 stages × (BN, S)
  float* sV = sK + 2 * BN * S;                 // 2 stages × (BN, S)

  // The CTA's problem, its rows and keys, as in tc_forward_kernel.
  const SeqSpan seq = Features::sequence(p.packed, p.shape);
  const int N = seq.n, Nk = seq.nk, shift = seq.shift();
  const std::int64_t bh = blockIdx.y, kv_bh = Features::kv_head(p.shape, bh);
  const int Hkv = p.shape.kv_heads();
  const std::int64_t ld_q = p.q_strides.row, ld_k = p.k_strides.row, ld_v = p.v_strides.row;
  const float* gK = as<float>(p.k) + p.k_strides.of_head(kv_bh, Hkv) + seq.k0 * ld_k;
  const float* gV = as<float>(p.v) + p.v_strides.of_head(kv_bh, Hkv) + seq.k0 * ld_v;
  const int tile = kCausal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int row0 = tile * BM;
  if (Features::kSequences && row0 >= N) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t4 = lane % 4;
  const int wrow0 = warp * 16 * MT;
  const int rows = min(BM, N - row0);
  auto keys = [&](int j0) { return min(BN, Nk - j0); };
  const float scale_log2 = p.scale * kLog2e;
  const int last_row = min(N, row0 + BM) - 1;
  const Features features(p.mods, p.shape, seq, bh, 1.f / p.scale);
  const DenseWalk<BN> walk =
      features.keys(DenseWalk<BN>::keys_of(p.sparse, Nk, row0, last_row + shift, kCausal), row0, last_row);
  const int n_tiles = walk.size();
  [[maybe_unused]] const TcDropout dropout(p.dropout, bh, seq.q0, seq.k0);

  load_f32_tile<Cfg, BM>(sQ, as<float>(p.q) + p.q_strides.of_head(bh, p.shape.H) + seq.q0 * ld_q, ld_q, row0, N);
  cp_async_commit();
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::Q, bh, row0, rows, 0, D, rows * D * kE);
  if (n_tiles > 0) {
    load_f32_tile<Cfg, BN>(sK, gK, ld_k, walk.start(0), Nk);
    load_f32_tile<Cfg, BN>(sV, gV, ld_v, walk.start(0), Nk);
    cp_async_commit();
  }
  // This lane's addresses. Q's A fragment (16 rows × 8 of d): lane l points at row l mod 16, float
  // 4·(l / 16) — matrices (rows 0-7, d 0-3), (8-15, 0-3), (0-7, 4-7), (8-15, 4-7). K's B fragments
  // of two 8-key tiles: row (l mod 8) + 8·(l / 16), float 4·((l / 8) mod 2) — (keys 0-7, d 0-3),
  // (0-7, 4-7), (8-15, 0-3), (8-15, 4-7). V: key 2·t4, column g (above).
  const std::uint32_t q_at = smem_address(sQ + (wrow0 + (lane & 15)) * S + 4 * (lane >> 4));
  const std::uint32_t k_at0 = smem_address(sK + ((lane & 7) + ((lane >> 4) << 3)) * S + 4 * ((lane >> 3) & 1));
  const float* v_at0 = sV + 2 * t4 * S + g;

  float o[MT][DT][4] = {};
  float m[MT][2], l[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      m[mt][h] = -INFINITY;
      l[mt][h] = 0.f;
    }

  for (int t = 0; t < n_tiles; ++t) {
    const int j0 = walk.start(t);
    const int stage = t & 1;
    cp_async_wait<0>();  // tile t (and Q) has landed for this thread,
    __syncthreads();     // for every warp; and every warp is done with tile t − 1's stage
    if (t + 1 < n_tiles) {
      load_f32_tile<Cfg, BN>(sK + (stage ^ 1) * BN * S, gK, ld_k, walk.start(t + 1), Nk);
      load_f32_tile<Cfg, BN>(sV + (stage ^ 1) * BN * S, gV, ld_v, walk.start(t + 1), Nk);
      cp_async_commit();
    }
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::K, kv_bh, j0, keys(j0), 0, D, keys(j0) * D * kE);
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::V, kv_bh, j0, keys(j0), 0, D, keys(j0) * D * kE);
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
          mma_3x<Cfg::kPasses>(s[mt][nt], a_hi[mt], a_lo[mt], b_hi[0], b_hi[1], b_lo[0], b_lo[1]);
          mma_3x<Cfg::kPasses>(s[mt][nt + 1], a_hi[mt], a_lo[mt], b_hi[2], b_hi[3], b_lo[2], b_lo[3]);
        }
      }
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) tc_scores<false>(features, s[mt], row0 + wrow0 + 16 * mt, j0);
    tc_mask_tile<kCausal, BN>(s, row0, wrow0, j0, Nk, shift);
    FS_TRACE_EVENT(tr, Kind::ComputeS, Tensor::S, bh, row0, rows, j0, keys(j0), 0);

    tc_online_softmax<Cfg::kLazyRescale>(s, m, l, o, scale_log2);
    if constexpr (kDropout) tc_dropout_tile(s, dropout, row0 + wrow0, j0);
    if constexpr (kTrace) {
      float l_row = l[0][0];
      l_row += __shfl_xor_sync(0xffffffffu, l_row, 1);
      l_row += __shfl_xor_sync(0xffffffffu, l_row, 2);
      FS_TRACE_STATS(tr, Kind::Softmax, Tensor::P, bh, row0, rows, j0, keys(j0), m[0][0] * p.scale, l_row, row0);
      FS_TRACE_STATS(tr, Kind::Rescale, Tensor::O, bh, row0, rows, 0, D, m[0][0] * p.scale, l_row, row0);
    }

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
          mma_3x_in_place<Cfg::kPasses>(pv[mt][dt], p_hi[mt], p_lo[mt], v_hi[0], v_hi[1], v_lo[0], v_lo[1]);
      }
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int dt = 0; dt < DT; ++dt)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[mt][dt][e] = __fadd_rn(o[mt][dt][e], pv[mt][dt][e]);
    FS_TRACE_EVENT(tr, Kind::AccumulateO, Tensor::O, bh, row0, rows, 0, D, 0);
  }
  if constexpr (kTrace)
    walk.for_each_skipped(Nk, [&](int j, int n) { FS_TRACE_EVENT(tr, Kind::Skip, Tensor::S, bh, row0, rows, j, n, 0); });

  const std::int64_t ld_o = p.o_strides.row;
  float* gO = as<float>(p.o) + p.o_strides.of_head(bh, p.shape.H) + seq.q0 * ld_o;
  float* gLse = p.lse + bh * p.shape.N + seq.q0;
  tc_finish_rows(o, m, l, row0 + wrow0, N, p.scale, gLse, [&](int row, int dt, float x0, float x1) {
    *reinterpret_cast<float2*>(gO + row * ld_o + 8 * dt + 2 * t4) = make_float2(x0, x1);
  });
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::O, bh, row0, rows, 0, D, rows * D * kE);
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::LSE, bh, row0, rows, 0, 1, rows * std::int64_t(sizeof(float)));
}

struct TcF32Forward {
  static constexpr const char* kName = "tc_forward_f32_kernel";
  template <typename Cfg, bool kCausal, bool kDropout, class Features, bool kTrace>
  static constexpr auto kernel = tc_forward_f32_kernel<Cfg, kCausal, kDropout, Features, kTrace>;
};

}  // namespace fs::tc
