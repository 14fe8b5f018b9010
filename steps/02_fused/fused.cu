// Step 02 — kernel fusion: what step 01 ran as separate passes over N×N matrices now happens
// where the matrix is produced.
//
//   forward   S = τ Q Kᵀ, mask, softmax, LSE   one kernel; rows of S live in shared memory
//             P → HBM (the backward needs it), S never does
//             O = P V                          step 01's kernel, unchanged
//   backward  dV = Pᵀ dO                       step 01's kernel, unchanged
//             dP = dO Vᵀ, D = rowsum(dO ∘ O),
//             dS = P ∘ (dP − D) → HBM          one kernel; dP and D never reach HBM
//             dQ = τ dS K, dK = τ dSᵀ Q        step 01's kernels, unchanged
//
// HBM traffic per head: forward 3Nd + 4N² + … → 3Nd + 2N² + … floats, backward 7N² + … →
// 5N² + … (common/io_model.hpp). Still Θ(Nd + N²): P and dS are N×N and go through HBM.
//
// Where fusion stops: a softmax needs its whole row, so the kernel keeps R rows of S (R·N
// floats) in shared memory. At 227 KiB per CTA that is N ≤ ~58000 for one row per CTA; past
// that this step refuses, and step 03 tiles the row instead. And with few rows per CTA, every
// CTA reads all of K (from L2): the next cost that tiling removes.
//
// Tracing (--trace): both kernels are templates on kTrace, as step 01's; the phases kept from
// step 01 are traced by step 01's kernels. Every CTA of a head reads all of K (forward) or V
// (backward) through L2, and the IO model counts it once: only the head's first CTA records
// that read as HBM traffic, the others record it cached (see "Tracing" below).
#include "steps/02_fused/fused.hpp"

#include <cmath>
#include <cstdint>

#include "common/check.hpp"
#include "common/cuda_utils.cuh"
#include "common/device.hpp"
#include "common/io_model.hpp"
#include "common/recorder/device.cuh"
#include "common/recorder/launch.cuh"
#include "common/recorder/nvtx.hpp"
#include "steps/01_naive/naive.hpp"

namespace fs {

namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / kWarpSize;
// Rows per CTA: the most (up to 16) whose rows of S stay under this much shared memory, so
// that 3 CTAs share an SM; one row per CTA may use the whole budget.
constexpr std::size_t kSmemTarget = 72 * 1024;

std::size_t scores_smem_bytes(int rows, int N, int d) { return std::size_t(rows) * (N + d) * sizeof(float); }

// ---------------------------------------------------------------------------------------
// Tracing
// ---------------------------------------------------------------------------------------
//
// A traced CTA records its R query rows: the loads where its loops begin to read, each
// compute phase where its loop ends, the stores after them. Every CTA of a head reads all of
// K (forward) or all of V (backward) through L2; the IO model (io_fused_forward /
// io_fused_backward) counts each head's K and V once, so only the head's first CTA
// (blockIdx.x == 0) records that read as HBM traffic and the others record it cached. The
// other reads (Q, dO, O and P rows) and every store belong to one CTA only: never cached.
// (The D loop re-reads the CTA's dO rows, from L1/L2; the IO model counts dO once.)

// P[i][:] = softmax(τ q_i Kᵀ) and LSE_i for R query rows i0..i0+R-1 of head blockIdx.y.
// grid (⌈N/R⌉, B·H), block 128, dynamic shared memory sQ (R, d) then sS (R, N).
template <int R, bool kTrace>
__global__ void __launch_bounds__(kThreads) scores_softmax_kernel(const float* __restrict__ q,
                                                                  const float* __restrict__ k,
                                                                  float* __restrict__ P,
                                                                  float* __restrict__ lse, int N,
                                                                  int d, float scale, bool causal,
                                                                  trace::Slices slices) {
  trace::CtaTracer<kTrace> tr(slices);
  extern __shared__ float smem[];
  float* sQ = smem;          // (R, d)
  float* sS = smem + R * d;  // (R, N)
  const std::int64_t bh = blockIdx.y;
  const int i0 = blockIdx.x * R;
  const int rows = min(R, N - i0);

  for (int e = threadIdx.x; e < R * d; e += kThreads)
    sQ[e] = e / d < rows ? q[(bh * N + i0) * d + e] : 0.f;
  __syncthreads();  // every thread reads all R rows of Q below
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::Q, bh, i0, rows, 0, d, rows * d * kF);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::K, bh, 0, N, 0, d, std::int64_t(N) * d * kF, blockIdx.x != 0);

  // S[r][j] = τ q_r · k_j: a thread per key, R dot products per key read k_j once.
  const float* kh = k + bh * N * d;  // (N, d)
  for (int j = threadIdx.x; j < N; j += kThreads) {
    const float* kj = kh + std::int64_t(j) * d;
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = 0.f;
    for (int c = 0; c < d; ++c) {
      const float kc = kj[c];
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r] = fmaf(sQ[r * d + c], kc, acc[r]);  // broadcast read
    }
