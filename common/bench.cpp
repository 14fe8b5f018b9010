// The benchmark sweep (common/bench.hpp): its command line, checked whole, then the grid run.
#include "common/bench.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <new>
#include <sstream>

#include "common/block_mask.hpp"
#include "common/cli_numbers.hpp"
#include "common/driver.hpp"
#include "common/errors.hpp"
#include "common/files.hpp"
#include "common/harness.hpp"
#include "common/smyrf.hpp"
#include "common/varlen.hpp"

namespace fs {

namespace {

constexpr long long kMaxInt = 0x7fffffff;

// The words of a list option ("512 1024", as the docs write them).
std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// The items of list `option`, each a decimal integer in [lo, hi]; at least one.
std::vector<int> integers(const std::string& option, const std::string& text, long long lo, long long hi) {
  std::vector<int> out;
  for (const std::string& w : words(text)) {
    long long v = 0;
    const auto [end, ec] = std::from_chars(w.data(), w.data() + w.size(), v, 10);
    if (ec != std::errc() || end != w.data() + w.size() || v < lo || v > hi)
      throw InputError(option + ": '" + w + "' is not a decimal integer from " + std::to_string(lo) + " to " +
                       std::to_string(hi));
    out.push_back(static_cast<int>(v));
  }
  if (out.empty()) throw InputError(option + ": the list is empty");
  return out;
}

// One --windows item: "none" or L,R with each -1 (unbounded) or 0 to 2^31 - 1.
BenchPlan::Window window(const std::string& w) {
  if (w == "none") return {};
  const std::size_t comma = w.find(',');
  auto side = [&](const std::string& text) {
    long long v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, 10);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < -1 || v > kMaxInt)
      throw InputError("--windows " + w + " is not none or L,R (each -1 or 0 to " + std::to_string(kMaxInt) + ")");
    return static_cast<int>(v);
  };
  if (comma == std::string::npos) side("");
  return {side(w.substr(0, comma)), side(w.substr(comma + 1))};
}

}  // namespace

Shape BenchPlan::shape(int N, int d) const {
  Shape s{batch ? batch : std::max(1, 16384 / N), heads ? heads : std::max(1, 2048 / d), N, d};
  if (packed.on()) {
    s.B = 1;
    s.Nk = packed.cu_k.back() == N ? 0 : packed.cu_k.back();
  }
  return s;
}

