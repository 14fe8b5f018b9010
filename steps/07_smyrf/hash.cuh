// Step 07's clustering on the GPU (common/smyrf.hpp says what it computes, and holds the host
// version the tests compare against): the XBOX+ transform and the E2LSH projections of every
// round, then one segmented sort per (query or key, head, round).
//
//   smyrf_norms_kernel  M² = max_i ‖x_i‖² of every head's queries and keys, in double: one
//                       atomicMax per CTA on the double's bits (a non-negative double orders as
//                       its bits do as an unsigned integer)
//   smyrf_hash_kernel   per row: ext = √(M_Q² + M_K² − ‖x‖²), and for each round ρ the hash
//                       h_ρ = ⟨α_ρ, [x, ext, 0]⟩ + β_ρ (keys; queries [x, 0, ext]) in double,
//                       written as a float sort key with the row's index as its value
//   then CUB's DeviceSegmentedRadixSort orders each (which, head, round) segment of N keys: the
//   values come out as the round's order, slot → index (stable: ties by index, as the host's)
//
// The hashes are computed in double, as the host computes them, so the float keys the sort sees
// are the host's hashes rounded once; the check (smyrf_check_orders) allows exactly that.
// α and β travel as a kernel parameter: every thread of a warp reads the same α_ρ[c] at the same
// time, which the constant cache broadcasts.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "common/cuda_utils.cuh"
#include "common/recorder/device.cuh"
#include "common/smyrf.hpp"

