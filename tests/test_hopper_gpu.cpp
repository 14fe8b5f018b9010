// Step 09's Hopper kernels beyond what every step's GPU tests check (test_steps_gpu and
// test_tensor_cores_gpu run step 09 against the fp64 reference on their odd shapes, and
// FS_TEST_STEPS=09 picks it out): the rungs of its ladder compute the same products in the same
// order, so they must agree bit for bit; the tiles' edges (N one short of a tile, on it, one past)
// against the reference at every d; tensors in other layouts read through TMA's strides; and
// what the step refuses.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "common/buffer.hpp"
#include "common/harness.hpp"
#include "common/verify.hpp"
#include "steps/09_hopper/hopper.hpp"
#include "tests/flash_checks.hpp"
#include "tests/gpu_cases.hpp"

using fs::DType;
using fs::testing::Case;
using fs::testing::same_bits;

namespace {

const fs::StepInfo& step09() {
  static const fs::StepInfo s = fs::step09_info();
  return s;
}

struct Outputs {
  std::vector<float> o, lse;
};
Outputs forward(const Case& c, const fs::HostProblem& p) {
  fs::DeviceRun run(*c.step, p, c.settings(), false);
  run.forward();
  run.sync();
  return {run.o(), run.lse()};
}

bool runs_here(const Case& c) { return c.step->refusal(c.shape, c.settings()).empty(); }

}  // namespace

TEST_CASE("step 09: the ladder's rungs give fa3's outputs bit for bit", "[gpu][hopper]") {
  const int N = GENERATE(1, 129, 1000);
  const bool causal = GENERATE(false, true);
  const fs::Shape s{2, 3, N, 128};
  const Case fa3{&step09(), 0, s, causal, DType::bf16};
  if (!runs_here(fa3)) {
    WARN(fa3.step->refusal(s, fa3.settings()));
    return;
  }
  const fs::HostProblem p = fs::random_problem(s, fa3.seed(), false, DType::bf16);
  const Outputs want = forward(fa3, p);
  for (int v = 1; v < int(step09().variants.size()); ++v) {
    const Case rung{&step09(), v, s, causal, DType::bf16};
    DYNAMIC_SECTION(rung.name()) {
      const Outputs got = forward(rung, p);
      REQUIRE(same_bits(got.o, want.o));
      REQUIRE(same_bits(got.lse, want.lse));
    }
  }
}

TEST_CASE("step 09: N at the tiles' edges matches the fp64 reference", "[gpu][hopper]") {
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const int d = GENERATE(64, 128, 256);
  const int N = GENERATE(63, 64, 65, 127, 128, 129, 255, 256);
  const bool causal = GENERATE(false, true);
  const fs::Shape s{1, 2, N, d};
  for (int v = 0; v < int(step09().variants.size()); ++v) {
    const Case c{&step09(), v, s, causal, dtype};
    if (!runs_here(c)) continue;
    DYNAMIC_SECTION(c.name()) {
      const fs::HostProblem p = fs::random_problem(s, c.seed(), false, dtype);
      const Outputs got = forward(c, p);
      const fs::AttnOptions attn{fs::default_scale(d), causal, {}, nullptr, dtype};
      const auto report =
          fs::verify_forward(s, attn, p.q.data(), p.k.data(), p.v.data(), got.o.data(), got.lse.data(), c.seed());
      INFO(report.summary());
      REQUIRE(report.coverage.rfind("all ", 0) == 0);
      REQUIRE(report.pass());
    }
  }
}

// flash_attn_func's (B, N, H, d), and one head of a wider tensor (a slice of packed QKV), for Q,
// K and V; O with a padded row. TMA reads them through the tensor maps' strides.
TEST_CASE("step 09 on tensors in other layouts gives the contiguous layout's results bit for bit", "[gpu][hopper]") {
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const int d = GENERATE(64, 128, 256);
  const bool causal = GENERATE(false, true);
  const fs::Shape s{2, 3, 300, d};
  const Case c{&step09(), 0, s, causal, dtype};
  if (!runs_here(c)) {
    WARN(c.step->refusal(s, c.settings()));
    return;
  }
  const fs::HostProblem p = fs::random_problem(s, c.seed(), false, dtype);
  fs::DeviceRun run(*c.step, p, c.settings(), false);
  run.forward();
  run.sync();
  const std::vector<float> want_o = run.o(), want_lse = run.lse();

  using fs::testing::Laid;
  const Laid lq = Laid::rows_heads(s.B, s.H, s.N, d), lk = Laid::rows_heads(s.B, s.H, s.N, d, 1),
             lv = Laid::rows_heads(s.B, s.H, s.N, d, 2), lo = Laid::rows_heads(s.B, s.H, s.N, d, 1);
  fs::DeviceTensor tq(lq.size, dtype), tk(lk.size, dtype), tv(lv.size, dtype), to(lo.size, dtype);
  tq.upload(lq.place(p.q, s.H, s.N, d));
  tk.upload(lk.place(p.k, s.H, s.N, d));
  tv.upload(lv.place(p.v, s.H, s.N, d));
  to.poison();
  fs::FwdParams f = run.fwd_params();
  f.q = tq.get(), f.k = tk.get(), f.v = tv.get(), f.o = to.get();
  f.q_strides = lq.strides, f.k_strides = lk.strides, f.v_strides = lv.strides, f.o_strides = lo.strides;
  c.step->forward(f);
  run.sync();
  const std::vector<float> o_store = to.download();
  CHECK(same_bits(lo.gather(o_store, want_o.size(), s.H, s.N, d), want_o));
  CHECK(same_bits(run.lse(), want_lse));
  std::int64_t written = 0;  // the padding is untouched (still the poison's NaN)
  for (float x : o_store) written += !std::isnan(x);
  CHECK(written == std::int64_t(want_o.size()));
}

TEST_CASE("step 09 refuses what its kernels do not take, in words", "[gpu][hopper]") {
  const fs::StepInfo& s = step09();
  fs::PassSettings bf16;
  bf16.dtype = DType::bf16;
  bf16.scale = 0.125f;
  fs::PassSettings fp32 = bf16;
  fp32.dtype = DType::fp32;
  CHECK(s.refusal({1, 1, 128, 64}, fp32).find("bf16 or fp16") != std::string::npos);
  CHECK(s.refusal({1, 1, 128, 32}, bf16).find("d must be 64, 128 or 256") != std::string::npos);
  fs::Shape other_keys{1, 1, 128, 64};
  other_keys.Nk = 100;
  CHECK(s.refusal(other_keys, bf16).find("--seq-k") != std::string::npos);
  fs::PassSettings rung = bf16;
  rung.variant = 1;
  CHECK(s.refusal({1, 1, 128, 64}, rung).find("compiled for bf16 at d = 128") != std::string::npos);
}
