// Step 10 program: decoding. n new tokens per sequence against a KV cache (flash_attn_with_kvcache's
// layouts, decode.hpp), the keys split among CTAs by the split rule (split_rule.hpp) or --splits,
// checked against the fp64 reference (--check) and timed (--reps). Run with --help for the options.
//
// Its own driver, not the table of steps (steps/registry.cpp) that the tour, the bench and the
// tests iterate over: those hand every step common/problem.hpp's FwdParams, (B, H, N, d) tensors and
// one length for all; a KV cache has other layouts, a length per sequence, pages and appends, which
// belong in this step's own struct (DecodeParams), not in FwdParams.
//
// `step10_decode --tour` prints its row of the tour (common/tour.hpp) at the tour's size, as the
// other steps' programs do, so that bash cmake/quickstart.sh runs it after step 09: the tour's
// B, H, N = the cache's length, d, one new token, H / 4 K/V heads (grouped-query attention).
//
// Exit codes as every step program's (common/errors.hpp): 0 ok, 1 a check failed, 2 bad input
// (one line), 3 no GPU or not enough GPU memory. Everything that needs no GPU is decided first.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "common/buffer.hpp"
#include "common/check.hpp"
#include "common/cli.hpp"
#include "common/cli_numbers.hpp"
#include "common/device.hpp"
#include "common/driver.hpp"
#include "common/errors.hpp"
#include "common/files.hpp"
#include "common/host_memory.hpp"
#include "common/reference.hpp"
#include "common/problem.hpp"
#include "common/results.hpp"
#include "common/timing.hpp"
#include "common/nvtx_tool/nvtx_tool.hpp"
#include "common/recorder/nvtx.hpp"
#include "common/recorder/sink.hpp"
#include "common/trace/trace_io.hpp"
#include "common/trace/validate.hpp"
#include "common/traced_run.hpp"
#include "steps/10_decode/decode.hpp"
#include "steps/10_decode/decode_io.hpp"
#include "steps/10_decode/decode_reference.hpp"
#include "steps/10_decode/split_rule.hpp"

