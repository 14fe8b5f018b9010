// The tour (common/tour.hpp): the tour program's and every step program's --tour.
#include "common/tour.hpp"

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "common/cli_numbers.hpp"
#include "common/driver.hpp"
#include "common/errors.hpp"
#include "common/files.hpp"
#include "common/reference.hpp"
#include "common/smyrf.hpp"
#include "common/traced_run.hpp"

namespace fs {

namespace {

void print_rule() { std::printf("%s\n", std::string(108, '-').c_str()); }

// No GPU: the CPU reference at a small size, fp64 and the plain fp32 version, with the fp32
// version's error (the quantity every GPU tolerance is built from).
void cpu_tour(const Shape& s, bool causal, std::uint64_t seed) {
  const HostProblem p = random_problem(s, seed, false);
  const AttnOptions opt{default_scale(s.d), causal};
  const auto rows = all_indices(s.rows());
  auto timed = [](auto&& fn) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  std::vector<double> o64, l64;
  std::vector<float> o32, l32;
  const double ms64 =
      timed([&] { reference_forward<double>(s, p.q.data(), p.k.data(), p.v.data(), opt, rows, o64, l64); });
  const double ms32 =
      timed([&] { reference_forward<float>(s, p.q.data(), p.k.data(), p.v.data(), opt, rows, o32, l32); });
  ErrorStat e;
  for (std::size_t i = 0; i < o64.size(); ++i) e.add(o32[i], o64[i]);
  std::printf("CPU reference, B=%d H=%d N=%d d=%d%s\n", s.B, s.H, s.N, s.d, causal ? " causal" : "");
  print_rule();
  std::printf("%-24s %10s %10s %14s\n", "implementation", "time ms", "GFLOP/s", "max err vs fp64");
  print_rule();
  const double flops = forward_flops(s, causal);
  std::printf("%-24s %10.1f %10.2f %14s\n", "cpu fp64 (reference)", ms64, flops / ms64 / 1e6, "-");
  std::printf("%-24s %10.1f %10.2f %14.2e\n", "cpu fp32 (tolerance)", ms32, flops / ms32 / 1e6, e.max_abs);
}

// A traced forward (and backward, where the step has one) of every step and variant at the
// traced runs' small shape, written to `dir` and validated: what the visualizer opens next.
bool record_traces(const std::string& dir, const std::vector<const StepInfo*>& steps, const DeviceInfo& dev) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);  // plan_tour checked the folder
  if (ec) throw InputError("--trace-dir " + dir + ": cannot create the folder (" + ec.message() + ")");
  Options opt;
  opt.shape = kTraceShape;
  int files = 0, invalid = 0;
  for (const StepInfo* each : steps) {
    const StepInfo& step = *each;
    opt.dtype = step.dtypes.front();  // the step's first element type (fp32 up to step 06)
    const HostProblem problem = random_problem(opt.shape, opt.seed, true, opt.dtype);
    for (std::size_t v = 0; v < step.variants.size(); ++v) {
      Options o = opt;
      o.variant = static_cast<int>(v);
      o.backward = step.backward != nullptr;
      o.trace_path = dir + "/" + step.id + (step.variants.size() > 1 ? "_" + step.variants[v] : "") + ".fwd.json";
      // A variant compiled for other shapes (step 09's rungs and fp8: d = 128) is left out, and a
      // backward the variant does not have (fp8's): the plan says which.
      std::optional<RunPlan> plan;
      try {
        plan.emplace(step, o);
      } catch (const InputError&) {
        o.backward = false;
        try {
          plan.emplace(step, o);
        } catch (const InputError& e) {
          std::printf("trace %s: skipped: %s\n", step.label(o.variant).c_str(), e.what());
          continue;
        }
      }
      for (const TraceFile& f : trace_case(*plan, problem, dev)) {
        ++files;
        if (!f.report.ok()) {
          ++invalid;
          std::printf("trace %s: INVALID: %s\n", f.path.c_str(), f.report.summary().c_str());
        }
      }
    }
  }
  std::printf("traces: %d files in %s (B=H=1, N=%d, d=%d), %s\n", files, dir.c_str(), opt.shape.N,
              opt.shape.d, invalid ? "SOME INVALID" : "all valid");
  return invalid == 0;
}

}  // namespace

