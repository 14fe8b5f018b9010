// FlashAttention's score features in steps 04 and 05's fp32 kernels on the GPU: the kernels'
// FlashFeatures instantiations (a sliding window, softcapping, ALiBi; common/flash_features.cuh),
// forward and both backwards, against the fp64 reference's definitions of those features under
// the fp32 rule — the GPU side of tests/test_flash_emulated.cpp's features case, on odd shapes and
// larger ones than the emulation can afford. The first case runs step 05's launchers with the
// features set, and so does the packed case after it (sequences packed along the tokens,
// cu_seqlens); the layout case runs every variant of steps 04 and 05 with each tensor in another
// layout (Strides) against the contiguous one, bit for bit; the next runs them as the step programs
// do (--window, --softcap, --alibi, --seq-k, --heads-kv through the plan), checked and, where
// square, traced: the trace's bytes must equal the IO model, which
// leaves out the tiles a window skips. Step 08's fa2 and deterministic (bf16, fp16) run in that
// one, and over every head dimension in the one after it (the GPU side of test_tc_emulated.cpp's
// features cases), under the 16-bit rule.
// One runs ALiBi slopes of shape (B, H) and (sequences, H) through --alibi FILE in every step that
// takes them. The last runs packed sequences (--varlen) in every step whose kernels take them, with
// the features, checked as the programs check them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/buffer.hpp"
#include "common/driver.hpp"
#include "common/errors.hpp"
#include "common/harness.hpp"
#include "common/npy.hpp"
#include "common/traced_run.hpp"
#include "common/reference.hpp"
#include "common/varlen.hpp"
#include "common/verify.hpp"
#include "steps/registry.hpp"
#include "tests/flash_checks.hpp"
#include "tests/gpu_cases.hpp"

