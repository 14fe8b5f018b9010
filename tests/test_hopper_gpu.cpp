// Step 09's Hopper kernels beyond what every step's GPU tests check (test_steps_gpu and
// test_tensor_cores_gpu run step 09 against the fp64 reference on their odd shapes, and
// FS_TEST_STEPS=09 picks it out): the rungs of its ladder compute the same products in the same
// order, so they must agree bit for bit; the tiles' edges (N one short of a tile, on it, one past)
// against the reference at every d; tensors in other layouts read through TMA's strides; and
// what the step refuses. The backward: at the tiles' edges against the reference, deterministic's
// repeats and its dK, dV against fa3's, other layouts.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/buffer.hpp"
#include "common/e4m3.hpp"
#include "common/harness.hpp"
#include "common/nvtx_tool/nvtx_tool.hpp"
#include "common/recorder/sink.hpp"
#include "common/trace/validate.hpp"
#include "common/traced_run.hpp"
#include "common/verify.hpp"
#include "steps/09_hopper/hopper.hpp"
#include "steps/09_hopper/variants.hpp"
#include "tests/flash_checks.hpp"
#include "tests/fp8_problems.hpp"
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
bool backward_runs_here(const Case& c) { return c.step->backward_refusal(c.shape, c.settings()).empty(); }

using fs::hopper::kDeterministic;  // the variants' ids (variants.hpp), in step09_info().variants' order

struct Grads {
  std::vector<float> o, lse, dq, dk, dv;
};
Grads both(const Case& c, const fs::HostProblem& p) {
  fs::DeviceRun run(*c.step, p, c.settings(), true);
  run.forward();
  run.backward();
  run.sync();
  return {run.o(), run.lse(), run.dq(), run.dk(), run.dv()};
}

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
    if (step09().rounds_to_e4m3(v)) continue;  // fp8 multiplies other inputs
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
      fs::AttnOptions attn{fs::default_scale(d), causal, {}, nullptr, dtype};
      attn.e4m3 = step09().rounds_to_e4m3(v);  // fp8: the FP8 rule (common/verify.hpp)
      const auto report =
          fs::verify_forward(s, attn, p.q.data(), p.k.data(), p.v.data(), got.o.data(), got.lse.data(), c.seed());
      INFO(report.summary());
      REQUIRE(report.coverage.rfind("all ", 0) == 0);
      REQUIRE(report.pass());
    }
  }
}

// fp8's key tiles and K/V scale blocks are B = 224 rows (common/e4m3.hpp): N at their edges, and
// a second key tile whose Vᵀ boxes (128 keys each) run past N.
TEST_CASE("step 09: fp8 at its key tiles' edges matches the fp64 reference", "[gpu][hopper]") {
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const int N = fs::kE4m3BlockKV + GENERATE(-1, 0, 1, 96, fs::kE4m3BlockKV, fs::kE4m3BlockKV + 1);
  const bool causal = GENERATE(false, true);
  const fs::Shape s{1, 2, N, 128};
  const int v = fs::hopper::kFp8;
  REQUIRE(step09().rounds_to_e4m3(v));
  const Case c{&step09(), v, s, causal, dtype};
  if (!runs_here(c)) return;
  const fs::HostProblem p = fs::random_problem(s, c.seed(), false, dtype);
  const Outputs got = forward(c, p);
  fs::AttnOptions attn{fs::default_scale(128), causal, {}, nullptr, dtype};
  attn.e4m3 = true;
  const auto report =
      fs::verify_forward(s, attn, p.q.data(), p.k.data(), p.v.data(), got.o.data(), got.lse.data(), c.seed());
  INFO(c.name() << "\n" << report.summary());
  REQUIRE(report.coverage.rfind("all ", 0) == 0);
  REQUIRE(report.pass());
}

