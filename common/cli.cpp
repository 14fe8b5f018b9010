#include "common/cli.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iostream>
#include <tuple>
#include <vector>

#include "common/block_mask.hpp"
#include "common/cli_numbers.hpp"
#include "common/errors.hpp"
#include "common/smyrf.hpp"
#include "common/varlen.hpp"

namespace fs {

DType default_dtype(const StepInfo& step, int variant) {
  if (step.dtypes.size() == 1) return step.dtypes.front();
  std::vector<DType> order;  // fp32 first, where the step has it; then the step's own order
  if (step.takes(DType::fp32)) order.push_back(DType::fp32);
  for (DType t : step.dtypes)
    if (t != DType::fp32) order.push_back(t);
  for (DType t : order) {
    const PassSettings settings(default_scale(kTraceShape.d), false, variant, {}, nullptr, t);
    if (step.refusal(kTraceShape, settings).empty()) return t;
  }
  return order.front();
}

std::pair<int, int> window_option(const std::string& window) {
  constexpr long long kMaxInt = 0x7fffffff;
  const auto comma = window.find(',');
  if (comma == std::string::npos)
    throw InputError("--window takes L,R: the keys each query sees on its left and right (-1: unbounded)");
  auto reach = [&](const std::string& text, const char* side) {
    long long v = 0;
    const char* end = text.data() + text.size();
    const auto [stop, ec] = std::from_chars(text.data(), end, v, 10);
    if (text.empty() || ec != std::errc() || stop != end || v < -1 || v > kMaxInt)
      throw InputError(std::string("--window: ") + side + " must be -1 (unbounded) or 0 to " + std::to_string(kMaxInt) +
                       " (got '" + text + "')");
    return static_cast<int>(v);
  };
  return {reach(window.substr(0, comma), "L"), reach(window.substr(comma + 1), "R")};
}

std::optional<Options> parse_options(const StepInfo& step, int argc, const char* const* argv) {
  Options o;
  CLI::App app{"flashsteps step " + step.id + ": " + step.title};
  app.get_formatter()->column_width(28);
  // Sizes are read as 64-bit so that "--seq 99999999999" is reported as too large rather
  // than wrapped around.
  long long B = o.shape.B, H = o.shape.H, N = o.shape.N, d = o.shape.d;
  float scale = 0;
  std::string variant, dtype;  // empty: default_dtype for the variant
  app.add_option("-b,--batch", B, "batch size B")->transform(decimal<long long>())->capture_default_str();
  app.add_option("--heads", H, "heads H")->transform(decimal<long long>())->capture_default_str();
  app.add_option("-n,--seq", N, "sequence length N")->transform(decimal<long long>())->capture_default_str();
  app.add_option("-d,--dim", d, "head dimension d")->transform(decimal<long long>())->capture_default_str();
  long long Nk = 0, Hkv = 0;
  app.add_option("--seq-k", Nk, "keys (and values) per sequence, when not N: causal aligns to the bottom-right corner")
      ->transform(decimal<long long>());
  app.add_option("--heads-kv", Hkv, "K/V heads, when not H (grouped-query attention; 1: multi-query); H a multiple")
      ->transform(decimal<long long>());
  app.add_flag("--causal", o.causal, "mask key j > query i");
  app.add_option("--scale", scale, "softmax scale (default 1/sqrt(d))")->transform(decimal_real());
  app.add_option("--seed", o.seed, "seed of the random inputs")->transform(decimal<std::uint64_t>())->capture_default_str();
  app.add_flag("--check", o.check, "compare against the fp64 CPU reference");
  app.add_flag("--bench", o.bench, "time with CUDA events (L2 flushed, median of --reps)");
  app.add_option("--reps", o.reps, "timed runs for --bench")->transform(decimal<int>())->capture_default_str();
  if (step.backward) app.add_flag("--backward", o.backward, "run the backward pass too");
  app.add_option("--dtype", dtype,
                 "element type of Q, K, V, O and the gradients: fp32, or bf16 / fp16 where the step has tensor-core "
                 "kernels (LSE is fp32 always); without it, fp32 where the variant has fp32 kernels, else bf16")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->default_str(dtype_name(default_dtype(step, 0)));
  app.add_option("--load", o.load_dir, "read q.npy, k.npy, v.npy (and do.npy) from DIR; the shape comes from them")->type_name("DIR");
  app.add_option("--save", o.save_dir, "write o.npy, lse.npy (and dq, dk, dv .npy) to DIR")->type_name("DIR");
  app.add_option("--csv", o.csv_path, "append one result row per pass to FILE (with --bench)")->type_name("FILE");
  app.add_option("--trace", o.trace_path,
                 "record a traced run to FILE (the backward to FILE.bwd.json with --backward); without "
                 "size options the shape is B=1 H=1 N=256 d=64")
      ->type_name("FILE");
  app.add_option("--trace-cap", o.trace_cap, "device events recorded per CTA; more are counted as dropped")
      ->transform(decimal<std::int64_t>())
      ->capture_default_str();
  if (step.variants.size() > 1)
    app.add_option("--variant", variant, "kernel to run")
        ->check(CLI::IsMember(step.variants))
        ->default_str(step.variants.front());
  bool deterministic = false;
  const bool has_deterministic =
      std::find(step.variants.begin(), step.variants.end(), "deterministic") != step.variants.end();
  if (has_deterministic)
    app.add_flag("--deterministic", deterministic,
                 "bit-identical gradients run to run (the same as --variant deterministic)");
  if (step.dropout)
    app.add_option("--dropout", o.dropout,
                   "drop each attention probability with probability P, in the forward and the backward "
                   "(the mask is regenerated from --seed, never stored)")
        ->type_name("P")
        ->transform(decimal_real())
        ->capture_default_str();

  long long block = o.block;
  if (step.block_sparse) {
    app.add_option("--pattern", o.pattern, std::string("block mask pattern: ") + kPatternForms)->capture_default_str();
    app.add_option("--mask", o.mask_path,
                   "block mask from a .npy file of 0/1, shape (ceil(N/block), ceil(N/block)); overrides --pattern")
        ->type_name("FILE");
    app.add_option("--block", block,
                   "mask block size in queries and keys, a multiple of the kernels' tiles (default: the smallest "
                   "such size of at least 128 for --dim)")
        ->transform(decimal<long long>());
  }

  long long hashes = kSmyrfDefault.hashes, cluster = kSmyrfDefault.q_cluster, q_cluster = kSmyrfDefault.q_cluster,
            k_cluster = kSmyrfDefault.k_cluster;
  float lsh_r = kSmyrfDefault.r;
  if (step.clustered) {
    app.add_option("--hashes", hashes, "SMYRF rounds of hashing, merged by the LSE rule (1-16)")
        ->transform(decimal<long long>())
        ->capture_default_str();
    app.add_option("--cluster", cluster, "queries and keys per cluster")->transform(decimal<long long>())->capture_default_str();
    app.add_option("--q-cluster", q_cluster, "queries per cluster (instead of --cluster)")->transform(decimal<long long>());
    app.add_option("--k-cluster", k_cluster,
                   "keys per cluster (instead of --cluster): the keys whose ranks are centred on the cluster's queries'")
        ->transform(decimal<long long>());
    app.add_option("--r", lsh_r, "E2LSH width: the offset beta ~ U(0, r) (shifts every hash of a round alike)")
        ->transform(decimal_real())
        ->capture_default_str();
  }

  // Every step takes these on its command line, so that one without the features refuses them
  // with the plan's message (naming the steps that have them) rather than CLI11's.
  std::string window, alibi;
  app.add_option("--window", window,
                 "sliding window: query i sees keys i-L to i+R (-1: that side unbounded; -1,0 is causal)")
      ->type_name("L,R");
  app.add_option("--softcap", o.softcap, "cap the scores: C*tanh(s/C) before the softmax (0: off)")
      ->type_name("C")
      ->transform(decimal_real());
  app.add_option("--alibi", alibi,
                 "ALiBi: subtract slope_h*|i-j| from the scores; the standard slopes of H heads, or FILE's "
                 "(.npy float32, (H) or (B, H): a row per batch, per sequence with --varlen)")
      ->expected(0, 1)
      ->type_name("[FILE]");
  std::string varlen;
  app.add_option("--varlen", varlen,
                 "packed sequences of their own lengths (flash_attn_varlen_func): each one's tokens, "
                 "e.g. 128,0,77:300 (QUERIES:KEYS where they differ), or cu_seqlens from FILE.npy (both) or "
                 "Q.npy,K.npy; B is 1, N and Nk the totals")
      ->type_name("LENGTHS|FILE");

  bool tour = false;  // step_main takes --tour first (common/tour.hpp); here it is only listed
  app.add_flag("--tour", tour,
               "this step's rows of the tour at its size, checked and timed (first option; --tour --help lists "
               "the tour's)");

  if (!parse_command_line(app, argc, argv)) return std::nullopt;
  if (tour) throw InputError("--tour comes first, before the tour's own options (--tour --help lists them)");

  constexpr long long kMaxInt = 0x7fffffff;
  if (!o.load_dir.empty()) {
    for (const char* opt : {"--batch", "--heads", "--seq", "--dim", "--seq-k", "--heads-kv"})
      if (app.count(opt))
        throw InputError(std::string(opt) + " conflicts with --load: the shape comes from the files");
    if (app.count("--varlen"))
      throw InputError("--varlen conflicts with --load: the sequences come from the folder's cu_seqlens_q.npy and "
                       "cu_seqlens_k.npy");
  }
  if (!o.trace_path.empty()) {  // a traced run defaults to a shape a person can follow
    if (!app.count("--batch")) B = kTraceShape.B;
    if (!app.count("--heads")) H = kTraceShape.H;
    if (!app.count("--seq")) N = kTraceShape.N;
    if (!app.count("--dim")) d = kTraceShape.d;
  }
  o.shape = {size_option("--batch", B, kMaxInt), size_option("--heads", H, kMaxInt),
             size_option("--seq", N, kMaxInt), size_option("--dim", d, kMaxInt)};
  if (app.count("--seq-k")) o.shape.Nk = size_option("--seq-k", Nk, kMaxInt);
  if (app.count("--heads-kv")) {
    o.shape.Hkv = size_option("--heads-kv", Hkv, kMaxInt);
    if (o.shape.H % o.shape.Hkv != 0)
      throw InputError("--heads " + std::to_string(o.shape.H) + " must be a multiple of --heads-kv " +
                       std::to_string(o.shape.Hkv));
  }
  if (app.count("--varlen")) {  // one batch of the sequences' tokens: the totals are N and Nk
    o.packed = parse_varlen(varlen);
    const int n = o.packed.cu_q.back(), nk = o.packed.cu_k.back();
    if (app.count("--batch") && o.shape.B != 1)
      throw InputError("--varlen packs the sequences into one batch: --batch must be 1 (got " +
                       std::to_string(o.shape.B) + ")");
    if (app.count("--seq") && o.shape.N != n)
      throw InputError("--seq " + std::to_string(o.shape.N) + " disagrees with --varlen's " + std::to_string(n) +
                       " query tokens (leave it out: N is their total)");
    if (app.count("--seq-k") && o.shape.keys() != nk)
      throw InputError("--seq-k " + std::to_string(o.shape.keys()) + " disagrees with --varlen's " +
                       std::to_string(nk) + " key tokens (leave it out: Nk is their total)");
    o.shape.B = 1;
    o.shape.N = n;
    o.shape.Nk = nk == n ? 0 : nk;
  }
  if (app.count("--scale")) {
    if (!std::isfinite(scale) || scale == 0.f)
      throw InputError("--scale must be a finite, non-zero number");
    o.scale = scale;
  }
  o.reps = size_option("--reps", o.reps, 100000);
  if (step.block_sparse && app.count("--block")) o.block = size_option("--block", block, kMaxInt);
  if (step.block_sparse && app.count("--mask") && app.count("--pattern"))
    throw InputError("--mask and --pattern both give the block mask: choose one");
  o.trace_cap = size_option("--trace-cap", o.trace_cap, kMaxInt);
  if (app.count("--trace-cap") && o.trace_path.empty()) throw InputError("--trace-cap is for traced runs: add --trace FILE");
  if (!o.csv_path.empty() && !o.bench) throw InputError("--csv records benchmark rows: add --bench");
  if (deterministic) {
    if (!variant.empty() && variant != "deterministic")
      throw InputError("--deterministic conflicts with --variant " + variant);
    variant = "deterministic";
  }
  if (!(o.dropout >= 0.f && o.dropout < 1.f))
    throw InputError("--dropout must be in [0, 1) (got " + std::to_string(o.dropout) + ")");
  for (std::size_t i = 0; i < step.variants.size(); ++i)
    if (step.variants[i] == variant) o.variant = static_cast<int>(i);
  o.dtype = dtype.empty() ? default_dtype(step, o.variant) : *parse_dtype(dtype);
  if (step.clustered) {
    if (app.count("--cluster") && (app.count("--q-cluster") || app.count("--k-cluster")))
      throw InputError("--cluster sets both cluster sizes: give it or --q-cluster/--k-cluster, not both");
    const bool split = app.count("--q-cluster") || app.count("--k-cluster");
    o.smyrf.hashes = size_option("--hashes", hashes, kMaxInt);
    o.smyrf.q_cluster = size_option(split ? "--q-cluster" : "--cluster", split ? q_cluster : cluster, kMaxInt);
    o.smyrf.k_cluster = size_option(split ? "--k-cluster" : "--cluster", split ? k_cluster : cluster, kMaxInt);
    o.smyrf.r = lsh_r;
    o.smyrf_given = app.count("--hashes") || app.count("--cluster") || split;
  }
  if (app.count("--window")) std::tie(o.window_left, o.window_right) = window_option(window);
  if (!(std::isfinite(o.softcap) && o.softcap >= 0.f))
    throw InputError("--softcap must be a finite number, 0 (off) or more");
  o.alibi = app.count("--alibi") > 0;
  o.alibi_path = alibi;
  return o;
}

}  // namespace fs
