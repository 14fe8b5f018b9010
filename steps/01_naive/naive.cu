// Step 01 — naive attention: the paper's standard attention, Algorithm 0 (forward) and
// Algorithm 3 (backward), as plain CUDA with one output element per thread.
//
//   forward   S = τ Q Kᵀ (+ causal mask)  → HBM        scores_kernel
//             P = softmax(S), LSE         → HBM        softmax_kernel
//             O = P V                     → HBM        pv_kernel
//   backward  dV = Pᵀ dO                               dv_kernel
//             dP = dO Vᵀ                  → HBM        dp_kernel
//             D = rowsum(dO ∘ O)                       rowdot_kernel
//             dS = P ∘ (dP − D)           → HBM        ds_kernel (in place over dP)
//             dQ = τ dS K,  dK = τ dSᵀ Q               dq_kernel, dk_kernel
//
// HBM traffic Θ(Nd + N²) per head (Theorem 2; common/io_model.hpp counts it exactly): every
// N×N matrix is written once and read back at least once. That N² term is what the rest of
// the steps remove. Memory is Θ(N²) too: S and P for the forward, and the backward keeps P
// (the forward's workspace) and adds dP. At N = 65536 with 16 heads that is 256 GiB per matrix.
//
// Nothing here is clever on purpose: each kernel is the loop it computes. Threads of a warp
// take consecutive output columns, so loads along a row coalesce and the other operand is a
// broadcast.
//
// Tracing (--trace): every kernel is a template on kTrace; <false> is the plain kernel, and
// <true> also has one thread per CTA record the CTA's tiles (see "Tracing" below).
#include "steps/01_naive/naive.hpp"

#include <cmath>
#include <cstdint>

#include "common/check.hpp"
#include "common/cuda_utils.cuh"
#include "common/io_model.hpp"
#include "common/recorder/device.cuh"
#include "common/recorder/launch.cuh"
#include "common/recorder/nvtx.hpp"

