// Step 09's forward: step 08's FlashAttention-2 forward rebuilt on Hopper's machinery, the
// techniques of FlashAttention-3 (Shah et al. 2024), each a template switch so that the lesson
// can measure what each one buys.
//
//   The CTA: 128 query rows, three warpgroups of 128 threads.
//     warpgroup 0, the producer: one thread issues every copy, by TMA — Q once, then each key
//       tile's K and V into a ring of kStages shared-memory stages. Each stage has mbarriers:
//       full_k and full_v (the copy's bytes have landed), and empty_k and empty_v (every consumer
//       warp is done with the tile, so the stage can be refilled). K and V have barriers of their
//       own because they are done with at different times: K when S has landed, V only when P̃V
//       has — a tile later, with kOverlap — and K_{t+1} should not wait for V_{t−1}. The producer keeps few registers (setmaxnreg).
//     warpgroups 1 and 2, the consumers: 64 query rows each. S = QKᵀ by wgmma from shared
//       memory (Q and K), the online softmax in registers (step 08's, on the same accumulator
//       layout), O += P̃V by wgmma with P̃ from registers and V from shared memory.
//   kOverlap (FlashAttention-3's intra-warpgroup overlap): S_{t+1} = QK_{t+1}ᵀ and O += P̃_t V_t
//     are issued together, and the softmax of S_{t+1} runs while the tensor cores finish P̃_t V_t;
//     O's rescale by α waits until that product has landed.
//   kPingPong: the two consumer warpgroups take turns to issue their products (named barriers),
//     so that one warpgroup's softmax runs while the other's products keep the tensor cores busy.
//
//   E = __nv_fp8_e4m3 (the fp8 variant, fp8.cuh): Q, K and Vᵀ as the quantizer wrote them, one
//     byte each, products by wgmma k32; S multiplied by its blocks' scales, P̃ rounded to e4m3
//     (times 2⁸, softmax_tile_fp8), O kept in units of the current V block's scale; O written
//     in EO (the problem's bf16 or fp16).
//
// The tiles a CTA reads and the HBM bytes are step 08's (io_flash2_forward with these tiles);
// what changes is who moves them (TMA, not 384 threads' cp.async) and how the products are
// issued (a warpgroup's 64 × N × 16 at a time, asynchronously, not a warp's 16 × 8 × 16).
#pragma once

#include <cuda.h>

#include <algorithm>
#include <cstdint>

#include "common/flash_tile.cuh"
#include "common/problem.hpp"
#include "common/recorder/device.cuh"
#include "common/recorder/launch.cuh"
#include "steps/08_tensor_cores/mma.cuh"
#include "steps/08_tensor_cores/tc_softmax.cuh"
#include "steps/09_hopper/fp8.cuh"
#include "steps/09_hopper/hopper.cuh"

