// Every step in the table of steps, every kernel variant, against the fp64 reference on the
// shapes that break tiling: N ∈ {1, 17, 97, 257, 1025}, d ∈ {16, 64, 128}, causal on and off,
// B and H above 1. Outputs are poisoned (NaN) before every run, inputs are fresh random data.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "common/device.hpp"
#include "common/harness.hpp"
#include "common/verify.hpp"
#include "tests/gpu_cases.hpp"

using fs::testing::Case;
using fs::testing::cases_for;

namespace {

fs::Shape odd_shape(int N, int d) { return {2, N > 512 ? 2 : 3, N, d}; }

}  // namespace

TEST_CASE("forward O and LSE match the fp64 reference on odd shapes", "[gpu][forward]") {
  const int N = GENERATE(1, 17, 97, 257, 1025, 4097);
  const int d = GENERATE(16, 64, 128);
  const bool causal = GENERATE(false, true);
  for (const Case& c : cases_for(odd_shape(N, d), causal, false)) {
    DYNAMIC_SECTION(c.name()) {
      const fs::HostProblem p = fs::random_problem(c.shape, c.seed(), false);
      fs::DeviceRun run(*c.step, p, {fs::default_scale(d), causal, c.variant}, false);
      run.forward();
      run.sync();
      const auto o = run.o(), lse = run.lse();
      const auto report = fs::verify_forward(c.shape, {fs::default_scale(d), causal}, p.q.data(),
                                             p.k.data(), p.v.data(), o.data(), lse.data(), c.seed());
      INFO(report.summary());
      if (N <= 1025) REQUIRE(report.coverage.rfind("all ", 0) == 0);  // every row checked
      REQUIRE(report.pass());
    }
  }
}

TEST_CASE("backward dQ, dK, dV match the fp64 reference on odd shapes", "[gpu][backward]") {
  const int N = GENERATE(1, 17, 97, 257, 1025);
  const int d = GENERATE(16, 64, 128);
  const bool causal = GENERATE(false, true);
  for (const Case& c : cases_for(odd_shape(N, d), causal, true)) {
    DYNAMIC_SECTION(c.name()) {
      const fs::HostProblem p = fs::random_problem(c.shape, c.seed(), true);
      fs::DeviceRun run(*c.step, p, {fs::default_scale(d), causal, c.variant}, true);
      run.forward();
      run.backward();
      run.sync();
      const auto dq = run.dq(), dk = run.dk(), dv = run.dv();
      const auto report = fs::verify_backward(c.shape, {fs::default_scale(d), causal}, p.q.data(),
                                              p.k.data(), p.v.data(), p.dout.data(), dq.data(),
                                              dk.data(), dv.data(), c.seed());
      INFO(report.summary());
      REQUIRE(report.coverage.rfind("all ", 0) == 0);
      REQUIRE(report.pass());
    }
  }
}

TEST_CASE("the same inputs give bit-identical outputs on a repeat run", "[gpu][determinism]") {
  const bool causal = GENERATE(false, true);
  for (const Case& c : cases_for({2, 2, 300, 64}, causal, false)) {
    DYNAMIC_SECTION(c.name()) {
      const fs::HostProblem p = fs::random_problem(c.shape, c.seed(), c.step->backward != nullptr);
      fs::DeviceRun run(*c.step, p, {fs::default_scale(64), causal, c.variant}, c.step->backward != nullptr);
      std::vector<float> first[5], second[5];
      for (auto* out : {first, second}) {
        run.forward();
        if (c.step->backward) run.backward();
        run.sync();
        out[0] = run.o();
        out[1] = run.lse();
        if (c.step->backward) {
          out[2] = run.dq();
          out[3] = run.dk();
          out[4] = run.dv();
        }
      }
      for (int t = 0; t < 5; ++t) {
        INFO("output " << t);
        REQUIRE(first[t].size() == second[t].size());
        REQUIRE(std::memcmp(first[t].data(), second[t].data(), first[t].size() * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("a row whose every score is -inf gives O = 0 and LSE = -inf, never NaN", "[gpu][forward]") {
  // Query rows (+inf, 0, ..., 0) against keys whose first component is negative: every score
  // of those rows is -inf, as an additive -inf mask would make it, and the softmax meets
  // exp(-inf - (-inf)). Every kernel's guard must turn that into P = 0.
  const int N = GENERATE(17, 300);
  const int d = GENERATE(16, 64, 128);
  const bool causal = GENERATE(false, true);
  for (const Case& c : cases_for({2, 2, N, d}, causal, false)) {
    DYNAMIC_SECTION(c.name()) {
      fs::HostProblem p = fs::random_problem(c.shape, c.seed(), false);
      const std::int64_t masked_rows[] = {0, 5, N - 1, N + 3, 3 * N - 1};  // rows of several heads
      for (std::int64_t j = 0; j < c.shape.rows(); ++j) p.k[j * d] = -std::abs(p.k[j * d]) - 0.25f;
      for (std::int64_t r : masked_rows) {
        for (int x = 0; x < d; ++x) p.q[r * d + x] = 0.f;
        p.q[r * d] = std::numeric_limits<float>::infinity();
      }
      fs::DeviceRun run(*c.step, p, {fs::default_scale(d), causal, c.variant}, false);
      run.forward();
      run.sync();
      const auto o = run.o(), lse = run.lse();
      for (std::int64_t r : masked_rows) {
        INFO("row " << r);
        REQUIRE(lse[r] == -std::numeric_limits<float>::infinity());
        for (int x = 0; x < d; ++x) REQUIRE(o[r * d + x] == 0.f);
      }
      const auto report = fs::verify_forward(c.shape, {fs::default_scale(d), causal}, p.q.data(),
                                             p.k.data(), p.v.data(), o.data(), lse.data(), c.seed());
      INFO(report.summary());
      REQUIRE(report.pass());  // the other rows are still right
    }
  }
}

TEST_CASE("a custom softmax scale is applied", "[gpu][forward]") {
  const fs::Shape s{1, 2, 65, 32};
  for (const Case& c : cases_for(s, false, false)) {
    DYNAMIC_SECTION(c.name()) {
      const fs::HostProblem p = fs::random_problem(s, 77, false);
      const float scale = 0.9f;  // far from 1/√32 ≈ 0.18: a kernel ignoring it fails
      fs::DeviceRun run(*c.step, p, {scale, false, c.variant}, false);
      run.forward();
      run.sync();
      const auto o = run.o(), lse = run.lse();
      const auto r = fs::verify_forward(s, {scale, false}, p.q.data(), p.k.data(), p.v.data(), o.data(), lse.data(), 1);
      INFO(r.summary());
      REQUIRE(r.pass());
    }
  }
}