namespace {

struct Features {
  int left, right;
  float softcap;
  bool alibi;
  float dropout;
};

using fs::testing::FlashOutputs;

// A step program's checked run of `shape` with the features f (--window, --softcap, --alibi,
// --dropout), as the command line makes it.
fs::Options featured(const fs::Shape& shape, bool causal, int variant, bool backward, fs::DType dtype,
                     const Features& f) {
  fs::Options opt;
  opt.shape = shape;
  opt.dtype = dtype;
  opt.causal = causal;
  opt.variant = variant;
  opt.backward = backward;
  opt.check = true;
  opt.dropout = f.dropout;
  opt.window_left = f.left;
  opt.window_right = f.right;
  opt.softcap = f.softcap;
  opt.alibi = f.alibi;
  return opt;
}

// Runs the plan as the step programs do: every pass's check against the fp64 reference must pass.
void require_checked(const fs::RunPlan& plan, const fs::HostProblem& p, bool backward) {
  const fs::CaseReport report = fs::run_case(plan, p, fs::testing::test_device());
  REQUIRE(report.passes.size() == (backward ? 2u : 1u));
  for (const auto& pass : report.passes) {
    INFO(pass.pass << ": " << pass.check->summary());
    REQUIRE(pass.check->pass());
  }
}

// Step 05's forward and backward (its variant atomic, or deterministic) as its launchers run them
// with `mods`: they choose the FlashFeatures instantiation (with the softcap's chain rule or
// without) and the dropout, which the step library compiles once; this test compiles no kernel.
// Packed sequences (the packed case): `packed` over cu_seqlens in device memory.
FlashOutputs run_featured(const fs::Shape& s, const fs::HostProblem& p, bool causal, const fs::Dropout& dropout,
                          bool atomic_dq, const fs::ScoreMods& mods, const fs::Packed& packed = {}) {
  const fs::StepInfo& step = *fs::find_step("05");
  const std::size_t n = s.elems(), kv = s.kv_elems(), rows = s.rows();
  fs::DeviceBuffer<float> q(n), k(kv), v(kv), o(n), lse(rows), dout(n), dq(n), dk(kv), dv(kv);
  q.upload(p.q.data(), n);
  k.upload(p.k.data(), kv);
  v.upload(p.v.data(), kv);
  dout.upload(p.dout.data(), n);
  for (auto* b : {&o, &lse, &dq, &dk, &dv}) b->poison();
  const fs::PassSettings settings(fs::default_scale(s.d), causal, atomic_dq ? 0 : 1, dropout);
  fs::DeviceBuffer<unsigned char> bwd_ws(std::max<std::size_t>(1, step.bwd_workspace(s, settings)));
  fs::FwdParams fp = fs::testing::forward_params(s, q.get(), k.get(), v.get(), o.get(), lse.get(), causal, dropout);
  fp.variant = settings.variant;
  fp.mods = mods;
  fp.packed = packed;
  step.forward(fp);
  fs::BwdParams bp = fs::testing::backward_params(fp, dout.get(), dq.get(), dk.get(), dv.get());
  bp.variant = settings.variant;
  bp.packed = packed;
  bp.workspace = bwd_ws.get();
  step.backward(bp);
  FS_CUDA_CHECK(cudaDeviceSynchronize());
  FlashOutputs out{std::vector<float>(n), std::vector<float>(rows), std::vector<float>(n), std::vector<float>(kv),
                   std::vector<float>(kv)};
  o.download(out.o.data(), n);
  lse.download(out.lse.data(), rows);
  dq.download(out.dq.data(), n);
  dk.download(out.dk.data(), kv);
  dv.download(out.dv.data(), kv);
  return out;
}

// A pass of a step (StepInfo::forward, and ::backward where it has one) as its program launches
// it, with each tensor in the layout `lq` (Q, O, dO, dQ) or `lk` (K, V, dK, dV), fs::testing::Laid,
// or contiguous where these are null: the inputs placed there, the outputs read back from there.
FlashOutputs run_step(const fs::StepInfo& step, int variant, const fs::Shape& s, const fs::HostProblem& p, bool causal,
                      const fs::testing::Laid* lq, const fs::testing::Laid* lk) {
  const int H = s.H, Hkv = s.kv_heads(), N = s.N, Nk = s.keys(), d = s.d;
  const std::size_t n = lq ? lq->size : s.elems(), kv = lk ? lk->size : s.kv_elems(), rows = s.rows();
  auto laid = [](const fs::testing::Laid* l, const std::vector<float>& x, int heads, int len, int dim) {
    return l ? l->place(x, heads, len, dim) : x;
  };
  auto back = [](const fs::testing::Laid* l, const std::vector<float>& y, std::size_t count, int heads, int len,
                 int dim) { return l ? l->gather(y, count, heads, len, dim) : y; };
  fs::DeviceBuffer<float> q(n), k(kv), v(kv), o(n), lse(rows), dout(n), dq(n), dk(kv), dv(kv);
  q.upload(laid(lq, p.q, H, N, d).data(), n);
  k.upload(laid(lk, p.k, Hkv, Nk, d).data(), kv);
  v.upload(laid(lk, p.v, Hkv, Nk, d).data(), kv);
  dout.upload(laid(lq, p.dout, H, N, d).data(), n);
  for (auto* b : {&o, &lse, &dq, &dk, &dv}) b->poison();
  const fs::PassSettings settings(fs::default_scale(d), causal, variant);
  fs::DeviceBuffer<unsigned char> fwd_ws(step.fwd_workspace(s, settings)), bwd_ws(step.bwd_workspace(s, settings));
  fs::FwdParams fp = fs::testing::forward_params(s, q.get(), k.get(), v.get(), o.get(), lse.get(), causal);
  fp.variant = variant;
  fp.workspace = fwd_ws.get();
  if (lq) fp.q_strides = fp.o_strides = lq->strides;
  if (lk) fp.k_strides = fp.v_strides = lk->strides;
  step.forward(fp);
  fs::BwdParams bp = fs::testing::backward_params(fp, dout.get(), dq.get(), dk.get(), dv.get());
  bp.variant = variant;
  bp.fwd_workspace = fwd_ws.get();
  bp.workspace = bwd_ws.get();
  if (step.backward) step.backward(bp);
  FS_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> ho(n), hl(rows), hdq(n), hdk(kv), hdv(kv);
  o.download(ho.data(), n);
  lse.download(hl.data(), rows);
  if (step.backward) {
    dq.download(hdq.data(), n);
    dk.download(hdk.data(), kv);
    dv.download(hdv.data(), kv);
    return {back(lq, ho, s.elems(), H, N, d), hl, back(lq, hdq, s.elems(), H, N, d),
            back(lk, hdk, s.kv_elems(), Hkv, Nk, d), back(lk, hdv, s.kv_elems(), Hkv, Nk, d)};
  }
  return {back(lq, ho, s.elems(), H, N, d), hl, {}, {}, {}};
}

}  // namespace

