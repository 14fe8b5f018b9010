// A run of a step, decided once. From the options (whose shape is the problem's) the plan
// builds the block mask and the pass settings and makes every check that needs no GPU, so a bad
// input is refused, with exit code 2, before any GPU work or large allocation. The timed run
// (run_case, common/driver.hpp), the traced run (trace_case, common/traced_run.hpp), the IO
// model and the result rows all read the plan; nothing below it decides again.
//
//   const fs::RunPlan plan(step, opt);                       // throws InputError
//   const fs::CaseReport r = fs::run_case(plan, problem, dev);
#pragma once

#include <optional>
#include <string>

#include "common/block_mask.hpp"
#include "common/cli.hpp"
#include "common/problem.hpp"

namespace fs {

// The steps with kernels for a dtype, for the message that refuses one (a step program knows
// only its own step; tests/test_plan.cpp checks these against the table of steps).
constexpr const char* kStepsFp32 = "01, 02, 03, 04, 05, 06";
constexpr const char* kSteps16Bit = "08";

// The checks of a run that need neither a GPU nor the block mask: sizes, and the features the
// step lacks (a backward pass, dropout, the dtype). Throws InputError. (RunPlan makes them;
// validate_run, common/validate_run.hpp, makes them before the GPU is looked for.)
void check_features(const StepInfo& step, const Options& opt);

class RunPlan {
 public:
  // Throws InputError, in one line, when `step` cannot run what `opt` asks for.
  RunPlan(const StepInfo& step, const Options& opt);

  const StepInfo& step() const { return *step_; }
  const Options& options() const { return opt_; }
  const Shape& shape() const { return opt_.shape; }
  // The settings of every pass; their mask is the plan's own (the plan must outlive them).
  PassSettings settings() const;
  const BlockMask* mask() const { return mask_ ? &*mask_ : nullptr; }
  double density() const { return mask_ ? mask_->density() : 1.0; }  // fraction of blocks computed
  // What the results and the output call the run: "04_online_softmax/fa2"; the mask's pattern
  // spec or file name (empty for steps without one).
  std::string label() const { return step_->label(opt_.variant); }
  std::string mask_label() const;
  // The step's IO model of one pass, "fwd" or "bwd".
  IoCount io(const std::string& pass) const;

 private:
  const StepInfo* step_;
  Options opt_;
  std::optional<BlockMask> mask_;
};

}  // namespace fs