namespace {

using namespace fs;
using namespace fs::decoding;

constexpr long long kMaxCacheLen = 1ll << 24;  // keys per sequence the program takes (16 Mi)
constexpr long long kMaxHeads = 4096;
constexpr std::int64_t kMaxCacheElems = std::int64_t(1) << 38;  // 512 GiB of K in 2-byte elements
constexpr int kMaxReps = 10000;

struct Options {
  DecodeShape shape;
  int cache_len = 4096;  // keys of every sequence (also the cache's room; with --append, + the new tokens)
  DType dtype = DType::bf16;
  int splits = 0;        // 0: the rule
  int page_size = 0;     // 0: a contiguous cache; else pages of this many keys, in shuffled order
  bool causal = false, check = false;
  bool append = false;   // the new tokens' k, v appended into the cache before attending (k_new, v_new)
  ScoreFeatures mods;    // --window, --softcap, --alibi (the slopes of the query heads)
  int rotary_dim = 0;    // with append: the new keys and q turned by a rotary embedding of this many columns
  bool rotary_interleaved = false;
  int reps = 0;          // timed runs; 0: none
  std::string csv;       // with reps: append the timed run's row here (decode_csv_header)
  std::string trace;     // a traced run's file (step 10's kernels at d = 64, validated)
  std::uint64_t seed = 1;
};

// The command line, checked: InputError (one line, exit 2) for anything the kernels do not take.
std::optional<Options> parse(int argc, char** argv) {
  Options o;
  long long B = 1, H = 32, Hkv = 8, L = o.cache_len, n = 1, d = 128, splits = 0, reps = 0, page = 0;
  std::string dtype = "bf16";
  CLI::App app{"flashsteps step 10_decode: decoding (Flash-Decoding). n new tokens per sequence against a KV cache "
               "(q (batch, n, heads, d), k/v cache (batch, cache_len, heads_kv, d)), the keys split among CTAs and "
               "the splits merged by their log-sum-exp"};
  app.get_formatter()->column_width(28);
  app.add_option("-b,--batch", B, "sequences")->transform(decimal<long long>())->capture_default_str();
  app.add_option("--heads", H, "query heads H")->transform(decimal<long long>())->capture_default_str();
  app.add_option("--heads-kv", Hkv, "K/V heads (H a multiple: grouped-query attention; 1: multi-query)")
      ->transform(decimal<long long>())->capture_default_str();
  app.add_option("--cache-len", L, "keys in every sequence's cache (0: an empty cache, every row sees no key)")
      ->transform(decimal<long long>())->capture_default_str();
  app.add_option("--new-tokens", n, "query tokens per sequence (1..16), already in the cache unless --append")
      ->transform(decimal<long long>())->capture_default_str();
  app.add_option("-d,--dim", d, "head dimension d: 64, 128 or 256")->transform(decimal<long long>())->capture_default_str();
  app.add_option("--dtype", dtype, "element type of q, the cache and O (LSE is fp32)")
      ->check(CLI::IsMember({"bf16", "fp16"}))->capture_default_str();
  app.add_option("--splits", splits, "splits of every sequence's keys (0: the split rule, split_rule.hpp)")
      ->transform(decimal<long long>())->capture_default_str();
  app.add_option("--page-size", page, "0: a contiguous cache; else a paged one (flash_attn_with_kvcache's block_table), "
                                      "pages of this many keys (a power of two, at least 16) in shuffled order")
      ->transform(decimal<long long>())->capture_default_str();
  app.add_flag("--append", o.append,
               "append the new tokens' k and v (flash_attn_with_kvcache's k, v) into the cache before attending: the "
               "cache holds --cache-len keys before, --cache-len + --new-tokens after (its room)");
  app.add_option("--rotary-dim", o.rotary_dim, "with --append: turn the new keys and q by a rotary embedding (RoPE) of "
                                               "this many columns, even, at most d (0: none)")
      ->capture_default_str();
  app.add_flag("--rotary-interleaved", o.rotary_interleaved,
               "the rotary pairs are neighbouring columns (2i, 2i+1), GPT-J's layout; else (i, i + rotary_dim/2)");
  std::string window;
  app.add_option("--window", window, "sliding window around each token's diagonal key L-n+t: keys from L-n+t-L' to "
                                     "L-n+t+R (-1: that side unbounded)")->type_name("L',R");
  app.add_option("--softcap", o.mods.softcap, "cap the scores: C*tanh(s/C) before the softmax (0: off)")
      ->type_name("C")->transform(decimal_real());
  bool alibi = false;
  app.add_flag("--alibi", alibi, "ALiBi: subtract slope_h*|L-n+t-j| from the scores, the standard slopes of the heads");
  app.add_flag("--causal", o.causal, "token t of n sees keys up to cache_len - n + t (the bottom-right corner; with --append, cache_len + t)");
  app.add_flag("--check", o.check, "compare O and LSE against the fp64 CPU reference");
  app.add_option("--reps", reps, "timed runs, L2 flushed before each, median reported (0: not timed)")
      ->transform(decimal<long long>())->capture_default_str();
  app.add_option("--csv", o.csv, "append the timed run's row to FILE (needs --reps; docs/benchmarks/decode_bench.py "
                                 "writes PyTorch's rows beside it)")->type_name("FILE");
  app.add_option("--seed", o.seed, "seed of the random inputs")->transform(decimal<std::uint64_t>())->capture_default_str();
  app.add_option("--trace", o.trace, "run once more traced and write the trace to FILE (the visualizer's input; "
                                     "d = 64, no rotary embedding), validated against the IO model")
      ->type_name("FILE");
  if (!parse_command_line(app, argc, argv)) return std::nullopt;

  o.shape.batch = size_option("--batch", B, 65535);
  o.shape.heads = size_option("--heads", H, kMaxHeads);
  o.shape.heads_kv = size_option("--heads-kv", Hkv, kMaxHeads);
  o.shape.new_tokens = size_option("--new-tokens", n, kMaxNewTokens);
  o.shape.d = size_option("--dim", d, 256);
  if (L < 0 || L > kMaxCacheLen)
    throw InputError("--cache-len must be in 0.." + std::to_string(kMaxCacheLen) + " (got " + std::to_string(L) + ")");
  if (splits < 0 || splits > kMaxSplits)
    throw InputError("--splits must be in 0.." + std::to_string(kMaxSplits) + " (0: the split rule; got " +
                     std::to_string(splits) + ")");
  if (reps < 0 || reps > kMaxReps)
    throw InputError("--reps must be in 0.." + std::to_string(kMaxReps) + " (got " + std::to_string(reps) + ")");
  if (std::int64_t(B) * L * Hkv * d > kMaxCacheElems)
    throw InputError("a cache of " + std::to_string(B) + " x " + std::to_string(L) + " x " + std::to_string(Hkv) + " x " +
                     std::to_string(d) + " elements is larger than any GPU's memory");
  o.cache_len = static_cast<int>(L);
  // The room: the keys, and with --append the new tokens' rows too; an empty cache still has a row.
  o.shape.seqlen_cache = std::max(1, o.cache_len + (o.append ? o.shape.new_tokens : 0));
  o.splits = static_cast<int>(splits);
  if (page != 0) {  // the block table of the run (DecodeRun): ⌈seqlen_cache / page⌉ pages per sequence
    if (page < 0 || page > (1 << 20) || (page & (page - 1)) != 0 || page < 16)
      throw InputError("--page-size must be 0 (a contiguous cache) or a power of two in 16..1048576 (got " +
                       std::to_string(page) + ")");
    o.page_size = static_cast<int>(page);
    const int blocks = (o.shape.seqlen_cache + o.page_size - 1) / o.page_size;
    if (std::string why = paging_unsupported(o.shape, true, o.page_size, blocks); !why.empty()) throw InputError(why);
  }
  o.reps = static_cast<int>(reps);
  if (!o.csv.empty()) {
    if (o.reps == 0) throw InputError("--csv writes a timed run's row: give --reps too");
    if (std::string why = output_file_problem(o.csv); !why.empty()) throw InputError("--csv " + o.csv + ": " + why);
  }
  o.dtype = *parse_dtype(dtype);
  if (std::string why = decode_unsupported(o.shape, o.dtype, std::max(1, o.splits)); !why.empty()) throw InputError(why);
  if (o.append)  // the room is made for them above; the refusal stays the launcher's own rule
    if (std::string why = append_unsupported(o.shape, nullptr, o.cache_len); !why.empty()) throw InputError(why);
  if (app.count("--window")) std::tie(o.mods.window_left, o.mods.window_right) = window_option(window);
  if (!(std::isfinite(o.mods.softcap) && o.mods.softcap >= 0.f))
    throw InputError("--softcap must be a finite number, 0 (off) or more");
  if (alibi) o.mods.alibi_slopes = fs::alibi_slopes(o.shape.heads);
  if (o.rotary_dim != 0 || o.rotary_interleaved) {
    if (!o.append) throw InputError("--rotary-dim turns the appended keys: give --append too");
    if (o.rotary_dim < 2 || o.rotary_dim > o.shape.d || o.rotary_dim % 2 != 0)
      throw InputError("--rotary-dim must be even and in 2..d = " + std::to_string(o.shape.d) + " (got " +
                       std::to_string(o.rotary_dim) + ")");
  }
  if (!o.trace.empty()) {
    if (std::string why = traced_unsupported(o.shape, o.rotary_dim); !why.empty()) throw InputError("--trace: " + why);
    if (std::string why = output_file_problem(o.trace); !why.empty()) throw InputError("--trace " + o.trace + ": " + why);
  }
  return o;
}

std::string shown_bytes(double bytes) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(bytes >= 1e9 ? 2 : 1);
  if (bytes >= 1e9) out << bytes / 1e9 << " GB";
  else if (bytes >= 1e6) out << bytes / 1e6 << " MB";
  else out << bytes / 1e3 << " kB";
  return out.str();
}