TEST_CASE("steps 04 and 05 with a sliding window, softcapping and ALiBi match the fp64 reference, forward and "
          "backward, on the GPU",
          "[gpu][features]") {
  const int N = GENERATE(1, 17, 257, 1025);
  const int d = GENERATE(16, 64, 128);
  const bool causal = GENERATE(false, true);
  const bool atomic_dq = GENERATE(true, false);
  const fs::Shape s{2, 2, N, d};
  const std::vector<float> slopes = fs::alibi_slopes(s.H);
  fs::DeviceBuffer<float> dslopes(slopes.size());
  dslopes.upload(slopes.data(), slopes.size());
  for (const Features f : {Features{64, 0, 0.f, false, 0.f}, Features{3, 5, 0.f, false, 0.f},
                           Features{-1, 100, 0.f, false, 0.f}, Features{300, -1, 0.f, false, 0.f},
                           Features{0, 0, 0.f, false, 0.f}, Features{-1, -1, 2.f, false, 0.f},
                           Features{-1, -1, 0.f, true, 0.f}, Features{40, 200, 1.5f, true, 0.1f},
                           Features{5000, 5000, 0.f, false, 0.f}}) {  // a window wider than N
    DYNAMIC_SECTION("N=" << N << " d=" << d << (causal ? " causal" : "") << (atomic_dq ? " atomic" : " deterministic")
                         << " window (" << f.left << ", " << f.right << ") softcap " << f.softcap
                         << (f.alibi ? " alibi" : "") << " dropout " << f.dropout) {
      const fs::ScoreMods mods = fs::testing::score_mods(f.left, f.right, f.softcap, f.alibi ? dslopes.get() : nullptr);
      const fs::Dropout dropout{f.dropout, 99};
      const fs::HostProblem p = fs::random_problem(s, 11ull * N + d + 5ull * f.left + f.right, true);
      const FlashOutputs g = run_featured(s, p, causal, dropout, atomic_dq, mods);
      fs::testing::require_reference(
          s, fs::testing::with_score_mods(fs::AttnOptions{fs::default_scale(d), causal, dropout}, mods, slopes.data()),
          p, g);
    }
  }
}

