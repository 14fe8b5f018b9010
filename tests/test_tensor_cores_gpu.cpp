// Step 08's tensor-core kernels against the fp64 reference, under the 16-bit rule: the error must
// be at most 2× (3× for gradients) that of a float32 CPU implementation that rounds to bf16 or
// fp16 where a 16-bit kernel must (common/reference.hpp), plus the floor. Every dtype × d ×
// causal × odd N × variant, forward and backward, with and without dropout; inputs of large
// magnitude; scores that are all equal; the dropout mask bit for bit; deterministic repeats.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/philox.hpp"

#include "common/buffer.hpp"
#include "common/device.hpp"
#include "common/harness.hpp"
#include "common/verify.hpp"
#include "steps/08_tensor_cores/tensor_cores.hpp"
#include "steps/08_tensor_cores/variants.hpp"
#include "tests/flash_checks.hpp"
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
// step 09's fa3 and deterministic. The rungs' backward is fa2's (fa3's), so they add nothing here.
bool own_backward(const std::string& v) {
  using fs::tc::tc_variant_name;
  return v == tc_variant_name(fs::tc::kFa2) || v == "fa3" || v == tc_variant_name(fs::tc::kDeterministic) ||
         v == tc_variant_name(fs::tc::kKeyWarps);
}
std::vector<Case> backward_cases(const fs::Shape& s, bool causal, DType dtype) {
  std::vector<Case> out;
  for (const Case& c : cases_for(s, causal, true, dtype))
    if (own_backward(c.step->variants[c.variant])) out.push_back(c);
  return out;
}

// Each case forward and backward (dropout p_drop where the step has dropout) against the fp64
// reference under the 16-bit rule, a section each.
void require_forward_and_backward(const std::vector<Case>& cases, DType dtype, float p_drop) {
  for (const Case& c : cases) {
    if (p_drop > 0 && !c.step->dropout) continue;  // step 09 has no dropout
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

// Step 08's cases only, for the checks of its own kernels' count and warp layouts.
std::vector<Case> step08_only(const std::vector<Case>& cases) {
  std::vector<Case> out;
  for (const Case& c : cases)
    if (c.step->id == "08_tensor_cores") out.push_back(c);
  return out;
}

}  // namespace

TEST_CASE("16-bit forward O and LSE match the fp64 reference on odd shapes", "[gpu][tc][forward]") {
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const int N = GENERATE(1, 17, 257, 1025, 4097);
  const int d = GENERATE(32, 64, 96, 128, 256);
  const bool causal = GENERATE(false, true);
  const auto cases = cases_for(odd_shape(N, d), causal, false, dtype);
  REQUIRE(fs::testing::has_cases_or_filtered(cases));  // step 08 runs every one of these
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
  // fa2, deterministic (and key_warps) run all of these, unless FS_TEST_STEPS has left step 08 out
  if (!fs::testing::test_steps_filter()) REQUIRE(step08_only(cases).size() == ((d == 64 || d == 128) ? 3u : 2u));
  require_forward_and_backward(cases, dtype, p_drop);
}

// Any head dimension 1 ... 256: fa2 and deterministic run a d they are not compiled at in the next
// compiled one's kernels, their tiles zero past d (tc_tiles.cuh, head_cols): whole chunks where d is
// a multiple of 8, element by element where not (1, 59, 111).
TEST_CASE("16-bit kernels at any head dimension 1 ... 256 match the fp64 reference, forward and backward",
          "[gpu][tc][backward][head_dim]") {
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const int N = GENERATE(1, 77, 257);
  const int d = GENERATE(1, 8, 40, 59, 80, 111, 160, 192, 224);
  const bool causal = GENERATE(false, true);
  const float p_drop = GENERATE(0.f, 0.15f);
  const auto cases = backward_cases(odd_shape(N, d), causal, dtype);
  if (!fs::testing::test_steps_filter()) REQUIRE(step08_only(cases).size() == 2u);  // fa2 and deterministic
  require_forward_and_backward(cases, dtype, p_drop);
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
    if (c.step->variants[c.variant] != fs::tc::tc_variant_name(fs::tc::kFa2)) continue;  // one forward for both
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
      const fs::Dropout drop = c.step->dropout ? fs::Dropout{0.1f, 5} : fs::Dropout{};  // step 09 has none
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
  const auto cases = step08_only(backward_cases(s, causal, dtype));
  const Case* fa2 = nullptr;
  for (const Case& c : cases)
    if (c.step->variants[c.variant] == fs::tc::tc_variant_name(fs::tc::kFa2)) fa2 = &c;
  if (!fa2 && fs::testing::test_steps_filter()) return;  // FS_TEST_STEPS has left step 08 out
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
    if (c.step->variants[c.variant] != fs::tc::tc_variant_name(fs::tc::kKeyWarps)) continue;
    DYNAMIC_SECTION(c.name()) {
      const auto got = grads(c);
      REQUIRE(same_bits(got[0], want[0]));
      REQUIRE(same_bits(got[1], want[1]));
    }
    ++compared;
  }
  REQUIRE(compared == 1);
}