// Elements of K (and of V): the contiguous cache's, or with --page-size its pages (⌈seqlen_cache /
// page⌉ per sequence, and the spare one that paged_layout adds).
std::int64_t cache_elems(const Options& o) {
  const DecodeShape& s = o.shape;
  if (o.page_size == 0) return s.cache_elems();
  const std::int64_t pages = std::int64_t(s.batch) * ((s.seqlen_cache + o.page_size - 1) / o.page_size) + 1;
  return pages * o.page_size * s.heads_kv * s.d;
}

// One decoding problem on the GPU: the random inputs (with --check host and device copies, with
// --page-size the cache laid out in shuffled pages, paged_layout, and its block table; without
// --check drawn on the GPU alone, fill_uniform, the pages' order shuffled all the same), the splits (the rule unless
// --splits), the parameters, the workspace. forward() runs it; check() and time() say
// how it did. The caller has made sure there is a GPU.
class DecodeRun {
 public:
  DecodeRun(const Options& opt, const DeviceInfo& dev)
      : opt_(opt), s_(opt.shape), lens_(static_cast<std::size_t>(s_.batch), opt.cache_len),
        keys_(opt.cache_len + (opt.append ? opt.shape.new_tokens : 0)),
        splits_(opt.splits > 0 ? opt.splits : num_splits(s_.batch, s_.heads_kv, keys_, dev.sm_count, s_.row_blocks())),
        ws_bytes_(decode_workspace_bytes(s_, splits_, opt.rotary_dim > 0)) {
    const std::size_t elem = dtype_bytes(opt.dtype);
    const std::int64_t kv = cache_elems(opt);
    if (opt.check) {  // the host copies; paged, the contiguous problem and its pages side by side while laid out
      const std::uint64_t host_bytes =
          sizeof(float) * std::uint64_t(2 * s_.q_elems() + 2 * kv + (opt.page_size ? 2 * s_.cache_elems() : 0) +
                                        s_.rows() + (opt.append ? 2 * kv + 2 * new_elems() : 0));  // appended(): a copy
      require_host_memory(host_bytes, "this problem's host copies (--check; without it the inputs are drawn on the GPU)");
    }
    const std::int64_t table =  // the block table's entries
        opt.page_size ? std::int64_t(s_.batch) * ((s_.seqlen_cache + opt.page_size - 1) / opt.page_size) : 0;
    device_bytes_ = elem * std::uint64_t(2 * s_.q_elems() + 2 * kv + (opt.append ? 2 * new_elems() : 0)) +
                    sizeof(float) * s_.rows() +
                    sizeof(std::int32_t) * (s_.batch + table) + ws_bytes_;
    if (device_bytes_ > dev.free_bytes)
      throw ResourceError("this problem needs " + shown_bytes(double(device_bytes_)) + " of GPU memory; " + dev.name +
                          " has " + shown_bytes(double(dev.free_bytes)) + " free");
    if (opt.check) {
      host_ = random_decode_problem(s_, lens_, opt.dtype, opt.seed);
      if (opt.page_size) host_ = paged_layout(host_, opt.page_size, opt.seed + 1);  // the reference reads it paged too
    } else if (opt.page_size) {  // the block table alone: the pages' values are drawn on the GPU below
      host_.page_size = opt.page_size;
      host_.max_blocks_per_seq = static_cast<int>(table / s_.batch);
      host_.block_table = shuffled_block_table(static_cast<int>(table), static_cast<int>(kv / (std::int64_t(opt.page_size) *
                                                                                               s_.heads_kv * s_.d)),
                                               opt.seed + 1);
    }
    q_.emplace(static_cast<std::size_t>(s_.q_elems()), opt.dtype);
    k_.emplace(static_cast<std::size_t>(kv), opt.dtype);
    v_.emplace(static_cast<std::size_t>(kv), opt.dtype);
    o_.emplace(static_cast<std::size_t>(s_.q_elems()), opt.dtype);
    lse_.emplace(static_cast<std::size_t>(s_.rows()));
    ws_.emplace(ws_bytes_ / sizeof(float));
    seqlens_.emplace(lens_.size());
    table_.emplace(std::max<std::size_t>(1, host_.block_table.size()));
    if (opt.page_size) table_->upload(host_.block_table.data(), host_.block_table.size());
    seqlens_->upload(lens_.data(), lens_.size());
    if (opt.check) {
      q_->upload(host_.q);
      k_->upload(host_.k);
      v_->upload(host_.v);
    } else {  // timed runs alone: uniform values drawn on the GPU (fill_uniform), never copied
      fill_uniform(q_->get(), s_.q_elems(), opt.dtype, opt.seed);
      fill_uniform(k_->get(), kv, opt.dtype, opt.seed + 1);
      fill_uniform(v_->get(), kv, opt.dtype, opt.seed + 2);
    }
    if (opt.append) {  // the new rows on the device; the reference attends over the problem after the append
      k_new_.emplace(static_cast<std::size_t>(new_elems()), opt.dtype);
      v_new_.emplace(static_cast<std::size_t>(new_elems()), opt.dtype);
      if (opt.check) {
        const std::vector<float> k_new = random_new_rows(s_, opt.dtype, opt.seed + 2);
        const std::vector<float> v_new = random_new_rows(s_, opt.dtype, opt.seed + 3);
        k_new_->upload(k_new);
        v_new_->upload(v_new);
        if (opt.rotary_dim) rotary_ = rotary_tables(s_.seqlen_cache, opt.rotary_dim, opt.rotary_interleaved, opt.dtype);
        host_ = host_.appended(k_new, v_new, opt.rotary_dim ? &rotary_ : nullptr, opt.causal || opt.mods.windowed());
      } else {
        fill_uniform(k_new_->get(), new_elems(), opt.dtype, opt.seed + 3);
        fill_uniform(v_new_->get(), new_elems(), opt.dtype, opt.seed + 4);
      }
      p_.k_new = k_new_->get();
      p_.v_new = v_new_->get();
      if (opt.rotary_dim) {  // the tables: position p's angles in row p, for every position of the room
        if (rotary_.dim == 0) rotary_ = rotary_tables(s_.seqlen_cache, opt.rotary_dim, opt.rotary_interleaved, opt.dtype);
        rot_cos_.emplace(rotary_.cos.size(), opt.dtype);
        rot_sin_.emplace(rotary_.sin.size(), opt.dtype);
        rot_cos_->upload(rotary_.cos);
        rot_sin_->upload(rotary_.sin);
        p_.rotary_cos = rot_cos_->get();
        p_.rotary_sin = rot_sin_->get();
        p_.rotary_dim = opt.rotary_dim;
        p_.rotary_len = rotary_.len;
        p_.rotary_interleaved = opt.rotary_interleaved;
      }
    }
    o_->poison();  // NaN: an element the kernels do not write fails the check
    lse_->poison();
    p_.q = q_->get();
    p_.k_cache = k_->get();
    p_.v_cache = v_->get();
    p_.cache_seqlens = seqlens_->get();
    if (opt.page_size) {
      p_.block_table = table_->get();
      p_.page_size = opt.page_size;
      p_.max_blocks_per_seq = host_.max_blocks_per_seq;
    }
    p_.cache_len = opt.cache_len;
    p_.o = o_->get();
    p_.lse = lse_->get();
    p_.dtype = opt.dtype;
    p_.shape = s_;
    p_.scale = default_scale(s_.d);
    p_.causal = opt.causal;
    host_.mods = opt.mods;  // the reference applies them as the kernels do
    p_.mods.window_left = opt.mods.window_left;
    p_.mods.window_right = opt.mods.window_right;
    p_.mods.softcap = opt.mods.softcap;
    if (!opt.mods.alibi_slopes.empty()) {
      slopes_.emplace(opt.mods.alibi_slopes.size());
      slopes_->upload(opt.mods.alibi_slopes.data(), opt.mods.alibi_slopes.size());
      p_.mods.alibi_slopes = slopes_->get();
      p_.mods.alibi_batch_stride = opt.mods.alibi_batch_stride;
    }
    p_.num_splits = splits_;
    p_.workspace = ws_->get();
  }
  void forward() { decode_forward(p_); }
  // O and LSE against the fp64 reference (after a forward()).
  CheckReport check() {
    FS_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> got_o = o_->download();
    std::vector<float> got_lse(static_cast<std::size_t>(s_.rows()));
    lse_->download(got_lse.data(), got_lse.size());
    return verify_decode(host_, p_.scale, opt_.causal, got_o.data(), got_lse.data(), opt_.seed);
  }
  Timing time(int reps, const DeviceInfo& dev) {
    L2Flusher flusher(dev.l2_bytes);
    return time_gpu([&] { decode_forward(p_); }, p_.stream, 3, reps, &flusher);
  }
  // The bytes a run must move: the cache's rows the sequences hold (K and V) and q read, O and LSE
  // written; and its FLOPs (S = qKᵀ and O = PV: 4·d per query row and key).
  double bytes() const {
    const double elem = double(dtype_bytes(opt_.dtype));
    // With --append, the keys are cache_len + n, and the append reads and writes the new rows once more.
    return 2.0 * elem * double(s_.batch) * keys_ * s_.heads_kv * s_.d + 2.0 * elem * double(s_.q_elems()) +
           sizeof(float) * double(s_.rows()) + (opt_.append ? 4.0 * elem * double(new_elems()) : 0.0) +
           (opt_.rotary_dim ? 2.0 * elem * double(s_.q_elems()) : 0.0);  // the turned q, written and read
  }
  double flops() const { return 4.0 * double(s_.rows()) * keys_ * s_.d; }
  // One more forward, traced (--trace): its trace written to `path` and validated (the events' bytes
  // against decode_io's count, the cache's slots against the block table, every output stored).
  trace::ValidationReport trace_to(const std::string& path, const DeviceInfo& dev) {
    const DecodeTraceCase c = trace_case();
    trace::DeviceSink sink(decode_event_cap(c));
    DecodeParams p = p_;
    p.trace = &sink;
    nvtx_tool::start();
    try {
      {
        FS_NVTX_RANGE("decode_forward (traced)");
        decode_forward(p);
      }
      FS_CUDA_CHECK(cudaStreamSynchronize(p.stream));
    } catch (...) {
      nvtx_tool::stop();
      throw;
    }
    trace::Trace t = trace_of_run(dev, sink, nvtx_tool::stop());
    describe_decode(t.meta, c);
    using trace::Tensor;
    std::vector<Tensor> io = {Tensor::Q, Tensor::K, Tensor::V, Tensor::O, Tensor::LSE};
    if (opt_.append) {
      io.push_back(Tensor::KNew);
      io.push_back(Tensor::VNew);
    }
    list_tensors(t, io);
    trace::write_trace(t, path);
    return trace::validate(t);
  }
  int splits() const { return splits_; }
  std::size_t workspace_bytes() const { return ws_bytes_; }
  std::uint64_t device_bytes() const { return device_bytes_; }

