// The program every step's main() runs: parse, allocate, run, check, time, save.
//
//   int main(int argc, char** argv) { return fs::step_main(fs::stepNN_info(), argc, argv); }
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "common/device.hpp"
#include "common/harness.hpp"
#include "common/results.hpp"
#include "common/timing.hpp"
#include "common/verify.hpp"

namespace fs {

struct PassReport {
  std::string pass;                  // "fwd" or "bwd"
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

// The block mask `opt` asks a block-sparse step for (--mask FILE, else --pattern), for the
// shape opt.shape; nothing for other steps. Throws InputError on a bad mask or pattern.
std::optional<BlockMask> block_mask_for(const StepInfo& step, const Options& opt);
// What the CSV and the output call it: the pattern spec, or the mask file's name.
std::string mask_label(const Options& opt);

// Runs `step` on `problem` as `opt` says (check, bench, backward, variant, ...) on the
// current device. Throws ResourceError when the problem does not fit the GPU's free memory,
// InputError when the step does not support the shape.
CaseReport run_case(const StepInfo& step, const Options& opt, const HostProblem& problem,
                    const DeviceInfo& dev);

// The result row of one pass, as --csv writes it.
ResultRow result_row(const StepInfo& step, const Options& opt, const PassReport& pass,
                     const DeviceInfo& dev);

// main() of a step program. Exit codes: see common/errors.hpp.
int step_main(const StepInfo& step, int argc, char** argv);

}  // namespace fs
