// Step 04 — online softmax: the FlashAttention forward. One pass over K and V; the running
// max m and normaliser ℓ are corrected as they grow, and the output with them:
//
//   m_new = max(m, m̃)                          m̃ = rowmax(S_ij)
//   ℓ_new = e^{m − m_new} ℓ + e^{m̃ − m_new} ℓ̃     ℓ̃ = rowsum(exp(S_ij − m̃))
//   O    ← (ℓ e^{m − m_new} O + e^{m̃ − m_new} P̃_ij V_j) / ℓ_new
//
// Two kernels, the same math in two loop orders (docs/notation.md):
//
//   alg1  Algorithm 1 as the paper writes it. Outer loop over K_j, V_j (line 5), inner loop
//         over Q_i (line 7). O, ℓ, m live in HBM and are read and written for every (i, j)
//         (lines 8, 12, 13); Bc = ⌈M/4d⌉, Br = min(⌈M/4d⌉, d) from the SRAM budget M (line 1);
//         one CTA per (batch, head), as in FlashAttention (v1). HBM traffic Θ(N²d²/M)
//         (Theorem 2): K, V once, Q and O once per K/V tile.
//
//   fa2   FlashAttention-2's order. Each CTA owns a Q tile (outer) and streams K_j, V_j
//         (inner); O, ℓ, m stay in registers, O is divided by ℓ once at the end, and only O
//         and LSE are written. Parallel over (batch, head, Q tile). Causal: K tiles past the
//         diagonal are never loaded, only the diagonal tiles are masked.
//
// Both leave LSE = m + log ℓ (natural log) for the backward (step 05). From step 03: one pass
// instead of two (4N²d FLOPs instead of 6N²d), K read once per Q tile instead of twice.
//
// Tracing (--trace): every kernel is a template on kTrace, as step 01's; <false> is the plain
// kernel. Nothing is marked cached: the IO models (io_flash1_forward, io_flash2_forward) count
// every tile each time it moves, and a tile's bytes are its real rows × d × 4 (the zero-filled
// rows of a tail tile past N move nothing). The softmax and rescale events carry the running
// m (natural log) and ℓ of one sampled row per CTA:
//   alg1  init: each grid-stride chunk of O, ℓ, m stored; main: K_j, V_j loaded, then for each
//         Q tile Q_i, O_i, ℓ_i, m_i loaded, S_ij, softmax, rescale, ℓ_i and m_i stored, P̃V
//         accumulated and O_i stored; the sampled row is the first row of the last Q tile,
//         the one tile every K/V tile updates (causal too); LSE: m, ℓ loaded, LSE stored.
//   fa2   Q_i loaded, then per K/V tile K_j, V_j loaded, S_ij, softmax, rescale, P̃V
//         accumulated; O_i and LSE stored. The sampled row is the CTA's first (thread 0's).
//         Causal: one skip event for the key tiles past the CTA's last row.
#include "steps/04_online_softmax/flash.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "common/check.hpp"
#include "common/device.hpp"
#include "common/flash_tile.cuh"
#include "common/io_model.hpp"
#include "common/recorder/device.cuh"
#include "common/recorder/launch.cuh"
#include "common/recorder/nvtx.hpp"
#include "common/flash_features.cuh"
#include "steps/04_online_softmax/flash2_forward.cuh"
#include "steps/04_online_softmax/flash_params.hpp"

