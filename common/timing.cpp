#include "common/timing.hpp"

#include <algorithm>
#include <vector>

namespace fs {

L2Flusher::L2Flusher(std::size_t l2_bytes) : scratch_(2 * std::max<std::size_t>(l2_bytes, 1 << 20)) {}

void L2Flusher::flush(cudaStream_t stream) {
  FS_CUDA_CHECK(cudaMemsetAsync(scratch_.get(), 0, scratch_.bytes(), stream));
}

void L2Flusher::hold(cudaStream_t stream) {
  for (int i = 0; i < kHoldFlushes; ++i) flush(stream);
}

namespace {
struct Event {
  cudaEvent_t e{};
  Event() { FS_CUDA_CHECK(cudaEventCreate(&e)); }
  ~Event() { cudaEventDestroy(e); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
};
}  // namespace

Timing time_gpu(const std::function<void()>& launch, cudaStream_t stream, int warmup, int reps,
                L2Flusher* flusher) {
  for (int i = 0; i < warmup; ++i) launch();
  FS_CUDA_CHECK(cudaStreamSynchronize(stream));

  std::vector<double> ms;
  Event start, stop;
  for (int r = 0; r < reps; ++r) {
    if (flusher) flusher->hold(stream);
    FS_CUDA_CHECK(cudaEventRecord(start.e, stream));
    launch();
    FS_CUDA_CHECK(cudaEventRecord(stop.e, stream));
    FS_CUDA_CHECK(cudaEventSynchronize(stop.e));
    float t = 0;
    FS_CUDA_CHECK(cudaEventElapsedTime(&t, start.e, stop.e));
    ms.push_back(t);
  }
  Timing out;
  out.reps = reps;
  if (ms.empty()) return out;
  std::sort(ms.begin(), ms.end());
  const std::size_t n = ms.size();
  out.median_ms = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
  out.min_ms = ms.front();
  out.max_ms = ms.back();
  return out;
}

}  // namespace fs
