// A run is planned once, before any GPU work: what a step cannot do is refused there, in one
// line, whether or not the machine has a GPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "common/harness.hpp"
#include "common/npy.hpp"
#include "common/plan.hpp"
#include "common/reference.hpp"
#include "common/smyrf.hpp"
#include "common/varlen.hpp"
#include "steps/registry.hpp"

namespace {

fs::Options options(fs::Shape shape) {
  fs::Options opt;
  opt.shape = shape;
  return opt;
}

}  // namespace

TEST_CASE("a plan refuses what its step cannot do, naming the step", "[plan]") {
  fs::Options opt = options({1, 2, 256, 64});
  opt.backward = true;
  REQUIRE_THROWS_WITH(fs::RunPlan(*fs::find_step("04"), opt), Catch::Contains("step 04_online_softmax has no backward"));
  opt.backward = false;
  opt.dropout = 0.1f;
  REQUIRE_THROWS_WITH(fs::RunPlan(*fs::find_step("04"), opt), Catch::Contains("has no dropout"));
  REQUIRE_NOTHROW(fs::RunPlan(*fs::find_step("05"), opt));
  REQUIRE_THROWS_WITH(fs::RunPlan(*fs::find_step("03"), options({1, 1, 256, 48})), Catch::Contains("d must be"));
  REQUIRE_THROWS_WITH(fs::RunPlan(*fs::find_step("03"), options({256, 256, 16, 64})), Catch::Contains("B·H"));
  REQUIRE_THROWS_AS(fs::RunPlan(*fs::find_step("01"), options({1, 0, 16, 64})), fs::InputError);
}

// Issue 52: every step's grid puts B·H in one dimension (step 09 had no check: an invalid launch
// on a GPU), and --alibi's slopes of 2^30 heads hung in their power-of-two loop before any step
// refused B·H. The plan refuses B·H first, for every step, before building anything of H.
TEST_CASE("B·H past 65535 is refused by the plan of every step, before the slopes of H heads", "[plan]") {
  for (const fs::StepInfo& step : fs::all_steps()) {
    INFO(step.id);
    fs::Options opt = options({65536, 1, 16, 64});
    opt.dtype = step.dtypes.front();
    REQUIRE_THROWS_WITH(fs::RunPlan(step, opt), Catch::Contains("B·H must be at most 65535"));
    opt = options({1, 1 << 30, 1, 1});
    opt.dtype = step.dtypes.front();
    opt.alibi = true;
    REQUIRE_THROWS_WITH(fs::RunPlan(step, opt), Catch::Contains("B·H must be at most 65535"));
  }
  // The slopes themselves, at any count: the standard ones where the counts are small, and no
  // loop that overflows (2^30 heads is a vector of 4 GiB: not built here).
  REQUIRE(fs::alibi_slopes(1) == std::vector<float>{std::exp2(-8.0f)});
  const std::vector<float> six = fs::alibi_slopes(6);  // those of 4, then every other of 8's
  REQUIRE(six == std::vector<float>{std::exp2(-2.0f), std::exp2(-4.0f), std::exp2(-6.0f), std::exp2(-8.0f),
                                    std::exp2(-1.0f), std::exp2(-3.0f)});
  REQUIRE(fs::alibi_slopes(65535).size() == 65535);
}