// fp8's lazy softmax on the GPU, on its two problems (tests/fp8_problems.hpp: rows whose max
// climbs through every tile with V blocks 2⁵ above and below the others, and blocks of zeros in Q,
// K and V among small V), causal and not. N = 800: four key tiles, the last of 128 keys.
TEST_CASE("step 09: fp8's lazy softmax on climbing maxima and blocks of zeros", "[gpu][hopper]") {
  using fs::testing::Fp8Problem;
  const Fp8Problem kind = GENERATE(Fp8Problem::climbing, Fp8Problem::zeros);
  const bool causal = GENERATE(false, true);
  const fs::Shape s{1, 2, 800, 128};
  const int v = fs::hopper::kFp8;
  const Case c{&step09(), v, s, causal, DType::bf16};
  if (!runs_here(c)) return;
  fs::HostProblem p = fs::random_problem(s, c.seed() + int(kind), false, DType::bf16);
  fs::testing::shape_fp8_problem(p, kind);
  const Outputs got = forward(c, p);
  fs::AttnOptions attn{fs::default_scale(128), causal, {}, nullptr, DType::bf16};
  attn.e4m3 = true;
  const auto report =
      fs::verify_forward(s, attn, p.q.data(), p.k.data(), p.v.data(), got.o.data(), got.lse.data(), c.seed());
  INFO(c.name() << (kind == Fp8Problem::zeros ? " zeros" : " climbing") << "\n" << report.summary());
  REQUIRE(report.coverage.rfind("all ", 0) == 0);
  REQUIRE(report.pass());
}

// The FP8 tensor core's adder (hopper::probe_fp8_mma): the FP8 rule's yardstick models it
// (common/e4m3.hpp), so a GPU that keeps fewer bits than the model must fail here.
TEST_CASE("step 09: the FP8 tensor core keeps the bits the FP8 rule's model of it assumes", "[gpu][hopper]") {
  const Case c{&step09(), 0, fs::Shape{1, 1, 128, 128}, false, DType::bf16};
  if (!runs_here(c)) {
    WARN(c.step->refusal(c.shape, c.settings()));
    return;
  }
  const fs::hopper::Fp8MmaProbe probe = fs::hopper::probe_fp8_mma();
  std::string rows;
  for (int j = 0; j < 24; ++j)
    rows += "  j = " + std::to_string(j) + ": 2^8 + 2^(8-j) -> " + std::to_string(probe.sum[j]) + ", 2^j + 1 -> " +
            std::to_string(probe.acc[j]) + "\n";
  // Printed on every run: the figures the lesson quotes.
  WARN("FP8 wgmma.m64n64k32 on this GPU: two products of one instruction add exactly to " << probe.sum_bits
       << " bits apart, a product to the accumulator " << probe.acc_bits << " bits apart (fp32: 17 and 23, "
       << "the most these experiments can show); the FP8 rule's model assumes " << fs::kE4m3MmaBits << "\n" << rows);
  REQUIRE(probe.sum_bits >= fs::kE4m3MmaBits);
  REQUIRE(probe.acc_bits >= fs::kE4m3MmaBits);
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
  CHECK(s.refusal({1, 1, 128, 59}, bf16).find("d must be a multiple of 8 up to 256") != std::string::npos);
  CHECK(s.refusal({1, 1, 128, 264}, bf16).find("d must be a multiple of 8 up to 256") != std::string::npos);
  CHECK(s.backward_refusal({1, 1, 128, 136}, bf16).find("backward takes d up to 128") != std::string::npos);
  CHECK(s.trace_refusal({1, 1, 128, 80}, bf16).find("runs in the d = 128 kernels") != std::string::npos);
  CHECK(s.trace_refusal({1, 1, 128, 128}, bf16).empty());
  fs::Shape other_keys{1, 1, 128, 64};
  other_keys.Nk = 100;
  CHECK(s.refusal(other_keys, bf16).find("--seq-k") != std::string::npos);
  fs::PassSettings rung = bf16;
  rung.variant = fs::hopper::kWs;
  CHECK(s.refusal({1, 1, 128, 64}, rung).find("compiled for bf16 at d = 128") != std::string::npos);
}