namespace fs {

namespace {

constexpr int kTile = 16;  // 16×16 threads per block for the 2-D "one output per thread" kernels
constexpr int kWarp = kWarpSize;

// The forward's workspace: S then P, each (B, H, N, N).
struct NaiveFwdWorkspace {
  float* s;
  float* p;
};
NaiveFwdWorkspace fwd_workspace(void* ws, const Shape& sh) {
  float* base = static_cast<float*>(ws);
  return {base, base + sh.score_elems()};
}
// The backward's: dP (overwritten by dS) (B, H, N, N), then D (B, H, N).
struct NaiveBwdWorkspace {
  float* dp;
  float* D;
};
NaiveBwdWorkspace bwd_workspace(void* ws, const Shape& sh) {
  float* base = static_cast<float*>(ws);
  return {base, base + sh.score_elems()};
}

// ---------------------------------------------------------------------------------------
// Tracing
// ---------------------------------------------------------------------------------------
//
// A traced CTA records the tiles it moves and computes: loads where its loops begin to read
// (they stream the operands through registers while computing), the compute phase when the
// loop ends, stores after the store. Ranges are elements of the (B·H, rows, cols) tensors.
//
// The naive kernels read the same rows in many CTAs: every CTA in a row of the scores grid
// reads the same Q rows, and so on. The IO model counts each of those HBM reads once; the
// others are served by L2 and are recorded cached. Which CTA's read counts is fixed, so that
// the non-cached bytes equal io_standard_forward / io_standard_backward exactly:
//   scores, dp   the Q (dO) rows of query block y: the CTA with blockIdx.x == 0;
//                the K (V) rows of key block x: the CTA with blockIdx.y == 0
//   pv, dq       the P (dS) rows of block y, all N keys: the CTA with blockIdx.x == 0;
//                the V (K) columns of block x, all N rows: the CTA with blockIdx.y == 0
//   dv, dk       the P (dS) columns of key block y, all N queries: blockIdx.x == 0;
//                the dO (Q) columns of block x, all N rows: blockIdx.y == 0
//   ds           D_i, read by every CTA whose stretch of dS holds part of row i: the CTA
//                holding column 0 of the row
//   softmax, rowdot and the rest of ds read each element in one CTA only: never cached.

// The part of a tile of `tile` rows (or columns) starting at `start` that lies inside `n`.
__device__ __forceinline__ int extent(int start, int tile, int n) { return min(tile, n - start); }

// ---------------------------------------------------------------------------------------
// Forward
// ---------------------------------------------------------------------------------------

// S[i][j] = τ · q_i · k_j, or -inf where the causal mask hides key j from query i.
// grid (⌈N/16⌉, ⌈N/16⌉, B·H), block (16, 16): x → key j, y → query i.
template <bool kTrace>
__global__ void scores_kernel(const float* __restrict__ q, const float* __restrict__ k,
                              float* __restrict__ s, int N, int d, float scale, bool causal,
                              trace::Slices slices) {
  trace::CtaTracer<kTrace> tr(slices);
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  const int i = blockIdx.y * blockDim.y + threadIdx.y;
  const std::int64_t bh = blockIdx.z;
  if (i >= N || j >= N) return;
  const int i0 = blockIdx.y * blockDim.y, rows = extent(i0, blockDim.y, N);  // the CTA's S tile
  const int j0 = blockIdx.x * blockDim.x, cols = extent(j0, blockDim.x, N);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::Q, bh, i0, rows, 0, d, rows * d * kF, blockIdx.x != 0);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::K, bh, j0, cols, 0, d, cols * d * kF, blockIdx.y != 0);
  const float* qi = q + (bh * N + i) * d;  // (d)
  const float* kj = k + (bh * N + j) * d;  // (d)
  float acc = 0.f;
  for (int c = 0; c < d; ++c) acc += qi[c] * kj[c];
  FS_TRACE_EVENT(tr, Kind::ComputeS, Tensor::S, bh, i0, rows, j0, cols, 0);
  s[(bh * N + i) * N + j] = (causal && j > i) ? -INFINITY : scale * acc;
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::S, bh, i0, rows, j0, cols, rows * cols * kF);
}

// P[i][:] = softmax(S[i][:]) and LSE_i = m_i + log ℓ_i. One warp per row, three sweeps of
// the row: max, sum of exponentials, normalise. (Rows re-read hit L1/L2; the IO model counts
// the row once.)
template <bool kTrace>
__global__ void softmax_kernel(const float* __restrict__ s, float* __restrict__ p,
                               float* __restrict__ lse, std::int64_t rows, int N,
                               trace::Slices slices) {
  trace::CtaTracer<kTrace> tr(slices);
  const std::int64_t row = std::int64_t(blockIdx.x) * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= rows) return;  // whole warps leave together: the shuffles below stay full-warp
  const float* srow = s + row * N;  // (N)
  float* prow = p + row * N;        // (N)
  // The CTA's rows, [r0, r1) of all B·H·N, split by head for the trace.
  const std::int64_t r0 = std::int64_t(blockIdx.x) * (blockDim.x / kWarp);
  const std::int64_t r1 = min(rows, r0 + blockDim.x / kWarp);

  float m = -INFINITY;
  for (int j = lane; j < N; j += kWarp) m = fmaxf(m, srow[j]);
  m = warp_max(m);
  if constexpr (kTrace)  // the first sweep has read the rows; the other two re-read them from L1/L2
    trace::for_each_head(r0, r1, N, [&](std::int64_t bh, std::int64_t i, std::int64_t n) {
      FS_TRACE_EVENT(tr, Kind::Load, Tensor::S, bh, i, n, 0, N, n * N * kF);
    });
  // A row whose every key is masked has m = -inf, and exp(-inf - (-inf)) would be NaN:
  // define its P as 0 and its LSE as -inf. (The causal mask alone never does this: key i
  // is always visible to query i.)
  const float m_safe = (m == -INFINITY) ? 0.f : m;
  float l = 0.f;
  for (int j = lane; j < N; j += kWarp) l += expf(srow[j] - m_safe);
  l = warp_sum(l);
  const float inv_l = (l > 0.f) ? 1.f / l : 0.f;
  for (int j = lane; j < N; j += kWarp) prow[j] = expf(srow[j] - m_safe) * inv_l;
  if (lane == 0) lse[row] = (l > 0.f) ? m + logf(l) : -INFINITY;
  if constexpr (kTrace)
    trace::for_each_head(r0, r1, N, [&](std::int64_t bh, std::int64_t i, std::int64_t n) {
      FS_TRACE_EVENT(tr, Kind::Softmax, Tensor::P, bh, i, n, 0, N, 0);
      FS_TRACE_EVENT(tr, Kind::Store, Tensor::P, bh, i, n, 0, N, n * N * kF);
      FS_TRACE_EVENT(tr, Kind::Store, Tensor::LSE, bh, i, n, 0, 1, n * kF);
    });
}