namespace fs::hopper {

using trace::Kind;
using trace::Tensor;

// Q, K and V as TMA sees them: 4-D tensors (d, rows, heads, batches), boxes of 128 bytes of a
// row (64 16-bit columns, 128 e4m3 ones); the fp8 variant's V is Vᵀ (keys, d, heads, batches).
struct TmaMaps {
  CUtensorMap q, k, v, o;  // o: boxes of 64 rows (a consumer warpgroup's), for kTmaStore
  // fp8: the blocks' scales (fp8.cuh), (B·H, blocks_q) for Q, (B·H, blocks_kv) for K and V; null
  // otherwise.
  const float *scale_q = nullptr, *scale_k = nullptr, *scale_v = nullptr;
  int blocks_q = 0, blocks_kv = 0;
};
// fp8: the scales of the maps, where the quantizer wrote them (fp8_layout), and its grid.
inline void set_fp8_scales(TmaMaps& maps, const Fp8Layout& l, const unsigned char* ws, std::int64_t heads) {
  const float* scales = reinterpret_cast<const float*>(ws + l.scales);
  maps.scale_q = scales + l.scale_offset(0, heads);
  maps.scale_k = scales + l.scale_offset(1, heads);
  maps.scale_v = scales + l.scale_offset(2, heads);
  maps.blocks_q = l.blocks_q;
  maps.blocks_kv = l.blocks_kv;
}
inline dim3 fp8_quantize_grid(const Fp8Layout& l, int heads) {
  return dim3(unsigned(std::max(l.blocks_q, l.blocks_kv)), unsigned(heads), 3);
}

// kBlockN keys per tile; kStages stages of K and V; the techniques on top of TMA + wgmma + the
// producer warpgroup. E: the elements the tensor cores read (16-bit, or e4m3), EO: O's.
// kProducer false (the wgmma rung): no producer warpgroup; consumer 0's first thread issues the
// copies between its own products, a ring of kStages tiles ahead.
template <typename E_, int D_, int kBlockN_, int kStages_, bool kOverlap_, bool kPingPong_, bool kPersistent_,
          typename EO_ = E_, bool kProducer_ = true>
struct HopperConfig {
  using E = E_;
  using EO = EO_;
  static constexpr int D = D_, kBlockM = 128, kBlockN = kBlockN_, kStages = kStages_;
  static constexpr bool kOverlap = kOverlap_, kPingPong = kPingPong_, kPersistent = kPersistent_;
  static constexpr bool kProducer = kProducer_;
  static_assert(kProducer || (!kOverlap && !kPersistent), "without a producer: one product at a time, a CTA per tile");
  static constexpr bool kFp8 = kIsFp8<E>;
  static_assert(sizeof(EO) == 2 && (kFp8 || std::is_same_v<E, EO>), "O in the 16-bit type of the problem");
  static_assert(!kPingPong || kOverlap, "ping-pong takes turns at the products the overlap issues together");
  static_assert(!kOverlap || kStages >= 2, "the overlap holds tile t − 1's stage while it waits for tile t's");
  static_assert(D % 64 == 0 && D <= 256, "d in 64-column boxes (the 128-byte swizzle of 16-bit elements)");
  static_assert(kBlockN == 64 || kBlockN == 128 || (kFp8 && kBlockN == 224), "S's wgmma: m64n64, m64n128, m64n224");
  static_assert(!kFp8 || (D == 128 && kBlockN <= 256),
                "fp8: d = 128 (one box of Q and K; one box of K's rows)");
  // The fp8 softmax's knobs (softmax_tile_fp8; Fp8Cfg sets them): ℓ in kSumParts partial sums.
  // kLazy: V's scale folded into P̃ and a row's max moved only when it grows by more than kSlack
  // (base-2 units), so that most tiles skip O's rescale (Fp8Lazy).
  static constexpr int kSumParts = 1;
  static constexpr bool kLazy = false;
  static constexpr float kSlack = 0.f;
  static constexpr int kConsumers = 2;                      // warpgroups of 64 query rows
  static constexpr int kThreads = 128 * (kConsumers + (kProducer ? 1 : 0));  // and the producer
  static constexpr int kBoxCols = 128 / int(sizeof(E));    // a 128-byte row of the swizzle
  static constexpr int kStepK = 32 / int(sizeof(E));       // k per wgmma: k16, or k32 for e4m3
  static constexpr int kColBlocks = D / kBoxCols;
  static constexpr int kQElems = kBlockM * D, kKVElems = kBlockN * D;
  // fp8's Vᵀ tile: d rows of the tile's keys, in boxes of 128 keys (the 128-byte swizzle's rows);
  // a tile of 224 keys takes two, the second's last 32 keys being the next tile's (never read).
  static constexpr int kVBoxes = kFp8 ? (kBlockN + 127) / 128 : 1;
  static constexpr int kVElems = kFp8 ? kVBoxes * 128 * D : kKVElems;
  static constexpr int kONt = D < 128 ? D : 128;  // columns of O per P̃V wgmma
  // Registers per thread: the producer gives its back, the consumers take them (65536 in all).
  static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
  // Q, then K's stages, then V's, each tile kColBlocks boxes of (rows × 64) one after another;
  // then the barriers. 1024 bytes of slack: the swizzle needs 1024-byte aligned tiles.
  static constexpr int kBarriers = 2 + 4 * kStages;
  // O leaves through shared memory and TMA stores where a tile of it fits beside the others (not at
  // d = 256): the consumers write it there and go on while the copy engine writes it out.
  static constexpr bool kTmaStore = D <= 128;
  static constexpr int kOElems = kTmaStore ? kBlockM * D : 0;
  static constexpr std::size_t kTileBytes =
      sizeof(E) * std::size_t(kQElems + kStages * (kKVElems + kVElems)) + sizeof(EO) * std::size_t(kOElems);
  static constexpr std::size_t kSmemBytes = 1024 + kTileBytes + 8 * kBarriers;
};

// The max of each of a lane's two rows (g, g + 8) of S and `from`, over the row's 4 lanes.
template <int NT>
__device__ __forceinline__ void row_max(const float (&s)[NT][4], const float (&from)[2], float (&mx)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float p[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) p[nt] = fmaxf(s[nt][2 * h], s[nt][2 * h + 1]);
#pragma unroll
    for (int w = 1; w < NT; w *= 2)
#pragma unroll
      for (int nt = 0; nt + w < NT; nt += 2 * w) p[nt] = fmaxf(p[nt], p[nt + w]);
    mx[h] = fmaxf(from[h], p[0]);
  }
#pragma unroll
  for (int x = 1; x <= 2; x *= 2)
#pragma unroll
    for (int h = 0; h < 2; ++h) mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], x));
}

// The online softmax of one tile as step 08's tc_online_softmax computes it (tc_softmax.cuh: the
// same roundings, so that a one-hot row gets ℓ = 1 and LSE = fl(τ m)), but O's rescale left to
// the caller: with kOverlap, O is still being written by the tensor cores when α is known.
template <int NT>
__device__ __forceinline__ void softmax_tile(float (&s)[NT][4], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                             float scale_log2) {
  float mx[2];
  row_max(s, m, mx);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float m_use = __fmul_rn(mx[h] == -INFINITY ? 0.f : mx[h], scale_log2);
    alpha[h] = tc::exp2_fast(__fsub_rn(__fmul_rn(m[h], scale_log2), m_use));
    m[h] = mx[h];
    l[h] *= alpha[h];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 2 * h; e < 2 * h + 2; ++e) {
        s[nt][e] = tc::exp2_fast(__fsub_rn(__fmul_rn(s[nt][e], scale_log2), m_use));
        l[h] += s[nt][e];
      }
  }
}

