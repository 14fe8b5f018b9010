// bench: the benchmark sweep, over the table of steps (every variant) and a grid of shapes,
// appending one CSV row per pass (docs/benchmarks/<gpu>.csv). A program that measures and
// records; the tests are what check correctness (add --check to record max_err too).
//
// Shapes follow the FlashAttention benchmarks: B·N = 16384 tokens (B = max(1, 16384/N)) and
// H = 2048/d heads, so every N fills the GPU with about the same work per matmul. With --varlen
// the one shape is the packed sequences' (B = 1, N and Nk their totals), in the steps that take them.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "common/cli_numbers.hpp"
#include "common/driver.hpp"
#include "common/errors.hpp"
#include "common/smyrf.hpp"
#include "common/varlen.hpp"
#include "steps/registry.hpp"

namespace {
template <typename T>
std::vector<T> parse_list(const std::string& text) {
  std::vector<T> out;
  std::istringstream in(text);
  for (T x; in >> x;) out.push_back(x);
  return out;
}
bool contains(const std::vector<std::string>& list, const std::string& x) {
  return std::find(list.begin(), list.end(), x) != list.end();
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"flashsteps bench: time every step over a grid of shapes, append rows to a CSV"};
  std::string steps_arg, seqs = "512 1024 2048 4096 8192 16384", dims = "64 128", causals = "0 1", dropouts = "0";
  std::string dtypes = "fp32", variants_arg;
  std::string csv;
  int batch = 0, heads = 0, reps = 10, warmup = 3;
  bool backward = false, check = false;
  app.add_option("--steps", steps_arg, "steps to run, e.g. \"01 04\" (default: all)");
  app.add_option("--seqs", seqs, "sequence lengths")->capture_default_str();
  app.add_option("--dims", dims, "head dimensions")->capture_default_str();
  app.add_option("--causal", causals, "causal settings, 0 and/or 1")->capture_default_str();
  app.add_option("--variants", variants_arg, "only these kernel variants, e.g. \"fa2 tuned\" (default: all)");
  app.add_option("--dtypes", dtypes, "element types, e.g. \"bf16 fp16\" (each step runs those it has kernels for)")
      ->capture_default_str();
  app.add_option("--dropout", dropouts, "dropout probabilities (steps with dropout; others run at 0 only)")
      ->capture_default_str();
  std::string patterns = "dense";
  app.add_option("--patterns", patterns,
                 "block masks for block-sparse steps, e.g. \"butterfly@0.25 random:0.25\" (--pattern forms)")
      ->capture_default_str();
  std::string smyrfs = "8x32";
  app.add_option("--smyrf", smyrfs,
                 "clusterings for clustered steps (SMYRF): rounds x cluster size, or rounds x queries x keys, "
                 "e.g. \"8x32 2x64 1x128x256\"")
      ->capture_default_str();
  std::string windows = "none";
  app.add_option("--windows", windows,
                 "sliding windows for steps whose kernels take one, e.g. \"none 4096,0 1024,0\" (L,R as --window; "
                 "other steps run none only)")
      ->capture_default_str();
  std::string varlen;
  app.add_option("--varlen", varlen,
                 "packed sequences instead of --seqs and --batch, as the step programs' --varlen (lengths such as "
                 "4096,1000,77:300, or cu_seqlens files): the steps whose kernels take them")
      ->type_name("LENGTHS|FILE");
  app.add_option("--batch", batch, "batch size (default 16384/N, at least 1)")->transform(fs::decimal<int>());
  app.add_option("--heads", heads, "heads (default 2048/d)")->transform(fs::decimal<int>());
  app.add_option("--reps", reps, "timed runs per pass")->transform(fs::decimal<int>())->capture_default_str();
  app.add_option("--warmup", warmup, "untimed runs before them")->transform(fs::decimal<int>())->capture_default_str();
  app.add_flag("--backward", backward, "time the backward pass too (steps that have one)");
  app.add_flag("--check", check, "also check against the fp64 reference (sampled at large sizes)");
  app.add_option("--csv", csv, "append rows to FILE")->required();
  CLI11_PARSE(app, argc, argv);