TEST_CASE("steps 04 and 05 with packed sequences (cu_seqlens) match the fp64 reference, every feature per "
          "sequence, forward and backward, on the GPU",
          "[gpu][features][packed]") {
  struct Config {
    int H, Hkv;
    Features f;
  };
  const int d = GENERATE(16, 64, 128);
  const bool causal = GENERATE(false, true);
  const bool atomic_dq = GENERATE(true, false);
  // (queries, keys) of each sequence, as tests/test_flash_emulated.cpp's packed case has them, longer:
  // several tiles of the longest, a sequence with keys and no query, an empty one, one with queries
  // and no key, one query, fewer keys than queries and more; the sequences with both start at
  // (even, even), (even, odd), (odd, even), (odd, odd) query and key tokens.
  const fs::testing::PackedSequences seqs(
      {{1000, 1000}, {0, 77}, {0, 0}, {300, 0}, {1, 513}, {776, 129}, {129, 1500}, {64, 64}});
  fs::DeviceBuffer<std::int32_t> cu_q(seqs.cu_q.size()), cu_k(seqs.cu_k.size());
  cu_q.upload(seqs.cu_q.data(), seqs.cu_q.size());
  cu_k.upload(seqs.cu_k.data(), seqs.cu_k.size());
  const std::vector<float> slopes = fs::alibi_slopes(4);
  fs::DeviceBuffer<float> dslopes(slopes.size());
  dslopes.upload(slopes.data(), slopes.size());
  for (const Config c :
       {Config{2, 2, Features{-1, -1, 0.f, false, 0.f}}, Config{4, 2, Features{64, 0, 0.f, true, 0.1f}},
        Config{4, 1, Features{-1, 100, 2.f, false, 0.15f}},
        Config{4, 4, Features{5000, 5000, 0.f, false, 0.f}}}) {  // a window wider than any sequence
    const Features& f = c.f;
    DYNAMIC_SECTION("d=" << d << " H=" << c.H << " Hkv=" << c.Hkv << (causal ? " causal" : "")
                         << (atomic_dq ? " atomic" : " deterministic") << " window (" << f.left << ", " << f.right
                         << ") softcap " << f.softcap << (f.alibi ? " alibi" : "") << " dropout " << f.dropout) {
      const fs::Shape s = seqs.shape(c.H, c.Hkv, d);
      const fs::ScoreMods mods = fs::testing::score_mods(f.left, f.right, f.softcap, f.alibi ? dslopes.get() : nullptr);
      const fs::Dropout dropout{f.dropout, 2024};
      const fs::HostProblem p = fs::random_problem(s, 17ull * d + c.Hkv + (causal ? 1 : 0), true);
      const FlashOutputs g =
          run_featured(s, p, causal, dropout, atomic_dq, mods, seqs.params(cu_q.get(), cu_k.get()));
      const fs::AttnOptions attn =
          fs::testing::with_score_mods(fs::AttnOptions{fs::default_scale(d), causal, dropout}, mods, slopes.data());
      fs::testing::require_reference(s, seqs.reference(attn), p, g);
    }
  }
}

TEST_CASE("steps 04 and 05 with every tensor in another layout (Strides) give the contiguous layout's bits, every "
          "variant, on the GPU",
          "[gpu][strides]") {
  const int d = GENERATE(16, 64, 128);
  const bool causal = GENERATE(false, true);
  const fs::Shape s{2, 3, 257, d};
  // Each tensor a head of a (B, N, 3·H, d) one, as a slice of packed QKV is: rows 3·H·d floats apart,
  // the other heads' room NaN.
  const auto lq = fs::testing::Laid::rows_heads(s.B, s.H, s.N, d, 2 * s.H);
  const auto lk = fs::testing::Laid::rows_heads(s.B, s.kv_heads(), s.keys(), d, 2 * s.H);
  const fs::HostProblem p = fs::random_problem(s, 3ull * d + (causal ? 1 : 0), true);
  for (const char* id : {"04", "05"}) {
    const fs::StepInfo& step = *fs::find_step(id);
    for (int variant = 0; variant < static_cast<int>(step.variants.size()); ++variant)
      DYNAMIC_SECTION(step.label(variant) << " d=" << d << (causal ? " causal" : "")) {
        const FlashOutputs dense = run_step(step, variant, s, p, causal, nullptr, nullptr);
        const FlashOutputs laid = run_step(step, variant, s, p, causal, &lq, &lk);
        // Bit for bit, but dQ where atomics add it up in an order of their own.
        REQUIRE(laid.o == dense.o);
        REQUIRE(laid.lse == dense.lse);
        REQUIRE(laid.dk == dense.dk);
        REQUIRE(laid.dv == dense.dv);
        const bool atomic = std::find(step.order_dependent.begin(), step.order_dependent.end(),
                                      step.variants[variant]) != step.order_dependent.end();
        if (!atomic) REQUIRE(laid.dq == dense.dq);
        fs::testing::require_reference(s, fs::AttnOptions{fs::default_scale(d), causal}, p, laid);
      }
  }
}