namespace fs {

namespace {

// ===========================================================================================
// alg1: Algorithm 1, faithfully
// ===========================================================================================

constexpr int kAlg1Threads = 256;
constexpr int kAlg1Warps = kAlg1Threads / kWarpSize;

// Shared memory of the alg1 kernel, in floats, for tiles Br × Bc and head dimension d. K is
// stored with rows padded to d + 1 floats: threads of a warp read the same column of
// consecutive rows of K, which would otherwise all fall in one bank.
struct Alg1Layout {
  int Br, Bc, d;
  __host__ __device__ int k_stride() const { return d + 1; }
  __host__ __device__ int s_stride() const { return Bc + 1; }
  __host__ __device__ std::size_t k() const { return 0; }                                  // (Bc, d+1)
  __host__ __device__ std::size_t v() const { return k() + std::size_t(Bc) * k_stride(); }  // (Bc, d)
  __host__ __device__ std::size_t q() const { return v() + std::size_t(Bc) * d; }           // (Br, d)
  __host__ __device__ std::size_t o() const { return q() + std::size_t(Br) * d; }           // (Br, d)
  __host__ __device__ std::size_t s() const { return o() + std::size_t(Br) * d; }           // (Br, Bc+1)
  __host__ __device__ std::size_t stats() const { return s() + std::size_t(Br) * s_stride(); }  // 2 × (Br)
  __host__ __device__ std::size_t floats() const { return stats() + 2 * std::size_t(Br); }
};

// Algorithm 1, line 2: O = 0, ℓ = 0, m = -inf in HBM. Element e of the B·H·N rows × d is
// column e mod d of row i of head bh, at its place in O's layout (o_strides, H heads). (For the
// trace: each pass of the grid-stride loop stores elements [e − threadIdx.x, + blockDim.x) of O
// and, below B·H·N, of ℓ and m.)
template <bool kTrace>
__global__ void alg1_init_kernel(float* o, Strides o_strides, int H, float* l, float* m, std::int64_t rows, int d,
                                 int N, trace::Slices slices) {
  trace::CtaTracer<kTrace> tr(slices);
  for (std::int64_t e = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < rows * d;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = e / d, bh = r / N, i = r % N;
    o[o_strides.of_head(bh, H) + i * o_strides.row + e % d] = 0.f;
    if (e < rows) {
      l[e] = 0.f;
      m[e] = -INFINITY;
    }
    if constexpr (kTrace)
      if (tr.records()) {
        const std::int64_t e0 = e - threadIdx.x, e1 = min(rows * d, e0 + blockDim.x);
        trace::for_each_tile(e0, e1, N, d, [&](std::int64_t bh, std::int64_t i, std::int64_t n_rows, std::int64_t c,
                                        std::int64_t n_cols) {
          FS_TRACE_EVENT(tr, Kind::Store, Tensor::O, bh, i, n_rows, c, n_cols, n_rows * n_cols * kF);
        });
        if (e0 < rows)
          trace::for_each_head(e0, min(rows, e1), N, [&](std::int64_t bh, std::int64_t i, std::int64_t n) {
            FS_TRACE_EVENT(tr, Kind::Store, Tensor::L, bh, i, n, 0, 1, n * kF);
            FS_TRACE_EVENT(tr, Kind::Store, Tensor::M, bh, i, n, 0, 1, n * kF);
          });
      }
  }
}

// LSE = m + log ℓ once every K/V tile has been seen; ℓ = 0 (no visible key) gives -inf.
// (N only locates the rows by head for the trace.)
template <bool kTrace>
__global__ void alg1_lse_kernel(const float* m, const float* l, float* lse, std::int64_t rows, int N,
                                trace::Slices slices) {
  trace::CtaTracer<kTrace> tr(slices);
  for (std::int64_t r = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < rows;
       r += std::int64_t(gridDim.x) * blockDim.x) {
    // The CTA's rows in this pass of the loop, [r0, r1), split by head for the trace.
    const std::int64_t r0 = r - threadIdx.x, r1 = min(rows, r0 + blockDim.x);
    if constexpr (kTrace)
      if (tr.records())
        trace::for_each_head(r0, r1, N, [&](std::int64_t bh, std::int64_t i, std::int64_t n) {
          FS_TRACE_EVENT(tr, Kind::Load, Tensor::M, bh, i, n, 0, 1, n * kF);
          FS_TRACE_EVENT(tr, Kind::Load, Tensor::L, bh, i, n, 0, 1, n * kF);
        });
    lse[r] = l[r] > 0.f ? m[r] + logf(l[r]) : -INFINITY;
    if constexpr (kTrace)
      if (tr.records())
        trace::for_each_head(r0, r1, N, [&](std::int64_t bh, std::int64_t i, std::int64_t n) {
          FS_TRACE_EVENT(tr, Kind::Store, Tensor::LSE, bh, i, n, 0, 1, n * kF);
        });
  }
}

// One CTA per (batch, head): grid (B·H), block 256. m and ℓ are natural-log statistics here,
// as in the paper's text. gm, gl: (B, H, N) in HBM.
template <int D, bool kTrace>
__global__ void __launch_bounds__(kAlg1Threads)
    alg1_forward_kernel(const FwdParams p, Alg1Layout L, float* __restrict__ gm, float* __restrict__ gl,
                        trace::Slices slices) {
  trace::CtaTracer<kTrace> tr(slices);
  extern __shared__ float smem[];
  float* sK = smem + L.k();  // (Bc, D+1)
  float* sV = smem + L.v();  // (Bc, D)
  float* sQ = smem + L.q();  // (Br, D)
  float* sO = smem + L.o();  // (Br, D)
  float* sS = smem + L.s();  // (Br, Bc+1)  S_ij, then P̃_ij
  float* sA = smem + L.stats();         // (Br) ℓ_i e^{m_i − m_new} / ℓ_new  (weight of the old O_i)
  float* sB = smem + L.stats() + L.Br;  // (Br) e^{m̃ − m_new} / ℓ_new        (weight of P̃_ij V_j)
  const int N = p.shape.N, Br = L.Br, Bc = L.Bc;
  const std::int64_t bh = blockIdx.x;
  // The head's rows of Q, K, V and O, ld_* floats apart (the tensors' strides).
  const std::int64_t ld_q = p.q_strides.row, ld_k = p.k_strides.row, ld_v = p.v_strides.row, ld_o = p.o_strides.row;
  const float* gQ = as<float>(p.q) + p.q_strides.of_head(bh, p.shape.H);
  const float* gK = as<float>(p.k) + p.k_strides.of_head(bh, p.shape.H);
  const float* gV = as<float>(p.v) + p.v_strides.of_head(bh, p.shape.H);
  float* gO = as<float>(p.o) + p.o_strides.of_head(bh, p.shape.H);
  gm += bh * N;
  gl += bh * N;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  // For the trace: the sampled row, the first row of the last Q tile (every K/V tile updates
  // it, causal too). Thread 0 (warp 0, lane 0) computes row 0 of each tile's statistics.
  const int sample_i0 = (N - 1) / Br * Br;
  float sample_m = -INFINITY, sample_l = 0.f;

  for (int j0 = 0; j0 < N; j0 += Bc) {  // line 5: for 1 ≤ j ≤ Tc
    const int cols = min(Bc, N - j0);
    // line 6: load K_j, V_j from HBM to on-chip SRAM (rows past N as zeros)
    for (int e = threadIdx.x; e < Bc * D; e += kAlg1Threads) {
      const int c = e / D, x = e % D;
      sK[c * L.k_stride() + x] = c < cols ? gK[(j0 + c) * ld_k + x] : 0.f;
      sV[e] = c < cols ? gV[(j0 + c) * ld_v + x] : 0.f;
    }
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::K, bh, j0, cols, 0, D, cols * D * kF);
    FS_TRACE_EVENT(tr, Kind::Load, Tensor::V, bh, j0, cols, 0, D, cols * D * kF);
    // line 7: for 1 ≤ i ≤ Tr — causal: Q tiles whose every row precedes key j0 are skipped
    const int i_first = p.causal ? j0 / Br * Br : 0;
    for (int i0 = i_first; i0 < N; i0 += Br) {
      const int rows = min(Br, N - i0);
      // line 8: load Q_i, O_i, ℓ_i, m_i from HBM to on-chip SRAM
      for (int e = threadIdx.x; e < Br * D; e += kAlg1Threads) {
        const int r = e / D, x = e % D;
        const bool in = r < rows;
        sQ[e] = in ? gQ[(i0 + r) * ld_q + x] : 0.f;
        sO[e] = in ? gO[(i0 + r) * ld_o + x] : 0.f;
      }
      __syncthreads();  // K_j, V_j (first i) and Q_i, O_i are in SRAM for everyone
      FS_TRACE_EVENT(tr, Kind::Load, Tensor::Q, bh, i0, rows, 0, D, rows * D * kF);
      FS_TRACE_EVENT(tr, Kind::Load, Tensor::O, bh, i0, rows, 0, D, rows * D * kF);
      FS_TRACE_EVENT(tr, Kind::Load, Tensor::L, bh, i0, rows, 0, 1, rows * kF);  // read at lines 10-11
      FS_TRACE_EVENT(tr, Kind::Load, Tensor::M, bh, i0, rows, 0, 1, rows * kF);

      // line 9: S_ij = Q_i K_jᵀ, times τ (Algorithm 2, line 10), masked (keys past N, and causal
      // j > i, get -inf)
      for (int e = threadIdx.x; e < Br * Bc; e += kAlg1Threads) {
        const int r = e / Bc, c = e % Bc;
        float acc = 0.f;
#pragma unroll 8
        for (int x = 0; x < D; ++x) acc = fmaf(sQ[r * D + x], sK[c * L.k_stride() + x], acc);
        const bool masked = c >= cols || (p.causal && j0 + c > i0 + r);
        sS[r * L.s_stride() + c] = masked ? -INFINITY : p.scale * acc;
      }
      __syncthreads();  // whole rows of S_ij are read below
      FS_TRACE_EVENT(tr, Kind::ComputeS, Tensor::S, bh, i0, rows, j0, cols, 0);

      // lines 10-11, a warp per row: m̃, P̃ = exp(S − m̃), ℓ̃; m_new, ℓ_new
      for (int r = warp; r < Br; r += kAlg1Warps) {
        float* srow = sS + r * L.s_stride();
        float mt = -INFINITY;
        for (int c = lane; c < Bc; c += kWarpSize) mt = fmaxf(mt, srow[c]);
        mt = warp_max(mt);
        // Every key of this tile masked for this row (or a padding row): m̃ = -inf, and
        // exp(-inf - (-inf)) would be NaN. Its P̃ is 0 and it changes nothing.
        const float mt_safe = mt == -INFINITY ? 0.f : mt;
        float lt = 0.f;
        for (int c = lane; c < Bc; c += kWarpSize) {
          const float e = expf(srow[c] - mt_safe);
          srow[c] = e;
          lt += e;
        }
        lt = warp_sum(lt);
        if (lane == 0) {
          const float m_old = r < rows ? gm[i0 + r] : -INFINITY;
          const float l_old = r < rows ? gl[i0 + r] : 0.f;
          const float m_new = fmaxf(m_old, mt);
          // With m_new = -inf nothing has been seen yet: keep ℓ = 0, O = 0.
          const float a = m_new == -INFINITY ? 0.f : l_old * expf(m_old - m_new);
          const float b = m_new == -INFINITY ? 0.f : expf(mt_safe - m_new) * (lt > 0.f ? 1.f : 0.f);
          const float l_new = a + b * lt;
          const float inv = l_new > 0.f ? 1.f / l_new : 0.f;
          sA[r] = a * inv;
          sB[r] = b * inv;
          if (r < rows) {  // line 13: ℓ_i ← ℓ_new, m_i ← m_new to HBM
            gl[i0 + r] = l_new;
            gm[i0 + r] = m_new;
          }
          if constexpr (kTrace)
            if (r == 0) {  // thread 0: the tile's first row, for the trace
              sample_m = m_new;
              sample_l = l_new;
            }
        }
      }
      __syncthreads();  // P̃_ij and the weights are read by every thread below
      if constexpr (kTrace) {
        if (i0 == sample_i0) {
          FS_TRACE_STATS(tr, Kind::Softmax, Tensor::P, bh, i0, rows, j0, cols, sample_m, sample_l, i0);
          FS_TRACE_STATS(tr, Kind::Rescale, Tensor::O, bh, i0, rows, 0, D, sample_m, sample_l, i0);
        } else {
          FS_TRACE_EVENT(tr, Kind::Softmax, Tensor::P, bh, i0, rows, j0, cols, 0);
          FS_TRACE_EVENT(tr, Kind::Rescale, Tensor::O, bh, i0, rows, 0, D, 0);
        }
      }
      FS_TRACE_EVENT(tr, Kind::Store, Tensor::L, bh, i0, rows, 0, 1, rows * kF);  // written at line 13
      FS_TRACE_EVENT(tr, Kind::Store, Tensor::M, bh, i0, rows, 0, 1, rows * kF);

      // line 12: O_i ← diag(ℓ_new)⁻¹ (diag(ℓ_i) e^{m_i − m_new} O_i + e^{m̃ − m_new} P̃_ij V_j) to HBM
      for (int e = threadIdx.x; e < rows * D; e += kAlg1Threads) {
        const int r = e / D, x = e % D;
        const float* prow = sS + r * L.s_stride();
        float acc = 0.f;
        for (int c = 0; c < cols; ++c) acc = fmaf(prow[c], sV[c * D + x], acc);
        gO[(i0 + r) * ld_o + x] = sA[r] * sO[e] + sB[r] * acc;
      }
      FS_TRACE_EVENT(tr, Kind::AccumulateO, Tensor::O, bh, i0, rows, 0, D, 0);
      FS_TRACE_EVENT(tr, Kind::Store, Tensor::O, bh, i0, rows, 0, D, rows * D * kF);
      __syncthreads();  // sQ, sO, sS are overwritten by the next Q tile
    }
  }
}

// ===========================================================================================
// Launchers
// ===========================================================================================

template <int D>
void launch_alg1(const FwdParams& params) {
  const FwdParams p = with_strides(params, "flash_forward");  // the tensors' layouts (flash_params.hpp)
  const Shape& s = p.shape;
  const Alg1Tiles t = alg1_tiles(D, smem_budget_bytes());
  const Alg1Layout L{t.Br, t.Bc, D};
  float* gm = static_cast<float*>(p.workspace);  // (B, H, N)
  float* gl = gm + s.rows();                     // (B, H, N)
  nvtx::NamedBuffers names;  // the workspace's statistics by name, in traced runs
  if (p.trace) {
    names.add(gm, s.rows() * sizeof(float), "m");
    names.add(gl, s.rows() * sizeof(float), "l");
    p.trace->set_tiles(t.Br, t.Bc);
  }
  constexpr bool kTraced = trace::kTracedAt<D>;  // traced twins at the traced runs' d only
  trace::launch<kTraced>(p.trace, "alg1_init_kernel", [](auto tr) { return alg1_init_kernel<tr>; }, 1024, 256, 0,
                         p.stream, as<float>(p.o), p.o_strides, s.H, gl, gm, s.rows(), D, s.N);
  trace::launch<kTraced>(p.trace, "alg1_forward_kernel", [](auto tr) { return alg1_forward_kernel<D, tr>; },
                         static_cast<unsigned>(s.heads()), kAlg1Threads, t.smem_bytes, p.stream, p, L, gm, gl);
  trace::launch<kTraced>(p.trace, "alg1_lse_kernel", [](auto tr) { return alg1_lse_kernel<tr>; }, 256, 256, 0, p.stream,
                         gm, gl, p.lse, s.rows(), s.N);
}

template <int D>
void launch(const FwdParams& p) {
  if (p.variant == kAlgorithm1)
    launch_alg1<D>(p);
  else if (p.mods.softcap > 0.f)  // FlashAttention's interface features (common/flash_features.cuh)
    launch_flash2<D, Flash2Tile<D>, DenseWalk, NoDropout, FlashFeatures>(p);
  else if (p.mods.on() || !p.shape.square() || p.packed.on())  // a window, ALiBi; Nk ≠ N, GQA; packed sequences
    launch_flash2<D, Flash2Tile<D>, DenseWalk, NoDropout, FlashFeaturesNoCap>(p);
  else
    launch_flash2<D, Flash2Tile<D>, DenseWalk, NoDropout>(p);
}

std::size_t fwd_ws_bytes(const Shape& s, const PassSettings&) { return 2 * s.rows() * sizeof(float); }  // alg1's m, ℓ

std::string unsupported(const Shape& s, const PassSettings& settings) {
  if (std::string why = tiled_unsupported(s); !why.empty()) return why;
  if (settings.variant == kAlgorithm1 && alg1_tiles(s.d, smem_budget_bytes()).Br < 1)
    return "the GPU's shared memory is too small for Algorithm 1's tiles";
  if (settings.variant == kAlgorithm1 && settings.features.on())
    return "Algorithm 1's kernel takes no window, softcap or ALiBi (--variant fa2 does)";
  if (settings.variant == kAlgorithm1 && !s.square())
    return "Algorithm 1's kernel takes K and V like Q only (--variant fa2 takes --seq-k and --heads-kv)";
  if (settings.variant == kAlgorithm1 && settings.packed.on())
    return "Algorithm 1's kernel takes no packed sequences (--variant fa2 takes --varlen)";
  return {};
}

IoCount io_forward(const Shape& s, const PassSettings& settings) {
  if (settings.variant == kAlgorithm1) {
    const Alg1Tiles t = alg1_tiles(s.d, smem_budget_bytes());
    return io_flash1_forward(s, settings.causal, t.Br, t.Bc);
  }
  const Flash2Tiles t = flash2_tiles(s.d);
  const ScoreFeatures& f = settings.features;
  return io_flash2_forward(s, settings.causal, t.Br, t.Bc, 4, clamp_reach(f.window_left, s.N, s.keys()),
                           clamp_reach(f.window_right, s.N, s.keys()));
}

}  // namespace