 private:
  std::int64_t new_elems() const { return std::int64_t(s_.batch) * s_.new_tokens * s_.heads_kv * s_.d; }  // k_new's
  // The run as its trace describes it.
  DecodeTraceCase trace_case() const {
    DecodeTraceCase c;
    c.io.shape = s_;
    c.io.elem_bytes = static_cast<int>(dtype_bytes(opt_.dtype));
    c.io.base = lens_;
    c.io.append = opt_.append;
    c.io.causal = opt_.causal;
    c.io.window_left = opt_.mods.window_left;
    c.io.window_right = opt_.mods.window_right;
    c.io.splits = splits_;
    c.io.tile_keys = decode_tile_keys(s_.d);
    c.dtype = opt_.dtype;
    c.scale = p_.scale;
    c.page_size = opt_.page_size;
    c.slots = static_cast<int>(cache_elems(opt_) / (std::int64_t(s_.heads_kv) * s_.d));
    c.block_table = host_.block_table;
    return c;
  }

  Options opt_;
  DecodeShape s_;
  std::vector<std::int32_t> lens_;  // before the append: the kernels add the new tokens themselves
  int keys_;                        // keys attended per sequence: cache_len, + n with --append
  int splits_;
  std::size_t ws_bytes_;
  std::uint64_t device_bytes_ = 0;
  DecodeHost host_;
  RotaryTables rotary_;  // with --rotary-dim
  std::optional<DeviceTensor> q_, k_, v_, o_, k_new_, v_new_, rot_cos_, rot_sin_;
  std::optional<DeviceBuffer<float>> lse_, ws_, slopes_;
  std::optional<DeviceBuffer<std::int32_t>> seqlens_, table_;
  DecodeParams p_;
};

