// Every step in the table of steps, every kernel variant, against the fp64 reference on the
// shapes that break tiling: N ∈ {1, 17, 97, 257, 1025}, d ∈ {16, 64, 128}, causal on and off,
// B and H above 1. Outputs are poisoned (NaN) before every run, inputs are fresh random data.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "common/device.hpp"
#include "common/harness.hpp"
#include "common/philox.hpp"
#include "common/verify.hpp"
#include "tests/gpu_cases.hpp"

using fs::testing::Case;
using fs::testing::cases_for;
using fs::testing::same_bits;

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
      const bool backward = c.step->backward_takes(c.shape, c.settings());
      const fs::HostProblem p = fs::random_problem(c.shape, c.seed(), backward);
      fs::DeviceRun run(*c.step, p, {fs::default_scale(64), causal, c.variant}, backward);
      std::vector<float> first[5], second[5];
      for (auto* out : {first, second}) {
        run.forward();
        if (backward) run.backward();
        run.sync();
        out[0] = run.o();
        out[1] = run.lse();
        if (backward) {
          out[2] = run.dq();
          out[3] = run.dk();
          out[4] = run.dv();
        }
      }
      const bool atomic_dq = c.order_dependent();
      for (int t = 0; t < 5; ++t) {
        INFO("output " << t);
        REQUIRE(first[t].size() == second[t].size());
        if (t == 2 && atomic_dq) continue;  // dQ's atomic adds land in any order (tested below)
        REQUIRE(same_bits(first[t], second[t]));
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

// ---- dropout (steps with StepInfo::dropout) ------------------------------------------------

namespace {
std::vector<Case> dropout_cases(const fs::Shape& s, bool causal) {
  return fs::testing::cases_with(&fs::StepInfo::dropout, s, causal);
}
}  // namespace

TEST_CASE("with dropout, O and the gradients match the reference with the identical mask", "[gpu][dropout]") {
  const int N = GENERATE(17, 97, 300);
  const int d = GENERATE(16, 64, 128);
  const bool causal = GENERATE(false, true);
  const float p_drop = GENERATE(0.1f, 0.5f);
  const auto cases = dropout_cases(odd_shape(N, d), causal);
  REQUIRE(fs::testing::has_cases_or_filtered(cases));  // step 05 has dropout
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.name() << " dropout " << p_drop) {
      const fs::HostProblem p = fs::random_problem(c.shape, c.seed(), true);
      const fs::Dropout drop{p_drop, c.seed() + 99};
      fs::DeviceRun run(*c.step, p, {fs::default_scale(d), causal, c.variant, drop}, true);
      run.forward();
      run.backward();
      run.sync();
      const fs::AttnOptions opt{fs::default_scale(d), causal, drop};
      const auto o = run.o(), lse = run.lse();
      const auto fwd = fs::verify_forward(c.shape, opt, p.q.data(), p.k.data(), p.v.data(), o.data(), lse.data(), c.seed());
      INFO(fwd.summary());
      REQUIRE(fwd.pass());
      const auto dq = run.dq(), dk = run.dk(), dv = run.dv();
      const auto bwd = fs::verify_backward(c.shape, opt, p.q.data(), p.k.data(), p.v.data(), p.dout.data(), dq.data(),
                                           dk.data(), dv.data(), c.seed());
      INFO(bwd.summary());
      REQUIRE(bwd.pass());
      // The mask matters: without it the same outputs fail the check.
      const auto undropped = fs::verify_forward(c.shape, {fs::default_scale(d), causal}, p.q.data(), p.k.data(),
                                                p.v.data(), o.data(), lse.data(), c.seed());
      REQUIRE_FALSE(undropped.pass());
    }
  }
}

