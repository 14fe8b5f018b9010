// The problem every step solves, and the one interface every step implements.
//
// Layout (all steps): Q, K, V, O, dO, dQ, dK, dV are (B, H, N, d) float32, row-major and
// contiguous; LSE is (B, H, N), natural log: LSE_i = m_i + log(ℓ_i) (ALGORITHMS.md,
// Notation). Causal masks key j > query i (top-left aligned: N queries, N keys).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fs {

namespace trace {
class DeviceSink;  // common/trace/sink.hpp
}

struct Shape {
  int B = 1;   // batch
  int H = 1;   // heads
  int N = 1;   // sequence length (queries = keys)
  int d = 64;  // head dimension

  std::int64_t heads() const { return std::int64_t(B) * H; }
  std::int64_t rows() const { return heads() * N; }        // elements of LSE
  std::int64_t elems() const { return rows() * d; }        // elements of Q (or K, V, O)
  std::int64_t score_elems() const { return heads() * N * std::int64_t(N); }  // of S or P
};

// Default softmax scale τ = 1/√d.
float default_scale(int d);

// FLOPs by the FlashAttention papers' convention: forward 4·B·H·N²·d (two matmuls of
// 2·N²·d each), halved when causal; backward 2.5× the forward.
double forward_flops(const Shape& s, bool causal);
double backward_flops(const Shape& s, bool causal);

// HBM traffic of one pass, as a step's IO model counts it.
struct IoCount {
  std::int64_t read_bytes = 0;
  std::int64_t write_bytes = 0;
  std::int64_t total() const { return read_bytes + write_bytes; }
};

// Every forward launcher takes this.
struct FwdParams {
  const float* q = nullptr;  // (B, H, N, d)
  const float* k = nullptr;  // (B, H, N, d)
  const float* v = nullptr;  // (B, H, N, d)
  float* o = nullptr;        // (B, H, N, d)
  float* lse = nullptr;      // (B, H, N)
  Shape shape;
  float scale = 0.f;
  bool causal = false;
  int variant = 0;              // index into StepInfo::variants
  void* workspace = nullptr;    // StepInfo::fwd_workspace_bytes(shape) bytes; kept for the backward
  cudaStream_t stream = nullptr;
  // Tracing (common/trace/launch.cuh): null runs the plain kernels; set, the launcher runs
  // their traced instantiations and the sink collects what each CTA recorded.
  trace::DeviceSink* trace = nullptr;
};

// Every backward launcher takes this. The forward's O and LSE are inputs.
struct BwdParams {
  const float* q = nullptr;     // (B, H, N, d)
  const float* k = nullptr;     // (B, H, N, d)
  const float* v = nullptr;     // (B, H, N, d)
  const float* o = nullptr;     // (B, H, N, d)
  const float* lse = nullptr;   // (B, H, N)
  const float* dout = nullptr;  // (B, H, N, d)  dO = ∂loss/∂O
  float* dq = nullptr;          // (B, H, N, d)
  float* dk = nullptr;          // (B, H, N, d)
  float* dv = nullptr;          // (B, H, N, d)
  Shape shape;
  float scale = 0.f;
  bool causal = false;
  int variant = 0;
  const void* fwd_workspace = nullptr;  // what the forward left there (step 01: S and P)
  void* workspace = nullptr;            // StepInfo::bwd_workspace_bytes(shape) bytes
  cudaStream_t stream = nullptr;
  trace::DeviceSink* trace = nullptr;   // as FwdParams::trace
};

struct DeviceInfo;

// One row of the table of steps that the tour, the tests and the benchmarks iterate over.
struct StepInfo {
  std::string id;                     // "01_naive"
  std::string title;                  // one line for tables and --help
  std::vector<std::string> variants;  // kernels the step holds; variant 0 is the default
  void (*forward)(const FwdParams&) = nullptr;
  void (*backward)(const BwdParams&) = nullptr;  // nullptr: the step has no backward
  std::size_t (*fwd_workspace_bytes)(const Shape&) = nullptr;
  std::size_t (*bwd_workspace_bytes)(const Shape&) = nullptr;
  // Empty when the step runs this shape on this device; otherwise why not, in one line.
  std::string (*unsupported)(const Shape&, const DeviceInfo&) = nullptr;
  IoCount (*io_forward)(const Shape&, bool causal, int variant) = nullptr;
  IoCount (*io_backward)(const Shape&, bool causal, int variant) = nullptr;
  // Said when a shape does not fit the GPU: what the step's memory grows with.
  std::string memory_note;
};

}  // namespace fs