// O[i][c] = Σ_j P[i][j] · V[j][c]. grid (⌈d/16⌉, ⌈N/16⌉, B·H): x → column c, y → row i.
template <bool kTrace>
__global__ void pv_kernel(const float* __restrict__ p, const float* __restrict__ v,
                          float* __restrict__ o, int N, int d, trace::Slices slices) {
  trace::CtaTracer<kTrace> tr(slices);
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int i = blockIdx.y * blockDim.y + threadIdx.y;
  const std::int64_t bh = blockIdx.z;
  if (i >= N || c >= d) return;
  const int i0 = blockIdx.y * blockDim.y, rows = extent(i0, blockDim.y, N);  // the CTA's O tile
  const int c0 = blockIdx.x * blockDim.x, cols = extent(c0, blockDim.x, d);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::P, bh, i0, rows, 0, N, rows * std::int64_t(N) * kF, blockIdx.x != 0);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::V, bh, 0, N, c0, cols, std::int64_t(N) * cols * kF, blockIdx.y != 0);
  const float* prow = p + (bh * N + i) * N;  // (N)
  const float* vh = v + bh * N * d;          // (N, d)
  float acc = 0.f;
  for (int j = 0; j < N; ++j) acc += prow[j] * vh[std::int64_t(j) * d + c];
  FS_TRACE_EVENT(tr, Kind::AccumulateO, Tensor::O, bh, i0, rows, c0, cols, 0);
  o[(bh * N + i) * d + c] = acc;
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::O, bh, i0, rows, c0, cols, rows * cols * kF);
}

// ---------------------------------------------------------------------------------------
// Backward
// ---------------------------------------------------------------------------------------

// dV[j][c] = Σ_i P[i][j] · dO[i][c]. grid (⌈d/16⌉, ⌈N/16⌉, B·H): x → c, y → key row j.
template <bool kTrace>
__global__ void dv_kernel(const float* __restrict__ p, const float* __restrict__ dout,
                          float* __restrict__ dv, int N, int d, trace::Slices slices) {
  trace::CtaTracer<kTrace> tr(slices);
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int j = blockIdx.y * blockDim.y + threadIdx.y;
  const std::int64_t bh = blockIdx.z;
  if (j >= N || c >= d) return;
  const int j0 = blockIdx.y * blockDim.y, rows = extent(j0, blockDim.y, N);  // the CTA's dV tile
  const int c0 = blockIdx.x * blockDim.x, cols = extent(c0, blockDim.x, d);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::P, bh, 0, N, j0, rows, std::int64_t(N) * rows * kF, blockIdx.x != 0);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::dO, bh, 0, N, c0, cols, std::int64_t(N) * cols * kF, blockIdx.y != 0);
  const float* ph = p + bh * N * std::int64_t(N);  // (N, N)
  const float* doh = dout + bh * N * d;            // (N, d)
  float acc = 0.f;
  for (int i = 0; i < N; ++i) acc += ph[std::int64_t(i) * N + j] * doh[std::int64_t(i) * d + c];
  FS_TRACE_EVENT(tr, Kind::AccumulateDV, Tensor::dV, bh, j0, rows, c0, cols, 0);
  dv[(bh * N + j) * d + c] = acc;
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::dV, bh, j0, rows, c0, cols, rows * cols * kF);
}