namespace {

// A tensor of `heads` heads of `rows` rows of d elements in some layout (fs::Strides) inside a
// storage buffer of `count` elements, at `offset`: what a slice of a PyTorch tensor hands over.
struct Layout {
  fs::Strides st;
  std::int64_t offset = 0, count = 0;
};
// flash_attn_func's (B, rows, heads, d), each token's row padded by `pad` elements and each batch
// by 2·pad (pad 0: contiguous).
Layout tokens_major(int B, int heads, int rows, int d, int pad) {
  const std::int64_t row = std::int64_t(heads) * d + pad, batch = rows * row + 2 * pad;
  return {{batch, d, row}, 0, B * batch};
}
// Q, K, V as slices of one packed (B, rows, 3, heads, d) tensor: which = 0, 1, 2.
Layout packed_qkv(int B, int heads, int rows, int d, int which) {
  const std::int64_t row = 3ll * heads * d;
  return {{rows * row, d, row}, std::int64_t(which) * heads * d, B * rows * row};
}
// The (B, heads, rows, d) values `dense` written into a storage of the layout (the gaps NaN,
// which a kernel that reads them turns into a failed comparison), and read back.
std::vector<float> scatter(const std::vector<float>& dense, const Layout& l, int heads, int rows, int d,
                           std::vector<float> storage) {
  if (storage.empty()) storage.assign(l.count, NAN);
  for (std::int64_t bh = 0; bh < std::int64_t(dense.size()) / (std::int64_t(rows) * d); ++bh)
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < d; ++c) storage[l.offset + l.st.of_head(bh, heads) + r * l.st.row + c] = dense[(bh * rows + r) * d + c];
  return storage;
}
std::vector<float> gather(const std::vector<float>& storage, const Layout& l, std::int64_t n_heads, int heads, int rows, int d) {
  std::vector<float> dense(n_heads * rows * d);
  for (std::int64_t bh = 0; bh < n_heads; ++bh)
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < d; ++c) dense[(bh * rows + r) * d + c] = storage[l.offset + l.st.of_head(bh, heads) + r * l.st.row + c];
  return dense;
}

}  // namespace