std::optional<BenchPlan> plan_bench(const std::vector<const StepInfo*>& all, int argc, const char* const* argv) {
  CLI::App app{"flashsteps bench: time every step over a grid of shapes, append rows to a CSV"};
  BenchPlan b;
  std::string steps_arg, seqs = "512 1024 2048 4096 8192 16384", dims = "64 128", causals = "0 1", dropouts = "0";
  std::string dtypes = "fp32", variants, patterns = "dense", smyrfs = "8x32", windows = "none", varlen;
  app.add_option("--steps", steps_arg, "steps to run, e.g. \"01 04\" (default: all)");
  app.add_option("--seqs", seqs, "sequence lengths")->capture_default_str();
  app.add_option("--dims", dims, "head dimensions")->capture_default_str();
  app.add_option("--causal", causals, "causal settings, 0 and/or 1")->capture_default_str();
  app.add_option("--variants", variants, "only these kernel variants, e.g. \"fa2 tuned\" (default: all)");
  app.add_option("--dtypes", dtypes, "element types, e.g. \"bf16 fp16\" (each step runs those it has kernels for)")
      ->capture_default_str();
  app.add_option("--dropout", dropouts, "dropout probabilities (steps with dropout; others run at 0 only)")
      ->capture_default_str();
  app.add_option("--patterns", patterns,
                 "block masks for block-sparse steps, e.g. \"butterfly@0.25 random:0.25\" (--pattern forms)")
      ->capture_default_str();
  app.add_option("--smyrf", smyrfs,
                 "clusterings for clustered steps (SMYRF): rounds x cluster size, or rounds x queries x keys, "
                 "e.g. \"8x32 2x64 1x128x256\"")
      ->capture_default_str();
  app.add_option("--windows", windows,
                 "sliding windows for steps whose kernels take one, e.g. \"none 4096,0 1024,0\" (L,R as --window; "
                 "other steps run none only)")
      ->capture_default_str();
  app.add_option("--varlen", varlen,
                 "packed sequences instead of --seqs and --batch, as the step programs' --varlen (lengths such as "
                 "4096,1000,77:300, or cu_seqlens files): the steps whose kernels take them")
      ->type_name("LENGTHS|FILE");
  app.add_option("--batch", b.batch, "batch size (default 16384/N, at least 1)")->transform(decimal<int>());
  app.add_option("--heads", b.heads, "heads (default 2048/d)")->transform(decimal<int>());
  app.add_option("--reps", b.reps, "timed runs per pass")->transform(decimal<int>())->capture_default_str();
  app.add_option("--warmup", b.warmup, "untimed runs before them")->transform(decimal<int>())->capture_default_str();
  app.add_flag("--backward", b.backward, "time the backward pass too (steps that have one)");
  app.add_flag("--check", b.check, "also check against the fp64 reference (sampled at large sizes)");
  app.add_option("--csv", b.csv, "append rows to FILE")->required();
  if (!parse_command_line(app, argc, argv)) return std::nullopt;

  if (std::string why = output_file_problem(b.csv); !why.empty()) throw InputError("--csv " + b.csv + ": " + why);
  if (app.count("--batch") && (b.batch < 1 || b.batch > kMaxInt)) throw InputError("--batch must be at least 1");
  if (app.count("--heads") && (b.heads < 1 || b.heads > kMaxInt)) throw InputError("--heads must be at least 1");
  if (b.reps < 1 || b.reps > 100000) throw InputError("--reps must be from 1 to 100000 (got " + std::to_string(b.reps) + ")");
  if (b.warmup < 0 || b.warmup > 100000)
    throw InputError("--warmup must be from 0 to 100000 (got " + std::to_string(b.warmup) + ")");
  if (steps_arg.empty()) b.steps = all;
  for (const std::string& id : words(steps_arg)) {
    const auto it = std::find_if(all.begin(), all.end(), [&](const StepInfo* s) {
      const std::string number = s->id.substr(0, s->id.find('_'));
      return s->id == id || number == id || (id.size() == 1 && number == "0" + id);
    });
    if (it == all.end()) throw InputError("--steps: no step " + id + " in this build");
    b.steps.push_back(*it);
  }
  for (const std::string& name : words(dtypes)) {
    const auto t = parse_dtype(name);
    if (!t) throw InputError("--dtypes: no dtype " + name + " (fp32, bf16, fp16)");
    b.dtypes.push_back(*t);
  }
  if (b.dtypes.empty()) throw InputError("--dtypes: the list is empty");
  b.variants = words(variants);
  for (const std::string& v : b.variants)
    if (std::none_of(b.steps.begin(), b.steps.end(), [&](const StepInfo* s) {
          return std::find(s->variants.begin(), s->variants.end(), v) != s->variants.end();
        }))
      throw InputError("--variants: no step chosen has a variant " + v);
  for (const std::string& spec : words(smyrfs)) {
    const auto p = parse_smyrf_spec(spec);
    if (!p) throw InputError("--smyrf " + spec + " is not HASHESxCLUSTER or HASHESxQxK");
    b.clusterings.push_back(*p);
  }
  for (const std::string& w : words(windows)) b.windows.push_back(window(w));
  if (b.windows.empty()) throw InputError("--windows: the list is empty");
  for (int c : integers("--causal", causals, 0, 1)) b.causals.push_back(c != 0);
  for (const std::string& w : words(dropouts)) {
    double p = -1;
    const auto [end, ec] = std::from_chars(w.data(), w.data() + w.size(), p);
    if (ec != std::errc() || end != w.data() + w.size() || !(p >= 0.0 && p < 1.0))
      throw InputError("--dropout: '" + w + "' is not a probability in [0, 1)");
    b.dropouts.push_back(float(p));
  }
  if (b.dropouts.empty()) throw InputError("--dropout: the list is empty");
  b.dims = integers("--dims", dims, 1, kMaxInt);
  if (!varlen.empty()) {
    b.packed = parse_varlen(varlen);
    if (b.batch > 1) throw InputError("--varlen packs the sequences into one batch: --batch must be 1");
    b.seqs = {b.packed.cu_q.back()};  // one "length": the sequences' tokens, packed
  } else {
    b.seqs = integers("--seqs", seqs, 1, kMaxInt);
  }
  // Every grid point a shape whose byte counts fit; each pattern one that some point can build.
  for (int d : b.dims)
    for (int N : b.seqs) {
      const Shape s = b.shape(N, d);
      try {
        validate_shape(s);
      } catch (const InputError& e) {
        throw InputError("--seqs " + std::to_string(N) + " --dims " + std::to_string(d) + ": " + e.what());
      }
    }
  b.patterns = words(patterns);
  if (b.patterns.empty()) throw InputError("--patterns: the list is empty");
  std::vector<int> blocks;
  for (const StepInfo* s : b.steps)
    if (s->block_sparse && s->mask_block)
      for (int d : b.dims) blocks.push_back(s->mask_block(d));
  if (blocks.empty()) blocks.push_back(128);
  for (const std::string& spec : b.patterns) {
    std::string why;
    bool some = false;
    for (int N : b.seqs)
      for (int block : blocks) try {
          check_pattern(spec, N, block);
          some = true;
        } catch (const InputError& e) {
          if (why.empty()) why = e.what();
        }
    if (!some) throw InputError("--patterns: " + why);
  }
  return b;
}

