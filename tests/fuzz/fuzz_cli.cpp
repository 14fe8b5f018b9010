// The step programs' command line (common/cli.hpp) on any argv: the input's NUL-separated
// pieces are the arguments, its first byte picks a step's features (variants, dropout, block
// mask). Options or one InputError, never a crash; the options it returns are in range.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "common/errors.hpp"
#include "tests/fuzz/fuzz_util.hpp"

namespace {

// The kinds of step the table holds, as parse_options sees them (no kernels needed).
std::vector<fs::StepInfo> steps() {
  std::vector<fs::StepInfo> out(4);
  out[0].id = "01_naive";
  out[0].variants = {"naive"};
  out[1].id = "04_online_softmax";
  out[1].variants = {"alg1", "fa2"};
  out[2].id = "05_recompute_backward";
  out[2].variants = {"atomic", "deterministic"};
  out[2].dropout = true;
  out[3] = out[2];
  out[3].id = "06_block_sparse";
  out[3].block_sparse = true;
  auto no_backward = [](const fs::BwdParams&) {};
  for (std::size_t i : {0, 2, 3}) out[i].backward = no_backward;
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fs::fuzz::quiet_stdout();  // --help prints the help: not worth the time
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::vector<fs::StepInfo> table = steps();
  const fs::StepInfo& step = table[fs::fuzz::take_byte(data, size) % table.size()];
  const std::vector<std::string> args = fs::fuzz::arguments("step", data, size);
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  try {
    const auto opt = fs::parse_options(step, int(argv.size()), argv.data());
    if (opt) {
      const fs::Shape& s = opt->shape;
      if (s.B < 1 || s.H < 1 || s.N < 1 || s.d < 1 || opt->reps < 1 || opt->trace_cap < 1) std::abort();
      if (!(opt->dropout >= 0.f && opt->dropout < 1.f)) std::abort();
      if (opt->variant < 0 || opt->variant >= int(step.variants.size())) std::abort();
      if (opt->backward && !step.backward) std::abort();
    }
  } catch (const fs::InputError&) {
  }
  std::cout.clear();
  return 0;
}