std::optional<TourPlan> plan_tour(const std::vector<const StepInfo*>& all, int argc, const char* const* argv,
                                  const std::string& prog) {
  CLI::App app{"flashsteps tour: " + std::string(all.size() == 1 ? "step " + all.front()->id : "every step") +
                   " at one size, checked against the fp64 reference and timed",
               prog};
  TourPlan t;
  Options& opt = t.opt;
  opt.shape = {2, 16, 2048, 64};
  opt.check = opt.bench = opt.backward = true;
  opt.reps = 10;
  std::string only;
  app.add_option("-b,--batch", opt.shape.B, "batch size")->transform(decimal<int>())->capture_default_str();
  app.add_option("--heads", opt.shape.H, "heads")->transform(decimal<int>())->capture_default_str();
  app.add_option("-n,--seq", opt.shape.N, "sequence length")->transform(decimal<int>())->capture_default_str();
  app.add_option("-d,--dim", opt.shape.d, "head dimension")->transform(decimal<int>())->capture_default_str();
  app.add_flag("--causal", opt.causal, "causal mask");
  std::string dtype = "fp32";
  app.add_option("--dtype", dtype,
                 "element type: fp32, or bf16 / fp16 (the steps with tensor-core kernels); without it a variant "
                 "without fp32 kernels runs in its step's first type (step 08's fa2, step 09: bf16)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  app.add_option("--reps", opt.reps, "timed runs per pass")->transform(decimal<int>())->capture_default_str();
  app.add_option("--csv", opt.csv_path, "append the result rows to FILE");
  if (all.size() > 1) app.add_option("--step", only, "run only this step (e.g. 01)");
  app.add_option("--trace-dir", t.trace_dir,
                 "also record a traced run of every step (B=H=1, N=256, d=64) into DIR, for the visualizer")
      ->type_name("DIR");
  app.add_flag("--no-header", t.no_header,
               "the rows alone, under the header of an earlier run (bash cmake/quickstart.sh runs each step so); "
               "without a GPU, nothing");
  if (!parse_command_line(app, argc, argv)) return std::nullopt;
  opt.dtype = *parse_dtype(dtype);

  validate_shape(opt.shape);
  if (opt.reps < 1 || opt.reps > 100000) throw InputError("--reps must be from 1 to 100000 (got " + std::to_string(opt.reps) + ")");
  if (!opt.csv_path.empty())
    if (std::string why = output_file_problem(opt.csv_path); !why.empty()) throw InputError("--csv " + opt.csv_path + ": " + why);
  if (!t.trace_dir.empty())
    if (std::string why = output_dir_problem(t.trace_dir); !why.empty())
      throw InputError("--trace-dir " + t.trace_dir + ": " + why);
  for (const StepInfo* s : all) {
    const std::string number = s->id.substr(0, s->id.find('_'));
    if (only.empty() || s->id == only || number == only || (only.size() == 1 && number == "0" + only))
      t.steps.push_back(s);
  }
  if (t.steps.empty()) throw InputError("--step " + only + ": no such step in this build");
  // Every variant of every chosen step: planned now (a refusal is its row's "skipped"); a step none
  // of whose variants runs the problem is the input's error. With --dtype, the steps that have kernels
  // of that type; without, each variant in fp32 where it has fp32 kernels, else in the first type
  // its step plans it in (step 08's fa2 and step 09 in bf16), so that every variant gets its rows.
  const bool dtype_given = app.count("--dtype") > 0;
  for (const StepInfo* each : t.steps) {
    const StepInfo& step = *each;
    if (dtype_given && !step.takes(opt.dtype)) continue;
    std::vector<DType> types{opt.dtype};
    if (!dtype_given) types.insert(types.end(), step.dtypes.begin(), step.dtypes.end());
    std::string first_refusal;
    bool runs = false;
    for (std::size_t v = 0; v < step.variants.size(); ++v) {
      Options o = opt;
      o.variant = static_cast<int>(v);
      o.backward = opt.backward && step.backward;
      if (step.clustered) o.smyrf = kSmyrfDefault;  // the paper's 8 rounds of clusters of 32
      TourCase c;
      c.step = each;
      c.variant = o.variant;
      c.name = step.label(o.variant) + (step.clustered ? " " + smyrf_spec(o.smyrf) : "");
      for (DType type : types) {
        if (!step.takes(type)) continue;
        o.dtype = c.dtype = type;
        try {
          c.plan.emplace(step, o);
          runs = true;
          break;
        } catch (const InputError& e) {
          if (c.refused.empty()) c.refused = e.what();  // the first type's refusal, when none plans
        }
      }
      if (!c.plan && first_refusal.empty()) first_refusal = c.refused;
      t.cases.push_back(std::move(c));
    }
    if (!runs)
      throw InputError(first_refusal + (all.size() > 1 ? " (--step runs one step alone)" : ""));
  }
  // A --dtype no chosen step has is refused.
  if (t.cases.empty() && dtype_given)
    throw InputError((all.size() == 1 ? "step " + all.front()->id + " has no " : "no step" + (only.empty() ? "" : " " + only) +
                      " of this build has ") + dtype_name(opt.dtype) + " kernels; steps with them: " +
                     (is_16bit(opt.dtype) ? kSteps16Bit : kStepsFp32));
  return t;
}

int tour_main(const std::vector<const StepInfo*>& all, int argc, const char* const* argv, const std::string& prog) {
  return run_guarded(prog, [&]() -> int {
    const std::optional<TourPlan> planned = plan_tour(all, argc, argv, prog);
    if (!planned) return kExitOk;
    const TourPlan& t = *planned;
    const Options& opt = t.opt;
    if (std::string why = gpu_unavailable_reason(); !why.empty()) {
      if (t.no_header) return kExitOk;
      std::printf("%s Skipping the GPU steps; running the CPU reference only.\n\n", why.c_str());
      cpu_tour({1, 2, 256, 64}, opt.causal, opt.seed);
      return kExitOk;
    }
    const DeviceInfo dev = query_device();
    const Shape& s = opt.shape;
    if (!t.no_header) {
      std::printf("flashsteps tour on %s: B=%d H=%d N=%d d=%d%s, median of %d runs, L2 flushed\n", dev.name.c_str(),
                  s.B, s.H, s.N, s.d, opt.causal ? " causal" : "", opt.reps);
      print_rule();
      std::printf("%-30s %-5s %-4s %-5s %10s %9s %12s %12s %10s\n", "step", "type", "pass", "check", "time ms",
                  "TFLOP/s", "device mem", "HBM model", "max err");
      print_rule();
    }
    std::map<DType, HostProblem> problems;  // the inputs in each element type, made when first needed
    auto problem_of = [&](DType type) -> const HostProblem& {
      auto it = problems.find(type);
      if (it == problems.end()) it = problems.emplace(type, random_problem(s, opt.seed, true, type)).first;
      return it->second;
    };
    bool all_pass = true;
    for (const TourCase& c : t.cases) {
      if (!c.plan) {
        std::printf("%-30s skipped: %s\n", c.name.c_str(), c.refused.c_str());
        continue;
      }
      const RunPlan& plan = *c.plan;
      try {
        const CaseReport r = run_case(plan, problem_of(c.dtype), dev);
        for (const auto& p : r.passes) {
          const bool ok = !p.check || p.check->pass();
          all_pass = all_pass && ok;
          std::printf("%-30s %-5s %-4s %-5s %10.3f %9.2f %12s %12s %10.2e\n", c.name.c_str(), dtype_name(c.dtype),
                      p.pass.c_str(), ok ? "ok" : "FAIL", p.timing->median_ms, p.tflops,
                      format_bytes(double(p.peak_mem_bytes)).c_str(), format_bytes(double(p.io.total())).c_str(),
                      p.check ? p.check->max_err() : NAN);
          if (!ok) std::printf("%s", p.check->summary().c_str());
          if (!opt.csv_path.empty()) append_csv(opt.csv_path, result_row(plan, p, dev));
        }
      } catch (const ResourceError& e) {
        std::printf("%-30s skipped: %s\n", c.name.c_str(), e.what());
      }
    }
    if (!t.no_header && all.size() > 1) print_rule();  // the tour program's table ends here; a step's rows go on
    std::fflush(stdout);
    if (!t.trace_dir.empty()) all_pass = record_traces(t.trace_dir, t.steps, dev) && all_pass;
    return all_pass ? kExitOk : kExitCheckFailed;
  });
}

}  // namespace fs