// The rows of decoding benchmarks: this program's, and PyTorch's that docs/benchmarks/decode_bench.py
// writes beside them on the same shapes. bytes: what the run must move (DecodeRun::bytes), the
// same count for every implementation, so that GB/s compare as times do.
constexpr const char* kDecodeCsvHeader =
    "gpu,impl,dtype,batch,heads,heads_kv,cache_len,new_tokens,d,causal,page_size,append,splits,split_rule,median_us,"
    "bytes,gbps,commit,date";

void append_decode_row(const Options& o, const DecodeRun& r, const Timing& t, const DeviceInfo& dev) {
  const DecodeShape& s = o.shape;
  std::ostringstream row;
  row << dev.name << ",step10_decode," << dtype_name(o.dtype) << ',' << s.batch << ',' << s.heads << ',' << s.heads_kv
      << ',' << o.cache_len << ',' << s.new_tokens << ',' << s.d << ',' << int(o.causal) << ',' << o.page_size << ','
      << int(o.append) << ',' << r.splits() << ',' << int(o.splits == 0) << ',' << std::fixed << std::setprecision(2) << t.median_ms * 1e3 << ','
      << std::setprecision(0) << r.bytes() << ',' << std::setprecision(1) << r.bytes() / (t.median_ms * 1e-3) / 1e9
      << ',' << build_commit() << ',' << today_utc() << '\n';
  std::error_code ec;
  const bool fresh = !std::filesystem::exists(o.csv, ec) || std::filesystem::file_size(o.csv, ec) == 0;
  append_file(o.csv, (fresh ? std::string(kDecodeCsvHeader) + '\n' : std::string()) + row.str());
}