#pragma unroll
    for (int r = 0; r < R; ++r) sS[r * N + j] = (causal && j > i0 + r) ? -INFINITY : scale * acc[r];
  }
  __syncthreads();  // the softmax below reads whole rows that other threads wrote
  FS_TRACE_EVENT(tr, Kind::ComputeS, Tensor::S, bh, i0, rows, 0, N, 0);

  // Softmax of each row, a warp per row, exactly as step 01's softmax_kernel but reading the
  // row from shared memory instead of HBM.
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  for (int r = warp; r < rows; r += kWarps) {
    const float* srow = sS + r * N;
    float m = -INFINITY;
    for (int j = lane; j < N; j += kWarpSize) m = fmaxf(m, srow[j]);
    m = warp_max(m);
    // A row with every key masked has m = -inf; exp(-inf - (-inf)) is NaN. Its P is 0.
    const float m_safe = (m == -INFINITY) ? 0.f : m;
    float l = 0.f;
    for (int j = lane; j < N; j += kWarpSize) l += expf(srow[j] - m_safe);
    l = warp_sum(l);
    const float inv_l = (l > 0.f) ? 1.f / l : 0.f;
    float* prow = P + (bh * N + i0 + r) * N;  // (N)
    for (int j = lane; j < N; j += kWarpSize) prow[j] = expf(srow[j] - m_safe) * inv_l;
    if (lane == 0) lse[bh * N + i0 + r] = (l > 0.f) ? m + logf(l) : -INFINITY;
  }
  FS_TRACE_EVENT(tr, Kind::Softmax, Tensor::P, bh, i0, rows, 0, N, 0);
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::P, bh, i0, rows, 0, N, rows * std::int64_t(N) * kF);
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::LSE, bh, i0, rows, 0, 1, rows * kF);
}

// dS[i][j] = P[i][j] · (dO_i · v_j − D_i) with D_i = dO_i · O_i, for R query rows per CTA.
// grid (⌈N/R⌉, B·H), block 128, dynamic shared memory sdO (R, d) then sD (R).
template <int R, bool kTrace>
__global__ void __launch_bounds__(kThreads) ds_fused_kernel(const float* __restrict__ dout,
                                                            const float* __restrict__ o,
                                                            const float* __restrict__ v,
                                                            const float* __restrict__ P,
                                                            float* __restrict__ dS, int N, int d,
                                                            trace::Slices slices) {
  trace::CtaTracer<kTrace> tr(slices);
  extern __shared__ float smem[];
  float* sdO = smem;        // (R, d)
  float* sD = smem + R * d;  // (R)
  const std::int64_t bh = blockIdx.y;
  const int i0 = blockIdx.x * R;
  const int rows = min(R, N - i0);

  for (int e = threadIdx.x; e < R * d; e += kThreads)
    sdO[e] = e / d < rows ? dout[(bh * N + i0) * d + e] : 0.f;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  for (int r = warp; r < R; r += kWarps) {  // D_r = dO_r · O_r, a warp per row
    float acc = 0.f;
    if (r < rows)
      for (int c = lane; c < d; c += kWarpSize) acc += dout[(bh * N + i0 + r) * d + c] * o[(bh * N + i0 + r) * d + c];
    acc = warp_sum(acc);
    if (lane == 0) sD[r] = acc;
  }
  __syncthreads();  // sdO and sD are read by every thread below
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::dO, bh, i0, rows, 0, d, rows * d * kF);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::O, bh, i0, rows, 0, d, rows * d * kF);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::V, bh, 0, N, 0, d, std::int64_t(N) * d * kF, blockIdx.x != 0);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::P, bh, i0, rows, 0, N, rows * std::int64_t(N) * kF);

  const float* vh = v + bh * N * d;  // (N, d)
  for (int j = threadIdx.x; j < N; j += kThreads) {
    const float* vj = vh + std::int64_t(j) * d;
    float dp[R];
#pragma unroll
    for (int r = 0; r < R; ++r) dp[r] = 0.f;
    for (int c = 0; c < d; ++c) {
      const float vc = vj[c];
#pragma unroll
      for (int r = 0; r < R; ++r) dp[r] = fmaf(sdO[r * d + c], vc, dp[r]);
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (r < rows) {
        const std::int64_t at = (bh * N + i0 + r) * N + j;
        dS[at] = P[at] * (dp[r] - sD[r]);  // masked entries have P = 0, so dS = 0
      }
  }
  FS_TRACE_EVENT(tr, Kind::ComputeDP, Tensor::dP, bh, i0, rows, 0, N, 0);
  FS_TRACE_EVENT(tr, Kind::ComputeDS, Tensor::dS, bh, i0, rows, 0, N, 0);
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::dS, bh, i0, rows, 0, N, rows * std::int64_t(N) * kF);
}

// The largest R in {16, 8, 4, 2, 1} whose rows fit the target (or, for R = 1, the budget).
int rows_per_cta(int N, int d, std::size_t budget) {
  for (int R = 16; R > 1; R /= 2)
    if (scores_smem_bytes(R, N, d) <= kSmemTarget) return R;
  return scores_smem_bytes(1, N, d) <= budget ? 1 : 0;
}