TEST_CASE("the step programs' --window, --softcap, --alibi, --seq-k and --heads-kv: planned, run and checked "
          "against the fp64 reference, and (square) traced with the bytes of the IO model",
          "[gpu][features]") {
  const auto dir = std::filesystem::temp_directory_path() / "flashsteps_test_flash_features_gpu";
  std::filesystem::create_directories(dir);
  struct Run {
    const char* step;
    int variant;
    bool backward;
    fs::DType dtype = fs::DType::fp32;
  };
  fs::Shape fewer_keys{2, 4, 300, 64}, more_keys{2, 4, 150, 128};  // with grouped and multi-query K/V heads
  fewer_keys.Nk = 170;
  fewer_keys.Hkv = 2;
  more_keys.Nk = 421;
  more_keys.Hkv = 1;
  for (const Run r : {Run{"04", 1, false}, Run{"05", 0, true}, Run{"05", 1, true}, Run{"08", 0, true, fs::DType::bf16},
                      Run{"08", 1, true, fs::DType::fp16}})
    for (const fs::Shape& shape : {fs::Shape{2, 3, 300, 64}, fewer_keys, more_keys})
      for (const bool causal : {false, true})
        for (const Features f : {Features{-1, -1, 0.f, false, 0.f}, Features{40, 7, 0.f, false, 0.f},
                                 Features{100, 0, 20.f, true, 0.f}, Features{-1, -1, 5.f, true, 0.2f}}) {
          const fs::StepInfo& step = *fs::find_step(r.step);
          if (f.dropout > 0.f && !step.dropout) continue;
          if (shape.square() && f.left < 0 && f.softcap == 0.f) continue;  // nothing beyond the plain run
          DYNAMIC_SECTION(step.label(r.variant)
                          << " N=" << shape.N << " Nk=" << shape.keys() << " H=" << shape.H << " Hkv="
                          << shape.kv_heads() << " d=" << shape.d << (causal ? " causal" : "") << " window ("
                          << f.left << ", " << f.right << ") softcap " << f.softcap << (f.alibi ? " alibi" : "")
                          << " dropout " << f.dropout << " " << fs::dtype_name(r.dtype)) {
            fs::Options opt = featured(shape, causal, r.variant, r.backward, r.dtype, f);
            if (shape.square()) opt.trace_path = (dir / (step.id + ".json")).string();  // traces are square
            const fs::RunPlan plan(step, opt);
            const fs::HostProblem p = fs::random_problem(opt.shape, 31, opt.backward, opt.dtype);
            require_checked(plan, p, opt.backward);
            if (opt.trace_path.empty()) continue;
            for (const fs::TraceFile& t : fs::trace_case(plan, p, fs::testing::test_device())) {
              INFO(t.pass << ": " << t.report.summary()
                          << (t.report.errors.empty() ? "" : "\n" + t.report.errors.front()));
              REQUIRE(t.report.ok());
              REQUIRE(t.report.dropped == 0);
            }
          }
        }
  std::filesystem::remove_all(dir);
}