TEST_CASE("step 09's backward at the tiles' edges matches the fp64 reference", "[gpu][hopper][backward]") {
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const int d = GENERATE(64, 128);
  const int N = GENERATE(1, 63, 64, 65, 127, 128, 129, 200);
  const bool causal = GENERATE(false, true);
  const fs::Shape s{1, 2, N, d};
  for (int v : {int(fs::hopper::kFa3), int(kDeterministic)}) {
    const Case c{&step09(), v, s, causal, dtype};
    if (!backward_runs_here(c)) {
      WARN(c.step->backward_refusal(s, c.settings()));
      continue;
    }
    DYNAMIC_SECTION(c.name()) {
      const fs::HostProblem p = fs::random_problem(s, c.seed(), true, dtype);
      const Grads g = both(c, p);
      const fs::AttnOptions attn{fs::default_scale(d), causal, {}, nullptr, dtype};
      const auto report = fs::verify_backward(s, attn, p.q.data(), p.k.data(), p.v.data(), p.dout.data(), g.dq.data(),
                                              g.dk.data(), g.dv.data(), c.seed());
      INFO(report.summary());
      REQUIRE(report.coverage.rfind("all ", 0) == 0);
      REQUIRE(report.pass());
    }
  }
}

// A head dimension between the compiled ones (a multiple of 8: variants.hpp, runs_head_dim) runs in
// the next one's kernels, padded on chip: fa3 and deterministic, forward and (d ≤ 128) backward,
// against the fp64 reference. d = 8 and 40 in the d = 64 kernels, 72 and 120 in the 128's, 136 and
// 224 in the 256's (a box of K and V wholly past d at 136).
TEST_CASE("step 09 at a head dimension between the compiled ones matches the fp64 reference",
          "[gpu][hopper][head_dim]") {
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const int d = GENERATE(8, 40, 72, 120, 136, 224);
  const int N = GENERATE(1, 65, 200);
  const bool causal = GENERATE(false, true);
  const fs::Shape s{1, 2, N, d};
  for (int v : {int(fs::hopper::kFa3), int(kDeterministic)}) {
    const Case c{&step09(), v, s, causal, dtype};
    if (!runs_here(c)) {
      WARN(c.step->refusal(s, c.settings()));
      continue;
    }
    DYNAMIC_SECTION(c.name()) {
      const fs::HostProblem p = fs::random_problem(s, c.seed(), true, dtype);
      const fs::AttnOptions attn{fs::default_scale(d), causal, {}, nullptr, dtype};
      const Outputs got = forward(c, p);
      const auto fwd =
          fs::verify_forward(s, attn, p.q.data(), p.k.data(), p.v.data(), got.o.data(), got.lse.data(), c.seed());
      INFO(fwd.summary());
      REQUIRE(fwd.coverage.rfind("all ", 0) == 0);
      REQUIRE(fwd.pass());
      REQUIRE(backward_runs_here(c) == (d <= 128));
      if (d <= 128) {
        const Grads g = both(c, p);
        const auto bwd = fs::verify_backward(s, attn, p.q.data(), p.k.data(), p.v.data(), p.dout.data(), g.dq.data(),
                                             g.dk.data(), g.dv.data(), c.seed());
        INFO(bwd.summary());
        REQUIRE(bwd.coverage.rfind("all ", 0) == 0);
        REQUIRE(bwd.pass());
      }
    }
  }
}