int run(const Options& opt, const std::string& prog) {
  const DecodeShape& s = opt.shape;
  if (opt.check) {  // before asking for a GPU: a problem too large for the host is refused on any machine
    const std::uint64_t host_bytes = sizeof(float) * std::uint64_t(2 * s.q_elems() + 2 * cache_elems(opt) + s.rows());
    require_host_memory(host_bytes, "this problem's host copies (--check; without it the inputs are drawn on the GPU)");
  }
  if (std::string why = gpu_unavailable_reason(); !why.empty()) {
    std::cerr << prog << ": " << why << " This program needs a CUDA GPU.\n";
    return kExitNoGpu;
  }
  const DeviceInfo dev = query_device();
  DecodeRun r(opt, dev);
  std::cout << "step 10_decode (decoding: split-KV on the tensor cores)\n  batch=" << s.batch << " heads=" << s.heads
            << " heads_kv=" << s.heads_kv << " cache_len=" << opt.cache_len << " new_tokens=" << s.new_tokens
            << " d=" << s.d << " " << dtype_name(opt.dtype) << (opt.causal ? " causal" : "") << " on " << dev.name << "\n"
            << "  cache "
            << (opt.page_size ? "paged: pages of " + std::to_string(opt.page_size) + " keys in shuffled order" : "contiguous")
            << (opt.append ? ", the new tokens' k, v appended before attending" : "")
            << (opt.rotary_dim ? ", rotary embedding of " + std::to_string(opt.rotary_dim) + " columns" +
                                     (opt.rotary_interleaved ? " (interleaved)" : "")
                               : "")
            << "\n"
            << "  splits " << r.splits()
            << (opt.splits > 0 ? " (--splits)" : " (the split rule, " + std::to_string(dev.sm_count) + " SMs)")
            << ", CTAs " << std::int64_t(r.splits()) * s.heads_kv * s.row_blocks() * s.batch << ", workspace "
            << shown_bytes(double(r.workspace_bytes())) << "\n";
  r.forward();
  bool ok = true;
  if (opt.check) {
    const CheckReport report = r.check();
    std::cout << report.summary();
    ok = report.pass();
  }
  if (opt.reps > 0) {
    const Timing t = r.time(opt.reps, dev);
    std::cout << std::fixed << std::setprecision(1) << "  time: median " << t.median_ms * 1e3 << " us (min "
              << t.min_ms * 1e3 << ", max " << t.max_ms * 1e3 << ", " << t.reps << " runs, L2 flushed); "
              << shown_bytes(r.bytes()) << " of K, V, q and O: " << std::setprecision(0)
              << r.bytes() / (t.median_ms * 1e-3) / 1e9 << " GB/s\n" << std::defaultfloat;
    if (!opt.csv.empty()) append_decode_row(opt, r, t, dev);
  }
  if (!opt.trace.empty()) {
    const trace::ValidationReport report = r.trace_to(opt.trace, dev);
    std::cout << "trace fwd: " << opt.trace << ": " << report.summary() << "\n";
    if (!report.ok()) {
      std::cout << "  TRACE INVALID: " << report.errors.front() << "\n";
      ok = false;
    }
    if (!nvtx_tool::attached())
      std::cout << "  NVTX is attached to another tool (NVTX_INJECTION64_PATH): the trace has no host ranges\n";
  }
  if (!ok) {
    std::cout << "CHECK FAILED\n";
    return kExitCheckFailed;
  }
  return kExitOk;
}