// Issue 52: step 08's and step 09's programs refused their own default (fp32 with variant 0,
// which has no fp32 kernel): without --dtype a step runs in the first dtype its variant takes.
TEST_CASE("without --dtype, a step runs in the first element type its variant has kernels for", "[plan][dtype]") {
  for (const fs::StepInfo& step : fs::all_steps()) {
    INFO(step.id);
    for (std::size_t v = 0; v < step.variants.size(); ++v) {
      INFO(step.variants[v]);
      std::vector<std::string> args{"step"};
      if (step.variants.size() > 1) args.insert(args.end(), {"--variant", step.variants[v]});
      if (step.id.rfind("09", 0) == 0 && step.variants[v] != "fa3" && step.variants[v] != "deterministic")
        args.insert(args.end(), {"--dim", "128"});  // the rungs and fp8 are compiled at d = 128
      std::vector<const char*> argv;
      for (const auto& a : args) argv.push_back(a.c_str());
      const auto opt = fs::parse_options(step, int(argv.size()), argv.data());
      REQUIRE(opt);
      REQUIRE(step.takes(opt->dtype));
      if (step.takes(fs::DType::fp32) && step.dtypes.size() == 1) REQUIRE(opt->dtype == fs::DType::fp32);
      REQUIRE_NOTHROW(fs::RunPlan(step, *opt));
    }
  }
}

TEST_CASE("a mask whose blocks do not fit the kernels' tiles is refused, naming the tiles", "[plan][sparse]") {
  const fs::StepInfo& step = *fs::find_step("06");
  const fs::BlockMask odd = fs::pattern_dense(256, 48);
  for (int variant : {0, 1}) {
    REQUIRE_THAT(step.refusal({1, 1, 256, 64}, {0.125f, false, variant, {}, &odd}),
                 Catch::Contains("multiples of the kernels' tiles"));
    fs::Options opt = options({1, 1, 256, 64});
    opt.variant = variant;
    opt.block = 48;
    REQUIRE_THROWS_WITH(fs::RunPlan(step, opt), Catch::Contains("try --block 128"));
  }
}

TEST_CASE("a plan builds the block mask once and hands it to every pass", "[plan][sparse]") {
  fs::Options opt = options({1, 1, 1000, 64});
  opt.pattern = "random:0.25";
  const fs::RunPlan plan(*fs::find_step("06"), opt);
  REQUIRE(plan.mask());
  REQUIRE(plan.settings().mask == plan.mask());
  REQUIRE(plan.density() == Approx(plan.mask()->density()));
  REQUIRE(plan.mask_label() == "random:0.25");
  const fs::RunPlan copy = plan;  // a copy's settings point at the copy's own mask
  REQUIRE(copy.settings().mask == copy.mask());
  REQUIRE(copy.io("fwd").total() == plan.io("fwd").total());
  const fs::RunPlan dense(*fs::find_step("04"), options({1, 1, 1000, 64}));
  REQUIRE(!dense.mask());
  REQUIRE(dense.label() == "04_online_softmax/alg1");
  REQUIRE(dense.density() == 1.0);
}

TEST_CASE("a dtype a step has no kernel for is refused, naming the steps that have one", "[plan][dtype]") {
  std::string with16, with32;
  for (const auto& step : fs::all_steps()) {
    if (step.takes(fs::DType::bf16)) with16 += (with16.empty() ? "" : ", ") + step.id.substr(0, 2);
    if (step.takes(fs::DType::fp32)) with32 += (with32.empty() ? "" : ", ") + step.id.substr(0, 2);
  }
  REQUIRE(with16 == fs::kSteps16Bit);  // the messages' lists are the table's
  REQUIRE(with32 == fs::kStepsFp32);
  fs::Options opt = options({1, 1, 64, 64});
  opt.dtype = fs::DType::bf16;
  REQUIRE_THROWS_WITH(fs::RunPlan(*fs::find_step("04"), opt),
                      Catch::Contains("has no bf16 kernel; steps with one: ") && Catch::Contains(fs::kSteps16Bit));
}

