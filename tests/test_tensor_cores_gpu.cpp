// Step 08's tensor-core kernels against the fp64 reference, under the 16-bit rule: the error must
// be at most 2× (3× for gradients) that of a float32 CPU implementation that rounds to bf16 or
// fp16 where a 16-bit kernel must (common/reference.hpp), plus the floor. Every dtype × d ×
// causal × odd N × variant, forward and backward, with and without dropout; inputs of large
// magnitude; scores that are all equal; the dropout mask bit for bit; deterministic repeats.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/philox.hpp"

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

// Forward then backward; the reports of O/LSE and of dQ, dK, dV under the 16-bit rule.
struct BothReports {
  fs::CheckReport fwd, bwd;
};
BothReports run_both(const Case& c, const fs::HostProblem& p, fs::Dropout drop = {}) {
  fs::DeviceRun run(*c.step, p, c.settings(drop), true);
  run.forward();
  run.backward();
  run.sync();
  const fs::AttnOptions attn{fs::default_scale(c.shape.d), c.causal, drop, nullptr, c.dtype};
  const auto o = run.o(), lse = run.lse(), dq = run.dq(), dk = run.dk(), dv = run.dv();
  return {fs::verify_forward(c.shape, attn, p.q.data(), p.k.data(), p.v.data(), o.data(), lse.data(), c.seed(), kBudget),
          fs::verify_backward(c.shape, attn, p.q.data(), p.k.data(), p.v.data(), p.dout.data(), dq.data(), dk.data(),
                              dv.data(), c.seed(), kBudget)};
}

// fa2 (dQ by atomics), deterministic, and key_warps (the other dK/dV kernel) where it is compiled;
// they are compiled; the rungs' backward is fa2's, so they add nothing here.
bool own_backward(const std::string& v) { return v == "fa2" || v == "deterministic" || v == "key_warps"; }
std::vector<Case> backward_cases(const fs::Shape& s, bool causal, DType dtype) {
  std::vector<Case> out;
  for (const Case& c : cases_for(s, causal, true, dtype))
    if (own_backward(c.step->variants[c.variant])) out.push_back(c);
  return out;
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

TEST_CASE("16-bit backward dQ, dK, dV match the fp64 reference on odd shapes, with and without dropout",
          "[gpu][tc][backward]") {
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const int N = GENERATE(1, 17, 257, 1025, 4097);
  const int d = GENERATE(32, 64, 96, 128, 256);
  const bool causal = GENERATE(false, true);
  const float p_drop = GENERATE(0.f, 0.15f);
  const auto cases = backward_cases(odd_shape(N, d), causal, dtype);
  REQUIRE(cases.size() == ((d == 64 || d == 128) ? 3u : 2u));  // fa2, deterministic (and key_warps) run all of these
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.name() << " dropout " << p_drop) {
      const fs::HostProblem p = fs::random_problem(c.shape, c.seed(), true, dtype);
      const auto r = run_both(c, p, {p_drop, c.seed() + 99});
      INFO(r.fwd.summary());
      REQUIRE(r.fwd.pass());
      INFO(r.bwd.summary());
      REQUIRE(r.bwd.pass());
    }
  }
}

// Inputs of magnitude 1e3 make every row's softmax one-hot, and dS = P ∘ (dP − D) an exact
// cancellation on the CPU (D and dP are the same dot product there), so the rule's tolerance for
// dQ and dK falls to the floor (1e-5): the kernels meet it only because D is summed on the tensor
// cores in dP's order (tc_bwd_preprocess_kernel). dV needs P's top entry to be exactly 1, hence
// LSE exactly fl(τ m): the forward's rescale α must be exactly 1 while the max stands still.
TEST_CASE("16-bit backward: inputs of large magnitude", "[gpu][tc][backward]") {
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const int d = GENERATE(64, 128);
  const bool causal = GENERATE(false, true);
  for (const Case& c : backward_cases(odd_shape(300, d), causal, dtype)) {
    DYNAMIC_SECTION(c.name() << " |x| up to 1e3") {
      fs::HostProblem p = fs::random_problem(c.shape, c.seed(), true, dtype);
      for (auto* t : {&p.q, &p.k, &p.v})
        for (float& x : *t) x = fs::round_to(dtype, x * 333.f);
      // dO at 1/8: every gradient is linear in dO, and at unit dO the fp64 reference's |dQ|
      // reaches 2.3e5 on one of these inputs (fp16, d = 64, key_warps' seed), past fp16's largest
      // finite 65504, which no fp16 output can hold; at 1/8 the largest is 2.9e4. Scores,
      // probabilities and O are unchanged.
      for (float& x : p.dout) x = fs::round_to(dtype, x / 8.f);
      const auto r = run_both(c, p);
      INFO(r.bwd.summary());
      REQUIRE(r.bwd.pass());
    }
  }
}

TEST_CASE("16-bit backward: rows whose scores are all equal", "[gpu][tc][backward]") {
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const int d = GENERATE(64, 128);
  const bool causal = GENERATE(false, true);
  for (const Case& c : backward_cases(odd_shape(300, d), causal, dtype)) {
    DYNAMIC_SECTION(c.name() << " all scores equal") {
      fs::HostProblem p = fs::random_problem(c.shape, c.seed(), true, dtype);
      for (std::size_t i = 0; i < p.k.size(); ++i) p.k[i] = p.k[i % d];
      const auto r = run_both(c, p);
      INFO(r.bwd.summary());
      REQUIRE(r.bwd.pass());
    }
  }
}

