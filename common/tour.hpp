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

#include <string>
#include <vector>

#include "common/problem.hpp"

namespace fs {

// main() of the tour over `steps` (their order is the table's). Exit codes: common/errors.hpp.
int tour_main(const std::vector<const StepInfo*>& steps, int argc, const char* const* argv, const std::string& prog);

}  // namespace fs