TEST_CASE("a SMYRF plan computes rounds × clusters of the scores, and takes --load's clusters with their sizes",
          "[plan][smyrf]") {
  const fs::StepInfo& step = *fs::find_step("07");
  fs::Options opt = options({1, 2, 1024, 64});
  opt.smyrf = fs::kSmyrfDefault;  // 8 rounds of clusters of 32
  const fs::RunPlan plan(step, opt);
  REQUIRE(plan.density() == Approx(8.0 * 32 / 1024));
  REQUIRE(plan.mask_label() == "smyrf:8x32");
  REQUIRE(plan.settings().smyrf.hashes == 8);
  REQUIRE(plan.settings().smyrf.seed == opt.seed);  // --seed draws the projections
  REQUIRE(plan.given_clusters() == nullptr);
  // Unequal sizes: every cluster still has C_k keys, so the density is rounds · C_k / N.
  opt.smyrf.k_cluster = 64;
  REQUIRE(fs::RunPlan(step, opt).density() == Approx(8.0 * 64 / 1024));
  REQUIRE(fs::RunPlan(step, opt).mask_label() == "smyrf:8x32x64");
  // Clusters saved beside the inputs: their rounds and sizes, unless the options say otherwise.
  const auto dir = std::filesystem::temp_directory_path() / "flashsteps_test_plan_smyrf";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const fs::Shape s{1, 2, 100, 16};
  const fs::HostProblem p = fs::random_problem(s, 3, false);
  for (const char* name : {"q.npy", "k.npy", "v.npy"}) fs::write_npy((dir / name).string(), p.q.data(), {1, 2, 100, 16});
  fs::SmyrfParams saved = fs::kSmyrfDefault;
  saved.hashes = 3;
  saved.q_cluster = 24;
  saved.k_cluster = 40;
  fs::write_smyrf_clusters(dir.string(), s, fs::smyrf_cluster(s, p.q.data(), p.k.data(), saved));
  fs::Options load;
  load.load_dir = dir.string();
  load.shape = s;
  load.smyrf = fs::kSmyrfDefault;
  const fs::RunPlan loaded(step, load);
  REQUIRE(loaded.given_clusters() != nullptr);
  REQUIRE(loaded.settings().smyrf.hashes == 3);
  REQUIRE(loaded.settings().smyrf.q_cluster == 24);
  REQUIRE(loaded.settings().smyrf.k_cluster == 40);
  load.smyrf_given = true;  // --hashes 8 --cluster 32 on the command line
  REQUIRE_THROWS_WITH(fs::RunPlan(step, load), Catch::Contains("its clusters are 3 rounds of 24 queries × 40 keys"));
  std::filesystem::remove_all(dir);
  // What SMYRF cannot do.
  opt.causal = true;
  REQUIRE_THROWS_WITH(fs::RunPlan(step, opt), Catch::Contains("no causal form"));
  opt.causal = false;
  opt.smyrf.hashes = 17;
  REQUIRE_THROWS_WITH(fs::RunPlan(step, opt), Catch::Contains("--hashes must be in 1..16"));
  // Options made without the command line carry no clustering: they get its default, 8 × 32.
  opt.smyrf = {};
  REQUIRE(fs::RunPlan(step, opt).mask_label() == "smyrf:8x32");
  REQUIRE(fs::RunPlan(step, opt).settings().smyrf.r == fs::kSmyrfDefault.r);
}