template <int R>
void launch_scores_softmax(const FwdParams& p, float* P) {
  const Shape& s = p.shape;
  const std::size_t smem = scores_smem_bytes(R, s.N, s.d);
  if (p.trace) p.trace->set_tiles(R, s.N);  // a CTA's tile of S: R whole rows
  const dim3 grid((s.N + R - 1) / R, static_cast<unsigned>(s.heads()));
  trace::launch(p.trace, "scores_softmax_kernel", [](auto tr) { return scores_softmax_kernel<R, tr>; }, grid, kThreads,
                smem, p.stream, as<float>(p.q), as<float>(p.k), P, p.lse, s.N, s.d, p.scale, p.causal);
}

std::size_t fwd_ws_bytes(const Shape& s, const PassSettings&) { return s.score_elems() * sizeof(float); }  // P
std::size_t bwd_ws_bytes(const Shape& s, const PassSettings&) { return s.score_elems() * sizeof(float); }  // dS

std::string unsupported(const Shape& s, const PassSettings&) {
  if (s.heads() > 65535) return "B·H must be at most 65535 (grid y)";
  const std::size_t smem = smem_budget_bytes();
  if (rows_per_cta(s.N, s.d, smem) == 0)
    return "a row of S (N = " + std::to_string(s.N) + " floats, plus one row of Q) does not fit in the " +
           std::to_string(smem / 1024) + " KiB of shared memory a CTA may use here: fusion "
           "stops at N = " + std::to_string(fused_max_seq(s.d, smem)) +
           ". Step 03 tiles the row and has no such limit";
  return {};
}

IoCount io_forward(const Shape& s, const PassSettings&) { return io_fused_forward(s); }
IoCount io_backward(const Shape& s, const PassSettings&) { return io_fused_backward(s); }

}  // namespace

int fused_max_seq(int d, std::size_t smem_bytes) { return static_cast<int>(smem_bytes / sizeof(float)) - d; }
int fused_rows_per_cta(int N, int d, std::size_t smem_bytes) { return rows_per_cta(N, d, smem_bytes); }

void fused_forward(const FwdParams& p) {
  const Shape& s = p.shape;
  float* P = static_cast<float*>(p.workspace);  // (B, H, N, N)
  nvtx::NamedBuffers names;  // the workspace's matrix by name, in traced runs
  if (p.trace) names.add(P, s.score_elems() * sizeof(float), "P");
  switch (rows_per_cta(s.N, s.d, smem_budget_bytes())) {
    case 16: launch_scores_softmax<16>(p, P); break;
    case 8: launch_scores_softmax<8>(p, P); break;
    case 4: launch_scores_softmax<4>(p, P); break;
    case 2: launch_scores_softmax<2>(p, P); break;
    default: launch_scores_softmax<1>(p, P); break;
  }
  naive_pv(P, as<float>(p.v), as<float>(p.o), s, p.stream, p.trace);
}

void fused_backward(const BwdParams& p) {
  const Shape& s = p.shape;
  const float* P = static_cast<const float*>(p.fwd_workspace);  // (B, H, N, N)
  float* dS = static_cast<float*>(p.workspace);                 // (B, H, N, N)
  nvtx::NamedBuffers names;  // the workspaces' matrices by name, in traced runs
  if (p.trace) {
    names.add(P, s.score_elems() * sizeof(float), "P");
    names.add(dS, s.score_elems() * sizeof(float), "dS");
  }
  naive_dv(P, as<float>(p.dout), as<float>(p.dv), s, p.stream, p.trace);
  constexpr int R = 8;
  const dim3 grid((s.N + R - 1) / R, static_cast<unsigned>(s.heads()));
  const std::size_t smem = (R * s.d + R) * sizeof(float);
  if (p.trace) p.trace->set_tiles(R, s.N);  // a CTA's tile of dS: R whole rows
  trace::launch(p.trace, "ds_fused_kernel", [](auto tr) { return ds_fused_kernel<R, tr>; }, grid, kThreads, smem,
                p.stream, as<float>(p.dout), as<float>(p.o), as<float>(p.v), P, dS, s.N, s.d);
  naive_dq_dk(dS, as<float>(p.q), as<float>(p.k), as<float>(p.dq), as<float>(p.dk), s, p.scale, p.stream, p.trace);
}

StepInfo step02_info() {
  StepInfo s;
  s.id = "02_fused";
  s.title = "kernel fusion: S, mask and softmax on chip, only P in HBM";
  s.variants = {"fused"};
  s.forward = fused_forward;
  s.backward = fused_backward;
  s.fwd_workspace_bytes = fwd_ws_bytes;
  s.bwd_workspace_bytes = bwd_ws_bytes;
  s.unsupported = unsupported;
  s.io_forward = io_forward;
  s.io_backward = io_backward;
  s.memory_note = "Its workspace holds P (and dS for the backward), N×N per head; steps from 03 on keep no N×N matrix";
  return s;
}

}  // namespace fs