template <int DT>
__device__ __forceinline__ void rescale_o(float (&o)[DT][4], const float (&alpha)[2]) {
#pragma unroll
  for (int dt = 0; dt < DT; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[dt][e] *= alpha[e >> 1];
}

// kLazy: skipped where α is 1 for every row of the warp (the same O, bit for bit).
template <bool kLazy, int DT>
__device__ __forceinline__ void rescale_o_if(float (&o)[DT][4], const float (&alpha)[2]) {
  if constexpr (kLazy)
    if (!__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) return;
  rescale_o(o, alpha);
}

// P̃ rounded to E as wgmma's A operand: keys [16kk, 16kk + 16) are S's 8-column chunks 2kk, 2kk + 1.
template <typename E, int NT>
__device__ __forceinline__ void pack_p(const float (&s)[NT][4], std::uint32_t (&pf)[NT / 2][4]) {
#pragma unroll
  for (int kk = 0; kk < NT / 2; ++kk) {
    pf[kk][0] = tc::Element<E>::pack(s[2 * kk][0], s[2 * kk][1]);
    pf[kk][1] = tc::Element<E>::pack(s[2 * kk][2], s[2 * kk][3]);
    pf[kk][2] = tc::Element<E>::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    pf[kk][3] = tc::Element<E>::pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
  }
}

// The fp8 variant's online softmax: S (the products of e4m3 Q and K) times c = its two blocks'
// scales · τ · log2 e is the score in base-2 units, different for each tile, so m is kept in
// those units (not S's, as softmax_tile does). P̃ = 2^(x − m + 8), at most 2⁸ = 256: e4m3 holds
// up to 448, and its smallest values (subnormal below 2⁻⁶) sit 8 binades further from P̃'s
// largest than they would with P̃ ≤ 1 (FlashAttention-3's max offset). ℓ sums the same P̃, so the
// offset cancels in O / ℓ; LSE takes it out (fp8_lse_m).
constexpr float kFp8Offset = 8.f;
#ifndef FS_EMULATION
__device__ __forceinline__ float fast_div(float a, float b) { return __fdividef(a, b); }
__device__ __forceinline__ float fast_log2(float a) { return __log2f(a); }
#else
inline float fast_div(float a, float b) { return a / b; }
inline float fast_log2(float a) { return std::log2(a); }
#endif
// The lazy fp8 softmax (HopperConfig's kLazy), in three parts that each keep P̃ below e4m3's 448.
//  - V's scale moves into P̃. Without it, O is kept in the units of the latest tile's V block and
//    α carries sv_{t−1} / sv_t, which is never 1. With it, O is kept in the units of sv_h, the
//    largest V scale of the head, and P̃ of tile t is 2^(x − m + off + log2 r) with r = sv_t /
//    sv_h ≤ 1 (one lg2 a tile); ℓ adds that tile's sum times 1 / r, so it still sums P̃.
//  - The max is lazy: m moves only where the tile's max exceeds it by more than kSlack, else P̃
//    is taken against the old m (the softmax is the same whatever m is, as long as P̃ fits), and
//    α is exactly 1. Where no row of a warp moved, the warp skips O's rescale (as step 08's
//    kLazy does). FlashAttention-4's conditional rescaling, with e4m3's ceiling as its bound.
//  - The offset is off = min(8, 8.8 − kSlack): P̃ ≤ 2^(off + kSlack) ≤ 2^8.8 < 448.
struct Fp8Lazy {
  float lg_r = 0.f, inv_r = 1.f;  // log2 r and 1 / r of the tile's V scale against the head's
  float slack = 0.f, off = kFp8Offset;
};
template <typename Cfg>
__host__ __device__ constexpr float fp8_offset() {
  return Cfg::kLazy && Cfg::kSlack > 0.8f ? 8.8f - Cfg::kSlack : kFp8Offset;
}
// kSumParts: ℓ's sum of the tile in that many partial sums, so that its adds do not wait on each
// other.
template <int NT, int kSumParts, bool kLazy = false>
__device__ __forceinline__ void softmax_tile_fp8(float (&s)[NT][4], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                                 float c, const Fp8Lazy& lz = {}) {
  float mx[2];
  const float none[2] = {-INFINITY, -INFINITY};
  row_max(s, none, mx);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float m_new = fmaxf(m[h], mx[h] * c);  // c > 0: the max of the scaled scores
    bool moved = true;
    if constexpr (kLazy) {
      moved = m_new > m[h] + lz.slack;  // false for a row that has seen only −inf, and stays there
      m_new = moved ? m_new : m[h];
    }
    const float m_use = m_new == -INFINITY ? 0.f : m_new;
    alpha[h] = moved ? tc::exp2_fast(m[h] - m_use) : 1.f;
    m[h] = m_new;
    const float bias = kLazy ? lz.off - m_use + lz.lg_r : kFp8Offset - m_use;
    float part[kSumParts];
    part[0] = kLazy ? 0.f : l[h] * alpha[h];
#pragma unroll
    for (int i = 1; i < kSumParts; ++i) part[i] = 0.f;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 2 * h; e < 2 * h + 2; ++e) {
        const float x = fmaf(s[nt][e], c, bias);
        s[nt][e] = tc::exp2_fast(x);
        part[nt % kSumParts] += s[nt][e];
      }
#pragma unroll
    for (int i = 1; i < kSumParts; ++i) part[0] += part[i];
    l[h] = kLazy ? fmaf(part[0], lz.inv_r, l[h] * alpha[h]) : part[0];
  }
}
// tc_finish_rows's m for LSE = m · 1 + ln ℓ: (m − off) ln 2, from the base-2 max and P̃'s offset.
__device__ __forceinline__ float fp8_lse_m(float m, float off = kFp8Offset) { return (m - off) * 0.69314718f; }

// P̃ rounded to e4m3 as wgmma's 8-bit A operand (hopper.cuh): k-step kk covers keys
// [32kk, 32kk + 32), S's chunks 4kk .. 4kk + 3. Register 0 gets row g's keys 2t, 2t + 1 of
// chunks 4kk and 4kk + 1, register 1 row g + 8's, registers 2 and 3 the same of chunks 4kk + 2
// and 4kk + 3: the slots fp8_slot gave those keys in Vᵀ (fp8.cuh).
template <int NT>
__device__ __forceinline__ void pack_p_fp8(const float (&s)[NT][4], std::uint32_t (&pf)[NT / 4][4]) {
  auto pack = [](float a, float b, float c, float d) {
    const std::uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
    const std::uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(c, d), __NV_SATFINITE, __NV_E4M3);
    return lo | hi << 16;
  };
#pragma unroll
  for (int kk = 0; kk < NT / 4; ++kk) {
    const int c = 4 * kk;
    pf[kk][0] = pack(s[c][0], s[c][1], s[c + 1][0], s[c + 1][1]);
    pf[kk][1] = pack(s[c][2], s[c][3], s[c + 1][2], s[c + 1][3]);
    pf[kk][2] = pack(s[c + 2][0], s[c + 2][1], s[c + 3][0], s[c + 3][1]);
    pf[kk][3] = pack(s[c + 2][2], s[c + 2][3], s[c + 3][2], s[c + 3][3]);
  }
}