TEST_CASE("the score features: refused where the kernels lack them, kept by the plan with the slopes, the label and "
          "the window's share of the scores",
          "[plan][features]") {
  std::string with;
  for (const auto& step : fs::all_steps())
    if (step.score_mods) with += (with.empty() ? "" : " ") + step.id.substr(0, 2);
  REQUIRE(with == "04 05 08");  // kStepsScoreMods's list
  fs::Options opt = options({1, 4, 10, 64});
  opt.window_left = 2;
  opt.window_right = 0;
  REQUIRE_THROWS_WITH(fs::RunPlan(*fs::find_step("03"), opt),
                      Catch::Contains("has no --window, --softcap or --alibi") && Catch::Contains(fs::kStepsScoreMods));
  REQUIRE_THROWS_WITH(fs::RunPlan(*fs::find_step("04"), opt), Catch::Contains("--variant fa2"));  // alg1
  opt.variant = 1;
  opt.softcap = 30.f;
  opt.alibi = true;
  const fs::RunPlan plan(*fs::find_step("04"), opt);
  const fs::ScoreFeatures& f = plan.settings().features;
  REQUIRE((f.window_left == 2 && f.window_right == 0 && f.softcap == 30.f));
  REQUIRE(f.alibi_slopes == fs::alibi_slopes(4));
  REQUIRE(plan.mask_label() == "window:2:0+softcap:30+alibi");
  // Row i keeps keys max(0, i − 2)..i: 1 + 2 + 3·8 = 27 of the 100 scores (causal: of the 55).
  REQUIRE(plan.density() == Approx(27.0 / 100));
  opt.causal = true;
  opt.window_right = -1;  // causal bounds the right side alone: the same scores
  REQUIRE(fs::RunPlan(*fs::find_step("04"), opt).density() == Approx(27.0 / 55));
  // A window wider than N keeps everything, and so does no window at all.
  opt.window_left = 1000;
  REQUIRE(fs::RunPlan(*fs::find_step("04"), opt).density() == Approx(1.0));
  opt.window_left = -1;
  REQUIRE(fs::RunPlan(*fs::find_step("04"), opt).density() == 1.0);
  REQUIRE(fs::RunPlan(*fs::find_step("04"), opt).mask_label() == "softcap:30+alibi");

  // --alibi FILE: float32 slopes, (H) or (B, H) (read_alibi_slopes; tests/test_files.cpp has its cases).
  const auto dir = std::filesystem::temp_directory_path() / "flashsteps_test_alibi";
  std::filesystem::create_directories(dir);
  const std::vector<float> slopes{0.5f, 0.25f, 0.125f, 0.0625f, 1.f, 2.f, 3.f, 4.f};
  fs::write_npy((dir / "four.npy").string(), slopes.data(), {4});
  fs::write_npy((dir / "three.npy").string(), slopes.data(), {3});
  fs::write_npy((dir / "rows.npy").string(), slopes.data(), {2, 4});
  opt.alibi_path = (dir / "four.npy").string();
  const fs::ScoreFeatures heads = fs::RunPlan(*fs::find_step("05"), opt).settings().features;
  REQUIRE(heads.alibi_slopes == std::vector<float>(slopes.begin(), slopes.begin() + 4));
  REQUIRE(heads.alibi_batch_stride == 0);
  opt.alibi_path = (dir / "three.npy").string();
  REQUIRE_THROWS_WITH(fs::RunPlan(*fs::find_step("05"), opt),
                      Catch::Contains("shape (3,), but ALiBi takes one slope per head, (4,), or a row of them per "
                                      "batch, (1, 4)"));
  opt.alibi_path = (dir / "rows.npy").string();  // a row per batch: B = 2
  REQUIRE_THROWS_WITH(fs::RunPlan(*fs::find_step("05"), opt), Catch::Contains("shape (2, 4)") && Catch::Contains("(1, 4)"));
  opt.shape.B = 2;
  const fs::RunPlan rows(*fs::find_step("05"), opt);
  REQUIRE(rows.settings().features.alibi_slopes == slopes);
  REQUIRE(rows.settings().features.alibi_batch_stride == 4);
  REQUIRE(rows.mask_label() == "softcap:30+alibi");
  std::filesystem::remove_all(dir);
}