// The kernels read and write tensors in any layout whose rows start on 16-byte boundaries
// (FwdParams::q_strides and the others), as a Python caller hands them over: flash_attn_func's
// (B, N, H, d), padded rows, slices of one packed QKV tensor. The same inputs in those layouts
// must give the contiguous run's outputs bit for bit (dQ by atomics: within the tolerance).
TEST_CASE("16-bit kernels on tensors in other layouts give the contiguous layout's results bit for bit",
          "[gpu][tc][layout]") {
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const bool causal = GENERATE(false, true);
  const bool packed = GENERATE(false, true);  // Q, K, V in one (B, N, 3, H, d) tensor (square shapes)
  const int d = GENERATE(64, 128);
  fs::Shape s{2, 4, 300, d};
  if (!packed) {
    s.Nk = 333;  // grouped K/V heads of their own length
    s.Hkv = 2;
  }
  const int H = s.H, Hk = s.kv_heads(), N = s.N, Nk = s.keys();
  for (const Case& c : backward_cases(s, causal, dtype)) {
    if (c.step->variants[c.variant] == fs::tc::tc_variant_name(fs::tc::kKeyWarps) && !packed) continue;  // takes no K/V shapes
    // Step 09 takes neither dropout nor K/V shapes: its layouts are tested in test_hopper_gpu.
    if (!c.step->dropout || !c.step->kv_shapes) continue;
    DYNAMIC_SECTION(c.name() << (packed ? " packed QKV" : " Nk=333 Hkv=2") << ", (B, N, H, d) with padded outputs") {
      const fs::HostProblem p = fs::random_problem(s, c.seed(), true, dtype);
      const fs::Dropout drop{0.1f, 5};
      fs::DeviceRun run(*c.step, p, c.settings(drop), true);
      run.forward();
      run.backward();
      run.sync();
      const std::vector<float> want[5] = {run.o(), run.lse(), run.dq(), run.dk(), run.dv()};

      // Inputs in their layouts; outputs padded (rows 8 elements apart from the next head's).
      Layout lq, lk, lv;
      if (packed) {
        lq = packed_qkv(s.B, H, N, d, 0), lk = packed_qkv(s.B, H, N, d, 1), lv = packed_qkv(s.B, H, N, d, 2);
      } else {
        lq = tokens_major(s.B, H, N, d, 0), lk = tokens_major(s.B, Hk, Nk, d, 0), lv = tokens_major(s.B, Hk, Nk, d, 0);
      }
      const Layout lo = tokens_major(s.B, H, N, d, 8), ldo = tokens_major(s.B, H, N, d, 0);
      const Layout ldq = tokens_major(s.B, H, N, d, 8), ldk = tokens_major(s.B, Hk, Nk, d, 16),
                   ldv = tokens_major(s.B, Hk, Nk, d, 8);
      std::vector<float> qkv_host;
      if (packed) qkv_host = scatter(p.v, lv, H, N, d, scatter(p.k, lk, H, N, d, scatter(p.q, lq, H, N, d, {})));
      fs::DeviceTensor qkv(packed ? lq.count : 0, dtype), tq(packed ? 0 : lq.count, dtype), tk(packed ? 0 : lk.count, dtype),
          tv(packed ? 0 : lv.count, dtype), tdo(ldo.count, dtype), to(lo.count, dtype), tdq(ldq.count, dtype),
          tdk(ldk.count, dtype), tdv(ldv.count, dtype);
      const std::size_t eb = fs::dtype_bytes(dtype);
      auto at = [&](const fs::DeviceTensor& t, const Layout& l) {
        return static_cast<void*>(static_cast<unsigned char*>(t.get()) + l.offset * eb);
      };
      if (packed) {
        qkv.upload(qkv_host);
      } else {
        tq.upload(scatter(p.q, lq, H, N, d, {}));
        tk.upload(scatter(p.k, lk, Hk, Nk, d, {}));
        tv.upload(scatter(p.v, lv, Hk, Nk, d, {}));
      }
      tdo.upload(scatter(p.dout, ldo, H, N, d, {}));
      for (auto* t : {&to, &tdq, &tdk, &tdv}) t->poison();

      fs::FwdParams f = run.fwd_params();
      f.q = at(packed ? qkv : tq, lq), f.k = at(packed ? qkv : tk, lk), f.v = at(packed ? qkv : tv, lv), f.o = to.get();
      f.q_strides = lq.st, f.k_strides = lk.st, f.v_strides = lv.st, f.o_strides = lo.st;
      c.step->forward(f);
      fs::BwdParams b = run.bwd_params();
      b.q = f.q, b.k = f.k, b.v = f.v, b.o = to.get(), b.dout = tdo.get(), b.dq = tdq.get(), b.dk = tdk.get(), b.dv = tdv.get();
      b.q_strides = lq.st, b.k_strides = lk.st, b.v_strides = lv.st, b.o_strides = lo.st, b.dout_strides = ldo.st;
      b.dq_strides = ldq.st, b.dk_strides = ldk.st, b.dv_strides = ldv.st;
      c.step->backward(b);
      run.sync();

      const std::int64_t qh = s.heads(), kh = std::int64_t(s.B) * Hk;
      CHECK(same_bits(gather(to.download(), lo, qh, H, N, d), want[0]));
      CHECK(same_bits(run.lse(), want[1]));
      const auto dq = gather(tdq.download(), ldq, qh, H, N, d);
      CHECK(same_bits(gather(tdk.download(), ldk, kh, Hk, Nk, d), want[3]));
      CHECK(same_bits(gather(tdv.download(), ldv, kh, Hk, Nk, d), want[4]));
      if (!c.order_dependent()) {
        CHECK(same_bits(dq, want[2]));
      } else {  // dQ by atomics: its own rounding each run; the reference judges it
        const fs::AttnOptions attn{fs::default_scale(d), causal, drop, nullptr, dtype};
        const auto r = fs::verify_backward(s, attn, p.q.data(), p.k.data(), p.v.data(), p.dout.data(), dq.data(),
                                           want[3].data(), want[4].data(), c.seed(), kBudget);
        INFO(r.summary());
        CHECK(r.pass());
      }
      // The padding between rows and heads is untouched (still the poison's NaN).
      const auto o_store = to.download();
      std::int64_t written = 0;
      for (float x : o_store) written += !std::isnan(x);
      CHECK(written == qh * N * d);
    }
  }
}