// One work tile: query rows [row0, row0 + rows) of head bh (batch b, head h; K/V head h_kv),
// and the key tiles it visits (causal: none past its last row's diagonal key).
struct Work {
  int row0, rows, bh, b, h, h_kv, n_tiles;
};
// Work tile w of the grid's list. Causal: the longest rows first (the last query tiles of every
// head, then the ones before), so that the short ones fill in at the end; otherwise head by head,
// so that the CTAs running together share their K and V in L2.
template <bool kCausal, int BM, int BN>
__device__ __forceinline__ Work work_tile(int w, int n_qtiles, const Shape& s) {
  const int heads = s.B * s.H;
  const int tile = kCausal ? n_qtiles - 1 - w / heads : w % n_qtiles;
  const int bh = kCausal ? w % heads : w / n_qtiles;
  const int row0 = tile * BM, rows = min(BM, s.N - row0);
  const int key_end = kCausal ? min(s.N, row0 + rows) : s.N;
  const int h = bh % s.H;
  return {row0, rows, bh, bh / s.H, h, h / (s.H / s.kv_heads()), (key_end + BN - 1) / BN};
}

template <typename Cfg, bool kCausal, bool kTrace>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    hopper_forward_kernel(const __grid_constant__ TmaMaps maps, const FwdParams p, trace::Slices slices) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(FS_EMULATION)  // and the CPU emulation (hopper_emu.hpp)
  using E = typename Cfg::E;
  using EO = typename Cfg::EO;
  constexpr int D = Cfg::D, BM = Cfg::kBlockM, BN = Cfg::kBlockN, S = Cfg::kStages;
  constexpr int NT = BN / 8, DT = D / 8, KD = D / Cfg::kStepK, KN = BN / Cfg::kStepK, CB = Cfg::kColBlocks;
  constexpr int BX = Cfg::kBoxCols;  // columns per box: 64, or 128 of e4m3
  constexpr std::int64_t kE = sizeof(E);
  static_assert(!Cfg::kLazy || (Cfg::kFp8 && Cfg::kSlack >= 0.f && Cfg::kSlack < 8.8f),
                "kLazy: the fp8 softmax's, with P̃ ≤ 2^(off + kSlack) ≤ 2^8.8 (fp8_offset)");
  // Traced (kTrace), each warpgroup records its own lane (launch_forward_kernel names them):
  // lane 0 the producer's thread 0 — its waits for free stages and its copies — and lanes 1 and 2
  // the consumers' first threads — their waits, products, softmax and stores.
  trace::CtaTracer<kTrace> tr(slices);
  extern __shared__ unsigned char smem_raw[];
  E* sQ = reinterpret_cast<E*>((reinterpret_cast<std::uintptr_t>(smem_raw) + 1023) & ~std::uintptr_t(1023));
  E* sK = sQ + Cfg::kQElems;       // kStages × (CB boxes of BN × 64)
  E* sV = sK + S * Cfg::kKVElems;  // likewise (fp8: kVBoxes boxes of d × 128 keys)
  EO* sO = reinterpret_cast<EO*>(sV + S * Cfg::kVElems);  // kTmaStore: O's tile, in 64-column boxes
  std::uint64_t* bars = reinterpret_cast<std::uint64_t*>(sO + Cfg::kOElems);
  std::uint64_t* full_q = bars;
  std::uint64_t* empty_q = bars + 1;
  std::uint64_t* full_k = bars + 2;           // [kStages]
  std::uint64_t* full_v = bars + 2 + S;       // [kStages]
  std::uint64_t* empty_k = bars + 2 + 2 * S;  // [kStages]
  std::uint64_t* empty_v = bars + 2 + 3 * S;  // [kStages]

  const int N = p.shape.N, H = p.shape.H;
  const int n_qtiles = (N + BM - 1) / BM, n_work = n_qtiles * p.shape.B * H;
  auto keys = [&](int j0) { return min(BN, N - j0); };
  auto kv_head = [&](const Work& w) { return std::int64_t(w.b) * p.shape.kv_heads() + w.h_kv; };

  if (threadIdx.x == 0) {
    mbar_init(full_q, 1);
    mbar_init(empty_q, Cfg::kConsumers * 4);  // one arrival per consumer warp
    for (int i = 0; i < S; ++i) {
      mbar_init(&full_k[i], 1);
      mbar_init(&full_v[i], 1);
      mbar_init(&empty_k[i], Cfg::kConsumers * 4);
      mbar_init(&empty_v[i], Cfg::kConsumers * 4);
    }
    fence_barrier_init();
  }
  __syncthreads();

  // The CTA's work tiles: w = blockIdx.x, + gridDim.x, ... (one each unless kPersistent). Producer
  // and consumers walk the same list; g counts the K/V tiles before the current work tile, so
  // that the ring's stages and phases run on across work tiles: tile t of it is stage (g + t) mod
  // S, phase (g + t) / S.
  //
  // The copies, issued by one thread: the producer's (or, without one, consumer 0's first).
  // Q of work tile wk (the k-th of the CTA): once the consumers are done with the previous work
  // tile's (its last S has landed).
  auto load_q = [&](const Work& wk, int k) {
    if (k > 0) {
      mbar_wait(empty_q, (k - 1) & 1);
      FS_TRACE_EVENT(tr, Kind::Wait, Tensor::None, wk.bh, wk.row0, wk.rows, 0, 0, 0);
    }
    mbar_arrive_expect_tx(full_q, Cfg::kQElems * kE);
#pragma unroll
    for (int c = 0; c < CB; ++c) tma_load_4d(sQ + c * BM * BX, &maps.q, full_q, BX * c, wk.row0, wk.h, wk.b);
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::Q, wk.bh, wk.row0, wk.rows, 0, D, wk.rows * D * kE);
  };
  // K_t (v false) or V_t of work tile wk, whose tiles start at ring position g: once the consumers
  // are done with what its stage held. fp8's V is Vᵀ: boxes of 128 keys × d rows.
  auto load_kv = [&](const Work& wk, int g, int t, bool v) {
    const CUtensorMap* map = v ? &maps.v : &maps.k;
    std::uint64_t *full = v ? full_v : full_k, *empty = v ? empty_v : empty_k;
    const int i = g + t, stage = i % S;
    if (i >= S) {
      mbar_wait(&empty[stage], ((i / S) & 1) ^ 1);
      FS_TRACE_EVENT(tr, Kind::Wait, Tensor::None, kv_head(wk), t * BN, keys(t * BN), 0, 0, 0);
    }
    E* dst = v ? sV + stage * Cfg::kVElems : sK + stage * Cfg::kKVElems;
    mbar_arrive_expect_tx(&full[stage], (v ? Cfg::kVElems : Cfg::kKVElems) * kE);
    if (Cfg::kFp8 && v) {
#pragma unroll
      for (int c = 0; c < Cfg::kVBoxes; ++c) tma_load_4d(dst + c * D * 128, map, &full[stage], t * BN + 128 * c, 0, wk.h_kv, wk.b);
    } else {
#pragma unroll
      for (int c = 0; c < CB; ++c) tma_load_4d(dst + c * BN * BX, map, &full[stage], BX * c, t * BN, wk.h_kv, wk.b);
    }
    const int j0 = t * BN;
    if (v) FS_TRACE_EVENT(tr, Kind::Load, Tensor::V, kv_head(wk), j0, keys(j0), 0, D, keys(j0) * D * kE);
    else FS_TRACE_EVENT(tr, Kind::Load, Tensor::K, kv_head(wk), j0, keys(j0), 0, D, keys(j0) * D * kE);
  };
  // Keys a causal work tile never reads, for the trace.
  auto note_skipped = [&](const Work& wk) {
    if constexpr (kTrace)
      if (wk.n_tiles * BN < N)
        FS_TRACE_EVENT(tr, Kind::Skip, Tensor::S, wk.bh, wk.row0, wk.rows, wk.n_tiles * BN, N - wk.n_tiles * BN, 0);
  };
  auto prefetch_descriptors = [&] {
    tma_prefetch_descriptor(&maps.q);
    tma_prefetch_descriptor(&maps.k);
    tma_prefetch_descriptor(&maps.v);
  };

  const int wg = threadIdx.x / 128;
  if (Cfg::kProducer && wg == 0) {
    // ---- the producer ----
    setmaxnreg_dec<Cfg::kProducerRegs>();
    if (threadIdx.x == 0) {
      prefetch_descriptors();
      int g = 0, k = 0;
      for (int w = blockIdx.x; w < n_work; w += gridDim.x, ++k) {
        const Work wk = work_tile<kCausal, BM, BN>(w, n_qtiles, p.shape);
        load_q(wk, k);
        // K_t, then V_{t−1}: K runs a tile ahead, as the consumers need it (S_t before
        // P̃_{t−1}V_{t−1}).
        for (int t = 0; t <= wk.n_tiles; ++t) {
          if (t < wk.n_tiles) load_kv(wk, g, t, false);
          if (t > 0) load_kv(wk, g, t - 1, true);
        }
        note_skipped(wk);
        g += wk.n_tiles;
      }
    }
  } else {
    // ---- the consumers ----
    if constexpr (Cfg::kProducer) setmaxnreg_inc<Cfg::kConsumerRegs>();
    const int cw = wg - (Cfg::kProducer ? 1 : 0);  // consumer warpgroup 0 or 1
    trace::CtaTracer<kTrace> ctr(slices, 1 + cw, threadIdx.x % 128 == 0);
    // Without a producer, this thread issues the copies: a work tile's Q and its first kStages
    // key tiles when the work tile begins, then tile t + kStages − 1 at the top of tile t.
    const bool copier = !Cfg::kProducer && threadIdx.x == 0;
    if (copier) prefetch_descriptors();
    const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32, t4 = lane % 4;
    const int wrow0 = 64 * cw + 16 * warp;  // the warp's first row in the tile
    const float scale_log2 = p.scale * kLog2e;

    // Descriptors (hopper.cuh, make_desc). Q and K: K-major, kStepK columns of d (32 bytes) per
    // step kk, box kk / 4. V: MN-major, 16 keys per step kk (2048 bytes), d's boxes BN·128 bytes
    // apart; fp8's Vᵀ: K-major like K, d its rows, 32 keys per step.
    // Each is made once, at the tiles' first element, and moved by a byte offset (desc_add) for
    // each product: kk and half are constants of unrolled loops, the stage's part one product a tile.
    const std::uint64_t q0 = make_desc(sQ + cw * 64 * BX, 16, 1024), k0 = make_desc(sK, 16, 1024),
                        v0 = Cfg::kFp8 ? make_desc(sV, 16, 1024) : make_desc(sV, BN * 128, 1024);
    auto q_desc = [&](int kk) { return desc_add(q0, kE * ((kk / 4) * BM * BX + (kk % 4) * Cfg::kStepK)); };
    auto k_desc = [&](int stage, int kk) {
      return desc_add(k0, kE * (stage * Cfg::kKVElems + (kk / 4) * BN * BX + (kk % 4) * Cfg::kStepK));
    };
    auto v_desc = [&](int stage, int kk, int half) {
      if constexpr (Cfg::kFp8)
        return desc_add(v0, kE * (stage * Cfg::kVElems + (kk / 4) * D * BX + half * Cfg::kONt * BX + (kk % 4) * Cfg::kStepK));
      else
        return desc_add(v0, kE * (stage * Cfg::kKVElems + half * 2 * BN * 64 + kk * 16 * 64));
    };
    float o[1][DT][4];  // [1]: one 16-row tile per warp, in tc_finish_rows' shape
    float m[1][2], l[1][2];
    // fp8: the work tile's Q scale, and the scale of the V block O is kept in units of (O holds
    // O_true / sv: each tile's α also carries sv_{t−1} / sv_t, and the end multiplies by sv; with
    // kLazy, sv is the head's largest V scale, and α carries none).
    float sq = 1.f, sv = 1.f;
    auto block_scale = [&](const float* scales, int blocks, std::int64_t head, int block) {
      return scales[head * blocks + block];
    };

    // S = Q K_tᵀ, issued (not waited for).
    auto issue_s = [&](float (&s)[NT][4], int stage) {
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < KD; ++kk) wgmma_ss<E, BN>(s, q_desc(kk), k_desc(stage, kk), kk > 0);
      wgmma_commit();
    };
    // O += P̃ V_t, issued.
    auto issue_pv = [&](std::uint32_t (&pf)[KN][4], int stage) {
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < KN; ++kk)
#pragma unroll
        for (int half = 0; half < D / Cfg::kONt; ++half)
          wgmma_rs<E, Cfg::kONt>(*reinterpret_cast<float(*)[Cfg::kONt / 8][4]>(&o[0][half * Cfg::kONt / 8]), pf[kk],
                                 v_desc(stage, kk, half), 1);
      wgmma_commit();
    };
    auto release = [&](std::uint64_t* empty, int stage) {
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[stage]);
    };
    // Ping-pong: warpgroup cw issues when the other one has issued (barrier 1 + cw), and then lets
    // it go (barrier 2 − cw).
    auto my_turn = [&] { if constexpr (Cfg::kPingPong) named_sync(1 + cw, 256); };
    auto your_turn = [&] { if constexpr (Cfg::kPingPong) named_arrive(2 - cw, 256); };

    int g = 0, k = 0;
    for (int w = blockIdx.x; w < n_work; w += gridDim.x, ++k) {
      const Work wk = work_tile<kCausal, BM, BN>(w, n_qtiles, p.shape);
      const int n_tiles = wk.n_tiles;
#pragma unroll
      for (int dt = 0; dt < DT; ++dt)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[0][dt][e] = 0.f;
      m[0][0] = m[0][1] = -INFINITY;
      l[0][0] = l[0][1] = 0.f;
      if constexpr (Cfg::kFp8) sq = block_scale(maps.scale_q, maps.blocks_q, wk.bh, wk.row0 / kFp8BlockQ);
      if constexpr (Cfg::kLazy) {  // sv_h: the largest of the head's V scales, a max over the warp
        const float* vs = maps.scale_v + kv_head(wk) * maps.blocks_kv;
        float mv = 0.f;
        for (int j = lane; j < maps.blocks_kv; j += 32) mv = fmaxf(mv, vs[j]);
#pragma unroll
        for (int x = 16; x >= 1; x /= 2) mv = fmaxf(mv, __shfl_xor_sync(0xffffffffu, mv, x));
        sv = mv;
      }
      // fp8: tile t's K and V scales, read before its wait for K so that the load's latency
      // passes during the wait and S's product, not at the softmax that needs them.
      struct TileScales {
        float k = 1.f, v = 1.f;
      };
      auto tile_scales = [&](int t) {
        TileScales ts;
        if constexpr (Cfg::kFp8)
          ts = {block_scale(maps.scale_k, maps.blocks_kv, kv_head(wk), t), block_scale(maps.scale_v, maps.blocks_kv, kv_head(wk), t)};
        return ts;
      };
      // Keys past N and (causal) after the row's diagonal get −inf, then the softmax of tile t.
      auto softmax = [&](float (&s)[NT][4], int t, const TileScales& ts, float (&alpha)[2]) {
        tc::tc_mask_tile<kCausal, BN>(*reinterpret_cast<float(*)[1][NT][4]>(&s), wk.row0, wrow0, t * BN, N, 0);
        if constexpr (Cfg::kLazy) {
          // r ≤ 1; a V block of zeros (scale 0) adds nothing to O, and its P̃ is taken as it is.
          const bool zero = !(ts.v > 0.f);
          const float r = zero ? 1.f : fast_div(ts.v, sv), inv_r = zero ? 1.f : fast_div(sv, ts.v);
          const Fp8Lazy lz{fast_log2(r), inv_r, Cfg::kSlack, fp8_offset<Cfg>()};
          softmax_tile_fp8<NT, Cfg::kSumParts, true>(s, m[0], l[0], alpha, sq * ts.k * scale_log2, lz);
        } else if constexpr (Cfg::kFp8) {
          const float sv_t = ts.v > 0.f ? ts.v : sv;  // a V block of zeros (scale 0): O keeps its units
          softmax_tile_fp8<NT, Cfg::kSumParts>(s, m[0], l[0], alpha, sq * ts.k * scale_log2);
          const float ratio = t > 0 ? fast_div(sv, sv_t) : 1.f;
          alpha[0] *= ratio;
          alpha[1] *= ratio;
          sv = sv_t;
        } else {
          (void)ts;
          softmax_tile(s, m[0], l[0], alpha, scale_log2);
        }
      };
      auto pack = [&](const float (&s)[NT][4], std::uint32_t (&pf)[KN][4]) {
        if constexpr (Cfg::kFp8) pack_p_fp8(s, pf);
        else pack_p<E>(s, pf);
      };
      // This warpgroup's events: its 64 rows of the work tile (none in a short last tile).
      const int c_row0 = wk.row0 + 64 * cw, c_rows = max(0, min(64, N - c_row0));
      auto note = [&](trace::Kind kind, trace::Tensor tensor, int col0, int cols, std::int64_t bytes) {
        if (c_rows > 0) ctr.event(kind, tensor, wk.bh, c_row0, c_rows, col0, cols, bytes);
      };
      auto note_wait = [&] { note(Kind::Wait, Tensor::None, 0, 0, 0); };
      auto note_keys = [&](trace::Kind kind, trace::Tensor tensor, int t) { note(kind, tensor, t * BN, keys(t * BN), 0); };
      auto note_o = [&](trace::Kind kind) { note(kind, Tensor::O, 0, D, 0); };
      auto stage_of = [&](int t) { return (g + t) % S; };
      auto phase_of = [&](int t) { return ((g + t) / S) & 1; };

      if (copier) {
        load_q(wk, k);
        for (int t = 0; t < min(S, n_tiles); ++t) {
          load_kv(wk, g, t, false);
          load_kv(wk, g, t, true);
        }
        note_skipped(wk);
      }
      if constexpr (!Cfg::kProducer) __syncwarp();  // warp 0 together again before its wgmma
      mbar_wait(full_q, k & 1);
      if constexpr (!Cfg::kOverlap) {
        for (int t = 0; t < n_tiles; ++t) {
          const int stage = stage_of(t), parity = phase_of(t);
          if (copier && t > 0 && t + S - 1 < n_tiles) {  // into the stage tile t − 1 held
            load_kv(wk, g, t + S - 1, false);
            load_kv(wk, g, t + S - 1, true);
          }
          if constexpr (!Cfg::kProducer) __syncwarp();
          float s[NT][4];
          const TileScales ts = tile_scales(t);
          mbar_wait(&full_k[stage], parity);
          note_wait();
          issue_s(s, stage);
          wgmma_wait<0>();
          fence_operands(s);
          release(empty_k, stage);
          note_keys(Kind::ComputeS, Tensor::S, t);
          if (t == n_tiles - 1) release(empty_q, 0);  // the work tile's last S: Q can be refilled
          float alpha[2];
          softmax(s, t, ts, alpha);
          note_keys(Kind::Softmax, Tensor::P, t);
          rescale_o_if<Cfg::kLazy>(o[0], alpha);
          std::uint32_t pf[KN][4];
          pack(s, pf);
          note_o(Kind::Rescale);
          mbar_wait(&full_v[stage], parity);
          note_wait();
          issue_pv(pf, stage);
          wgmma_wait<0>();
          fence_operands(o[0]);
          release(empty_v, stage);
          note_o(Kind::AccumulateO);
        }
      } else {
        // Turns (kPingPong): [S_0], then [S_t, P̃_{t−1}V_{t−1}] for t = 1 .. n − 1, then
        // [P̃_{n−1}V_{n−1}]: each warpgroup's n + 1 turns alternate with the other's, warpgroup 0
        // first (warpgroup 1 gives it the first turn, and owes no turn after its last).
        if constexpr (Cfg::kPingPong)
          if (cw == 1) named_arrive(1, 256);
        std::uint32_t pf[KN][4];
        {  // tile 0: S and its softmax alone (O is 0: α does not matter)
          float s[NT][4], alpha[2];
          const TileScales ts = tile_scales(0);
          mbar_wait(&full_k[stage_of(0)], phase_of(0));
          my_turn();
          note_wait();
          issue_s(s, stage_of(0));
          your_turn();
          wgmma_wait<0>();
          fence_operands(s);
          release(empty_k, stage_of(0));
          note_keys(Kind::ComputeS, Tensor::S, 0);
          softmax(s, 0, ts, alpha);
          pack(s, pf);
          note_keys(Kind::Softmax, Tensor::P, 0);
        }
        for (int t = 1; t < n_tiles; ++t) {
          const int stage = stage_of(t), prev = stage_of(t - 1);
          float s[NT][4], alpha[2];
          const TileScales ts = tile_scales(t);
          mbar_wait(&full_k[stage], phase_of(t));
          mbar_wait(&full_v[prev], phase_of(t - 1));
          my_turn();
          note_wait();
          issue_s(s, stage);   // S_t = Q K_tᵀ
          issue_pv(pf, prev);  // O += P̃_{t−1} V_{t−1}
          your_turn();
          wgmma_wait<1>();  // S_t has landed (groups complete in order); P̃V is still running
          fence_operands(s);
          release(empty_k, stage);
          note_keys(Kind::ComputeS, Tensor::S, t);
          softmax(s, t, ts, alpha);
          note_keys(Kind::Softmax, Tensor::P, t);
          wgmma_wait<0>();
          fence_operands(o[0]);
          release(empty_v, prev);
          note_o(Kind::AccumulateO);  // P̃_{t−1}V_{t−1}, which ran beside the softmax
          rescale_o_if<Cfg::kLazy>(o[0], alpha);
          pack(s, pf);  // only now: pf fed P̃_{t−1}V_{t−1} (see Pitfalls on rounding P̃_t earlier)
          note_o(Kind::Rescale);
        }
        release(empty_q, 0);  // every S of the work tile has landed: Q can be refilled
        {                     // the last tile's P̃V
          const int last = stage_of(n_tiles - 1);
          mbar_wait(&full_v[last], phase_of(n_tiles - 1));
          my_turn();
          note_wait();
          issue_pv(pf, last);
          if (cw == 0) your_turn();
          wgmma_wait<0>();
          fence_operands(o[0]);
          release(empty_v, last);
          note_o(Kind::AccumulateO);
        }
      }

      // O = O / ℓ, rounded to EO, and LSE (step 08's tc_finish_rows). fp8: O back from V's
      // units, and m from base 2 (fp8_lse_m).
      const std::int64_t ld_o = p.o_strides.row;
      EO* gO = as<EO>(p.o) + p.o_strides.of_head(wk.bh, H);
      float* gLse = p.lse + std::int64_t(wk.bh) * N;
      float lse_scale = p.scale;
      if constexpr (Cfg::kFp8) {
        const float unit[2] = {sv, sv};
        rescale_o(o[0], unit);
        m[0][0] = fp8_lse_m(m[0][0], fp8_offset<Cfg>());
        m[0][1] = fp8_lse_m(m[0][1], fp8_offset<Cfg>());
        lse_scale = 1.f;
      }
      if constexpr (Cfg::kTmaStore) {
        // Into shared memory in TMA's swizzled layout (column c of row r of a 64-column box at
        // byte r·128 + 16((c / 8) xor (r mod 8)) + 2(c mod 8)), then one thread stores the
        // warpgroup's 64 rows. Rows past N are written nowhere: TMA clips the box.
        const bool issuer = threadIdx.x % 128 == 0;
        if (issuer) bulk_wait_read<0>();  // the previous work tile's store has read sO
        named_sync(3 + cw, 128);
        tc::tc_finish_rows(o, m, l, wk.row0 + wrow0, N, lse_scale, gLse, [&](int row, int dt, float x0, float x1) {
          const int r = row - wk.row0, c = 8 * dt + 2 * t4, box = c / 64, cc = c % 64;
          unsigned char* at = reinterpret_cast<unsigned char*>(sO + box * BM * 64) + r * 128 +
                              16 * ((cc / 8) ^ (r % 8)) + 2 * (cc % 8);
          *reinterpret_cast<std::uint32_t*>(at) = tc::Element<EO>::pack(x0, x1);
        });
        fence_async_shared();  // the threads' writes, visible to the copy engine
        named_sync(3 + cw, 128);
        if (issuer) {
#pragma unroll
          for (int c = 0; c < D / 64; ++c)  // O's boxes: 64 columns of EO
            tma_store_4d(&maps.o, sO + c * BM * 64 + cw * 64 * 64, 64 * c, wk.row0 + 64 * cw, wk.h, wk.b);
          bulk_commit();
        }
      } else {
        tc::tc_finish_rows(o, m, l, wk.row0 + wrow0, N, lse_scale, gLse, [&](int row, int dt, float x0, float x1) {
          *reinterpret_cast<std::uint32_t*>(gO + row * ld_o + 8 * dt + 2 * t4) = tc::Element<EO>::pack(x0, x1);
        });
      }
      note(Kind::Store, Tensor::O, 0, D, std::int64_t(c_rows) * D * std::int64_t(sizeof(EO)));
      note(Kind::Store, Tensor::LSE, 0, 1, std::int64_t(c_rows) * std::int64_t(sizeof(float)));
      g += n_tiles;
    }
    if constexpr (Cfg::kTmaStore)
      if (threadIdx.x % 128 == 0) bulk_wait<0>();  // the last stores have landed before the CTA ends
  }