// dP[i][j] = dO_i · v_j. Same launch shape as scores_kernel.
template <bool kTrace>
__global__ void dp_kernel(const float* __restrict__ dout, const float* __restrict__ v,
                          float* __restrict__ dp, int N, int d, trace::Slices slices) {
  trace::CtaTracer<kTrace> tr(slices);
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  const int i = blockIdx.y * blockDim.y + threadIdx.y;
  const std::int64_t bh = blockIdx.z;
  if (i >= N || j >= N) return;
  const int i0 = blockIdx.y * blockDim.y, rows = extent(i0, blockDim.y, N);  // the CTA's dP tile
  const int j0 = blockIdx.x * blockDim.x, cols = extent(j0, blockDim.x, N);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::dO, bh, i0, rows, 0, d, rows * d * kF, blockIdx.x != 0);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::V, bh, j0, cols, 0, d, cols * d * kF, blockIdx.y != 0);
  const float* doi = dout + (bh * N + i) * d;  // (d)
  const float* vj = v + (bh * N + j) * d;      // (d)
  float acc = 0.f;
  for (int c = 0; c < d; ++c) acc += doi[c] * vj[c];
  FS_TRACE_EVENT(tr, Kind::ComputeDP, Tensor::dP, bh, i0, rows, j0, cols, 0);
  dp[(bh * N + i) * N + j] = acc;
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::dP, bh, i0, rows, j0, cols, rows * cols * kF);
}

// D_i = Σ_c dO[i][c] · O[i][c]  (= Σ_j P_ij dP_ij, the softmax's Jacobian term). One warp per row.
// Traced, D shows as a compute_ds phase: it is the part of dS that needs O. (N only locates
// the rows by head for the trace.)
template <bool kTrace>
__global__ void rowdot_kernel(const float* __restrict__ dout, const float* __restrict__ o,
                              float* __restrict__ D, std::int64_t rows, int d, int N,
                              trace::Slices slices) {
  trace::CtaTracer<kTrace> tr(slices);
  const std::int64_t row = std::int64_t(blockIdx.x) * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= rows) return;  // whole warps leave together
  const std::int64_t r0 = std::int64_t(blockIdx.x) * (blockDim.x / kWarp);  // the CTA's rows [r0, r1)
  const std::int64_t r1 = min(rows, r0 + blockDim.x / kWarp);
  if constexpr (kTrace)
    trace::for_each_head(r0, r1, N, [&](std::int64_t bh, std::int64_t i, std::int64_t n) {
      FS_TRACE_EVENT(tr, Kind::Load, Tensor::dO, bh, i, n, 0, d, n * d * kF);
      FS_TRACE_EVENT(tr, Kind::Load, Tensor::O, bh, i, n, 0, d, n * d * kF);
    });
  float acc = 0.f;
  for (int c = lane; c < d; c += kWarp) acc += dout[row * d + c] * o[row * d + c];
  acc = warp_sum(acc);
  if (lane == 0) D[row] = acc;
  if constexpr (kTrace)
    trace::for_each_head(r0, r1, N, [&](std::int64_t bh, std::int64_t i, std::int64_t n) {
      FS_TRACE_EVENT(tr, Kind::ComputeDS, Tensor::D, bh, i, n, 0, 1, 0);
      FS_TRACE_EVENT(tr, Kind::Store, Tensor::D, bh, i, n, 0, 1, n * kF);
    });
}

