// The tour: steps at one canonical size, checked against the fp64 reference and timed, one row per
// pass, and (with --trace-dir) a traced run of each recorded for the visualizer. Without a GPU it
// says so in one line, runs the CPU reference instead (what a check compares against) and exits 0.
//
//   tour [options]                  every step this build has (steps/tour.cpp)
//   stepNN_name --tour [options]    that step's rows alone: bash cmake/quickstart.sh runs each step's
//                                   program as soon as it is built, while the next one compiles
//
// Options: the shape (--batch 2 --heads 16 --seq 2048 --dim 64), --causal, --dtype, --reps, --csv,
// --step (the tour program), --trace-dir DIR, and --no-header: the rows alone, under a header an
// earlier run printed (without a GPU such a run prints nothing).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/plan.hpp"
#include "common/problem.hpp"

namespace fs {

// One row of the tour: a step's variant and its plan, or why the variant cannot run the tour's
// problem (a row "skipped": step 09's rungs are compiled at d = 128 alone).
struct TourCase {
  const StepInfo* step = nullptr;
  int variant = 0;
  std::string name;              // "04_online_softmax/fa2", "07_smyrf 8x32"
  DType dtype = DType::fp32;    // the element type it runs in (without --dtype: its own default)
  std::optional<RunPlan> plan;   // empty: refused
  std::string refused;           // the plan's refusal
};

// The tour's options and its rows, decided before any GPU is looked for, so that every bad input
// is one line and exit code 2 on any machine: numbers, --csv and --trace-dir (checked as the step
// programs check their outputs), --step, --dtype (some chosen step must have kernels for it;
// without it each variant runs in fp32 where it has fp32 kernels, else in its step's first type:
// step 08's fa2 and step 09 in bf16), and the shape — refused where some chosen step has no
// variant that runs it (tour --dim 3: step 03 has kernels for d = 16, 32, 64 and 128 only; --step
// runs one step alone).
struct TourPlan {
  Options opt;
  std::vector<const StepInfo*> steps;  // those --step chose, in the table's order
  std::vector<TourCase> cases;         // every variant of theirs that has kernels of the type
  std::string trace_dir;
  bool no_header = false;
};

// The tour's command line over `all` (the tour program's steps, or a step program's own). Empty
// when --help was asked for (and printed). Throws InputError, in one line.
std::optional<TourPlan> plan_tour(const std::vector<const StepInfo*>& all, int argc, const char* const* argv,
                                  const std::string& prog);

// main() of the tour over `steps` (their order is the table's). Exit codes: common/errors.hpp.
int tour_main(const std::vector<const StepInfo*>& steps, int argc, const char* const* argv, const std::string& prog);

}  // namespace fs