TEST_CASE("K and V of their own shape: refused by steps whose kernels take square problems, and by --trace",
          "[plan][features]") {
  std::string with;
  for (const auto& step : fs::all_steps())
    if (step.kv_shapes) with += (with.empty() ? "" : " ") + step.id.substr(0, 2);
  REQUIRE(with == "04 05 08");  // kStepsKvShapes's list
  fs::Options opt = options({1, 4, 100, 64});
  opt.shape.Nk = 50;
  opt.shape.Hkv = 2;
  REQUIRE_THROWS_WITH(fs::RunPlan(*fs::find_step("03"), opt),
                      Catch::Contains("takes K and V of Q's length and heads only") && Catch::Contains(fs::kStepsKvShapes));
  REQUIRE_THROWS_WITH(fs::RunPlan(*fs::find_step("04"), opt), Catch::Contains("--variant fa2"));  // alg1
  opt.variant = 1;
  REQUIRE_NOTHROW(fs::RunPlan(*fs::find_step("04"), opt));
  REQUIRE(fs::RunPlan(*fs::find_step("05"), opt).mask_label() == "seq-k:50+heads-kv:2");  // the CSV row's label
  opt.trace_path = (std::filesystem::temp_directory_path() / "flashsteps_plan_trace.json").string();
  REQUIRE_THROWS_WITH(fs::RunPlan(*fs::find_step("05"), opt), Catch::Contains("--trace records square problems"));
}

// Steps 04-08 compile traced kernels at the traced runs' d alone (trace::kTracedAt): a traced run at
// another d is refused before it runs, naming the d it has; steps 01-03 and 09 trace every d they run.
TEST_CASE("a traced run (--trace) at a head dimension without traced kernels is refused, naming the one that has them",
          "[plan][trace]") {
  for (const fs::StepInfo& step : fs::all_steps()) {
    fs::Options opt = options({1, 2, 64, 128});
    opt.dtype = step.dtypes.front();
    opt.trace_path = (std::filesystem::temp_directory_path() / "flashsteps_plan_trace_d.json").string();
    const std::string n = step.id.substr(0, 2);
    INFO(step.id);
    if (n >= "04" && n <= "08") {
      REQUIRE_THROWS_WITH(fs::RunPlan(step, opt), Catch::Contains("--trace: ") && Catch::Contains("d = 64") &&
                                                      Catch::Contains("got d = 128"));
      opt.shape.d = 64;
      REQUIRE_NOTHROW(fs::RunPlan(step, opt));
      opt.trace_path.clear();
      opt.shape.d = 128;
      REQUIRE_NOTHROW(fs::RunPlan(step, opt));  // the plain run at that d is there
    } else if (step.refusal(opt.shape, {fs::default_scale(128), false, 0, {}, nullptr, opt.dtype}).empty()) {
      REQUIRE_NOTHROW(fs::RunPlan(step, opt));
    }
  }
}

TEST_CASE("step 08 takes the interface features in fa2 and deterministic, and its rungs and key_warps refuse them",
          "[plan][features]") {
  fs::Options opt = options({1, 4, 100, 64});
  opt.dtype = fs::DType::bf16;
  opt.backward = true;
  opt.shape.Nk = 150;
  opt.shape.Hkv = 2;
  opt.window_left = 20;
  opt.window_right = 0;
  opt.softcap = 30.f;
  opt.alibi = true;
  const fs::StepInfo& step = *fs::find_step("08");
  auto index = [&](const std::string& name) {
    return int(std::find(step.variants.begin(), step.variants.end(), name) - step.variants.begin());
  };
  for (const char* v : {"fa2", "deterministic"}) {
    opt.variant = index(v);
    REQUIRE_NOTHROW(fs::RunPlan(step, opt));
  }
  REQUIRE(fs::RunPlan(step, opt).mask_label() == "seq-k:150+heads-kv:2+window:20:0+softcap:30+alibi");
  for (const char* v : {"r1_mma", "r4_p_in_regs", "key_warps"}) {
    opt.variant = index(v);
    REQUIRE(opt.variant < int(step.variants.size()));
    REQUIRE_THROWS_WITH(fs::RunPlan(step, opt), Catch::Contains("compiled into fa2 and deterministic"));
    fs::Options square = opt;  // the score features alone, too
    square.shape.Nk = square.shape.Hkv = 0;
    REQUIRE_THROWS_WITH(fs::RunPlan(step, square), Catch::Contains("compiled into fa2 and deterministic"));
  }
}

