#include "common/device.hpp"

#include <cuda_runtime.h>

#include <cctype>

#include "common/check.hpp"

namespace fs {

std::string gpu_unavailable_reason() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaErrorNoDevice || (err == cudaSuccess && count == 0))
    return "No CUDA GPU found on this machine.";
  if (err == cudaErrorInsufficientDriver)
    return "No CUDA GPU found (no NVIDIA driver, or one older than this CUDA build needs).";
  if (err != cudaSuccess)
    return std::string("No usable CUDA GPU (") + cudaGetErrorString(err) + ").";
  return {};
}

DeviceInfo query_device() {
  DeviceInfo info;
  FS_CUDA_CHECK(cudaGetDevice(&info.index));
  cudaDeviceProp prop{};
  FS_CUDA_CHECK(cudaGetDeviceProperties(&prop, info.index));
  info.name = prop.name;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  info.l2_bytes = static_cast<std::size_t>(prop.l2CacheSize);
  info.smem_per_block_optin = prop.sharedMemPerBlockOptin;
  info.smem_per_sm = prop.sharedMemPerMultiprocessor;
  info.total_bytes = prop.totalGlobalMem;
  FS_CUDA_CHECK(cudaMemGetInfo(&info.free_bytes, &info.total_bytes));
  FS_CUDA_CHECK(cudaDriverGetVersion(&info.driver_version));
  return info;
}

std::size_t smem_budget_bytes() {
  static const std::size_t budget = [] {
    constexpr std::size_t kHopper = 227 * 1024;
    if (!gpu_unavailable_reason().empty()) return kHopper;
    int dev = 0, bytes = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
      return kHopper;
    return static_cast<std::size_t>(bytes);
  }();
  return budget;
}

std::string gpu_slug(const std::string& name) {
  // Drop the vendor word, keep letters and digits of the model, lower case, '-' between.
  std::string s = name;
  for (const char* vendor : {"NVIDIA ", "Tesla "})
    if (s.rfind(vendor, 0) == 0) s = s.substr(std::char_traits<char>::length(vendor));
  std::string out;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (!out.empty() && out.back() != '-')
      out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "unknown-gpu" : out;
}

}  // namespace fs