#else
  __trap();  // compiled for another architecture than sm_90a: step 09 refuses other GPUs first
#endif
}

// Q, K or V of p as TMA's 4-D tensor: (d, rows, heads, batches), boxes of 64 columns × box_rows
// rows, swizzled by 128 bytes (hopper.cu).
CUtensorMap make_tensor_map(const void* base, DType dtype, const Strides& strides, int d, int rows, int heads,
                            int batches, int box_rows);
// A dense tensor of bytes (the fp8 variant's): (cols, rows, heads, batches), boxes of 128
// columns × box_rows rows, swizzled by 128 bytes (hopper.cu).
CUtensorMap make_tensor_map_fp8(const void* base, int cols, int rows, int heads, int batches, int box_rows);

int sm_count();  // of the current device (hopper.cu)

// Grid: the work tiles (query tiles × B·H), or one CTA per SM.
template <typename Cfg>
void launch_forward_kernel(const FwdParams& p, const TmaMaps& maps) {
  const Shape& s = p.shape;
  const std::int64_t work = std::int64_t((s.N + Cfg::kBlockM - 1) / Cfg::kBlockM) * s.heads();
  if (work == 0) return;
  // One CTA per work tile, or (kPersistent) one per SM, each taking every gridDim.x-th work tile.
  // Causal work tiles differ in length, and a fixed share per SM leaves some SMs idle at the end:
  // the hardware's scheduler, handing out CTAs as SMs free up, balances them better.
  const bool persistent = Cfg::kPersistent && !p.causal;
  const dim3 grid(static_cast<unsigned>(persistent ? std::min<std::int64_t>(work, sm_count()) : work));
  if (p.trace) {
    p.trace->set_tiles(Cfg::kBlockM, Cfg::kBlockN);
    if constexpr (Cfg::kProducer) p.trace->set_lanes({"producer", "consumer 0", "consumer 1"});
    else p.trace->set_lanes({"copies (consumer 0's thread 0)", "consumer 0", "consumer 1"});
  }
  static_assert(Cfg::kConsumers == 2, "the lanes' names: the copies and two consumers");
  if (p.causal)
    trace::launch(p.trace, "hopper_forward_kernel", [](auto tr) { return hopper_forward_kernel<Cfg, true, tr>; }, grid,
                  Cfg::kThreads, Cfg::kSmemBytes, p.stream, maps, p);
  else
    trace::launch(p.trace, "hopper_forward_kernel", [](auto tr) { return hopper_forward_kernel<Cfg, false, tr>; }, grid,
                  Cfg::kThreads, Cfg::kSmemBytes, p.stream, maps, p);
}

