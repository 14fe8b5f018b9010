// The host clock of traces: the NVTX tool's ranges and DeviceSink's launch ranges both read it,
// so that kernels can be placed among the host ranges.
#pragma once

#include <chrono>
#include <cstdint>

namespace fs::trace {

inline std::int64_t host_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace fs::trace
