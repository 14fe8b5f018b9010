// sanitize_cases: every step × variant × dtype of the table of steps (steps/registry.cpp) at small,
// odd shapes, forward and backward, causal and not, with dropout where a step has it, block
// masks that skip blocks where a step is block-sparse, plain and traced — each checked against
// the fp64 reference. tests/sanitize.sh runs it under compute-sanitizer's memcheck, racecheck,
// synccheck and initcheck; a new step is covered by adding it to the registry.
//
//   sanitize_cases            run every case (one process: the sanitizer starts once per tool)
//   sanitize_cases --list     name the cases, without a GPU
//   sanitize_cases --probe    exit 0 with a usable GPU, 77 (CTest's "skipped") without one
//   sanitize_cases --only 06  only the cases of steps whose id starts with "06"
//   sanitize_cases --with window  only the cases whose name holds "window"
//   sanitize_cases --help     these options
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "common/block_mask.hpp"
#include "common/driver.hpp"
#include "common/errors.hpp"
#include "common/plan.hpp"
#include "common/smyrf.hpp"
#include "common/traced_run.hpp"
#include "common/varlen.hpp"
#include "steps/registry.hpp"

namespace {

struct SanitizeCase {
  const fs::StepInfo* step;
  fs::Options opt;
  bool traced = false;

