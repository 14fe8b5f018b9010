// The backward's first and last kernels, around the dK/dV kernel (and, in deterministic, the dQ
// kernel): every variant of step 08 runs them, bf16, fp16 and fp32 alike, and step 09's backward too.
//
//   tc_bwd_preprocess_kernel  D_i = rowsum(dO_i ∘ O_i), once per row, on the tensor cores as the
//                             dK/dV kernel computes dP (exact cancellation); a copy of LSE with
//                             +inf for a row that saw no key (−inf), so that its P is 0 with no
//                             test per score; with atomic dQ it also zeroes dQacc, float32 rows
//                             of the compiled head dimension (tc_dq_acc_cols)
//   tc_dq_convert_kernel      atomic dQ: dQ = τ · dQacc, rounded to the run's element type
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/problem.hpp"
#include "common/recorder/device.cuh"
#include "steps/08_tensor_cores/bwd_common.cuh"
#include "steps/08_tensor_cores/mma.cuh"
#include "steps/08_tensor_cores/tf32.cuh"

namespace fs::tc {

// D_i = rowsum(dO_i ∘ O_i) on the tensor cores, 16 rows per warp: the diagonal of O dOᵀ, summed
// over d in the order the dK/dV kernel sums dPᵀ = V_j dO_iᵀ (16 columns of d per mma.sync, from
// 0). Where a row's softmax is one-hot, O_i is exactly the row V_k of its top key, and D_i is then
// the very number the kernel computes for dP_ik, bit for bit: dS_ik = P_ik (dP_ik − D_i) is an
// exact 0, as the fp64 reference has it. Summed by FMAs instead, D_i and dP_ik are two roundings
// of one dot product, and at inputs of magnitude 1e3 (dot products of 1e6) their difference
// times K or Q put errors of tenths into dQ and dK.
constexpr int kTcPreprocessWarps = 4, kTcPreprocessRows = 16 * kTcPreprocessWarps;  // rows per CTA

template <typename E, bool kZeroDQ, bool kTrace>
__global__ void __launch_bounds__(kTcPreprocessWarps * 32)
    tc_bwd_preprocess_kernel(const BwdParams p, float* __restrict__ delta, float* __restrict__ dq_acc,
                             trace::Slices slices) {
  trace::CtaTracer<kTrace> tr(slices);
  const int d = p.shape.d, N = p.shape.N;
  const std::int64_t rows = std::int64_t(p.shape.B) * p.shape.H * N;
  const std::int64_t r0 = std::int64_t(blockIdx.x) * kTcPreprocessRows, r1 = min(rows, r0 + kTcPreprocessRows);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
  const std::int64_t w0 = r0 + 16 * warp;  // the warp's rows: this lane's are w0 + g and w0 + g + 8
  // Row r (of all B·H·N) of a tensor in its layout; rows past the end read as zero.
  auto row_of = [&](const void* base, const Strides& st, std::int64_t r) {
    return r < rows ? as<E>(base) + st.of_head(r / N, p.shape.H) + r % N * st.row : nullptr;
  };
  const E *o_lo = row_of(p.o, p.o_strides, w0 + g), *o_hi = row_of(p.o, p.o_strides, w0 + g + 8);
  const E *do_lo = row_of(p.dout, p.dout_strides, w0 + g), *do_hi = row_of(p.dout, p.dout_strides, w0 + g + 8);
  // A = O (rows w0..w0+15), B = dOᵀ: dO's rows w0..w0+7 (tile lo) and w0+8..w0+15 (tile hi) as columns.
  float lo[4] = {}, hi[4] = {};
  if constexpr (std::is_same_v<E, float>) {
    // fp32 (3xtf32): 8 columns of d per product triple, summed from zero and added (mma_3x), as
    // tc_dkdv_f32_kernel sums dPᵀ; column 8kk + t is k = t, as ldmatrix hands that kernel its rows.
    auto at = [](const float* row, int c) { return row ? row[c] : 0.f; };
    for (int kk = 0; kk < d / 8; ++kk) {
      const int c = 8 * kk + t4;
      const float a[4] = {at(o_lo, c), at(o_hi, c), at(o_lo, c + 4), at(o_hi, c + 4)};
      const float b[4] = {at(do_lo, c), at(do_lo, c + 4), at(do_hi, c), at(do_hi, c + 4)};
      std::uint32_t a_hi[4], a_lo[4], b_hi[4], b_lo[4];
      for (int i = 0; i < 4; ++i) {
        Tf32::split(a[i], a_hi[i], a_lo[i]);
        Tf32::split(b[i], b_hi[i], b_lo[i]);
      }
      mma_3x<3>(lo, a_hi, a_lo, b_hi[0], b_hi[1], b_lo[0], b_lo[1]);
      mma_3x<3>(hi, a_hi, a_lo, b_hi[2], b_hi[3], b_lo[2], b_lo[3]);
    }
  } else {
    // Columns c, c + 1 of a row; past d (a head dimension not compiled, tc_tiles.cuh) zero, as the
    // dK/dV kernel's tiles have them. Rows of a d that is not a multiple of 8 may start anywhere:
    // element by element there.
    auto pair = [d](const E* row, int c) -> std::uint32_t {
      if (!row) return 0u;
      if (d % 8 == 0) return c < d ? *reinterpret_cast<const std::uint32_t*>(row + c) : 0u;
      const auto* e = reinterpret_cast<const std::uint16_t*>(row);
      return (c < d ? e[c] : 0u) | (c + 1 < d ? std::uint32_t(e[c + 1]) << 16 : 0u);
    };
    for (int kk = 0; kk < (d + 15) / 16; ++kk) {
      const int c = 16 * kk + 2 * t4;
      const std::uint32_t a[4] = {pair(o_lo, c), pair(o_hi, c), pair(o_lo, c + 8), pair(o_hi, c + 8)};
      Element<E>::mma(lo, a, pair(do_lo, c), pair(do_lo, c + 8));
      Element<E>::mma(hi, a, pair(do_hi, c), pair(do_hi, c + 8));
    }
  }
  // The diagonal: (g, g) is lo's column g, (g + 8, g + 8) hi's column g, both held by lane t4 = g/2.
  if (t4 == g / 2) {
    if (w0 + g < rows) delta[w0 + g] = lo[g % 2];
    if (w0 + g + 8 < rows) delta[w0 + g + 8] = hi[2 + g % 2];
  }
  {  // LSE for the dK/dV kernel, +inf where a row saw no key (−inf): its P is then exactly 0
     // with no test per score there
    float* lse_bwd = delta + tc_delta_floats(p.shape);
    for (std::int64_t i = r0 + threadIdx.x; i < r1; i += blockDim.x) {
      const float x = p.lse[i];
      lse_bwd[i] = x == -INFINITY ? INFINITY : x;
    }
  }
  if constexpr (kZeroDQ) {
    const int dc = tc_dq_acc_cols(p.shape);  // dQacc's row: the compiled head dimension's floats
    auto* z = reinterpret_cast<float4*>(dq_acc + r0 * dc);
    for (std::int64_t i = threadIdx.x; i < (r1 - r0) * dc / 4; i += blockDim.x) z[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  if constexpr (kTrace)
    if (tr.records()) {
      constexpr std::int64_t kE = sizeof(E);
      trace::for_each_head(r0, r1, N, [&](std::int64_t bh, std::int64_t i, std::int64_t n) {
        FS_TRACE_EVENT(tr, Kind::Load, Tensor::O, bh, i, n, 0, d, n * d * kE);
        FS_TRACE_EVENT(tr, Kind::Load, Tensor::dO, bh, i, n, 0, d, n * d * kE);
        FS_TRACE_EVENT(tr, Kind::Store, Tensor::D, bh, i, n, 0, 1, n * kF);
        FS_TRACE_EVENT(tr, Kind::Load, Tensor::LSE, bh, i, n, 0, 1, n * kF);   // and its copy, written
        FS_TRACE_EVENT(tr, Kind::Store, Tensor::LSE, bh, i, n, 0, 1, n * kF);  // to the workspace
        if (kZeroDQ) FS_TRACE_EVENT(tr, Kind::Store, Tensor::dQacc, bh, i, n, 0, d, n * d * kF);
      });
    }
}

// dQ = τ · dQacc in the run's element type (dQ in its layout), 8 elements per thread; dQacc's
// columns past d (a head dimension not compiled) are not stored. Its grid: tc_dq_convert_blocks.
constexpr int kTcConvertThreads = 256;
inline unsigned tc_dq_convert_blocks(const Shape& s) {  // dQacc's floats (≥ dQ's), 8 a thread
  const std::int64_t elems = s.rows() * tc_dq_acc_cols(s);
  return static_cast<unsigned>((elems / 8 + kTcConvertThreads - 1) / kTcConvertThreads);
}
template <typename E, bool kTrace>
__global__ void __launch_bounds__(256)
    tc_dq_convert_kernel(const BwdParams p, const float* __restrict__ dq_acc, trace::Slices slices) {
  trace::CtaTracer<kTrace> tr(slices);
  const int dc = tc_dq_acc_cols(p.shape);  // dQacc is (B, H, N, dc), dc ≥ d
  const std::int64_t elems = std::int64_t(p.shape.B) * p.shape.H * p.shape.N * dc;
  const std::int64_t n8 = elems / 8, i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n8) {
    const float4 a = reinterpret_cast<const float4*>(dq_acc)[2 * i], b = reinterpret_cast<const float4*>(dq_acc)[2 * i + 1];
    const float t = p.scale;
    const int d = p.shape.d, N = p.shape.N;
    const std::int64_t row = 8 * i / dc, col = 8 * i % dc;  // of all B·H·N
    E* dst = as<E>(p.dq) + p.dq_strides.of_head(row / N, p.shape.H) + row % N * p.dq_strides.row + col;
    if (d % 8 != 0 || col >= d) {  // past d: nothing (d a multiple of 8), or element by element
      if constexpr (!std::is_same_v<E, float>) {
        const float x[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
        auto* e = reinterpret_cast<std::uint16_t*>(dst);
        for (int j = 0; j < 8 && col + j < d; ++j) e[j] = static_cast<std::uint16_t>(Element<E>::pack(t * x[j], 0.f));
      }
    } else if constexpr (std::is_same_v<E, float>) {
      reinterpret_cast<float4*>(dst)[0] = make_float4(t * a.x, t * a.y, t * a.z, t * a.w);
      reinterpret_cast<float4*>(dst)[1] = make_float4(t * b.x, t * b.y, t * b.z, t * b.w);
    } else {
      *reinterpret_cast<uint4*>(dst) = {Element<E>::pack(t * a.x, t * a.y), Element<E>::pack(t * a.z, t * a.w),
                                        Element<E>::pack(t * b.x, t * b.y), Element<E>::pack(t * b.z, t * b.w)};
    }
  }
  if constexpr (kTrace)
    if (tr.records()) {  // this CTA's rows: blockDim.x · 8 elements from its first
      const int d = p.shape.d, N = p.shape.N;
      const std::int64_t e0 = std::int64_t(blockIdx.x) * blockDim.x * 8, e1 = min(elems, e0 + blockDim.x * 8);
      trace::for_each_head(e0 / dc, (e1 + dc - 1) / dc, N, [&](std::int64_t bh, std::int64_t row, std::int64_t n) {
        FS_TRACE_EVENT(tr, Kind::Load, Tensor::dQacc, bh, row, n, 0, d, n * d * kF);
        FS_TRACE_EVENT(tr, Kind::Store, Tensor::dQ, bh, row, n, 0, d, n * d * std::int64_t(sizeof(E)));
      });
    }
}

}  // namespace fs::tc
