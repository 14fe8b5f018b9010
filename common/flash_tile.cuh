// The tile machinery steps 03 onward share, so that each step's kernel shows only its
// algorithm.
//
// Work split (FlashAttention-2's: by query rows, no shared-memory reduction). A CTA owns kBR
// query rows. Threads form groups of kSplit adjacent lanes; a group owns R consecutive rows
// and each thread of it holds DC = d/kSplit columns of those rows' q and o in registers. K
// and V stream through shared memory in tiles of BC keys; all threads read the same K/V
// element at the same time, so shared-memory reads are broadcasts (no bank conflicts).
//
// Why R rows per thread: a broadcast load feeds one FMA per row the thread owns. With one row
// the kernel waits on shared memory (one 4-byte broadcast per FMA, a quarter of the FMA
// rate); with R rows each load feeds R FMAs.
//
//   q  (R, DC)  registers, scaled by τ·log2(e) so that exp(τ s) = exp2(s')
//   sK (BC, d)  shared memory, one tile of keys; sV likewise
//   s  (R, BC)  registers: scores of the thread's rows against the tile (log2 units)
//   o  (R, DC)  registers: output accumulators
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <type_traits>

#include "common/cuda_utils.cuh"
#include "common/problem.hpp"

namespace fs {

template <int D, int BC, int R = 1, int DC = (D > 64 ? 64 : D), int Threads = 128>
struct RowTile {
  static constexpr int kThreads = Threads;
  static constexpr int kSplit = D / DC;                 // threads sharing a group of rows
  static constexpr int kRows = R;                       // rows per thread group
  static constexpr int kDC = DC;                        // q, o columns held by one thread
  static constexpr int kBR = kThreads / kSplit * R;     // query rows per CTA
  static constexpr int kBC = BC;                        // keys per tile
  static constexpr int kTileFloats = BC * D;            // one K or V tile in shared memory
  static_assert(D % DC == 0 && DC % 4 == 0, "rows move in 16-byte pieces");
  static_assert((kSplit & (kSplit - 1)) == 0 && kSplit <= 8, "the row's threads are 1-8 adjacent lanes");
  static_assert(kThreads % 32 == 0, "whole warps: the row's threads add their sums with full-warp shuffles");

  // The first of this thread's R query rows, and which DC columns of them it holds.
  static __device__ int first_row(int row0) { return row0 + static_cast<int>(threadIdx.x) / kSplit * R; }
  static __device__ int part() { return static_cast<int>(threadIdx.x) % kSplit; }
};

// The tile steps 03 and 04 use, measured on an H200 at N = 4096 (docs/benchmarks, FA2 order,
// fp32 TFLOP/s, d = 64 / d = 128):
//   1 row  × d (≤ 64) columns per thread    18.9 / 13.7   shared-memory broadcasts bind
//   2 rows × 32 columns, Bc = 16            27.8 /  7.9
//   4 rows × 16 columns, Bc = 8             24.8 / 14.3   L1/shared at 87% of its peak (ncu)
// so: 2 × 32 for d ≤ 64, 4 × 16 for d = 128.
template <int D>
using DefaultRowTile = std::conditional_t<(D <= 64), RowTile<D, 16, 2, (D < 32 ? D : 32)>, RowTile<D, 8, 4, 16>>;

// The head dimensions the tiled kernels are compiled for, and the call that picks one:
//   dispatch_head_dim(d, [&](auto D) { launch<D>(p); })   // D is std::integral_constant<int, d>
inline bool is_compiled_head_dim(int d) { return d == 16 || d == 32 || d == 64 || d == 128; }

// Why the tiled kernels (steps 03 on) cannot run shape s, or empty: d must be compiled, and
// B·H goes in grid y.
inline std::string tiled_unsupported(const Shape& s) {
  if (!is_compiled_head_dim(s.d))
    return "d must be 16, 32, 64 or 128 (the kernels are compiled for these); got " + std::to_string(s.d);
  if (s.heads() > 65535) return "B·H must be at most 65535 (grid y)";
  return {};
}
inline std::string tiled_unsupported(const Shape& s, const PassSettings&) { return tiled_unsupported(s); }
template <typename Fn>
auto dispatch_head_dim(int d, Fn&& fn) {
  switch (d) {
    case 16: return fn(std::integral_constant<int, 16>{});
    case 32: return fn(std::integral_constant<int, 32>{});
    case 64: return fn(std::integral_constant<int, 64>{});
    default: return fn(std::integral_constant<int, 128>{});  // callers check is_compiled_head_dim first
  }
}

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// q[r][c] = τ·log2(e)·Q[row + r][part·DC + c]; zeros past the last row (their results are
// computed and discarded). Rows are ld floats apart (a multiple of 4: rows move as float4).
template <int D, int R, int DC>
__device__ __forceinline__ void load_q_rows(const float* gQ, int row, int n_rows, int part,
                                            float scale_log2, float (&q)[R][DC], long long ld = D) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float4* src = reinterpret_cast<const float4*>(gQ + static_cast<long long>(row + r) * ld + part * DC);
#pragma unroll
    for (int c = 0; c < DC; c += 4) {
      const float4 x = row + r < n_rows ? src[c / 4] : make_float4(0.f, 0.f, 0.f, 0.f);
      q[r][c] = x.x * scale_log2;
      q[r][c + 1] = x.y * scale_log2;
      q[r][c + 2] = x.z * scale_log2;
      q[r][c + 3] = x.w * scale_log2;
    }
  }
}