// Packed sequences (FwdParams::packed, flash_attn_varlen_func's cu_seqlens) in that function's
// layout, (tokens, heads, d): one batch of tokens, each sequence its own problem with its own δ and
// masks, against the fp64 reference's definition (AttnOptions::cu_seqlens_q/k). The sequences hold
// an empty one, one of a single token (the ones after it start at odd tokens: dropout pairs that
// straddle two Philox blocks), queries without keys (O = 0, LSE = -inf, dQ = 0) and keys without
// queries (dK = dV = 0), lengths across tiles, more keys than queries and fewer; grouped K/V heads;
// every head dimension, both backwards, with and without dropout.
TEST_CASE("16-bit kernels on packed sequences (cu_seqlens) match the fp64 reference, forward and backward",
          "[gpu][tc][packed]") {
  const int d = GENERATE(32, 64, 96, 128, 256);
  const bool causal = GENERATE(false, true);
  const DType dtype = d % 64 == 0 ? DType::bf16 : DType::fp16;
  const std::vector<int> q_lens{300, 0, 1, 129, 33, 0, 517}, k_lens{300, 5, 1, 200, 0, 17, 260};
  std::vector<std::int32_t> cu_q{0}, cu_k{0};
  for (std::size_t b = 0; b < q_lens.size(); ++b) {
    cu_q.push_back(cu_q.back() + q_lens[b]);
    cu_k.push_back(cu_k.back() + k_lens[b]);
  }
  fs::Shape s{1, 4, cu_q.back(), d};
  s.Nk = cu_k.back();
  s.Hkv = 2;
  const int H = s.H, Hk = s.kv_heads(), N = s.N, Nk = s.keys();
  fs::DeviceBuffer<std::int32_t> dcu_q(cu_q.size()), dcu_k(cu_k.size());
  dcu_q.upload(cu_q.data(), cu_q.size());
  dcu_k.upload(cu_k.data(), cu_k.size());
  fs::Packed packed;
  packed.cu_q = dcu_q.get();
  packed.cu_k = dcu_k.get();
  packed.count = static_cast<int>(q_lens.size());
  packed.max_q = *std::max_element(q_lens.begin(), q_lens.end());
  packed.max_k = *std::max_element(k_lens.begin(), k_lens.end());
  for (const float p_drop : {0.f, 0.1f})
    for (const Case& c : backward_cases(s, causal, dtype)) {
      const std::string& v = c.step->variants[c.variant];
      if (v != fs::tc::tc_variant_name(fs::tc::kFa2) && v != fs::tc::tc_variant_name(fs::tc::kDeterministic)) continue;  // key_warps takes the plain problem only
      DYNAMIC_SECTION(c.name() << " packed " << packed.count << " sequences, N=" << N << " Nk=" << Nk << " H=" << H
                               << " Hkv=" << Hk << " dropout " << p_drop) {
        const fs::HostProblem p = fs::random_problem(s, c.seed(), true, dtype);
        const fs::Dropout drop{p_drop, 11};
        fs::DeviceRun run(*c.step, p, c.settings(drop), true);  // LSE and settings; its tensors unused
        // The backward's workspace: DeviceRun allocates its own at its first backward(), never run here.
        fs::DeviceBuffer<unsigned char> ws(c.step->bwd_workspace(s, c.settings(drop)));
        const Layout lq = tokens_major(1, H, N, d, 0), lk = tokens_major(1, Hk, Nk, d, 0);
        fs::DeviceTensor tq(lq.count, dtype), tk(lk.count, dtype), tv(lk.count, dtype), tdo(lq.count, dtype),
            to(lq.count, dtype), tdq(lq.count, dtype), tdk(lk.count, dtype), tdv(lk.count, dtype);
        tq.upload(scatter(p.q, lq, H, N, d, {}));
        tk.upload(scatter(p.k, lk, Hk, Nk, d, {}));
        tv.upload(scatter(p.v, lk, Hk, Nk, d, {}));
        tdo.upload(scatter(p.dout, lq, H, N, d, {}));
        for (auto* t : {&to, &tdq, &tdk, &tdv}) t->poison();

        fs::FwdParams f = run.fwd_params();
        f.q = tq.get(), f.k = tk.get(), f.v = tv.get(), f.o = to.get();
        f.q_strides = f.o_strides = lq.st, f.k_strides = f.v_strides = lk.st;
        f.packed = packed;
        c.step->forward(f);
        fs::BwdParams b = run.bwd_params();
        b.q = f.q, b.k = f.k, b.v = f.v, b.o = to.get(), b.dout = tdo.get(), b.dq = tdq.get(), b.dk = tdk.get(), b.dv = tdv.get();
        b.q_strides = b.o_strides = b.dout_strides = b.dq_strides = lq.st;
        b.k_strides = b.v_strides = b.dk_strides = b.dv_strides = lk.st;
        b.packed = packed;
        b.workspace = ws.get();
        c.step->backward(b);
        run.sync();

        fs::AttnOptions attn{fs::default_scale(d), causal, drop, nullptr, dtype};
        attn.cu_seqlens_q = &cu_q;
        attn.cu_seqlens_k = &cu_k;
        const auto o = gather(to.download(), lq, H, H, N, d), lse = run.lse();
        const auto dq = gather(tdq.download(), lq, H, H, N, d), dk = gather(tdk.download(), lk, Hk, Hk, Nk, d),
                   dv = gather(tdv.download(), lk, Hk, Hk, Nk, d);
        const auto fwd = fs::verify_forward(s, attn, p.q.data(), p.k.data(), p.v.data(), o.data(), lse.data(), c.seed(),
                                            kBudget);
        INFO(fwd.summary());
        CHECK(fwd.pass());
        const auto bwd = fs::verify_backward(s, attn, p.q.data(), p.k.data(), p.v.data(), p.dout.data(), dq.data(),
                                             dk.data(), dv.data(), c.seed(), kBudget);
        INFO(bwd.summary());
        CHECK(bwd.pass());
        // Every row written: the tokens of queries without keys too (O = 0), of keys without queries (0).
        for (const auto* x : {&o, &dq, &dk, &dv}) CHECK(std::none_of(x->begin(), x->end(), [](float e) { return std::isnan(e); }));
      }
    }
}