  std::vector<const fs::StepInfo*> steps;
  if (steps_arg.empty())
    for (const auto& s : fs::all_steps()) steps.push_back(&s);
  for (const auto& id : parse_list<std::string>(steps_arg)) {
    const fs::StepInfo* s = fs::find_step(id);
    if (!s) {
      std::fprintf(stderr, "bench: error: no step %s\n", id.c_str());
      return fs::kExitBadInput;
    }
    steps.push_back(s);
  }
  std::vector<fs::DType> dtype_list;
  for (const auto& name : parse_list<std::string>(dtypes)) {
    const auto t = fs::parse_dtype(name);
    if (!t) {
      std::fprintf(stderr, "bench: error: no dtype %s (fp32, bf16, fp16)\n", name.c_str());
      return fs::kExitBadInput;
    }
    dtype_list.push_back(*t);
  }
  std::vector<fs::SmyrfParams> smyrf_list;
  for (const auto& spec : parse_list<std::string>(smyrfs)) {
    const auto p = fs::parse_smyrf_spec(spec);
    if (!p) {
      std::fprintf(stderr, "bench: error: --smyrf %s is not HASHESxCLUSTER or HASHESxQxK\n", spec.c_str());
      return fs::kExitBadInput;
    }
    smyrf_list.push_back(*p);
  }
  struct Window {
    int left = -1, right = -1;
  };
  std::vector<Window> window_list;
  for (const auto& spec : parse_list<std::string>(windows)) {
    Window w;
    char comma = 0;
    std::istringstream in(spec);
    if (spec != "none" && !(in >> w.left >> comma >> w.right && comma == ',' && in.peek() == EOF && w.left >= -1 &&
                            w.right >= -1)) {
      std::fprintf(stderr, "bench: error: --windows %s is not none or L,R (each -1 or more)\n", spec.c_str());
      return fs::kExitBadInput;
    }
    window_list.push_back(w);
  }
  fs::PackedSeqs packed;
  if (!varlen.empty()) {
    try {
      packed = fs::parse_varlen(varlen);
    } catch (const fs::InputError& e) {
      std::fprintf(stderr, "bench: error: %s\n", e.what());
      return fs::kExitBadInput;
    }
    if (batch > 1) {
      std::fprintf(stderr, "bench: error: --varlen packs the sequences into one batch: --batch must be 1\n");
      return fs::kExitBadInput;
    }
  }
  // With --varlen, one "length": the sequences' tokens, packed.
  const std::vector<int> seq_list = packed.on() ? std::vector<int>{packed.cu_q.back()} : parse_list<int>(seqs);
  if (std::string why = fs::gpu_unavailable_reason(); !why.empty()) {  // after the arguments: bad ones are exit 2 anywhere
    std::printf("%s Nothing to benchmark.\n", why.c_str());
    return fs::kExitNoGpu;
  }
  const fs::DeviceInfo dev = fs::query_device();
  int failures = 0;
  for (fs::DType dtype : dtype_list)
  for (int d : parse_list<int>(dims))
    for (int N : seq_list)
      for (int causal : parse_list<int>(causals))
        for (float dropout : parse_list<float>(dropouts)) {
        fs::Options opt;
        opt.shape = {batch ? batch : std::max(1, 16384 / N), heads ? heads : std::max(1, 2048 / d), N, d};
        if (packed.on()) {
          opt.shape.B = 1;
          opt.shape.Nk = packed.cu_k.back() == N ? 0 : packed.cu_k.back();
          opt.packed = packed;
        }
        opt.causal = causal != 0;
        opt.dropout = dropout;
        opt.dtype = dtype;
        opt.bench = true;
        opt.check = check;
        opt.reps = reps;
        opt.warmup = warmup;
        const fs::HostProblem problem = fs::random_problem(opt.shape, opt.seed, backward, dtype);
        for (const fs::StepInfo* step : steps)
          if (step->takes(dtype))
          for (const std::string& pattern : step->block_sparse ? parse_list<std::string>(patterns) : std::vector<std::string>{""})
          for (const fs::SmyrfParams& clustering : step->clustered ? smyrf_list : std::vector<fs::SmyrfParams>{{}})
          for (const Window& window : step->score_mods ? window_list : std::vector<Window>{{}})
          for (std::size_t v = 0; v < step->variants.size() && (dropout == 0.f || step->dropout); ++v) {
            if (!variants_arg.empty() && step->variants.size() > 1 &&
                !contains(parse_list<std::string>(variants_arg), step->variants[v]))
              continue;
            opt.pattern = pattern;
            opt.smyrf = clustering;
            opt.window_left = window.left;
            opt.window_right = window.right;
            opt.variant = static_cast<int>(v);
            opt.backward = backward && step->backward_takes(opt.shape, {fs::default_scale(d), opt.causal, int(v), {}, nullptr, dtype});
            const std::string name = step->label(static_cast<int>(v)) + (pattern.empty() ? "" : " " + pattern) +
                                     (step->clustered ? " " + fs::smyrf_spec(clustering) : "") +
                                     (window.left >= 0 || window.right >= 0
                                          ? " window " + std::to_string(window.left) + "," + std::to_string(window.right)
                                          : "");
            std::printf("%-34s %s B=%-3d H=%-3d N=%-6d d=%-4d causal=%d dropout=%g  ", name.c_str(),
                        fs::dtype_name(dtype), opt.shape.B, opt.shape.H, N, d, causal, dropout);
            try {
              const fs::RunPlan plan(*step, opt);
              const fs::CaseReport r = fs::run_case(plan, problem, dev);
              for (const auto& p : r.passes) {
                std::printf("%s %9.3f ms %7.2f TFLOP/s  ", p.pass.c_str(), p.timing->median_ms, p.tflops);
                if (p.check && !p.check->pass()) {
                  ++failures;
                  std::printf("CHECK FAILED ");
                }
                fs::append_csv(csv, fs::result_row(plan, p, dev));
              }
              std::printf("\n");
            } catch (const fs::ResourceError& e) {
              std::printf("skipped: %s\n", e.what());
            } catch (const fs::InputError& e) {
              std::printf("skipped: %s\n", e.what());
            }
            std::fflush(stdout);
          }
        }
  return failures ? fs::kExitCheckFailed : fs::kExitOk;
}