Alg1Tiles alg1_tiles(int d, std::size_t smem_budget_bytes) {
  Alg1Tiles t;
  for (std::size_t M = smem_budget_bytes / sizeof(float); M >= std::size_t(4 * d); M -= M / 64 + 1) {
    const int Bc = static_cast<int>((M + 4 * d - 1) / (4 * d));  // line 1: Bc = ⌈M/4d⌉
    const int Br = std::min(Bc, d);                              //         Br = min(⌈M/4d⌉, d)
    const Alg1Layout L{Br, Bc, d};
    if (L.floats() * sizeof(float) <= smem_budget_bytes) return {Br, Bc, M, L.floats() * sizeof(float)};
  }
  return t;
}

Flash2Tiles flash2_tiles(int d) {
  if (!is_compiled_head_dim(d)) return {};
  return dispatch_head_dim(d, [](auto D) {
    using T = Flash2Tile<D>;
    return Flash2Tiles{T::kBR, T::kBC, T::kRows, T::kSplit};
  });
}

void flash_forward(const FwdParams& p) {
  if (!is_compiled_head_dim(p.shape.d)) throw CudaError(cudaErrorInvalidValue, "flash_forward: unsupported d");
  if (p.packed.on() && p.variant == kAlgorithm1)  // one CTA walks a whole head: it has no sequences
    throw CudaError(cudaErrorInvalidValue, "flash_forward: Algorithm 1's kernel takes no packed sequences (fa2 does)");
  dispatch_head_dim(p.shape.d, [&](auto D) { launch<D>(p); });
}

StepInfo step04_info() {
  StepInfo s;
  s.id = "04_online_softmax";
  s.title = "online softmax: the FlashAttention forward (Algorithm 1, and FlashAttention-2's order)";
  s.variants = {"alg1", "fa2"};
  s.forward = flash_forward;
  s.fwd_workspace_bytes = fwd_ws_bytes;
  s.unsupported = unsupported;
  s.untraced = untraced_head_dim;  // traced kernels at d = 64 only (trace::kTracedAt)
  s.io_forward = io_forward;
  s.score_mods = true;  // fa2's (unsupported refuses them for alg1)
  s.kv_shapes = true;   // likewise
  s.packed = true;      // likewise (flash_forward refuses them for alg1)
  s.strides = true;     // every variant's
  return s;
}

}  // namespace fs
