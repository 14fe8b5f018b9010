// bench: the benchmark sweep over the table of steps (every variant) and a grid of shapes,
// appending one CSV row per pass (docs/benchmarks/<gpu>.csv); common/bench.hpp has its options
// and the shapes it runs.
#include <vector>

#include "common/bench.hpp"
#include "steps/registry.hpp"

int main(int argc, char** argv) {
  std::vector<const fs::StepInfo*> steps;
  for (const fs::StepInfo& s : fs::all_steps()) steps.push_back(&s);
  return fs::bench_main(steps, argc, argv);
}