// --tour: this step's row of the tour (common/tour.hpp's options and columns), under the header the
// steps before it printed (--no-header, as bash cmake/quickstart.sh runs it). Without a GPU it says
// so in one line, or with --no-header prints nothing, and exits 0, as every step's tour does.
int tour(int argc, char** argv, const std::string& prog) {
  long long B = 2, H = 16, N = 2048, d = 64, reps = 10;
  bool causal = false, no_header = false;
  std::string dtype, trace_dir, csv;
  CLI::App app{"flashsteps tour: step 10_decode at one size, checked against the fp64 reference and timed: one new "
               "token per sequence against a cache of N keys, H / 4 K/V heads",
               prog + " --tour"};
  app.add_option("-b,--batch", B, "batch size")->transform(decimal<long long>())->capture_default_str();
  app.add_option("--heads", H, "query heads (a multiple of 4: H / 4 K/V heads; else H)")
      ->transform(decimal<long long>())->capture_default_str();
  app.add_option("-n,--seq", N, "keys in every sequence's cache")->transform(decimal<long long>())->capture_default_str();
  app.add_option("-d,--dim", d, "head dimension: 64, 128 or 256")->transform(decimal<long long>())->capture_default_str();
  app.add_flag("--causal", causal, "causal mask (one new token sees the whole cache either way)");
  app.add_option("--dtype", dtype, "bf16 or fp16 (fp32 or none: bf16, this step's first type)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  app.add_option("--reps", reps, "timed runs")->transform(decimal<long long>())->capture_default_str();
  app.add_option("--csv", csv, "taken for the tour's sake: step 10's row is not written (its columns are not the "
                               "other steps')");
  app.add_option("--trace-dir", trace_dir, "also record a traced run of this row's problem into DIR/10_decode.fwd.json "
                                           "(d = 64 only), for the visualizer")->type_name("DIR");
  app.add_flag("--no-header", no_header, "the row alone, under an earlier run's header; without a GPU, nothing");
  if (!parse_command_line(app, argc, argv)) return kExitOk;
  Options opt;
  opt.shape.batch = size_option("--batch", B, 65535);
  opt.shape.heads = size_option("--heads", H, kMaxHeads);
  opt.shape.heads_kv = opt.shape.heads % 4 == 0 ? opt.shape.heads / 4 : opt.shape.heads;
  opt.shape.new_tokens = 1;
  opt.shape.d = size_option("--dim", d, 256);
  if (N < 1 || N > kMaxCacheLen) throw InputError("--seq must be in 1.." + std::to_string(kMaxCacheLen));
  if (reps < 1 || reps > kMaxReps) throw InputError("--reps must be in 1.." + std::to_string(kMaxReps));
  opt.cache_len = static_cast<int>(N);
  opt.shape.seqlen_cache = opt.cache_len;
  opt.causal = causal;
  opt.reps = static_cast<int>(reps);
  opt.dtype = dtype == "fp16" ? DType::fp16 : DType::bf16;
  if (std::string why = decode_unsupported(opt.shape, opt.dtype, 1); !why.empty()) throw InputError(why);

  if (std::string why = gpu_unavailable_reason(); !why.empty()) {
    if (!no_header) std::cout << prog << ": " << why << " Step 10's tour row needs a CUDA GPU.\n";
    return kExitOk;
  }
  const DeviceInfo dev = query_device();
  const std::string name = "10_decode (1 token, Hkv " + std::to_string(opt.shape.heads_kv) + ")";
  if (!no_header)
    std::printf("flashsteps tour on %s: B=%d H=%d N=%d d=%d%s, median of %d runs, L2 flushed\n%-30s %-5s %-4s %-5s %10s "
                "%9s %12s %12s %10s\n",
                dev.name.c_str(), opt.shape.batch, opt.shape.heads, opt.cache_len, opt.shape.d, causal ? " causal" : "",
                opt.reps, "step", "type", "pass", "check", "time ms", "TFLOP/s", "device mem", "HBM model", "max err");
  try {
    DecodeRun r(opt, dev);
    r.forward();
    const CheckReport report = r.check();
    const Timing t = r.time(opt.reps, dev);
    std::printf("%-30s %-5s %-4s %-5s %10.3f %9.2f %12s %12s %10.2e\n", name.c_str(), dtype_name(opt.dtype), "fwd",
                report.pass() ? "ok" : "FAIL", t.median_ms, r.flops() / (t.median_ms * 1e-3) / 1e12,
                shown_bytes(double(r.device_bytes())).c_str(), shown_bytes(r.bytes()).c_str(), report.max_err());
    if (!report.pass()) std::printf("%s", report.summary().c_str());
    bool trace_ok = true;
    if (!trace_dir.empty()) {
      if (std::string why = traced_unsupported(opt.shape, 0); !why.empty()) {
        std::printf("trace 10_decode: skipped: %s\n", why.c_str());
      } else {
        std::error_code ec;
        std::filesystem::create_directories(trace_dir, ec);
        if (ec) throw InputError("--trace-dir " + trace_dir + ": cannot create the folder (" + ec.message() + ")");
        const std::string path = trace_dir + "/10_decode.fwd.json";
        const trace::ValidationReport v = r.trace_to(path, dev);
        trace_ok = v.ok();
        std::printf("trace 10_decode: %s: %s%s\n", path.c_str(), v.ok() ? "" : "INVALID: ", v.summary().c_str());
      }
    }
    std::fflush(stdout);
    return report.pass() && trace_ok ? kExitOk : kExitCheckFailed;
  } catch (const ResourceError& e) {
    std::printf("%-30s skipped: %s\n", name.c_str(), e.what());
    return kExitOk;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string prog = std::filesystem::path(argc > 0 ? argv[0] : "step10_decode").filename().string();
  return run_guarded(prog, [&]() -> int {  // exceptions to one line and the exit codes (common/driver.hpp)
    if (argc > 1 && std::string(argv[1]) == "--tour") return tour(argc - 1, argv + 1, prog);
    const auto opt = parse(argc, argv);
    return opt ? run(*opt, prog) : kExitOk;
  });
}
