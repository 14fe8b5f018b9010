// From device records (record.hpp) to the trace model: kernels, one track per lane of a CTA (one
// per CTA for most kernels) that recorded anything, events on the host clock in logical order. Plain C++: the tests feed it synthetic
// record buffers, the harness feeds it what DeviceSink copied back.
#pragma once

#include <cstdint>
#include <vector>

#include "common/trace/record.hpp"
#include "common/trace/trace.hpp"

namespace fs::trace {

// One traced launch as it came back from the device.
struct KernelCapture {
  Kernel kernel;  // name, grid, block, smem_bytes (ts_ns, dur_ns are set by decoding)
  // The launch range on the host clock (host_clock_ns): from just before the launch to the
  // end of the synchronisation after it, so the kernel ran inside it.
  std::int64_t launch_begin_ns = 0, launch_end_ns = 0;
  std::uint32_t cap = 0;               // records per lane
  std::vector<CtaHeader> headers;      // one per lane of each CTA of the grid: [ctas][kernel.lanes]
  std::vector<DeviceRecord> records;   // headers.size() × cap
};

// Fills out.kernels, out.tracks, out.events and out.meta.events_dropped from `launches`
// (replacing what was there). Host times become relative to `t0_ns`.
//
//   placement  each kernel's earliest %globaltimer (its first lane's start) is placed at the
//              start of its launch range; %globaltimer differences give the rest
//   events     an event begins where its lane's previous one ended, the first at the lane's start;
//              times that run backwards (a torn record) are clamped, never overlapped
//   seq        events ordered by (kernel, begin, track, order within the lane): the logical
//              order the visualizer can replay when the 32 ns timer makes time too coarse
//   dropped    count − cap for each lane whose slice was full
//
// Throws TraceError on records that cannot come from device.cuh (an unknown kind or tensor, a
// negative head, row or column, an SM id past kMaxSm, a grid below 1 CTA, a record buffer of
// the wrong size).
void decode_kernels(const std::vector<KernelCapture>& launches, std::int64_t t0_ns, Trace& out);

}  // namespace fs::trace