// What packed sequences refuse: the rungs and key_warps (the plain problem's kernels), a batch of
// more than one, a traced run.
TEST_CASE("step 08 refuses packed sequences where its kernels do not take them", "[gpu][tc][packed]") {
  fs::Shape s{1, 2, 64, 64};
  const fs::HostProblem p = fs::random_problem(s, 3, true, DType::bf16);
  const std::vector<std::int32_t> cu{0, 20, 64};
  fs::DeviceBuffer<std::int32_t> dcu(cu.size());
  dcu.upload(cu.data(), cu.size());
  for (const Case& c : cases_for(s, false, true, DType::bf16)) {
    if (!c.step->packed) continue;  // step 09: no packed sequences at all (StepInfo::packed)
    const std::string& v = c.step->variants[c.variant];
    fs::DeviceRun run(*c.step, p, c.settings(), true);
    fs::FwdParams f = run.fwd_params();
    f.packed = {dcu.get(), dcu.get(), 2, 44, 44};
    if (v == fs::tc::tc_variant_name(fs::tc::kFa2) || v == fs::tc::tc_variant_name(fs::tc::kDeterministic)) {
      CHECK_NOTHROW(c.step->forward(f));
      CHECK_NOTHROW(run.sync());  // and it ran
      f.shape.B = 2;
      f.shape.N = 32;
      CHECK_THROWS_WITH(c.step->forward(f), Catch::Contains("B = 1"));
    } else {
      CHECK_THROWS_WITH(c.step->forward(f), Catch::Contains("fa2 and deterministic"));
    }
  }
}

