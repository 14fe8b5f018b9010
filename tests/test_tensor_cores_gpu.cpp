// Step 08's tensor-core kernels against the fp64 reference, under the 16-bit rule: the error must
// be at most 2× (3× for gradients) that of a float32 CPU implementation that rounds to bf16 or
// fp16 where a 16-bit kernel must (common/reference.hpp), plus the floor. Every dtype × d ×
// causal × odd N × variant; inputs of large magnitude; scores that are all equal.
#include <catch2/catch.hpp>

#include <cmath>

#include "common/device.hpp"
#include "common/harness.hpp"
#include "common/verify.hpp"
#include "tests/gpu_cases.hpp"

using fs::DType;
using fs::testing::Case;
using fs::testing::cases_for;
using fs::testing::same_bits;

namespace {

fs::Shape odd_shape(int N, int d) { return {2, N > 512 ? 2 : 3, N, d}; }

// A smaller reference budget than the fp32 tests': there are many more cases here.
constexpr std::int64_t kBudget = std::int64_t(1) << 28;

fs::CheckReport run_forward(const Case& c, const fs::HostProblem& p) {
  fs::DeviceRun run(*c.step, p, c.settings(), false);
  run.forward();
  run.sync();
  const auto o = run.o(), lse = run.lse();
  const fs::AttnOptions attn{fs::default_scale(c.shape.d), c.causal, {}, nullptr, c.dtype};
  return fs::verify_forward(c.shape, attn, p.q.data(), p.k.data(), p.v.data(), o.data(), lse.data(), c.seed(), kBudget);
}

}  // namespace

TEST_CASE("16-bit forward O and LSE match the fp64 reference on odd shapes", "[gpu][tc][forward]") {
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const int N = GENERATE(1, 17, 257, 1025, 4097);
  const int d = GENERATE(32, 64, 96, 128, 256);
  const bool causal = GENERATE(false, true);
  const auto cases = cases_for(odd_shape(N, d), causal, false, dtype);
  REQUIRE(!cases.empty());  // step 08 runs every one of these
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.name()) {
      const fs::HostProblem p = fs::random_problem(c.shape, c.seed(), false, dtype);
      const auto report = run_forward(c, p);
      INFO(report.summary());
      REQUIRE(report.pass());
    }
  }
}

TEST_CASE("16-bit forward: inputs of large magnitude, and rows whose scores are all equal", "[gpu][tc][forward]") {
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const int d = GENERATE(64, 128);
  const bool causal = GENERATE(false, true);
  for (const Case& c : cases_for(odd_shape(300, d), causal, false, dtype)) {
    DYNAMIC_SECTION(c.name() << " |x| up to 1e3") {
      fs::HostProblem p = fs::random_problem(c.shape, c.seed(), false, dtype);
      // Scores of order 1e6·τ: the softmax is nearly one-hot, and exp of a difference must
      // never see an unrescaled 1e5.
      for (auto* t : {&p.q, &p.k, &p.v})
        for (float& x : *t) x = fs::round_to(dtype, x * 333.f);
      const auto report = run_forward(c, p);
      INFO(report.summary());
      REQUIRE(report.pass());
    }
    DYNAMIC_SECTION(c.name() << " all scores equal") {
      fs::HostProblem p = fs::random_problem(c.shape, c.seed(), false, dtype);
      for (std::size_t i = 0; i < p.k.size(); ++i) p.k[i] = p.k[i % d];  // every key the same: P uniform
      const auto report = run_forward(c, p);
      INFO(report.summary());
      REQUIRE(report.pass());
    }
  }
}

TEST_CASE("16-bit forward: the same inputs give bit-identical outputs on a repeat run", "[gpu][tc][determinism]") {
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  for (const Case& c : cases_for({2, 2, 700, 64}, true, false, dtype)) {
    DYNAMIC_SECTION(c.name()) {
      const fs::HostProblem p = fs::random_problem(c.shape, c.seed(), false, dtype);
      fs::DeviceRun run(*c.step, p, c.settings(), false);
      run.forward();
      run.sync();
      const auto o1 = run.o(), l1 = run.lse();
      run.forward();
      run.sync();
      REQUIRE(same_bits(run.o(), o1));
      REQUIRE(same_bits(run.lse(), l1));
    }
  }
}
