// What a step program checks before it looks for a GPU: every mistake in the options, the
// inputs and the output paths is reported on any machine, in one line with exit code 2, instead
// of only on a GPU machine after the work (issue 14).
#pragma once

#include "common/cli.hpp"
#include "common/harness.hpp"
#include "common/problem.hpp"

namespace fs {

// Throws InputError naming the first problem of running `step` as `opt` asks, on opt.shape
// (already from --load when given):
//   outputs   --save DIR, --trace FILE (and its backward file), --csv FILE: a folder that does
//             not exist or cannot be written, checked without creating anything
//   shape     sizes whose byte counts overflow, features the step lacks, and what its kernels
//             cannot run (StepInfo::refusal: a head dimension it has no kernels for, B·H past its
//             grid's limit, a mask's blocks off its tiles, ...)
//   memory    host memory for the inputs and the outputs read back, beyond what is available
//   mask      block-sparse steps: --pattern parsed and checked on the grid without building the
//             mask, --mask read and checked against the grid; a mask that keeps no block at all
//             (with --causal: no block on or below the diagonal)
// Cheap by design: it allocates nothing the size of the problem, so run_program calls it before
// looking for a GPU and builds the RunPlan (which builds the mask, T² bytes) only after. For a
// --pattern, StepInfo::refusal sees the mask's grid (block sizes, Tr, Tc) with no block filled
// in: a step's check must judge the grid, not which blocks are on (step 06's does).
void validate_run(const StepInfo& step, const Options& opt);

// Throws InputError when an input of `problem` holds NaN or an infinity: "<dir>/v.npy: element
// (0, 0, 3, 5) is NaN; the inputs must be finite". Every output would be NaN, and a check
// against the reference would fail for a reason that is not the kernel's (README, "Using a step").
void require_finite(const HostProblem& problem, const std::string& dir);

}  // namespace fs
