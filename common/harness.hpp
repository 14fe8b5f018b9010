// Running a step on a problem: the host tensors, their device copies, the step's workspace,
// and the forward and backward passes as every step program, the tour and the GPU tests run
// them (one code path, so the tests exercise what the programs run).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/block_mask.hpp"
#include "common/buffer.hpp"
#include "common/problem.hpp"
#include "common/recorder/nvtx.hpp"
#include "common/smyrf.hpp"

namespace fs {

struct HostProblem {
  Shape shape;
  DType dtype = DType::fp32;   // the values below are all values of this dtype
  std::vector<float> q, k, v;  // (B, H, N, d)
  std::vector<float> dout;     // (B, H, N, d), empty unless a backward will run
  std::int64_t rounded = 0;    // loaded values that were not of the dtype, rounded to it
};

// Fresh standard-normal inputs (never zeros: zeros hide unwritten outputs), rounded to `dtype`.
HostProblem random_problem(const Shape& s, std::uint64_t seed, bool with_dout, DType dtype = DType::fp32);

// q.npy, k.npy, v.npy (and do.npy when with_dout) from `dir`, each (B, H, N, d) and all the
// same shape: float32 files, or float16 ones for fp16; values are rounded to `dtype` (and
// counted in `rounded`). Throws InputError naming the file and what is wrong, NaN and infinite
// values (by element) included.
HostProblem load_problem(const std::string& dir, bool with_dout, DType dtype = DType::fp32);

// Problems whose byte counts overflow or are absurd are rejected before anything else.
void validate_shape(const Shape& s);

// The mask a block-sparse step runs with: `mask`, or every block at the step's default block
// size (StepInfo::mask_block).
BlockMask effective_mask(const StepInfo& step, const Shape& s, const BlockMask* mask);

// The IO model of one pass, "fwd" or "bwd": the step's hook (StepInfo::io_forward, io_backward).
// With packed sequences (PassSettings::packed) the sum over the sequences of the hook on each one's
// own problem (PackedSeqs::sequence: B = 1, its n queries and n_k keys; the settings without the
// sequences); a sequence with no queries or no keys has no walk at all and moves only the outputs
// the reference has there, written once: O = 0 and LSE = −inf of its queries (forward), dQ = 0 of
// its queries or dK = dV = 0 of its keys (backward).
IoCount pass_io(const StepInfo& step, const Shape& s, const PassSettings& settings, const std::string& pass);

// Device memory a run of `step` on shape `s` allocates: inputs, outputs and workspaces.
std::size_t device_bytes_needed(const StepInfo& step, const Shape& s, const PassSettings& settings, bool backward);

// The device side of one problem. Construct, then forward() (and backward()). The backward's
// buffers are allocated at the first backward(), so memory::peak_bytes() after a forward is
// the forward's alone. `problem` must outlive the run.
class DeviceRun {
 public:
  DeviceRun(const StepInfo& step, const HostProblem& problem, const PassSettings& settings,
            bool backward, cudaStream_t stream = nullptr);

  // Poison the outputs with NaN, then launch. Asynchronous: call sync() before reading.
  void forward();
  void backward();
  void sync() const;

  FwdParams fwd_params() const;
  BwdParams bwd_params() const;

  // Passes from now on are traced into `sink` (null: not traced); see common/recorder/sink.hpp.
  void set_trace(trace::DeviceSink* sink) { trace_ = sink; }

  // Outputs to the host.
  std::vector<float> o() const { return to_host(o_, "download O"); }
  std::vector<float> lse() const;
  std::vector<float> dq() const { return to_host(dq_, "download dQ"); }
  std::vector<float> dk() const { return to_host(dk_, "download dK"); }
  std::vector<float> dv() const { return to_host(dv_, "download dV"); }
  // Clustered steps, after a forward: the clusters it used (StepInfo::cluster_orders).
  SmyrfClusters clusters() const;

 private:
  static std::vector<float> to_host(const DeviceTensor& t, const char* what);

  const StepInfo& step_;
  Shape shape_;
  PassSettings settings_;
  cudaStream_t stream_;
  DeviceTensor q_, k_, v_, o_;
  DeviceBuffer<float> lse_;
  const std::vector<float>* dout_host_ = nullptr;
  DeviceTensor dout_, dq_, dk_, dv_;
  DeviceBuffer<unsigned char> fwd_ws_, bwd_ws_;
  DeviceBuffer<int> row_ptr_, col_idx_, col_ptr_, row_idx_;  // block-sparse steps: the mask's lists
  DeviceBuffer<std::int32_t> given_orders_;  // clustered steps with given clusters: q orders, then k orders
  BlockSparse sparse_;
  DeviceBuffer<float> alibi_;  // steps with score features: the ALiBi slopes
  ScoreMods mods_;
  DeviceBuffer<std::int32_t> cu_q_, cu_k_;  // packed sequences: their offsets
  Packed packed_;
  nvtx::NamedBuffers names_;  // after the buffers: unregistered before they are freed
  trace::DeviceSink* trace_ = nullptr;
};

std::string format_bytes(double bytes);  // "1.50 GiB"

}  // namespace fs
