// Every program's command line and its plan, as far as it goes without a GPU: a step program's
// options and RunPlan (common/cli.hpp, plan.hpp), the tour's plan (common/tour.hpp), the bench's
// (common/bench.hpp), io_model's options and rows (common/io_model_cli.hpp). The input's first
// byte picks the program (a step of each kind the table holds: variants, a backward, dropout, a
// block mask, clusters, score features, K/V shapes, packed sequences, 16-bit dtypes), its
// NUL-separated rest is argv. A plan or one InputError, never a crash or a hang (libFuzzer's
// -timeout): every loop whose length the input sets must be bounded before it runs.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "common/bench.hpp"
#include "common/block_mask.hpp"
#include "common/cli.hpp"
#include "common/errors.hpp"
#include "common/io_model.hpp"
#include "common/io_model_cli.hpp"
#include "common/plan.hpp"
#include "common/smyrf.hpp"
#include "common/tour.hpp"
#include "tests/fuzz/fuzz_util.hpp"

namespace {

// The kernels' own checks, as the tiled steps make them (flash_tile.cuh: tiled_unsupported),
// and IO models from common/io_model.hpp at fixed tiles: what a step's hooks do, without kernels.
std::string tiled(const fs::Shape& s, const fs::PassSettings& p) {
  if (s.d != 16 && s.d != 32 && s.d != 64 && s.d != 128) return "d must be 16, 32, 64 or 128";
  if (s.heads() > 65535) return "B·H must be at most 65535 (grid y)";
  if (p.mask && (p.mask->block_r % 64 != 0 || p.mask->block_c % 64 != 0)) return "blocks must be multiples of the tiles";
  return {};
}
std::string clustered(const fs::Shape& s, const fs::PassSettings& p) {
  if (std::string why = tiled(s, p); !why.empty()) return why;
  if (p.causal) return "SMYRF has no causal form";
  return fs::smyrf_params_error(s, p.smyrf);
}
std::string tensor_cores(const fs::Shape& s, const fs::PassSettings& p) {
  if (p.dtype == fs::DType::fp32 && p.variant != 1) return "fp32 runs in variant 3xtf32";
  if (p.dtype != fs::DType::fp32 && p.variant == 1) return "3xtf32 is the fp32 variant";
  return tiled(s, p);
}
fs::IoCount io_standard(const fs::Shape& s, const fs::PassSettings&) { return fs::io_standard_forward(s); }
fs::IoCount io_flash(const fs::Shape& s, const fs::PassSettings& p) {
  return fs::io_flash2_forward(s, p.causal, 64, 64, 4, fs::clamp_reach(p.features.window_left, s.N, s.keys()),
                               fs::clamp_reach(p.features.window_right, s.N, s.keys()));
}
fs::IoCount io_alg1(const fs::Shape& s, const fs::PassSettings& p) { return fs::io_flash1_forward(s, p.causal, 16, 64); }
fs::IoCount io_tc_backward(const fs::Shape& s, const fs::PassSettings& p) {
  return fs::io_flash2_backward(s, p.causal, fs::TcBwdTiles{64, 64, 1, 64, 64}, p.variant == 0, 2);
}
int mask_block(int d) { return d <= 64 ? 128 : 64; }

std::vector<fs::StepInfo> steps() {
  auto backward = [](const fs::BwdParams&) {};
  std::vector<fs::StepInfo> out(6);
  out[0].id = "01_naive";
  out[0].backward = backward;
  out[0].io_forward = out[0].io_backward = io_standard;
  out[1].id = "04_online_softmax";
  out[1].variants = {"alg1", "fa2"};
  out[1].unsupported = tiled;
  out[1].io_forward = io_alg1;
  out[1].score_mods = out[1].kv_shapes = out[1].packed = out[1].strides = true;
  out[2].id = "05_recompute_backward";
  out[2].variants = {"atomic", "deterministic"};
  out[2].backward = backward;
  out[2].unsupported = tiled;
  out[2].io_forward = io_flash;
  out[2].io_backward = io_tc_backward;
  out[2].dropout = out[2].score_mods = out[2].kv_shapes = out[2].packed = true;
  out[3] = out[2];
  out[3].id = "06_block_sparse";
  out[3].score_mods = out[3].kv_shapes = out[3].packed = false;
  out[3].block_sparse = true;
  out[3].mask_block = mask_block;
  out[4].id = "07_smyrf";
  out[4].backward = backward;
  out[4].clustered = true;
  out[4].unsupported = clustered;
  out[4].io_forward = out[4].io_backward = io_flash;
  out[5] = out[2];
  out[5].id = "08_tensor_cores";
  out[5].variants = {"fa2", "3xtf32", "deterministic"};
  out[5].dtypes = {fs::DType::bf16, fs::DType::fp16, fs::DType::fp32};
  out[5].unsupported = tensor_cores;
  return out;
}

void invariant(bool ok) {
  if (!ok) std::abort();
}

void check_shape(const fs::Shape& s) {
  invariant(s.B >= 1 && s.H >= 1 && s.N >= 1 && s.d >= 1 && s.keys() >= 1 && s.kv_heads() >= 1 && s.H % s.kv_heads() == 0);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fs::fuzz::quiet_stdout();  // --help prints the help: not worth the time
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::vector<fs::StepInfo> table = steps();
  static const std::vector<const fs::StepInfo*> all = [] {
    std::vector<const fs::StepInfo*> p;
    for (const fs::StepInfo& s : table) p.push_back(&s);
    return p;
  }();
  const std::size_t program = fs::fuzz::take_byte(data, size) % (table.size() + 3);
  const std::vector<std::string> args = fs::fuzz::arguments("program", data, size);
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  const int argc = int(argv.size());
  try {
    if (program < table.size()) {  // a step program: its options, then its plan
      const fs::StepInfo& step = table[program];
      const auto opt = fs::parse_options(step, argc, argv.data());
      if (!opt) return 0;
      const fs::RunPlan plan(step, *opt);
      invariant(step.takes(opt->dtype));
      check_shape(plan.shape());
      invariant(plan.shape().heads() <= fs::kMaxHeads && plan.shape().elems() <= (std::int64_t(1) << 40));
      (void)plan.label();
      (void)plan.mask_label();
      // The mask is built when a pass asks for it; the plan checked its grid (at most 2^30 blocks,
      // and the host memory): built here only where it is small enough for the fuzzer's memory.
      // ALiBi's slopes: (H), or (B, H) with a row per batch (per packed sequence).
      const fs::ScoreFeatures& f = plan.settings().features;
      if (f.alibi_slopes.size() > 0)
        invariant(f.alibi_batch_stride == 0 ? f.alibi_slopes.size() == std::size_t(plan.shape().H)
                                            : f.alibi_batch_stride == plan.shape().H &&
                                                  f.alibi_slopes.size() ==
                                                      std::size_t(fs::alibi_batches(plan.shape(), opt->packed)) *
                                                          std::size_t(plan.shape().H));
    } else if (program == table.size()) {  // the tour
      const auto t = fs::plan_tour(all, argc, argv.data(), "tour");
      if (!t) return 0;
      check_shape(t->opt.shape);
      invariant(t->opt.reps >= 1 && !t->steps.empty());
    } else if (program == table.size() + 1) {  // bench
      const auto b = fs::plan_bench(all, argc, argv.data());
      if (!b) return 0;
      invariant(!b->seqs.empty() && !b->dims.empty() && !b->dtypes.empty() && b->reps >= 1 && b->warmup >= 0);
      for (int N : b->seqs)
        for (int d : b->dims) check_shape(b->shape(N, d));
    } else {  // io_model: its options and rows (the models at fixed tiles)
      const auto o = fs::parse_io_model(argc, argv.data());
      if (!o) return 0;
      check_shape(o->shape);
      if (o->tiles) return 0;
      invariant(o->shape.N <= fs::kIoModelMaxSeq && o->shape.heads() <= fs::kMaxHeads);
      for (const std::string& row : fs::io_model_rows(all, *o)) invariant(!row.empty() && row.find('\n') == std::string::npos);
    }
  } catch (const fs::InputError& e) {  // one line, unless it quotes an argument that holds a newline
    bool quoted_newline = false;
    for (const std::string& a : args) quoted_newline = quoted_newline || a.find('\n') != std::string::npos;
    invariant(quoted_newline || std::string(e.what()).find('\n') == std::string::npos);
  }
  std::cout.clear();
  return 0;
}