namespace fs {

template <int D>
struct SmyrfProjParams {
  float alpha[kSmyrfMaxHashes][D + 2];  // α_ρ over [x, ext_key, ext_query]
  float beta[kSmyrfMaxHashes];
};

constexpr int kNormThreads = 256;  // 8 warps, a row per warp at a time
constexpr int kNormRows = 64;      // rows per CTA
constexpr std::size_t kNormSmemBytes = kNormThreads / 32 * sizeof(double);  // a max per warp
// Rows per CTA of the hash kernel, one per thread, in shared memory as rows of D + 1 floats.
template <int D>
constexpr int kHashRows = D <= 64 ? 128 : 64;
template <int D>
constexpr std::size_t kHashSmemBytes = std::size_t(kHashRows<D>) * (D + 1) * sizeof(float);

// Grid (⌈N / kNormRows⌉, 2·B·H): y < B·H the queries of head y, else the keys of head y − B·H.
template <int D, bool kTrace>
__global__ void __launch_bounds__(kNormThreads)
    smyrf_norms_kernel(const float* __restrict__ q, const float* __restrict__ k, int N, int BH,
                       unsigned long long* __restrict__ max_norm2, trace::Slices slices) {
  trace::CtaTracer<kTrace> tr(slices);
  double* warp_max = dynamic_smem<double>();  // (kNormThreads / 32): kNormSmemBytes
  const int which = blockIdx.y >= unsigned(BH);
  const std::int64_t bh = which ? blockIdx.y - BH : blockIdx.y;
  const float* x = (which ? k : q) + bh * N * D;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  double m = 0;
  const int row0 = blockIdx.x * kNormRows, row1 = min(N, row0 + kNormRows);
  for (int i = row0 + warp; i < row1; i += kNormThreads / 32) {
    double n2 = 0;
    for (int c = lane; c < D; c += 32) n2 = fma(double(x[std::int64_t(i) * D + c]), double(x[std::int64_t(i) * D + c]), n2);
    for (int o = 16; o > 0; o /= 2) n2 += __shfl_xor_sync(0xffffffffu, n2, o);
    m = fmax(m, n2);
  }
  if (lane == 0) warp_max[warp] = m;
  __syncthreads();  // every warp's max is in shared memory
  if (which) FS_TRACE_EVENT(tr, Kind::Load, Tensor::K, bh, row0, row1 - row0, 0, D, (row1 - row0) * D * kF);
  else FS_TRACE_EVENT(tr, Kind::Load, Tensor::Q, bh, row0, row1 - row0, 0, D, (row1 - row0) * D * kF);
  if (threadIdx.x == 0) {
    for (int w = 1; w < kNormThreads / 32; ++w) m = fmax(m, warp_max[w]);
    atomicMax(&max_norm2[blockIdx.y], static_cast<unsigned long long>(__double_as_longlong(m)));
  }
}

// Grid (⌈N / kHashRows<D>⌉, 2·B·H), as the norms kernel. Segment (which·B·H + bh)·hashes + ρ of
// keys and orders holds the N hashes (float) and indices of round ρ.
template <int D, bool kTrace>
__global__ void __launch_bounds__(kHashRows<D>)
    smyrf_hash_kernel(const float* __restrict__ q, const float* __restrict__ k, int N, int BH, int hashes,
                      const unsigned long long* __restrict__ max_norm2, const SmyrfProjParams<D> proj,
                      float* __restrict__ keys, std::int32_t* __restrict__ orders, trace::Slices slices) {
  constexpr int kRows = kHashRows<D>;
  trace::CtaTracer<kTrace> tr(slices);
  // (kRows, D + 1): kHashSmemBytes. The +1: thread t reads row t, column c from bank
  // (t·(D + 1) + c) mod 32, a different bank for each thread of a warp.
  float* sx = dynamic_smem<float>();
  const int which = blockIdx.y >= unsigned(BH);
  const std::int64_t bh = which ? blockIdx.y - BH : blockIdx.y;
  const float* x = (which ? k : q) + bh * N * D;
  const int row0 = blockIdx.x * kRows, rows = min(kRows, N - row0);
  for (int e = threadIdx.x; e < rows * D; e += kRows)  // coalesced: consecutive threads, consecutive floats
    sx[e / D * (D + 1) + e % D] = x[std::int64_t(row0) * D + e];
  __syncthreads();  // the CTA's rows are in shared memory
  if (which) FS_TRACE_EVENT(tr, Kind::Load, Tensor::K, bh, row0, rows, 0, D, rows * D * kF);
  else FS_TRACE_EVENT(tr, Kind::Load, Tensor::Q, bh, row0, rows, 0, D, rows * D * kF);
  if (int(threadIdx.x) >= rows) return;
  const float* xi = sx + threadIdx.x * (D + 1);
  double n2 = 0;
  for (int c = 0; c < D; ++c) n2 = fma(double(xi[c]), double(xi[c]), n2);
  // As the host: M = √(max ‖x‖²), then M² (common/smyrf.cpp, xbox_plus).
  const double mq = sqrt(__longlong_as_double(static_cast<long long>(max_norm2[bh])));
  const double mk = sqrt(__longlong_as_double(static_cast<long long>(max_norm2[BH + bh])));
  const double ext = sqrt(fmax(0.0, mq * mq + mk * mk - n2));
  const int i = row0 + threadIdx.x;
  for (int r = 0; r < hashes; ++r) {
    double h = 0;
    for (int c = 0; c < D; ++c) h = fma(double(proj.alpha[r][c]), double(xi[c]), h);
    h = fma(double(proj.alpha[r][which ? D : D + 1]), ext, h);  // keys [x, ext, 0], queries [x, 0, ext]
    h += proj.beta[r];
    const std::int64_t at = ((which * std::int64_t(BH) + bh) * hashes + r) * N + i;
    keys[at] = static_cast<float>(h);
    orders[at] = i;
  }
  // Thread 0's rows are written (the others' a little before or after): the sort's input, a key
  // and an index per row and round, in columns which·hashes + ρ of sort_key.
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::SortKey, bh, row0, rows, which * hashes, hashes,
                 std::int64_t(rows) * hashes * (kF + 4));
}

// offsets[s] = s·N for s in [0, n]: the boundaries of n equal segments.
__global__ void smyrf_offsets_kernel(int* offsets, int n, int N) {
  for (int s = blockIdx.x * blockDim.x + threadIdx.x; s <= n; s += gridDim.x * blockDim.x) offsets[s] = s * N;
}

}  // namespace fs
