// A traced run of a step: what `stepNN_name --trace FILE` does. The problem runs once more
// with a DeviceSink in its params and the NVTX tool recording; each pass becomes one trace
// file (docs/trace-format.md):
//
//   FILE                    the forward
//   FILE less .json (and a trailing .fwd), plus .bwd.json   the backward, with --backward
//                           (t.json → t.bwd.json, t.fwd.json → t.bwd.json)
#pragma once

#include <string>
#include <vector>

#include "common/device.hpp"
#include "common/harness.hpp"
#include "common/plan.hpp"
#include "common/nvtx_tool/nvtx_tool.hpp"
#include "common/recorder/sink.hpp"
#include "common/trace/trace.hpp"
#include "common/trace/validate.hpp"

namespace fs {

struct TraceFile {
  std::string path;
  std::string pass;                  // "fwd" or "bwd"
  trace::ValidationReport report;    // the written trace, validated
};

// Where the backward's trace goes when the forward's goes to `path`.
std::string backward_trace_path(const std::string& path);

// What every traced pass's file holds alike, whatever its step: the device and the build in the
// metadata (gpu, driver, commit, date, tiles, shared memory, event cap), the kernels, tracks and
// events from the sink's records, and the host ranges, marks and buffers from the NVTX capture,
// times relative to t0 (the first host range's start, or the first launch's). The step fills in
// the rest of the metadata (a step of its own driver, step 10, too), then list_tensors.
trace::Trace trace_of_run(const DeviceInfo& dev, const trace::DeviceSink& sink, const nvtx_tool::Capture& host);

// Meta::tensors: `io` (the pass's inputs and outputs), then whatever else the events touch (S, P,
// dP, ...) or an untraced step writes, each at its shape for t.meta (trace::tensor_shape).
void list_tensors(trace::Trace& t, const std::vector<trace::Tensor>& io);

// The trace of one pass: metadata from the step, shape, settings and device; kernels, tracks
// and events from the sink's records; host ranges, marks and buffers from the NVTX capture.
// Times are relative to t0, the start of the first host range (or of the first launch).
// Clustered steps: `clusters` are the ones the pass used (DeviceRun::clusters()), which the
// trace carries so that its slots map to rows (trace.hpp, Meta::clusters).
trace::Trace build_trace(const StepInfo& step, const Shape& shape, const PassSettings& settings,
                         const DeviceInfo& dev, const std::string& pass, const trace::DeviceSink& sink,
                         const nvtx_tool::Capture& host, const SmyrfClusters* clusters = nullptr);

// Runs the plan on `problem` traced (forward, and backward when the plan has one) and writes the
// files to the plan's --trace path. Throws InputError when a file cannot be written or the grid
// is too large to trace.
std::vector<TraceFile> trace_case(const RunPlan& plan, const HostProblem& problem, const DeviceInfo& dev);

}  // namespace fs
