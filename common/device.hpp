// What the harness needs to know about the GPU, and whether there is one.
#pragma once

#include <cstddef>
#include <string>

namespace fs {

struct DeviceInfo {
  int index = 0;
  std::string name;                   // "NVIDIA H200"
  int cc_major = 0, cc_minor = 0;     // compute capability
  int sm_count = 0;
  std::size_t l2_bytes = 0;
  std::size_t smem_per_block_optin = 0;  // the most dynamic shared memory one CTA may ask for
  std::size_t smem_per_sm = 0;
  std::size_t total_bytes = 0;
  std::size_t free_bytes = 0;         // at the time of query_device()
  int driver_version = 0;             // e.g. 13000
};

// Empty string when a usable CUDA device is present; otherwise one plain sentence saying
// why not (no driver, no device, ...) that can be shown to a user as it is.
std::string gpu_unavailable_reason();

// Properties of the current device. Call only when gpu_unavailable_reason() is empty.
DeviceInfo query_device();

// Shared memory one CTA may use on the current device (cudaDevAttrMaxSharedMemoryPerBlockOptin),
// the M of the paper's tile sizes. Without a GPU: 227 KiB, the H100/H200 value, so that IO
// counts on a build machine are those of the GPU the docs were measured on.
std::size_t smem_budget_bytes();

// "NVIDIA H200" -> "h200": the name used for docs/benchmarks/<gpu>.csv.
std::string gpu_slug(const std::string& name);

}  // namespace fs