TEST_CASE("the GPU drops the fraction p, with exactly the CPU generator's mask", "[gpu][dropout]") {
  // Q = K = 0 makes every P_ij = 1/N; V = I (N = d) then puts Z_ij/(N(1 − p)) at O_ij: the
  // kernel's mask, read back whole. 256 heads × 64 × 64 = 1M scores (σ of the fraction 5e-4).
  const float p_drop = GENERATE(0.1f, 0.5f);
  const fs::Shape s{4, 64, 64, 64};
  for (const Case& c : dropout_cases(s, false)) {
    DYNAMIC_SECTION(c.name() << " dropout " << p_drop) {
      fs::HostProblem p = fs::random_problem(s, 3, true);
      std::fill(p.q.begin(), p.q.end(), 0.f);
      std::fill(p.k.begin(), p.k.end(), 0.f);
      std::fill(p.v.begin(), p.v.end(), 0.f);
      for (std::int64_t bh = 0; bh < s.heads(); ++bh)
        for (int j = 0; j < s.N; ++j) p.v[(bh * s.N + j) * s.d + j] = 1.f;
      const fs::Dropout drop{p_drop, 2024};
      fs::DeviceRun run(*c.step, p, {fs::default_scale(s.d), false, c.variant, drop}, false);
      run.forward();
      run.sync();
      const auto o = run.o();
      const std::uint32_t t = fs::dropout_threshold(p_drop);
      std::int64_t dropped = 0, mismatched = 0;
      for (std::int64_t bh = 0; bh < s.heads(); ++bh)
        for (int i = 0; i < s.N; ++i)
          for (int j = 0; j < s.N; ++j) {
            const bool kept = o[(bh * s.N + i) * s.d + j] != 0.f;
            dropped += !kept;
            mismatched += kept != fs::dropout_keep(drop.seed, t, bh, i, j);
          }
      const double fraction = double(dropped) / double(s.score_elems());
      INFO("dropped " << fraction << ", mask bits differing from the CPU generator: " << mismatched);
      REQUIRE(std::abs(fraction - p_drop) < 0.01);
      REQUIRE(mismatched == 0);
    }
  }
}

TEST_CASE("a deterministic backward is bit-identical over 20 runs, atomic dQ stays within tolerance",
          "[gpu][determinism]") {
  const bool causal = GENERATE(false, true);
  const fs::Shape s{2, 3, 1000, 64};
  for (const Case& c : cases_for(s, causal, true)) {
    if (!c.step->dropout) continue;  // the steps with a choice of dQ (05 on)
    DYNAMIC_SECTION(c.name()) {
      const fs::HostProblem p = fs::random_problem(s, c.seed(), true);
      const fs::Dropout drop{0.1f, 5};
      fs::DeviceRun run(*c.step, p, {fs::default_scale(64), causal, c.variant, drop}, true);
      run.forward();
      std::vector<float> first[3];
      const bool atomic_dq = c.order_dependent();
      int differing_runs = 0;
      for (int rep = 0; rep < 20; ++rep) {
        run.backward();
        run.sync();
        const std::vector<float> now[3] = {run.dq(), run.dk(), run.dv()};
        if (rep == 0) {
          for (int t = 0; t < 3; ++t) first[t] = now[t];
          const auto r = fs::verify_backward(s, {fs::default_scale(64), causal, drop}, p.q.data(), p.k.data(),
                                             p.v.data(), p.dout.data(), now[0].data(), now[1].data(),
                                             now[2].data(), c.seed());
          INFO(r.summary());
          REQUIRE(r.pass());
          continue;
        }
        for (int t = 1; t < 3; ++t)  // dK, dV: one CTA sums each, in a fixed order, in every variant
          REQUIRE(same_bits(first[t], now[t]));
        const bool same_dq = same_bits(first[0], now[0]);
        if (!atomic_dq) REQUIRE(same_dq);
        differing_runs += !same_dq;
      }
      // Reported, not required: atomics may happen to land in the same order.
      if (atomic_dq) WARN(c.name() << ": dQ differed from the first run in " << differing_runs << " of 19 repeats");
    }
  }
}
