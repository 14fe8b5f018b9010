// Traced runs on the GPU, for every step in the table of steps and every variant: the trace
// of each pass validates (bytes equal to the step's IO model, every output element stored,
// events nested per track, nothing dropped), survives the file round trip, and tracing does
// not change a single output bit.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <sstream>

#include "common/device.hpp"
#include "common/harness.hpp"
#include "common/nvtx_tool/nvtx_tool.hpp"
#include "common/recorder/sink.hpp"
#include "common/trace/trace_io.hpp"
#include "common/traced_run.hpp"
#include "common/trace/validate.hpp"
#include "steps/registry.hpp"
#include "tests/gpu_cases.hpp"

using fs::testing::Case;
using fs::testing::cases_for;

namespace {

std::string first_error(const fs::trace::ValidationReport& r) {
  std::string s;
  for (const auto& e : r.errors) s += e + "\n";
  return s;
}

void require_valid(const fs::trace::Trace& t) {
  const auto r = fs::trace::validate(t);
  INFO(first_error(r));
  INFO(r.summary());
  REQUIRE(r.ok());
  REQUIRE(r.events > 0);
  REQUIRE(r.dropped == 0);
  // The file says the same as the model it was written from.
  const fs::trace::Trace back = fs::trace::parse_trace(fs::trace::trace_to_json(t));
  REQUIRE(back.events.size() == t.events.size());
  REQUIRE(fs::trace::validate(back).ok());
}

}  // namespace

using fs::testing::same_bits;

TEST_CASE("a traced run of every step validates, and tracing changes no output bit", "[gpu][trace]") {
  const fs::Shape shape = GENERATE(fs::Shape{1, 1, 256, 64}, fs::Shape{2, 3, 97, 64}, fs::Shape{1, 2, 33, 16});
  const bool causal = GENERATE(false, true);
  const fs::DType dtype = GENERATE(fs::DType::fp32, fs::DType::bf16);
  for (const Case& c : cases_for(shape, causal, false, dtype)) {
    if (!c.step->trace_refusal(c.shape, c.settings()).empty()) continue;  // no traced kernels at this d
    DYNAMIC_SECTION(c.name()) {
      const bool backward = c.step->backward_takes(c.shape, c.settings());
      const fs::HostProblem p = fs::random_problem(c.shape, 4242 + c.shape.N, backward, dtype);
      const fs::PassSettings settings = c.settings();
      fs::DeviceRun run(*c.step, p, settings, backward);

      run.forward();
      if (backward) run.backward();
      run.sync();
      const auto o = run.o(), lse = run.lse();
      std::vector<float> dq, dk, dv;
      if (backward) dq = run.dq(), dk = run.dk(), dv = run.dv();

      fs::trace::DeviceSink fwd_sink, bwd_sink;
      fs::nvtx_tool::start();
      run.set_trace(&fwd_sink);
      run.forward();
      run.sync();
      const auto fwd = fs::build_trace(*c.step, c.shape, settings, fs::testing::test_device(), "fwd", fwd_sink, fs::nvtx_tool::stop());
      REQUIRE(same_bits(run.o(), o));
      REQUIRE(same_bits(run.lse(), lse));
      {
        INFO("forward trace");
        require_valid(fwd);
      }
      if (backward) {
        fs::nvtx_tool::start();
        run.set_trace(&bwd_sink);
        run.backward();
        run.sync();
        const auto bwd = fs::build_trace(*c.step, c.shape, settings, fs::testing::test_device(), "bwd", bwd_sink, fs::nvtx_tool::stop());
        if (c.order_dependent()) {  // atomic dQ: the order of the adds differs, the value does not
          const auto dq2 = run.dq();
          for (std::size_t e = 0; e < dq.size(); ++e) REQUIRE(dq2[e] == Approx(dq[e]).margin(1e-5).epsilon(1e-5));
        } else {
          REQUIRE(same_bits(run.dq(), dq));
        }
        REQUIRE(same_bits(run.dk(), dk));
        REQUIRE(same_bits(run.dv(), dv));
        INFO("backward trace");
        require_valid(bwd);
      }
    }
  }
}