// dS[i][j] = P[i][j] · (dP[i][j] − D_i), written over dP (each element reads then writes
// only itself, so in place is safe). Masked entries have P = 0, so their dS is 0.
// Traced, each pass of the grid-stride loop is a stretch [e − threadIdx.x, + blockDim.x) of
// the flat (B·H, N, N) matrices, recorded as the tiles it covers.
template <bool kTrace>
__global__ void ds_kernel(const float* __restrict__ p, float* dp_ds, const float* __restrict__ D,
                          std::int64_t elems, int N, trace::Slices slices) {
  trace::CtaTracer<kTrace> tr(slices);
  for (std::int64_t e = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < elems;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t e0 = e - threadIdx.x, e1 = min(elems, e0 + blockDim.x);
    if constexpr (kTrace)
      if (tr.records())
        trace::for_each_tile(e0, e1, N, N, [&](std::int64_t bh, std::int64_t i, std::int64_t rows, std::int64_t j,
                                     std::int64_t cols) {
          FS_TRACE_EVENT(tr, Kind::Load, Tensor::P, bh, i, rows, j, cols, rows * cols * kF);
          FS_TRACE_EVENT(tr, Kind::Load, Tensor::dP, bh, i, rows, j, cols, rows * cols * kF);
          FS_TRACE_EVENT(tr, Kind::Load, Tensor::D, bh, i, rows, 0, 1, rows * kF, j != 0);
        });
    dp_ds[e] = p[e] * (dp_ds[e] - D[e / N]);
    if constexpr (kTrace)
      if (tr.records())
        trace::for_each_tile(e0, e1, N, N, [&](std::int64_t bh, std::int64_t i, std::int64_t rows, std::int64_t j,
                                     std::int64_t cols) {
          FS_TRACE_EVENT(tr, Kind::ComputeDS, Tensor::dS, bh, i, rows, j, cols, 0);
          FS_TRACE_EVENT(tr, Kind::Store, Tensor::dS, bh, i, rows, j, cols, rows * cols * kF);
        });
  }
}

// dQ[i][c] = τ Σ_j dS[i][j] · K[j][c]. Same shape as pv_kernel.
template <bool kTrace>
__global__ void dq_kernel(const float* __restrict__ ds, const float* __restrict__ k,
                          float* __restrict__ dq, int N, int d, float scale, trace::Slices slices) {
  trace::CtaTracer<kTrace> tr(slices);
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int i = blockIdx.y * blockDim.y + threadIdx.y;
  const std::int64_t bh = blockIdx.z;
  if (i >= N || c >= d) return;
  const int i0 = blockIdx.y * blockDim.y, rows = extent(i0, blockDim.y, N);  // the CTA's dQ tile
  const int c0 = blockIdx.x * blockDim.x, cols = extent(c0, blockDim.x, d);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::dS, bh, i0, rows, 0, N, rows * std::int64_t(N) * kF, blockIdx.x != 0);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::K, bh, 0, N, c0, cols, std::int64_t(N) * cols * kF, blockIdx.y != 0);
  const float* dsrow = ds + (bh * N + i) * N;  // (N)
  const float* kh = k + bh * N * d;            // (N, d)
  float acc = 0.f;
  for (int j = 0; j < N; ++j) acc += dsrow[j] * kh[std::int64_t(j) * d + c];
  FS_TRACE_EVENT(tr, Kind::AccumulateDQ, Tensor::dQ, bh, i0, rows, c0, cols, 0);
  dq[(bh * N + i) * d + c] = scale * acc;
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::dQ, bh, i0, rows, c0, cols, rows * cols * kF);
}

