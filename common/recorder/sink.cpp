#include "common/recorder/sink.hpp"

#include <algorithm>

#include "common/check.hpp"
#include "common/errors.hpp"
#include "common/trace/clock.hpp"

namespace fs::trace {

DeviceSink::DeviceSink(std::int64_t event_cap, std::size_t record_budget_bytes)
    : event_cap_(event_cap), budget_(record_budget_bytes) {
  if (event_cap < 1 || event_cap > 0x7fffffff) throw InputError("the event cap must be 1..2^31-1 records per CTA");
}

DeviceSink::~DeviceSink() { release(); }

void DeviceSink::release() {
  // No throw from here (destructor); a failed free surfaces at the next CUDA call.
  if (headers_) cudaFree(headers_);
  if (records_) cudaFree(records_);
  headers_ = records_ = nullptr;
}

Slices DeviceSink::begin_kernel(const char* name, dim3 grid, dim3 block, std::size_t dynamic_smem,
                                const void* func, cudaStream_t stream) {
  release();
  KernelCapture kc;
  kc.kernel.name = name;
  kc.kernel.grid[0] = static_cast<int>(grid.x);
  kc.kernel.grid[1] = static_cast<int>(grid.y);
  kc.kernel.grid[2] = static_cast<int>(grid.z);
  kc.kernel.block[0] = static_cast<int>(block.x);
  kc.kernel.block[1] = static_cast<int>(block.y);
  kc.kernel.block[2] = static_cast<int>(block.z);
  cudaFuncAttributes attr{};
  FS_CUDA_CHECK(cudaFuncGetAttributes(&attr, func));
  kc.kernel.smem_bytes = static_cast<std::int64_t>(attr.sharedSizeBytes + dynamic_smem);

  kc.kernel.lanes = lane_names_.empty() ? 1 : static_cast<int>(lane_names_.size());
  kc.kernel.lane_names = std::move(lane_names_);
  lane_names_.clear();
  const std::uint64_t ctas = std::uint64_t(grid.x) * grid.y * grid.z;
  const std::uint64_t slices = ctas * std::uint64_t(kc.kernel.lanes);  // one per lane of each CTA
  const std::uint64_t fit = budget_ / (slices * sizeof(DeviceRecord));
  if (fit < 1)
    throw InputError(std::string("tracing ") + name + "'s " + std::to_string(ctas) +
                     " CTAs needs more record memory than the trace budget: trace a smaller shape");
  kc.cap = static_cast<std::uint32_t>(std::min<std::uint64_t>(fit, std::uint64_t(event_cap_)));
  kc.headers.resize(slices);
  kc.records.resize(slices * kc.cap);

  FS_CUDA_CHECK(cudaMalloc(&headers_, slices * sizeof(CtaHeader)));
  FS_CUDA_CHECK(cudaMalloc(&records_, kc.records.size() * sizeof(DeviceRecord)));
  // Zeroed headers: a CTA that records nothing leaves count 0 and gets no track.
  FS_CUDA_CHECK(cudaMemsetAsync(headers_, 0, slices * sizeof(CtaHeader), stream));
  // Zeroed records too: the whole buffer is copied back, slots no CTA filled included, and
  // compute-sanitizer's initcheck reports a copy of memory nothing wrote.
  FS_CUDA_CHECK(cudaMemsetAsync(records_, 0, kc.records.size() * sizeof(DeviceRecord), stream));
  FS_CUDA_CHECK(cudaStreamSynchronize(stream));
  kc.launch_begin_ns = host_clock_ns();
  captures_.push_back(std::move(kc));
  return {static_cast<CtaHeader*>(headers_), static_cast<DeviceRecord*>(records_), captures_.back().cap,
          static_cast<std::uint32_t>(captures_.back().kernel.lanes)};
}

void DeviceSink::end_kernel(cudaStream_t stream) {
  FS_CUDA_CHECK(cudaStreamSynchronize(stream));
  KernelCapture& kc = captures_.back();
  kc.launch_end_ns = host_clock_ns();
  FS_CUDA_CHECK(cudaMemcpy(kc.headers.data(), headers_, kc.headers.size() * sizeof(CtaHeader),
                           cudaMemcpyDeviceToHost));
  FS_CUDA_CHECK(cudaMemcpy(kc.records.data(), records_, kc.records.size() * sizeof(DeviceRecord),
                           cudaMemcpyDeviceToHost));
  release();
}

std::int64_t DeviceSink::effective_cap() const {
  std::int64_t cap = event_cap_;
  for (const auto& kc : captures_) cap = std::min<std::int64_t>(cap, kc.cap);
  return cap;
}

std::int64_t DeviceSink::max_smem_per_cta() const {
  std::int64_t smem = 0;
  for (const auto& kc : captures_) smem = std::max(smem, kc.kernel.smem_bytes);
  return smem;
}

}  // namespace fs::trace