TEST_CASE("a traced run writes a file per pass that validates, with host ranges and named buffers", "[gpu][trace]") {
  const auto dir = std::filesystem::temp_directory_path() / "flashsteps_test_trace_gpu";
  std::filesystem::create_directories(dir);
  for (const auto& step : fs::all_steps()) {
    DYNAMIC_SECTION(step.id) {
      fs::Options opt;
      opt.shape = fs::kTraceShape;
      opt.backward = step.backward != nullptr;
      opt.dtype = step.dtypes.front();
      opt.trace_path = (dir / (step.id + ".json")).string();
      const fs::HostProblem p = fs::random_problem(opt.shape, 7, opt.backward, opt.dtype);
      const auto files = fs::trace_case(fs::RunPlan(step, opt), p, fs::testing::test_device());
      REQUIRE(files.size() == (opt.backward ? 2u : 1u));
      for (const auto& f : files) {
        INFO(f.path);
        const auto r = fs::trace::validate_file(f.path);
        INFO(first_error(r));
        REQUIRE(r.ok());
        const fs::trace::Trace t = fs::trace::read_trace(f.path);
        REQUIRE(t.meta.step == step.id);
        REQUIRE(t.meta.pass == f.pass);
        REQUIRE(t.meta.gpu == fs::testing::test_device().name);
        REQUIRE(!t.kernels.empty());
        if (fs::nvtx_tool::attached()) {
          REQUIRE(!t.buffers.empty());
          // Each kernel's launch range lies inside the NVTX range named after it.
          for (const auto& k : t.kernels) {
            INFO(k.name);
            bool inside = false;
            for (const auto& range : t.ranges)
              inside = inside || (range.name == k.name && range.ts_ns <= k.ts_ns &&
                                  k.ts_ns + k.dur_ns <= range.ts_ns + range.dur_ns);
            REQUIRE(inside);
          }
        }
        // Events placed by %globaltimer fall inside their kernel's launch range.
        CHECK(r.warnings.empty());
      }
    }
  }
}

TEST_CASE("a cap too small for the run is reported as dropped events, never silently", "[gpu][trace]") {
  const fs::StepInfo& step = fs::all_steps().front();
  const fs::Shape shape{1, 1, 64, 16};
  const fs::HostProblem p = fs::random_problem(shape, 3, false);
  const fs::PassSettings settings{fs::default_scale(shape.d), false, 0};
  fs::DeviceRun run(step, p, settings, false);
  fs::trace::DeviceSink sink(1);  // one record per CTA: every CTA records more
  run.set_trace(&sink);
  run.forward();
  run.sync();
  const auto t = fs::build_trace(step, shape, settings, fs::testing::test_device(), "fwd", sink, {});
  REQUIRE(t.meta.events_dropped > 0);
  REQUIRE(t.meta.event_cap == 1);
  const auto r = fs::trace::validate(t);
  REQUIRE_FALSE(r.ok());
  REQUIRE_THAT(first_error(r), Catch::Contains("events were dropped"));
}

// Steps 04-08 compile no traced twin at a head dimension no trace is recorded at (trace::kTracedAt):
// a sink given there anyway is refused at the launch, before any kernel runs, never run untraced.
TEST_CASE("a traced run where no traced kernel is compiled is refused at the launch", "[gpu][trace]") {
  const fs::StepInfo* step = fs::find_step("04");
  if (!step) return;  // a build without step 04 (FS_STEPS)
  const fs::Shape shape{1, 1, 64, 128};
  const fs::HostProblem p = fs::random_problem(shape, 5, false);
  const fs::PassSettings settings{fs::default_scale(shape.d), false, 1};  // fa2
  REQUIRE_FALSE(step->trace_refusal(shape, settings).empty());
  fs::DeviceRun run(*step, p, settings, false);
  fs::trace::DeviceSink sink;
  run.set_trace(&sink);
  REQUIRE_THROWS_WITH(run.forward(), Catch::Contains("no traced instantiation"));
}