// dK[j][c] = τ Σ_i dS[i][j] · Q[i][c]. Same shape as dv_kernel.
template <bool kTrace>
__global__ void dk_kernel(const float* __restrict__ ds, const float* __restrict__ q,
                          float* __restrict__ dk, int N, int d, float scale, trace::Slices slices) {
  trace::CtaTracer<kTrace> tr(slices);
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int j = blockIdx.y * blockDim.y + threadIdx.y;
  const std::int64_t bh = blockIdx.z;
  if (j >= N || c >= d) return;
  const int j0 = blockIdx.y * blockDim.y, rows = extent(j0, blockDim.y, N);  // the CTA's dK tile
  const int c0 = blockIdx.x * blockDim.x, cols = extent(c0, blockDim.x, d);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::dS, bh, 0, N, j0, rows, std::int64_t(N) * rows * kF, blockIdx.x != 0);
  FS_TRACE_EVENT(tr, Kind::Load, Tensor::Q, bh, 0, N, c0, cols, std::int64_t(N) * cols * kF, blockIdx.y != 0);
  const float* dsh = ds + bh * N * std::int64_t(N);  // (N, N)
  const float* qh = q + bh * N * d;                  // (N, d)
  float acc = 0.f;
  for (int i = 0; i < N; ++i) acc += dsh[std::int64_t(i) * N + j] * qh[std::int64_t(i) * d + c];
  FS_TRACE_EVENT(tr, Kind::AccumulateDK, Tensor::dK, bh, j0, rows, c0, cols, 0);
  dk[(bh * N + j) * d + c] = scale * acc;
  FS_TRACE_EVENT(tr, Kind::Store, Tensor::dK, bh, j0, rows, c0, cols, rows * cols * kF);
}

dim3 grid2d(int cols, int rows, std::int64_t heads) {
  return dim3((cols + kTile - 1) / kTile, (rows + kTile - 1) / kTile, static_cast<unsigned>(heads));
}

constexpr int kRowsPerBlock = 8;  // warps per block for the one-warp-per-row kernels
unsigned row_blocks(std::int64_t rows) {
  return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

std::size_t fwd_ws_bytes(const Shape& s, const PassSettings&) { return 2 * s.score_elems() * sizeof(float); }
std::size_t bwd_ws_bytes(const Shape& s, const PassSettings&) { return (s.score_elems() + s.rows()) * sizeof(float); }

std::string unsupported(const Shape& s, const PassSettings&) {
  // The grids put B·H in z (at most 65535 blocks) and ⌈N/16⌉ in y (at most 65535).
  if (s.heads() > 65535) return "B·H must be at most 65535 (grid z)";
  if ((s.N + kTile - 1) / kTile > 65535) return "N must be at most 1048560 (grid y)";
  return {};
}

IoCount io_forward(const Shape& s, const PassSettings&) { return io_standard_forward(s); }
IoCount io_backward(const Shape& s, const PassSettings&) { return io_standard_backward(s); }

}  // namespace

// Each launch: kernel<false><<<...>>>(..., Slices{}) and FS_CHECK_LAUNCH(), in an NVTX range
// named after the kernel; with a trace sink, kernel<true> and the sink's slices instead.
void naive_pv(const float* P, const float* v, float* o, const Shape& sh, cudaStream_t stream,
              trace::DeviceSink* tr) {
  trace::launch(tr, "pv_kernel", [](auto tr) { return pv_kernel<tr>; }, grid2d(sh.d, sh.N, sh.heads()),
                dim3(kTile, kTile), 0, stream, P, v, o, sh.N, sh.d);
}

void naive_dv(const float* P, const float* dout, float* dv, const Shape& sh, cudaStream_t stream,
              trace::DeviceSink* tr) {
  trace::launch(tr, "dv_kernel", [](auto tr) { return dv_kernel<tr>; }, grid2d(sh.d, sh.N, sh.heads()),
                dim3(kTile, kTile), 0, stream, P, dout, dv, sh.N, sh.d);
}

void naive_dq_dk(const float* dS, const float* q, const float* k, float* dq, float* dk,
                 const Shape& sh, float scale, cudaStream_t stream, trace::DeviceSink* tr) {
  const dim3 block(kTile, kTile);
  trace::launch(tr, "dq_kernel", [](auto tr) { return dq_kernel<tr>; }, grid2d(sh.d, sh.N, sh.heads()), block, 0,
                stream, dS, k, dq, sh.N, sh.d, scale);
  trace::launch(tr, "dk_kernel", [](auto tr) { return dk_kernel<tr>; }, grid2d(sh.d, sh.N, sh.heads()), block, 0,
                stream, dS, q, dk, sh.N, sh.d, scale);
}

