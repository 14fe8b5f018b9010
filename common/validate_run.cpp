#include "common/validate_run.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/block_mask.hpp"
#include "common/errors.hpp"
#include "common/files.hpp"
#include "common/host_memory.hpp"
#include "common/plan.hpp"
#include "common/traced_run.hpp"

namespace fs {

namespace {

void check_output(const std::string& option, const std::string& problem) {
  if (!problem.empty()) throw InputError(option + ": " + problem);
}

}  // namespace

void validate_run(const StepInfo& step, const Options& opt) {
  // Outputs first: the cheapest mistake to make and the most annoying to find after the work.
  if (!opt.save_dir.empty()) check_output("--save " + opt.save_dir, output_dir_problem(opt.save_dir));
  if (!opt.csv_path.empty()) check_output("--csv " + opt.csv_path, output_file_problem(opt.csv_path));
  if (!opt.trace_path.empty()) {
    check_output("--trace " + opt.trace_path, output_file_problem(opt.trace_path));
    if (opt.backward) check_output("--trace", output_file_problem(backward_trace_path(opt.trace_path)));
  }

  const Shape& s = opt.shape;
  check_features(step, opt);
  const std::string who = "step " + step.id;

  // Host memory: Q, K, V (and dO), and what comes back to check or save (O, LSE; dQ, dK, dV).
  const std::uint64_t tensor = std::uint64_t(s.elems()) * sizeof(float);
  const std::uint64_t host = tensor * (opt.backward ? 8 : 4) + std::uint64_t(s.rows()) * sizeof(float);
  require_host_memory(host, "B=" + std::to_string(s.B) + " H=" + std::to_string(s.H) + " N=" + std::to_string(s.N) +
                                " d=" + std::to_string(s.d) + " on the host");

  // The step's own check (StepInfo::refusal), on the mask's grid alone for block-sparse steps:
  // RunPlan builds the mask itself only once a GPU is there to run it.
  BlockMask m;
  if (step.block_sparse) {
    const int block = opt.block ? opt.block : step.mask_block(s.d);
    bool keeps_none = false;
    if (opt.mask_path.empty()) {  // the grid alone: the mask itself may be large (T² bytes)
      const PatternGrid g = check_pattern(opt.pattern, s.N, block);
      m.block_r = m.block_c = block;
      m.Tr = g.Tr;
      m.Tc = g.Tc;
      keeps_none = g.no_block;
      require_host_memory(std::uint64_t(g.Tr) * std::uint64_t(g.Tc) * 2, "the block mask '" + opt.pattern + "'");
    } else {  // what the file holds: reading it costs what the file is
      m = read_block_mask(opt.mask_path, s.N, block, block);
      keeps_none = to_lists(m, opt.causal).nonzero() == 0;
    }
    if (keeps_none)
      throw InputError("the block mask keeps no block" + std::string(opt.causal ? " on or below the diagonal" : "") +
                       ": every query would attend to no key");
  }
  const PassSettings settings{opt.effective_scale(), opt.causal, opt.variant, opt.effective_dropout(),
                              step.block_sparse ? &m : nullptr, opt.dtype};
  if (std::string why = step.refusal(s, settings); !why.empty()) throw InputError(who + ": " + why);
}

void require_finite(const HostProblem& problem, const std::string& dir) {
  const Shape& s = problem.shape;
  const std::pair<const char*, const std::vector<float>*> inputs[] = {
      {"q.npy", &problem.q}, {"k.npy", &problem.k}, {"v.npy", &problem.v}, {"do.npy", &problem.dout}};
  for (const auto& [name, data] : inputs)
    for (std::size_t i = 0; i < data->size(); ++i) {
      const float x = (*data)[i];
      if (std::isfinite(x)) continue;
      const std::int64_t d = s.d, n = s.N, h = s.H, at = std::int64_t(i);
      throw InputError(dir + "/" + name + ": element (" + std::to_string(at / (d * n * h)) + ", " +
                       std::to_string(at / (d * n) % h) + ", " + std::to_string(at / d % n) + ", " +
                       std::to_string(at % d) + ") is " + (std::isnan(x) ? "NaN" : x > 0 ? "+inf" : "-inf") +
                       "; the inputs must be finite");
    }
}

}  // namespace fs