// s[r][j] = q_r · k_j for the BC keys of the tile in sK (BC, D). Each thread sums its DC
// columns, then the kSplit threads of the row group add their partial sums (xor shuffles).
template <int D, int BC, int R, int DC, int kSplit>
__device__ __forceinline__ void row_scores(const float (&q)[R][DC], const float* sK, int part,
                                           float (&s)[R][BC]) {
#pragma unroll
  for (int j = 0; j < BC; ++j) {
    const float4* kj = reinterpret_cast<const float4*>(sK + j * D + part * DC);
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = 0.f;
#pragma unroll
    for (int c = 0; c < DC; c += 4) {
      const float4 k4 = kj[c / 4];  // the same address in every thread: a broadcast
#pragma unroll
      for (int r = 0; r < R; ++r) {
        acc[r] = fmaf(q[r][c], k4.x, acc[r]);
        acc[r] = fmaf(q[r][c + 1], k4.y, acc[r]);
        acc[r] = fmaf(q[r][c + 2], k4.z, acc[r]);
        acc[r] = fmaf(q[r][c + 3], k4.w, acc[r]);
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int o = 1; o < kSplit; o *= 2) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
      s[r][j] = acc[r];
    }
  }
}

// Keys past the end of the sequence, and (causal) keys after the query, get -inf: exp2 of
// them is 0. Call only for tiles that need it (the tail tile, the tiles on the diagonal).
template <int R, int BC>
__device__ __forceinline__ void mask_scores(float (&s)[R][BC], int j0, int n_keys, int row, bool causal) {
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int j = 0; j < BC; ++j)
      if (j0 + j >= n_keys || (causal && j0 + j > row + r)) s[r][j] = -INFINITY;
}

template <int BC>
__device__ __forceinline__ float row_max(const float (&s)[BC]) {
  float m = s[0];
#pragma unroll
  for (int j = 1; j < BC; ++j) m = fmaxf(m, s[j]);
  return m;
}

// o[r] += Σ_j p[r][j] · v_j over the tile in sV (BC, D).
template <int D, int BC, int R, int DC>
__device__ __forceinline__ void accumulate_pv(const float (&p)[R][BC], const float* sV, int part,
                                              float (&o)[R][DC]) {
#pragma unroll
  for (int j = 0; j < BC; ++j) {
    const float4* vj = reinterpret_cast<const float4*>(sV + j * D + part * DC);
#pragma unroll
    for (int c = 0; c < DC; c += 4) {
      const float4 v4 = vj[c / 4];  // broadcast
#pragma unroll
      for (int r = 0; r < R; ++r) {
        o[r][c] = fmaf(p[r][j], v4.x, o[r][c]);
        o[r][c + 1] = fmaf(p[r][j], v4.y, o[r][c + 1]);
        o[r][c + 2] = fmaf(p[r][j], v4.z, o[r][c + 2]);
        o[r][c + 3] = fmaf(p[r][j], v4.w, o[r][c + 3]);
      }
    }
  }
}

// O[row] = o / ℓ and LSE[row] = ln 2 · (m + log2 ℓ), m in log2 units. A row that saw no key
// (ℓ = 0: every key masked) gets O = 0 and LSE = -inf, never 0/0. O's rows are ld floats apart.
template <int D, int DC>
__device__ __forceinline__ void store_row(float* gO, float* gLse, int row, int n_rows, int part,
                                          const float (&o)[DC], float m, float l, long long ld = D) {
  if (row >= n_rows) return;
  const float inv_l = l > 0.f ? 1.f / l : 0.f;
  float4* dst = reinterpret_cast<float4*>(gO + static_cast<long long>(row) * ld + part * DC);
#pragma unroll
  for (int c = 0; c < DC; c += 4)
    dst[c / 4] = make_float4(o[c] * inv_l, o[c + 1] * inv_l, o[c + 2] * inv_l, o[c + 3] * inv_l);
  if (part == 0) gLse[row] = l > 0.f ? kLn2 * (m + log2f(l)) : -INFINITY;
}

}  // namespace fs
