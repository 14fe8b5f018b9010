#include "common/buffer.hpp"

#include <algorithm>
#include <atomic>
#include <stdexcept>

namespace fs::memory {

namespace {
std::atomic<std::size_t> g_current{0};
std::atomic<std::size_t> g_peak{0};
}  // namespace

std::size_t current_bytes() { return g_current.load(); }
std::size_t peak_bytes() { return g_peak.load(); }
void reset_peak() { g_peak.store(g_current.load()); }

void* allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  FS_CUDA_CHECK(cudaMalloc(&p, bytes));
  const std::size_t now = g_current.fetch_add(bytes) + bytes;
  std::size_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
  return p;
}

void release(void* p, std::size_t bytes) noexcept {
  if (!p) return;
  cudaFree(p);  // no throw from destructors; a failure here is reported by the next call
  g_current.fetch_sub(bytes);
}

}  // namespace fs::memory

namespace fs {

void DeviceTensor::upload(const std::vector<float>& host) {
  if (host.size() != count_) throw std::logic_error("DeviceTensor::upload: size mismatch");
  std::vector<unsigned char> encoded(bytes());
  encode(dtype_, host.data(), encoded.data(), count_);
  bytes_.upload(encoded.data(), encoded.size());
}

std::vector<float> DeviceTensor::download() const {
  std::vector<unsigned char> raw(bytes());
  bytes_.download(raw.data(), raw.size());
  std::vector<float> out(count_);
  decode(dtype_, raw.data(), out.data(), count_);
  return out;
}

}  // namespace fs