// ALiBi slopes of shape (B, H) and, with --varlen, (sequences, H), as flash_attn_func and
// flash_attn_varlen_func take them: the file through the plan (read_alibi_slopes), the slopes and
// their batch stride uploaded by the harness, the kernels reading batch b's row (packed: sequence
// b's, from blockIdx.z), the reference checking with the same rows. The rows differ
// (batch_slopes): a kernel, an upload or a reference that read row 0 for every batch fails here.
TEST_CASE("the step programs' --alibi FILE of shape (B, H), and (sequences, H) with --varlen, each batch or "
          "sequence its own row, planned, run and checked against the fp64 reference",
          "[gpu][features][alibi]") {
  const auto dir = std::filesystem::temp_directory_path() / "flashsteps_test_alibi_rows_gpu";
  std::filesystem::create_directories(dir);
  struct Run {
    const char* step;
    int variant;
    bool backward;
    fs::DType dtype;
  };
  fs::Shape shape{3, 4, 257, 64};  // grouped K/V heads, more keys than queries
  shape.Nk = 300;
  shape.Hkv = 2;
  const char* lengths = "128,0,77:300,5,1,300:17";  // six sequences, one empty
  for (const Run r : {Run{"04", 1, false, fs::DType::fp32}, Run{"05", 0, true, fs::DType::fp32},
                      Run{"05", 1, true, fs::DType::fp32}, Run{"08", 0, true, fs::DType::bf16},
                      Run{"08", 1, true, fs::DType::fp16}})
    for (const bool packed : {false, true})
      for (const bool causal : {false, true}) {
        const fs::StepInfo& step = *fs::find_step(r.step);
        DYNAMIC_SECTION(step.label(r.variant) << " " << fs::dtype_name(r.dtype) << (causal ? " causal" : "")
                                              << (packed ? " --varlen: a row per sequence" : " a row per batch")) {
          // A window, and with packed sequences a softcap too (the kernels' other instantiation).
          fs::Options opt = featured(shape, causal, r.variant, r.backward, r.dtype,
                                     Features{100, 20, packed ? 2.f : 0.f, true, 0.f});
          if (packed) {
            opt.packed = fs::parse_varlen(lengths);
            opt.shape.B = 1;
            opt.shape.N = opt.packed.cu_q.back();
            opt.shape.Nk = opt.packed.cu_k.back();
          }
          const int rows = fs::alibi_batches(opt.shape, opt.packed);
          REQUIRE(rows == (packed ? 6 : 3));
          const std::vector<float> slopes = fs::testing::batch_slopes(rows, shape.H);
          opt.alibi_path = (dir / "slopes.npy").string();
          fs::write_npy(opt.alibi_path, slopes.data(), {rows, shape.H});
          const fs::RunPlan plan(step, opt);
          REQUIRE(plan.settings().features.alibi_batch_stride == shape.H);
          REQUIRE(plan.settings().features.alibi_slopes == slopes);
          require_checked(plan, fs::random_problem(opt.shape, 43ull + rows, opt.backward, opt.dtype), opt.backward);
        }
      }
  std::filesystem::remove_all(dir);
}

TEST_CASE("step 08's fa2 and deterministic with the interface features at every head dimension, bf16 and fp16, "
          "odd lengths and grouped K/V heads: planned, run and checked against the fp64 reference",
          "[gpu][features][tc]") {
  struct Kv {
    int N, Nk, H, Hkv;
  };
  const int d = GENERATE(32, 64, 96, 128, 256);
  const bool causal = GENERATE(false, true);
  const int variant = GENERATE(0, 1);  // fa2 (dQ by atomics), deterministic
  const fs::DType dtype = d % 64 == 0 ? fs::DType::bf16 : fs::DType::fp16;
  const fs::StepInfo& step = *fs::find_step("08");
  for (const Kv kv : {Kv{1, 17, 2, 1}, Kv{17, 1, 2, 2}, Kv{257, 1025, 4, 2}, Kv{1025, 257, 4, 1}, Kv{1000, 1000, 6, 3}})
    for (const Features f : {Features{-1, -1, 0.f, false, 0.f}, Features{64, 0, 0.f, false, 0.f},
                             Features{3, 130, 30.f, true, 0.f}, Features{5000, 5000, 0.f, false, 0.f},
                             Features{100, 20, 2.f, true, 0.15f}}) {
      fs::Shape shape{1, kv.H, kv.N, d};
      shape.Nk = kv.Nk;
      shape.Hkv = kv.Hkv;
      if (shape.square() && f.left < 0 && f.softcap == 0.f) continue;  // nothing beyond the plain run
      DYNAMIC_SECTION(step.label(variant) << " " << fs::dtype_name(dtype) << " N=" << kv.N << " Nk=" << kv.Nk
                                          << " H=" << kv.H << " Hkv=" << kv.Hkv << " d=" << d
                                          << (causal ? " causal" : "") << " window (" << f.left << ", " << f.right
                                          << ") softcap " << f.softcap << (f.alibi ? " alibi" : "") << " dropout "
                                          << f.dropout) {
        const fs::RunPlan plan(step, featured(shape, causal, variant, true, dtype, f));
        require_checked(plan, fs::random_problem(shape, 7ull * kv.N + kv.Nk + d, true, dtype), true);
      }
    }
}