  std::string name() const {
    const fs::Shape& s = opt.shape;
    char buf[256];
    const std::string kv = (s.square() ? "" : " Nk=" + std::to_string(s.keys()) + " Hkv=" + std::to_string(s.kv_heads())) +
                           (opt.packed.on() ? " varlen " + std::to_string(opt.packed.count()) : "");
    const std::string features =
        kv + (opt.window_left >= 0 || opt.window_right >= 0 || opt.softcap > 0.f || opt.alibi
            ? " window " + std::to_string(opt.window_left) + "," + std::to_string(opt.window_right) + " softcap " +
                  std::to_string(int(opt.softcap)) + (opt.alibi ? " alibi" : "")
            : "");
    std::snprintf(buf, sizeof buf, "%s/%s %s B=%d H=%d N=%d d=%d%s%s%s%s%s%s", step->id.c_str(),
                  step->variants[std::size_t(opt.variant)].c_str(), fs::dtype_name(opt.dtype), s.B, s.H, s.N,
                  s.d, opt.causal ? " causal" : "",
                  opt.dropout > 0 ? " dropout" : "", opt.backward ? " fwd+bwd" : " fwd",
                  step->block_sparse  ? (" mask " + opt.pattern).c_str()
                  : step->clustered   ? (" smyrf " + fs::smyrf_spec(opt.smyrf)).c_str()
                                      : "",
                  features.c_str(), traced ? " traced" : "");
    return buf;
  }
};

// The cases, from the table of steps. Shapes are small (the sanitizers slow kernels down by
// orders of magnitude) and odd, so that every kernel's tail handling runs.
std::vector<SanitizeCase> all_cases(const std::string& only) {
  std::vector<SanitizeCase> out;
  for (const fs::StepInfo& step : fs::all_steps()) {
    if (!only.empty() && step.id.rfind(only, 0) != 0) continue;
    for (int v = 0; v < int(step.variants.size()); ++v)
    for (fs::DType dtype : step.dtypes) {
      fs::Options base;
      base.variant = v;
      base.dtype = dtype;
      base.check = true;
      base.backward = step.backward != nullptr;
      base.seed = 11;
      if (step.clustered) {  // SMYRF: no causal or dropout; clusters of every kernel's CTA size, equal and not
        const fs::SmyrfParams clusterings[] = {{2, 32, 32, 4.f, 0}, {3, 24, 40, 4.f, 0}, {2, 100, 70, 4.f, 0}};
        for (const fs::SmyrfParams& clustering : clusterings)
          for (const fs::Shape& shape : {fs::Shape{2, 3, 97, 64}, fs::Shape{1, 2, 45, 32}, fs::Shape{1, 1, 71, 128},
                                         fs::Shape{1, 2, 33, 16}}) {
            SanitizeCase c{&step, base, false};
            c.opt.shape = shape;
            c.opt.smyrf = clustering;
            out.push_back(c);
          }
        continue;
      }
      auto add_from = [&](const fs::Options& from, fs::Shape shape, bool causal, float dropout,
                          const std::string& pattern, bool traced) {
        SanitizeCase c{&step, from, traced};
        c.opt.shape = shape;
        c.opt.causal = causal;
        c.opt.dropout = step.dropout ? dropout : 0.f;
        if (step.block_sparse) c.opt.pattern = pattern;
        if (c.opt.backward)  // step 09's backward takes fewer head dimensions than its forward
          c.opt.backward = step.backward_takes(shape, {fs::default_scale(shape.d), causal, v, {}, nullptr, dtype});
        out.push_back(c);
      };
      auto add = [&](fs::Shape shape, bool causal, float dropout, const std::string& pattern, bool traced) {
        add_from(base, shape, causal, dropout, pattern, traced);
      };
      // The full grid at one shape: causal × dropout.
      for (bool causal : {false, true})
        for (float dropout : step.dropout ? std::vector<float>{0.f, 0.2f} : std::vector<float>{0.f})
          add({2, 3, 97, 64}, causal, dropout, "dense", false);
      // Other head dimensions (other template instantiations), odd N, every feature on.
      add({1, 2, 45, 32}, true, 0.2f, "dense", false);
      add({1, 1, 71, 128}, true, 0.2f, "dense", false);
      add({1, 2, 33, 16}, false, 0.f, "dense", false);
      add({1, 1, 50, 256}, true, 0.2f, "dense", false);
      // Block masks that skip blocks: N = 301 spans three 128-blocks, the last one cut.
      if (step.block_sparse)
        for (const char* pattern : {"local:0", "random:0.5"})
          for (bool causal : {false, true}) add({1, 2, 301, 64}, causal, 0.2f, pattern, false);
      // Head dimensions between the compiled ones, where a step runs them in the next one's kernels
      // (steps 08 and 09): 80 in d = 128's, 136 in d = 256's (step 09: forward only there).
      for (const fs::Shape padded : {fs::Shape{1, 2, 77, 80}, fs::Shape{1, 1, 65, 136}})
        if (step.refusal(padded, {fs::default_scale(padded.d), true, v, {}, nullptr, dtype}).empty())
          add(padded, padded.d == 80, 0.f, "dense", false);
      // The traced kernels (a compile-time switch: other instantiations, which write records).
      add({1, 1, 97, 64}, true, 0.f, step.block_sparse ? "local:0" : "dense", true);
      // A variant compiled for d = 128 only (step 09's rungs and fp8, whose warpgroups record in
      // lanes): its traced kernels there.
      const fs::Shape d64{1, 1, 97, 64}, d128{1, 1, 97, 128};
      if (!step.refusal(d64, {fs::default_scale(64), true, v, {}, nullptr, dtype}).empty() &&
          step.refusal(d128, {fs::default_scale(128), true, v, {}, nullptr, dtype}).empty())
        add(d128, true, 0.f, "dense", true);
      // FlashAttention's score features (the FlashFeatures instantiations), where the variant
      // takes them: a window that skips tiles at both ends, softcapping, ALiBi; traced too.
      fs::Options featured = base;
      featured.window_left = 40;
      featured.window_right = 7;
      featured.softcap = 20.f;
      featured.alibi = true;
      fs::PassSettings with_features;
      with_features.scale = fs::default_scale(64);  // step 08 refuses a scale that is not positive
      with_features.variant = v;
      with_features.dtype = dtype;
      with_features.features.window_left = 40;
      if (step.score_mods && step.refusal({1, 1, 97, 64}, with_features).empty()) {
        // Step 08 (16-bit) at each of its head dimensions, with both dK/dV kernels and d = 256's split.
        const bool tc = step.takes(fs::DType::bf16);  // step 08: its own head dimensions (3xtf32 refuses 96, 256)
        for (int d : tc ? std::vector<int>{32, 64, 96, 128, 256} : std::vector<int>{16, 64, 128})
          add_from(featured, {2, 3, 301, d}, d == 64, 0.2f, "dense", false);
        add_from(featured, {1, 1, 97, 64}, true, 0.f, "dense", true);
        // K and V of their own length and heads: fewer keys (grouped heads), more (one K/V head).
        add_from(base, {2, 4, 150, 64, 77, 2}, true, 0.2f, "dense", false);
        add_from(featured, {1, 4, 90, 128, 333, 1}, true, 0.f, "dense", false);
        add_from(base, {1, 2, 61, tc ? 32 : 16, 200, 1}, false, 0.f, "dense", false);
        if (tc) add_from(featured, {1, 4, 130, 96, 61, 2}, true, 0.2f, "dense", false);
        // Head dimensions the kernels are not compiled at, in the next one's tiles (step 08's
        // head_cols): element by element (59, rows 118 bytes apart), whole chunks (80).
        if (tc) add_from(featured, {1, 3, 77, 59, 90, 1}, true, 0.2f, "dense", false);
        if (tc) add_from(base, {2, 2, 97, 80}, false, 0.2f, "dense", false);
      }
      // Packed sequences (--varlen): an empty one, one token (the rest start at odd tokens),
      // queries without keys and keys without queries, more keys than queries and fewer; with
      // grouped K/V heads, dropout, and the features.
      fs::PassSettings with_packed = with_features;
      with_packed.features = {};
      with_packed.packed = fs::parse_varlen("97,0,1,33:50,20:0,0:9,70:40");
      const fs::Shape packed_shape{1, 4, with_packed.packed.cu_q.back(), 64, with_packed.packed.cu_k.back(), 2};
      if (step.packed && step.refusal(packed_shape, with_packed).empty()) {
        fs::Options packed = base;
        packed.packed = with_packed.packed;
        add_from(packed, packed_shape, true, 0.2f, "dense", false);
        fs::Options packed_featured = featured;
        packed_featured.packed = with_packed.packed;
        fs::Shape wide = packed_shape;
        wide.d = dtype == fs::DType::fp32 ? 128 : 256;
        add_from(packed_featured, wide, false, 0.2f, "dense", false);
      }
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  bool list = false, probe = false;
  std::string only, with;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf(
          "sanitize_cases: every step x variant x dtype at small odd shapes, checked against the fp64 reference\n"
          "(tests/sanitize.sh runs it under compute-sanitizer's tools)\n"
          "  --list        name the cases, without a GPU\n"
          "  --probe       exit 0 with a usable GPU, 77 without one\n"
          "  --only STEP   only the steps whose id starts with STEP (e.g. 06)\n"
          "  --with TEXT   only the cases whose name holds TEXT (e.g. window, fp32)\n");
      return 0;
    }
    if (a == "--list") list = true;
    else if (a == "--probe") probe = true;
    else if (a == "--only" && i + 1 < argc) only = argv[++i];
    else if (a == "--with" && i + 1 < argc) with = argv[++i];
    else {
      std::fprintf(stderr, "sanitize_cases: unknown argument '%s' (--list, --probe, --only STEP, --with TEXT)\n",
                   a.c_str());
      return fs::kExitBadInput;
    }
  }
  std::vector<SanitizeCase> cases = all_cases(only);
  if (!with.empty())
    cases.erase(std::remove_if(cases.begin(), cases.end(),
                               [&](const SanitizeCase& c) { return c.name().find(with) == std::string::npos; }),
                cases.end());
  if (list) {
    for (const auto& c : cases) std::printf("%s\n", c.name().c_str());
    std::printf("%zu cases\n", cases.size());
    return fs::kExitOk;
  }
  if (const std::string why = fs::gpu_unavailable_reason(); !why.empty()) {
    std::printf("SKIPPED (needs a GPU): %s\n", why.c_str());
    return 77;
  }
  if (probe) return fs::kExitOk;

  const fs::DeviceInfo dev = fs::query_device();
  const std::string trace_dir =
      (std::filesystem::temp_directory_path() / ("flashsteps_sanitize_" + std::to_string(::getpid()))).string();
  int failed = 0, skipped = 0;
  for (const SanitizeCase& c : cases) {
    try {
      const fs::HostProblem problem = fs::random_problem(c.opt.shape, c.opt.seed, c.opt.backward, c.opt.dtype);
      bool ok = true;
      std::string what;
      if (c.traced) {
        std::filesystem::create_directories(trace_dir);
        fs::Options o = c.opt;
        o.trace_path = trace_dir + "/" + c.step->id + "_" + std::to_string(o.variant) + ".json";
        const fs::RunPlan plan(*c.step, o);
        for (const fs::TraceFile& f : fs::trace_case(plan, problem, dev))
          if (!f.report.ok()) ok = false, what = f.report.errors.front();
      } else {
        const fs::RunPlan plan(*c.step, c.opt);
        const fs::CaseReport r = fs::run_case(plan, problem, dev);
        ok = r.pass();
        for (const auto& p : r.passes)
          if (p.check && !p.check->pass()) what = p.check->summary();
      }
      std::printf("%-4s %s\n", ok ? "ok" : "FAIL", c.name().c_str());
      if (!ok) std::printf("%s\n", what.c_str());
      failed += !ok;
    } catch (const fs::InputError& e) {  // a shape this step does not run on this GPU
      std::printf("skip %s: %s\n", c.name().c_str(), e.what());
      ++skipped;
    } catch (const fs::ResourceError& e) {
      std::printf("skip %s: %s\n", c.name().c_str(), e.what());
      ++skipped;
    } catch (const fs::CudaError& e) {
      std::printf("FAIL %s: CUDA error: %s\n", c.name().c_str(), e.what());
      ++failed;
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(trace_dir, ec);
  std::printf("%zu cases: %zu passed, %d failed, %d skipped\n", cases.size(), cases.size() - failed - skipped, failed,
              skipped);
  return failed ? fs::kExitCheckFailed : fs::kExitOk;
}
