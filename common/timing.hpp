// GPU timing with CUDA events: warm-up runs, the L2 cache flushed before every timed run
// (so a run does not find the previous run's inputs in the 50+ MB L2), median of R runs.
//
// The flush is enqueued kHoldFlushes times, and only then the start event and the run: while the
// GPU overwrites the buffer again and again, the host has time to enqueue the whole run, so its
// kernels start back to back and the events time the GPU's work, not the host's gaps between
// launches. One flush is enough for a step's launches from C++; PyTorch's backward, launched from
// Python through autograd, is not, and docs/benchmarks/torch_sdpa.py times with the same hold.
#pragma once

#include <cuda_runtime.h>

#include <functional>

#include "common/buffer.hpp"

namespace fs {

class L2Flusher {
 public:
  explicit L2Flusher(std::size_t l2_bytes);  // allocates 2 × L2 once
  void flush(cudaStream_t stream);           // overwrites all of it
  void hold(cudaStream_t stream);            // flushes kHoldFlushes times
  static constexpr int kHoldFlushes = 32;

 private:
  DeviceBuffer<unsigned char> scratch_;
};

struct Timing {
  double median_ms = 0, min_ms = 0, max_ms = 0;
  int reps = 0;
};

// Runs `launch` (which enqueues work on `stream`) `warmup` times untimed, then `reps` times
// timed, each timed run preceded by flusher->hold() when a flusher is given.
Timing time_gpu(const std::function<void()>& launch, cudaStream_t stream, int warmup, int reps,
                L2Flusher* flusher);

inline double tflops(double flops, double ms) { return ms > 0 ? flops / (ms * 1e-3) / 1e12 : 0; }

}  // namespace fs