TEST_CASE("16-bit dropout drops exactly the entries step 05's fp32 kernels drop", "[gpu][tc][dropout]") {
  // Q = K = 0 makes every P_ij = 1/N; V = I (N = d) then puts Z_ij/N at O_ij: the kernel's mask,
  // read back whole, against the generator the fp32 steps and the reference share.
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const float p_drop = GENERATE(0.1f, 0.5f);
  const fs::Shape s{4, 64, 64, 64};
  for (const Case& c : backward_cases(s, false, dtype)) {
    if (c.step->variants[c.variant] != "fa2") continue;  // one forward for both
    DYNAMIC_SECTION(c.name() << " dropout " << p_drop) {
      fs::HostProblem p = fs::random_problem(s, 3, false, dtype);
      std::fill(p.q.begin(), p.q.end(), 0.f);
      std::fill(p.k.begin(), p.k.end(), 0.f);
      std::fill(p.v.begin(), p.v.end(), 0.f);
      for (std::int64_t bh = 0; bh < s.heads(); ++bh)
        for (int j = 0; j < s.N; ++j) p.v[(bh * s.N + j) * s.d + j] = 1.f;
      const fs::Dropout drop{p_drop, 2024};
      fs::DeviceRun run(*c.step, p, c.settings(drop), false);
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
      INFO("dropped " << double(dropped) / double(s.score_elems()) << ", differing from the generator: " << mismatched);
      REQUIRE(std::abs(double(dropped) / double(s.score_elems()) - p_drop) < 0.01);
      REQUIRE(mismatched == 0);
    }
  }
}

TEST_CASE("16-bit deterministic backward is bit-identical over repeats, atomic dQ stays within tolerance",
          "[gpu][tc][determinism]") {
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const bool causal = GENERATE(false, true);
  const fs::Shape s{2, 3, 1000, 64};
  for (const Case& c : backward_cases(s, causal, dtype)) {
    DYNAMIC_SECTION(c.name()) {
      const fs::HostProblem p = fs::random_problem(s, c.seed(), true, dtype);
      const fs::Dropout drop{0.1f, 5};
      fs::DeviceRun run(*c.step, p, c.settings(drop), true);
      run.forward();
      const fs::AttnOptions attn{fs::default_scale(s.d), causal, drop, nullptr, dtype};
      std::vector<float> first[3];
      int differing_runs = 0;
      for (int rep = 0; rep < 10; ++rep) {
        run.backward();
        run.sync();
        const std::vector<float> now[3] = {run.dq(), run.dk(), run.dv()};
        const auto r = fs::verify_backward(s, attn, p.q.data(), p.k.data(), p.v.data(), p.dout.data(), now[0].data(),
                                           now[1].data(), now[2].data(), c.seed(), kBudget);
        INFO(r.summary());
        REQUIRE(r.pass());
        if (rep == 0) {
          for (int t = 0; t < 3; ++t) first[t] = now[t];
          continue;
        }
        for (int t = 1; t < 3; ++t) REQUIRE(same_bits(first[t], now[t]));  // dK, dV: one CTA each, fixed order
        const bool same_dq = same_bits(first[0], now[0]);
        if (!c.order_dependent()) REQUIRE(same_dq);
        differing_runs += !same_dq;
      }
      if (c.order_dependent()) WARN(c.name() << ": dQ differed from the first run in " << differing_runs << " of 9 repeats");
    }
  }
}

// tc_dkdv_smem_kernel (fa2 at d = 64 and 128) sums every product of dK and dV in the order
// tc_dkdv_kernel (key_warps) does, so their dK and dV must agree bit for bit, on any input (also
// where a 16-bit output overflows), with dropout; dQ goes by atomics in both.
TEST_CASE("16-bit backward: the warp layouts' dK and dV are bit-identical", "[gpu][tc][determinism]") {
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const bool causal = GENERATE(false, true);
  const int d = GENERATE(64, 128);
  const int N = GENERATE(17, 300, 1000);
  const float magnitude = GENERATE(1.f, 333.f);
  const fs::Shape s{2, 3, N, d};
  const auto cases = backward_cases(s, causal, dtype);
  const Case* fa2 = nullptr;
  for (const Case& c : cases)
    if (c.step->variants[c.variant] == "fa2") fa2 = &c;
  REQUIRE(fa2 != nullptr);
  const auto seed_of = GENERATE(range(0, 3));  // the inputs of each variant's own cases
  REQUIRE(cases.size() == 3);
  fs::HostProblem p = fs::random_problem(s, cases[seed_of].seed(), true, dtype);
  for (auto* t : {&p.q, &p.k, &p.v})
    for (float& x : *t) x = fs::round_to(dtype, x * magnitude);
  const fs::Dropout drop{0.1f, 5};
  auto grads = [&](const Case& c) {
    fs::DeviceRun run(*c.step, p, c.settings(drop), true);
    run.forward();
    run.backward();
    run.sync();
    return std::vector<std::vector<float>>{run.dk(), run.dv()};
  };
  const auto want = grads(*fa2);
  int compared = 0;
  for (const Case& c : cases) {
    if (c.step->variants[c.variant] != "key_warps") continue;
    DYNAMIC_SECTION(c.name()) {
      const auto got = grads(c);
      REQUIRE(same_bits(got[0], want[0]));
      REQUIRE(same_bits(got[1], want[1]));
    }
    ++compared;
  }
  REQUIRE(compared == 1);
}