template <typename Cfg>
void launch_hopper_forward(const FwdParams& p) {
  const Shape& s = p.shape;
  const int Hkv = s.kv_heads();
  const TmaMaps maps{make_tensor_map(p.q, p.dtype, p.q_strides, s.d, s.N, s.H, s.B, Cfg::kBlockM),
                     make_tensor_map(p.k, p.dtype, p.k_strides, s.d, s.N, Hkv, s.B, Cfg::kBlockN),
                     make_tensor_map(p.v, p.dtype, p.v_strides, s.d, s.N, Hkv, s.B, Cfg::kBlockN),
                     make_tensor_map(p.o, p.dtype, p.o_strides, s.d, s.N, s.H, s.B, 64)};
  launch_forward_kernel<Cfg>(p, maps);
}

// The fp8 variant: the quantizer (fp8.cuh) writes Q, K, Vᵀ and their scales into the workspace,
// then the forward reads them; O and LSE as the 16-bit forward writes them. p.part: both, or the
// quantizer alone, or the kernel alone on what the quantizer last wrote.
template <typename Cfg>
void launch_hopper_forward_fp8(const FwdParams& p) {
  static_assert(Cfg::kFp8);
  using EI = typename Cfg::EO;  // the problem's elements, in and out
  const Shape& s = p.shape;
  if (s.N == 0 || s.heads() == 0) return;
  const Fp8Layout l = fp8_layout(s);
  unsigned char* ws = static_cast<unsigned char*>(p.workspace);
  const int heads = s.B * s.H;
  if (p.part != FwdPart::kKernel)
    trace::launch_untraced("quantize_fp8_kernel", quantize_fp8_kernel<EI>, fp8_quantize_grid(l, heads),
                           dim3(kQuantizeThreads), kQuantizeSmem, p.stream, p, ws, l);
  if (p.part == FwdPart::kPrepare) return;
  TmaMaps maps{make_tensor_map_fp8(ws + l.q, s.d, s.N, s.H, s.B, Cfg::kBlockM),
               make_tensor_map_fp8(ws + l.k, s.d, s.N, s.H, s.B, Cfg::kBlockN),
               make_tensor_map_fp8(ws + l.vt, int(l.n_pad), s.d, s.H, s.B, s.d),
               make_tensor_map(p.o, p.dtype, p.o_strides, s.d, s.N, s.H, s.B, 64)};
  set_fp8_scales(maps, l, ws, heads);
  launch_forward_kernel<Cfg>(p, maps);
}

}  // namespace fs::hopper
