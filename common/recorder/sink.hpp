// The host side of device tracing for one traced pass: it gives each traced launch its CTA
// slices (device memory), and after the launch copies what the CTAs recorded back.
//
// A launcher receives it through FwdParams::trace / BwdParams::trace (null: tracing off) and
// launches through fs::trace::launch (launch.cuh), which calls begin_kernel and end_kernel.
// In a traced pass every launch is synchronised before the next one (end_kernel), so that each
// kernel runs inside its launch range on the host clock and can be placed there.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/trace/decode.hpp"
#include "common/trace/record.hpp"

namespace fs::trace {

constexpr std::int64_t kDefaultEventCap = 256;  // records per CTA
// Device memory one traced launch may hold for records; past it the cap is lowered for that
// launch (and reported as the trace's event_cap).
constexpr std::size_t kDefaultRecordBudget = std::size_t(1) << 30;

class DeviceSink {
 public:
  explicit DeviceSink(std::int64_t event_cap = kDefaultEventCap,
                      std::size_t record_budget_bytes = kDefaultRecordBudget);
  ~DeviceSink();
  DeviceSink(const DeviceSink&) = delete;
  DeviceSink& operator=(const DeviceSink&) = delete;

  // Before a traced launch of `func`: allocates and clears its slices, notes the launch range's
  // start. Throws InputError when the grid has more CTAs than the record budget can hold.
  Slices begin_kernel(const char* name, dim3 grid, dim3 block, std::size_t dynamic_smem, const void* func,
                      cudaStream_t stream);
  // After it: synchronises `stream`, notes the launch range's end, copies the records back.
  void end_kernel(cudaStream_t stream);

  // The next traced launch records in lanes (record.hpp): `names.size()` lanes per CTA, each
  // with its own slice and track (step 09's warpgroups). One launch only: the one after it
  // records one lane per CTA again unless this is called again.
  void set_lanes(std::vector<std::string> names) { lane_names_ = std::move(names); }

  // Tile sizes for the trace's metadata (steps that tile call this from their launcher).
  void set_tiles(int Br, int Bc) {
    br_ = Br;
    bc_ = Bc;
  }
  int Br() const { return br_; }
  int Bc() const { return bc_; }

  const std::vector<KernelCapture>& captures() const { return captures_; }
  std::int64_t event_cap() const { return event_cap_; }
  // The smallest cap any launch ran with (below event_cap() when the budget lowered it).
  std::int64_t effective_cap() const;
  // The most shared memory (static + dynamic) one CTA of any traced launch used.
  std::int64_t max_smem_per_cta() const;

 private:
  void release();

  std::int64_t event_cap_;
  std::size_t budget_;
  int br_ = 0, bc_ = 0;
  std::vector<std::string> lane_names_;  // of the next launch (set_lanes)
  std::vector<KernelCapture> captures_;
  void* headers_ = nullptr;  // of the launch in flight
  void* records_ = nullptr;
};

}  // namespace fs::trace