TEST_CASE("the step programs' --varlen: planned, run and checked against the fp64 reference", "[gpu][features][varlen]") {
  // Packed sequences (flash_attn_varlen_func) through fs::Options and the plan, as --varlen makes
  // them: every step whose kernels take them, each variant its plan accepts, each dtype it has.
  struct Packing {
    const char* lengths;  // --varlen's form
    int H, Hkv, d;
  };
  // Odd lengths, an empty sequence, keys ≠ queries both ways, grouped and multi-query K/V heads;
  // the third holds a sequence of queries and no keys and one of keys and no queries (O = 0,
  // LSE = −inf; dQ = 0; dK = dV = 0).
  const Packing packings[] = {{"128,0,77:300,5,1,300:17,64:65", 4, 2, 64},
                              {"1000:1025,17,0,257:1", 3, 1, 128},
                              {"33:0,0:9,200:150,1:2", 2, 2, 64}};
  const Features features[] = {Features{-1, -1, 0.f, false, 0.f}, Features{5000, 5000, 0.f, false, 0.f},  // wider than N
                               Features{40, 7, 0.f, false, 0.f}, Features{100, 0, 20.f, true, 0.f},
                               Features{-1, -1, 5.f, true, 0.2f}};
  int steps = 0;
  for (const fs::StepInfo& step : fs::all_steps()) {
    if (!step.packed) continue;
    ++steps;
    int runs = 0;
    std::set<std::string> refused;
    for (const fs::DType dtype : step.dtypes)
      for (int variant = 0; variant < int(step.variants.size()); ++variant)
        for (const Packing& pk : packings)
          for (const bool causal : {false, true})
            for (const Features& f : features) {
              if (f.dropout > 0.f && !step.dropout) continue;
              fs::Shape shape{1, pk.H, 1, pk.d};
              shape.Hkv = pk.Hkv;
              fs::Options opt = featured(shape, causal, variant, step.backward != nullptr, dtype, f);
              opt.packed = fs::parse_varlen(pk.lengths);
              opt.shape.N = opt.packed.cu_q.back();
              opt.shape.Nk = opt.packed.cu_k.back();
              std::optional<fs::RunPlan> plan;
              try {
                plan.emplace(step, opt);
              } catch (const fs::InputError& e) {  // a variant the step's check refuses: not run
                refused.insert(step.label(variant) + " " + fs::dtype_name(dtype) + ": " + e.what());
                continue;
              }
              ++runs;
              DYNAMIC_SECTION(step.label(variant)
                              << " " << fs::dtype_name(dtype) << " --varlen " << pk.lengths << " H=" << pk.H
                              << " Hkv=" << pk.Hkv << " d=" << pk.d << (causal ? " causal" : "") << " window ("
                              << f.left << ", " << f.right << ") softcap " << f.softcap << (f.alibi ? " alibi" : "")
                              << " dropout " << f.dropout) {
                const fs::HostProblem p = fs::random_problem(plan->shape(), 17ull * pk.d + pk.H + variant, opt.backward, dtype);
                require_checked(*plan, p, opt.backward);
              }
            }
    for (const std::string& why : refused) WARN("not run: " << why);
    INFO(step.id);
    REQUIRE(runs > 0);  // the plan accepts some variant of a step that takes packed sequences
  }
  INFO("no step's StepInfo::packed is set: the kernels take no packed sequences yet");
  REQUIRE(steps > 0);
}