// A backward without its workspace (BwdParams::workspace, StepInfo::bwd_workspace bytes) is refused
// with a message before any launch, not left to fault on the device.
TEST_CASE("step 08's backward refuses a missing workspace", "[gpu][tc]") {
  fs::Shape s{1, 2, 64, 64};
  const fs::HostProblem p = fs::random_problem(s, 3, true, DType::bf16);
  for (const Case& c : cases_for(s, false, true, DType::bf16)) {
    fs::DeviceRun run(*c.step, p, c.settings(), true);
    fs::BwdParams b = run.bwd_params();
    b.workspace = nullptr;
    CHECK_THROWS_WITH(c.step->backward(b), Catch::Contains("workspace"));
  }
}

// fp32 on the tensor cores (variant 3xtf32; tests/test_steps_gpu.cpp runs it, forward and backward,
// with every fp32 step). Here: its forward beside plain TF32 (one product instead of three) on the
// same inputs, both under the fp32 rule: 3xTF32 must pass it, plain TF32 must not — and the errors,
// printed, are what the lesson compares.
TEST_CASE("fp32 forward on the tensor cores: 3xTF32 passes the fp32 rule, plain TF32 does not", "[gpu][tc][fp32]") {
  const int d = GENERATE(32, 64, 128);
  const int N = GENERATE(17, 1025);
  const bool causal = GENERATE(false, true);
  const fs::Shape s = odd_shape(N, d);
  const fs::HostProblem p = fs::random_problem(s, 100 + N + d, false, DType::fp32);
  fs::DeviceBuffer<float> q(s.elems()), k(s.elems()), v(s.elems()), o(s.elems()), lse(s.rows());
  q.upload(p.q.data(), p.q.size());
  k.upload(p.k.data(), p.k.size());
  v.upload(p.v.data(), p.v.size());
  const fs::AttnOptions attn{fs::default_scale(d), causal, {}, nullptr, DType::fp32};
  double err[2] = {};
  for (int passes : {3, 1}) {
    fs::FwdParams fp = fs::testing::forward_params(s, q.get(), k.get(), v.get(), o.get(), lse.get(), causal);
    fp.dtype = DType::fp32;
    o.poison();
    fs::tc_forward_tf32(fp, passes);
    FS_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> ho(s.elems()), hl(s.rows());
    o.download(ho.data(), ho.size());
    lse.download(hl.data(), hl.size());
    const auto report = fs::verify_forward(s, attn, p.q.data(), p.k.data(), p.v.data(), ho.data(), hl.data(), 7, kBudget);
    err[passes == 1] = report.tensors[0].err;
    INFO("d=" << d << " N=" << N << (causal ? " causal" : "") << ", " << passes << " TF32 products:\n" << report.summary());
    if (passes == 3)
      REQUIRE(report.pass());
    else
      REQUIRE_FALSE(report.pass());
  }
  std::printf("d=%d N=%d%s: O max err 3xTF32 %.3g, TF32 %.3g\n", d, N, causal ? " causal" : "", err[0], err[1]);
  REQUIRE(err[1] > 30 * err[0]);
}