void naive_forward(const FwdParams& p) {
  const Shape& sh = p.shape;
  const NaiveFwdWorkspace ws = fwd_workspace(p.workspace, sh);
  const dim3 block(kTile, kTile);
  nvtx::NamedBuffers names;  // the workspace's matrices by name, in traced runs
  if (p.trace) {
    names.add(ws.s, sh.score_elems() * sizeof(float), "S");
    names.add(ws.p, sh.score_elems() * sizeof(float), "P");
  }

  trace::launch(p.trace, "scores_kernel", [](auto tr) { return scores_kernel<tr>; }, grid2d(sh.N, sh.N, sh.heads()),
                block, 0, p.stream, as<float>(p.q), as<float>(p.k), ws.s, sh.N, sh.d, p.scale, p.causal);
  trace::launch(p.trace, "softmax_kernel", [](auto tr) { return softmax_kernel<tr>; }, row_blocks(sh.rows()),
                kRowsPerBlock * kWarp, 0, p.stream, ws.s, ws.p, p.lse, sh.rows(), sh.N);
  naive_pv(ws.p, as<float>(p.v), as<float>(p.o), sh, p.stream, p.trace);
}

void naive_backward(const BwdParams& p) {
  const Shape& sh = p.shape;
  const float* P = fwd_workspace(const_cast<void*>(p.fwd_workspace), sh).p;  // (B, H, N, N)
  const NaiveBwdWorkspace ws = bwd_workspace(p.workspace, sh);
  const dim3 block(kTile, kTile);
  nvtx::NamedBuffers names;  // the workspaces' matrices by name, in traced runs
  if (p.trace) {
    names.add(P, sh.score_elems() * sizeof(float), "P");
    names.add(ws.dp, sh.score_elems() * sizeof(float), "dP, then dS");
    names.add(ws.D, sh.rows() * sizeof(float), "D");
  }

  naive_dv(P, as<float>(p.dout), as<float>(p.dv), sh, p.stream, p.trace);
  trace::launch(p.trace, "dp_kernel", [](auto tr) { return dp_kernel<tr>; }, grid2d(sh.N, sh.N, sh.heads()), block, 0,
                p.stream, as<float>(p.dout), as<float>(p.v), ws.dp, sh.N, sh.d);
  trace::launch(p.trace, "rowdot_kernel", [](auto tr) { return rowdot_kernel<tr>; }, row_blocks(sh.rows()),
                kRowsPerBlock * kWarp, 0, p.stream, as<float>(p.dout), as<float>(p.o), ws.D, sh.rows(), sh.d, sh.N);
  trace::launch(p.trace, "ds_kernel", [](auto tr) { return ds_kernel<tr>; }, 4096, 256, 0, p.stream, P, ws.dp, ws.D,
                sh.score_elems(), sh.N);
  const float* dS = ws.dp;  // (B, H, N, N), now holding dS
  naive_dq_dk(dS, as<float>(p.q), as<float>(p.k), as<float>(p.dq), as<float>(p.dk), sh, p.scale, p.stream, p.trace);
}

StepInfo step01_info() {
  StepInfo s;
  s.id = "01_naive";
  s.title = "standard attention, S and P materialised in HBM (Algorithm 0)";
  s.variants = {"naive"};
  s.forward = naive_forward;
  s.backward = naive_backward;
  s.fwd_workspace_bytes = fwd_ws_bytes;
  s.bwd_workspace_bytes = bwd_ws_bytes;
  s.unsupported = unsupported;
  s.io_forward = io_forward;
  s.io_backward = io_backward;
  s.memory_note =
      "Its workspace holds N×N matrices per head (S and P; dP for the backward); steps from 03 "
      "on keep no N×N matrix and need O(N) extra memory";
  return s;
}

}  // namespace fs