// dK and dV sum in registers in one order whatever the variant; dQ's reduce-adds land in fa3 in
// whatever order the CTAs reach them, in deterministic in the key tiles' order.
TEST_CASE("step 09's deterministic backward repeats bit for bit, with fa3's dK and dV", "[gpu][hopper][backward]") {
  const int d = GENERATE(64, 128);
  const bool causal = GENERATE(false, true);
  const fs::Shape s{2, 2, 1000, d};  // 8 key tiles adding to each block of dQ
  const Case det{&step09(), kDeterministic, s, causal, DType::bf16};
  const Case fa3{&step09(), 0, s, causal, DType::bf16};
  if (!backward_runs_here(det)) {
    WARN(det.step->backward_refusal(s, det.settings()));
    return;
  }
  const fs::HostProblem p = fs::random_problem(s, det.seed(), true, DType::bf16);
  const Grads first = both(det, p), second = both(det, p), other = both(fa3, p);
  CHECK(same_bits(first.dq, second.dq));
  CHECK(same_bits(first.dk, second.dk));
  CHECK(same_bits(first.dv, second.dv));
  CHECK(same_bits(first.dk, other.dk));
  CHECK(same_bits(first.dv, other.dv));
  // fa3's dQ: the same sums in another order, within a few roundings of fp32.
  double worst = 0;
  for (std::size_t i = 0; i < first.dq.size(); ++i)
    worst = std::max(worst, double(std::fabs(first.dq[i] - other.dq[i])) / (1e-3 + std::fabs(first.dq[i])));
  CHECK(worst < 1e-2);
}

TEST_CASE("step 09's backward on tensors in other layouts gives the contiguous layout's gradients bit for bit",
          "[gpu][hopper][backward]") {
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const int d = GENERATE(64, 128);
  const bool causal = GENERATE(false, true);
  const fs::Shape s{2, 3, 300, d};
  const Case c{&step09(), kDeterministic, s, causal, dtype};
  if (!backward_runs_here(c)) {
    WARN(c.step->backward_refusal(s, c.settings()));
    return;
  }
  const fs::HostProblem p = fs::random_problem(s, c.seed(), true, dtype);
  fs::DeviceRun run(*c.step, p, c.settings(), true);
  run.forward();
  run.backward();
  run.sync();
  const std::vector<float> want_dq = run.dq(), want_dk = run.dk(), want_dv = run.dv();

  using fs::testing::Laid;
  const Laid lq = Laid::rows_heads(s.B, s.H, s.N, d), lk = Laid::rows_heads(s.B, s.H, s.N, d, 1),
             lv = Laid::rows_heads(s.B, s.H, s.N, d, 2), lo = Laid::rows_heads(s.B, s.H, s.N, d, 1),
             ldo = Laid::rows_heads(s.B, s.H, s.N, d, 2), ldq = Laid::rows_heads(s.B, s.H, s.N, d, 1),
             ldk = Laid::rows_heads(s.B, s.H, s.N, d), ldv = Laid::rows_heads(s.B, s.H, s.N, d, 3);
  fs::DeviceTensor tq(lq.size, dtype), tk(lk.size, dtype), tv(lv.size, dtype), to(lo.size, dtype), tdo(ldo.size, dtype),
      tdq(ldq.size, dtype), tdk(ldk.size, dtype), tdv(ldv.size, dtype);
  tq.upload(lq.place(p.q, s.H, s.N, d));
  tk.upload(lk.place(p.k, s.H, s.N, d));
  tv.upload(lv.place(p.v, s.H, s.N, d));
  tdo.upload(ldo.place(p.dout, s.H, s.N, d));
  for (auto* t : {&to, &tdq, &tdk, &tdv}) t->poison();
  fs::FwdParams f = run.fwd_params();
  f.q = tq.get(), f.k = tk.get(), f.v = tv.get(), f.o = to.get();
  f.q_strides = lq.strides, f.k_strides = lk.strides, f.v_strides = lv.strides, f.o_strides = lo.strides;
  c.step->forward(f);
  fs::BwdParams b = run.bwd_params();
  b.q = f.q, b.k = f.k, b.v = f.v, b.o = to.get(), b.dout = tdo.get(), b.dq = tdq.get(), b.dk = tdk.get(), b.dv = tdv.get();
  b.q_strides = lq.strides, b.k_strides = lk.strides, b.v_strides = lv.strides, b.o_strides = lo.strides;
  b.dout_strides = ldo.strides, b.dq_strides = ldq.strides, b.dk_strides = ldk.strides, b.dv_strides = ldv.strides;
  c.step->backward(b);
  run.sync();
  CHECK(same_bits(ldq.gather(tdq.download(), want_dq.size(), s.H, s.N, d), want_dq));
  CHECK(same_bits(ldk.gather(tdk.download(), want_dk.size(), s.H, s.N, d), want_dk));
  CHECK(same_bits(ldv.gather(tdv.download(), want_dv.size(), s.H, s.N, d), want_dv));
}