namespace {

// A copy of step `id` that takes packed sequences (in this branch no step does yet: the plan's
// part does not depend on which).
fs::StepInfo packed_copy(const char* id) {
  fs::StepInfo step = *fs::find_step(id);
  step.packed = true;
  return step;
}

// opt with the sequences `lengths` (--varlen's form) and the shape they make.
fs::Options with_sequences(fs::Options opt, const char* lengths) {
  opt.packed = fs::parse_varlen(lengths);
  opt.shape.B = 1;
  opt.shape.N = opt.packed.cu_q.back();
  opt.shape.Nk = opt.packed.cu_k.back();
  return opt;
}

}  // namespace

TEST_CASE("packed sequences: refused by steps whose kernels take none, block-sparse and clustered steps, --trace and "
          "sequences that do not pack the shape, and the step's own check sees them",
          "[plan][varlen]") {
  for (const auto& step : fs::all_steps())  // kStepsPacked names every step that takes them
    if (step.packed) REQUIRE_THAT(std::string(fs::kStepsPacked), Catch::Contains(step.id.substr(0, 2)));
  const fs::Options opt = with_sequences(options({1, 4, 1, 64}), "100,0,37:60,5:0");
  REQUIRE_THROWS_WITH(fs::RunPlan(*fs::find_step("03"), opt),
                      Catch::Contains("step 03_tiled takes no packed sequences (--varlen); steps with them: ") &&
                          Catch::Contains(fs::kStepsPacked));
  REQUIRE_THROWS_WITH(fs::RunPlan(packed_copy("06"), opt), Catch::Contains("a block mask covers the whole N × N problem"));
  REQUIRE_THROWS_WITH(fs::RunPlan(packed_copy("07"), opt), Catch::Contains("SMYRF's clusters are of one sequence"));
  const fs::StepInfo step = packed_copy("05");
  REQUIRE_NOTHROW(fs::RunPlan(step, opt));
  fs::Options traced = opt;
  traced.trace_path = (std::filesystem::temp_directory_path() / "flashsteps_plan_varlen.json").string();
  REQUIRE_THROWS_WITH(fs::RunPlan(step, traced), Catch::Contains("--trace records no packed sequences"));

  fs::Options off = opt;
  off.shape.N = 141;
  REQUIRE_THROWS_WITH(fs::RunPlan(step, off), Catch::Contains("--varlen: the sequences hold 142 query tokens, but N = 141"));
  off = opt;
  off.shape.Nk = 0;  // Nk = N = 142
  REQUIRE_THROWS_WITH(fs::RunPlan(step, off), Catch::Contains("hold 160 key tokens, but Nk = 142"));
  off = opt;
  off.shape.B = 2;
  off.load_dir = "saved";
  REQUIRE_THROWS_WITH(fs::RunPlan(step, off), Catch::Contains("--load saved: packed sequences are one batch of tokens: B must be 1"));
  off = opt;
  off.packed.cu_k.pop_back();  // 3 sequences' keys, still 160 of them
  REQUIRE_THROWS_WITH(fs::RunPlan(step, off), Catch::Contains("cu_seqlens_q holds 4 sequences and cu_seqlens_k 3"));
  off = opt;
  off.packed.cu_q[2] = 90;
  REQUIRE_THROWS_WITH(fs::RunPlan(step, off), Catch::Contains("cu_seqlens_q decreases at index 2"));

  // The step's own check (StepInfo::refusal) is given the sequences.
  fs::StepInfo refusing = step;
  refusing.unsupported = [](const fs::Shape&, const fs::PassSettings& settings) {
    return settings.packed.on() ? std::string("this kernel takes no packed sequences") : std::string();
  };
  REQUIRE_THROWS_WITH(fs::RunPlan(refusing, opt), Catch::Contains("this kernel takes no packed sequences"));
  REQUIRE_NOTHROW(fs::RunPlan(refusing, options({1, 4, 142, 64})));

  // --alibi FILE of shape (sequences, H): a row per sequence, as flash_attn_varlen_func takes them.
  const auto dir = std::filesystem::temp_directory_path() / "flashsteps_test_varlen_alibi";
  std::filesystem::create_directories(dir);
  std::vector<float> slopes(16);
  for (std::size_t i = 0; i < slopes.size(); ++i) slopes[i] = 0.5f + float(i);
  fs::write_npy((dir / "sequences.npy").string(), slopes.data(), {4, 4});
  fs::write_npy((dir / "one.npy").string(), slopes.data(), {1, 4});
  fs::Options alibi = opt;
  alibi.alibi = true;
  alibi.alibi_path = (dir / "sequences.npy").string();
  const fs::ScoreFeatures f = fs::RunPlan(step, alibi).settings().features;
  REQUIRE((f.alibi_slopes == slopes && f.alibi_batch_stride == 4));
  alibi.alibi_path = (dir / "one.npy").string();  // B = 1, but 4 sequences
  REQUIRE_THROWS_WITH(fs::RunPlan(step, alibi), Catch::Contains("shape (1, 4)") &&
                                                    Catch::Contains("a row of them per packed sequence, (4, 4)"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("packed sequences: the plan keeps them for every pass, and counts the FLOPs, the window's share and the label "
          "sequence by sequence",
          "[plan][varlen]") {
  const fs::StepInfo step = packed_copy("05");
  fs::Options opt = with_sequences(options({1, 4, 1, 64}), "100,0,37:60,5:0");
  const fs::RunPlan plan(step, opt);
  REQUIRE(plan.settings().packed.cu_q == opt.packed.cu_q);
  REQUIRE(plan.settings().packed.cu_k == opt.packed.cu_k);
  REQUIRE(plan.mask_label() == "varlen:4+seq-k:160");
  // 4·H·d·(n·n_k) summed: 100·100 + 37·60; causal, the area below each bottom-right diagonal:
  // 100²/2, 37·60 − 37²/2, and 0 for the sequence of no keys.
  const double unit = 4.0 * 4 * 64;
  REQUIRE(plan.flops("fwd") == Approx(unit * (10000 + 37 * 60)));
  REQUIRE(plan.flops("bwd") == Approx(2.5 * unit * (10000 + 37 * 60)));
  opt.causal = true;
  REQUIRE(fs::RunPlan(step, opt).flops("fwd") == Approx(unit * (5000 + 37 * 60 - 37 * 37 / 2.0)));
  // Fewer keys than queries: n_k²/2.
  REQUIRE(fs::RunPlan(step, with_sequences(opt, "60:37")).flops("fwd") == Approx(unit * 37 * 37 / 2.0));
  // One square sequence is the unpacked problem, the papers' N²/2 when causal.
  REQUIRE(fs::RunPlan(step, with_sequences(opt, "300")).flops("fwd") == Approx(fs::forward_flops({1, 4, 300, 64}, true)));

  // The window (1, 0): sequence 3 × 3 keeps 1 + 2 + 2 of its 9 scores; 2 queries × 4 keys
  // (diagonal keys 2 and 3) keeps 2 + 2 of its 8.
  opt = with_sequences(options({1, 4, 1, 64}), "3,2:4");
  opt.window_left = 1;
  opt.window_right = 0;
  REQUIRE(fs::RunPlan(step, opt).density() == Approx(9.0 / 17));
  REQUIRE(fs::RunPlan(step, opt).mask_label() == "varlen:2+seq-k:7+window:1:0");
  // Causal, the window's left side alone: of the 1 + 2 + 3 and 3 + 4 causal scores, the same 9.
  opt.causal = true;
  opt.window_right = -1;
  REQUIRE(fs::RunPlan(step, opt).density() == Approx(9.0 / 13));
}
