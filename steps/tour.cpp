// The tour: every step this build has, at one canonical size, checked against the fp64 reference
// and timed, in one table (common/tour.hpp; a step program's --tour runs its own rows alone).
// Without a GPU it says so in one line, runs the CPU reference (what a check compares against)
// and exits 0.
#include <vector>

#include "common/tour.hpp"
#include "steps/registry.hpp"

int main(int argc, char** argv) {
  std::vector<const fs::StepInfo*> steps;
  for (const fs::StepInfo& s : fs::all_steps()) steps.push_back(&s);
  return fs::tour_main(steps, argc, argv, "tour");
}