TEST_CASE("step 09's backward refuses d = 256 in words, and the forward still runs it", "[gpu][hopper][backward]") {
  const fs::StepInfo& s = step09();
  fs::PassSettings bf16;
  bf16.dtype = DType::bf16;
  bf16.scale = 0.0625f;
  CHECK(s.backward_refusal({1, 1, 128, 256}, bf16).find("compiled for d = 64 and 128") != std::string::npos);
  CHECK_FALSE(s.backward_takes({1, 1, 128, 256}, bf16));
  CHECK(s.backward_takes({1, 1, 128, 128}, bf16));
  CHECK(s.unsupported_backward({1, 1, 128, 256}, bf16) != "");
  CHECK(s.refusal({1, 1, 128, 256}, bf16).find("d must be") == std::string::npos);
}

// Traced runs of every variant at d = 128 (the rungs' and fp8's only head dimension; test_trace_gpu
// covers d = 64): each warpgroup records a lane of its own, named, the traces validate (bytes
// equal to the IO model, fp8's quantizer among the untraced), and tracing changes no output bit.
TEST_CASE("step 09: traced runs record the producer and each consumer in a lane of their own", "[gpu][hopper][trace]") {
  const bool causal = GENERATE(false, true);
  const fs::Shape s{1, 2, 300, 128};
  for (int v = 0; v < int(step09().variants.size()); ++v) {
    const Case c{&step09(), v, s, causal, DType::bf16};
    if (!runs_here(c)) continue;
    DYNAMIC_SECTION(c.name()) {
      const bool backward = backward_runs_here(c);
      const fs::HostProblem p = fs::random_problem(s, c.seed(), backward, DType::bf16);
      fs::DeviceRun run(*c.step, p, c.settings(), backward);
      run.forward();
      run.sync();
      const std::vector<float> o = run.o(), lse = run.lse();
      for (const char* pass : {"fwd", "bwd"}) {
        if (std::string(pass) == "bwd" && !backward) continue;
        INFO(pass);
        fs::trace::DeviceSink sink;
        fs::nvtx_tool::start();
        run.set_trace(&sink);
        if (std::string(pass) == "fwd") run.forward();
        else run.backward();
        run.sync();
        const fs::trace::Trace t =
            fs::build_trace(*c.step, s, c.settings(), fs::testing::test_device(), pass, sink, fs::nvtx_tool::stop());
        const auto report = fs::trace::validate(t);
        INFO((report.errors.empty() ? std::string() : report.errors.front()));
        REQUIRE(report.ok());
        bool laned = false;
        for (const auto& k : t.kernels) {
          if (k.name != "hopper_forward_kernel" && k.name != "hopper_backward_kernel") continue;
          laned = true;
          REQUIRE(k.lanes == 3);
          REQUIRE(k.lane_names.size() == 3);
        }
        REQUIRE(laned);
        int lane_tracks[3] = {};
        for (const auto& tr : t.tracks)
          if (t.kernels[std::size_t(tr.kernel)].lanes == 3) ++lane_tracks[tr.lane];
        REQUIRE(lane_tracks[0] > 0);
        REQUIRE(lane_tracks[1] == lane_tracks[0]);  // every CTA's consumers recorded
        REQUIRE(lane_tracks[2] > 0);
      }
      REQUIRE(same_bits(run.o(), o));
      REQUIRE(same_bits(run.lse(), lse));
    }
  }
}