int bench_main(const std::vector<const StepInfo*>& all, int argc, const char* const* argv) {
  std::optional<BenchPlan> planned;
  try {
    planned = plan_bench(all, argc, argv);
  } catch (const InputError& e) {
    std::fprintf(stderr, "bench: error: %s\n", e.what());
    return kExitBadInput;
  }
  if (!planned) return kExitOk;
  const BenchPlan& b = *planned;
  if (std::string why = gpu_unavailable_reason(); !why.empty()) {  // after the arguments: bad ones are exit 2 anywhere
    std::printf("%s Nothing to benchmark.\n", why.c_str());
    return kExitNoGpu;
  }
  try {
    const DeviceInfo dev = query_device();
    int failures = 0;
    for (DType dtype : b.dtypes)
      for (int d : b.dims)
        for (int N : b.seqs)
          for (bool causal : b.causals)
            for (float dropout : b.dropouts) {
              Options opt;
              opt.shape = b.shape(N, d);
              opt.packed = b.packed;
              opt.causal = causal;
              opt.dropout = dropout;
              opt.dtype = dtype;
              opt.bench = true;
              opt.check = b.check;
              opt.reps = b.reps;
              opt.warmup = b.warmup;
              const HostProblem problem = random_problem(opt.shape, opt.seed, b.backward, dtype);
              for (const StepInfo* step : b.steps) {
                if (!step->takes(dtype) || (dropout > 0.f && !step->dropout)) continue;
                const std::vector<std::string> patterns = step->block_sparse ? b.patterns : std::vector<std::string>{""};
                const std::vector<SmyrfParams> clusterings = step->clustered ? b.clusterings : std::vector<SmyrfParams>{{}};
                const std::vector<BenchPlan::Window> windows = step->score_mods ? b.windows : std::vector<BenchPlan::Window>{{}};
                for (const std::string& pattern : patterns)
                  for (const SmyrfParams& clustering : clusterings)
                    for (const BenchPlan::Window& w : windows)
                      for (std::size_t v = 0; v < step->variants.size(); ++v) {
                        if (!b.variants.empty() && step->variants.size() > 1 &&
                            std::find(b.variants.begin(), b.variants.end(), step->variants[v]) == b.variants.end())
                          continue;
                        opt.pattern = pattern;
                        opt.smyrf = clustering;
                        opt.window_left = w.left;
                        opt.window_right = w.right;
                        opt.variant = static_cast<int>(v);
                        opt.backward = b.backward && step->backward_takes(opt.shape, {default_scale(d), opt.causal, int(v), {},
                                                                                      nullptr, dtype});
                        const std::string name =
                            step->label(static_cast<int>(v)) + (pattern.empty() ? "" : " " + pattern) +
                            (step->clustered ? " " + smyrf_spec(clustering) : "") +
                            (w.left >= 0 || w.right >= 0 ? " window " + std::to_string(w.left) + "," + std::to_string(w.right)
                                                         : "");
                        std::printf("%-34s %s B=%-3d H=%-3d N=%-6d d=%-4d causal=%d dropout=%g  ", name.c_str(),
                                    dtype_name(dtype), opt.shape.B, opt.shape.H, N, d, causal ? 1 : 0, dropout);
                        try {
                          const RunPlan plan(*step, opt);
                          const CaseReport r = run_case(plan, problem, dev);
                          for (const auto& p : r.passes) {
                            std::printf("%s %9.3f ms %7.2f TFLOP/s  ", p.pass.c_str(), p.timing->median_ms, p.tflops);
                            if (p.check && !p.check->pass()) {
                              ++failures;
                              std::printf("CHECK FAILED ");
                            }
                            append_csv(b.csv, result_row(plan, p, dev));
                          }
                          std::printf("\n");
                        } catch (const ResourceError& e) {
                          std::printf("skipped: %s\n", e.what());
                        } catch (const InputError& e) {
                          std::printf("skipped: %s\n", e.what());
                        }
                        std::fflush(stdout);
                      }
              }
            }
    return failures ? kExitCheckFailed : kExitOk;
  } catch (const InputError& e) {
    std::fprintf(stderr, "bench: error: %s\n", e.what());
    return kExitBadInput;
  } catch (const CudaError& e) {
    std::fprintf(stderr, "bench: CUDA error: %s\n", e.what());
    return kExitCheckFailed;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "bench: error: not enough host memory for this problem\n");
    return kExitBadInput;
  }
}

}  // namespace fs
