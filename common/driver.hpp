// The program every step's main() runs: parse, allocate, run, check, time, save.
//
//   int main(int argc, char** argv) { return fs::step_main(fs::stepNN_info(), argc, argv); }
//
// The order: options parsed, inputs read, the run planned (every check that needs no GPU), then
// the GPU: the timed run (run_case) and the traced run (trace_case, common/traced_run.hpp).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "common/device.hpp"
#include "common/harness.hpp"
#include "common/plan.hpp"
#include "common/results.hpp"
#include "common/timing.hpp"
#include "common/verify.hpp"

namespace fs {

struct PassReport {
  // "fwd" or "bwd"; with --bench, a variant that prepares its inputs (StepInfo::e4m3) adds its
  // forward's parts timed alone (FwdParams::part): "fwd_prep" and "fwd_kernel", unchecked.
  std::string pass;
  std::optional<CheckReport> check;  // with --check
  std::optional<Timing> timing;      // with --bench
  double tflops = 0;
  std::int64_t peak_mem_bytes = 0;   // device memory the run held (inputs, outputs, workspace)
  IoCount io;                        // the step's IO model for this pass
  double density = 1;                // block-sparse steps: the mask's fraction of nonzero blocks
};

struct CaseReport {
  std::vector<PassReport> passes;
  bool pass() const;  // every check that ran passed
};

// Runs the plan on `problem` (the plan's shape) on the current device: the passes, then what
// its options ask for (check, save, bench). Throws ResourceError when the problem does not fit
// the GPU's free memory.
CaseReport run_case(const RunPlan& plan, const HostProblem& problem, const DeviceInfo& dev);

// The result row of one pass, as --csv writes it.
ResultRow result_row(const RunPlan& plan, const PassReport& pass, const DeviceInfo& dev);

// main() of a step program. Exit codes: see common/errors.hpp.
int step_main(const StepInfo& step, int argc, char** argv);

// Runs a program's body and turns the project's exceptions into one line on stderr and the exit
// code every program uses (common/errors.hpp): bad input or too little host memory 2, a GPU
// without enough memory 3, a CUDA error 1 (3 when it is an allocation's), anything else 1 as an
// internal error. step_main, the tour and step 10's program (its own driver) end this way.
int run_guarded(const std::string& prog, const std::function<int()>& body);

}  // namespace fs
