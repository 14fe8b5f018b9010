// Step 10 program: decoding. n new tokens per sequence against a KV cache (flash_attn_with_kvcache's
// layouts, decode.hpp), the keys split among CTAs by the split rule (split_rule.hpp) or --splits,
// checked against the fp64 reference (--check) and timed (--reps). Run with --help for the options.
//
// Its own driver, not the table of steps (steps/registry.cpp) that the tour, the bench and the
// tests iterate over: those hand every step common/problem.hpp's FwdParams, (B, H, N, d) tensors and
// one length for all; a KV cache has other layouts, a length per sequence, and (phase 2) pages and
// appends, which belong in this step's own struct (DecodeParams), not in FwdParams.
//
// Exit codes as every step program's (common/errors.hpp): 0 ok, 1 a check failed, 2 bad input
// (one line), 3 no GPU or not enough GPU memory. Everything that needs no GPU is decided first.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/buffer.hpp"
#include "common/check.hpp"
#include "common/cli_numbers.hpp"
#include "common/device.hpp"
#include "common/errors.hpp"
#include "common/host_memory.hpp"
#include "common/problem.hpp"
#include "common/timing.hpp"
#include "steps/10_decode/decode.hpp"
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
  int cache_len = 4096;  // keys of every sequence (also the cache's room)
  DType dtype = DType::bf16;
  int splits = 0;        // 0: the rule
  bool causal = false, check = false;
  int reps = 0;          // timed runs; 0: none
  std::uint64_t seed = 1;
};

// The command line, checked: InputError (one line, exit 2) for anything the kernels do not take.
std::optional<Options> parse(int argc, char** argv) {
  Options o;
  long long B = 1, H = 32, Hkv = 8, L = o.cache_len, n = 1, d = 128, splits = 0, reps = 0;
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
  app.add_option("--new-tokens", n, "query tokens per sequence, already in the cache (1..16)")
      ->transform(decimal<long long>())->capture_default_str();
  app.add_option("-d,--dim", d, "head dimension d: 64, 128 or 256")->transform(decimal<long long>())->capture_default_str();
  app.add_option("--dtype", dtype, "element type of q, the cache and O (LSE is fp32)")
      ->check(CLI::IsMember({"bf16", "fp16"}))->capture_default_str();
  app.add_option("--splits", splits, "splits of every sequence's keys (0: the split rule, split_rule.hpp)")
      ->transform(decimal<long long>())->capture_default_str();
  app.add_flag("--causal", o.causal, "token t of n sees keys up to cache_len - n + t (the bottom-right corner)");
  app.add_flag("--check", o.check, "compare O and LSE against the fp64 CPU reference");
  app.add_option("--reps", reps, "timed runs, L2 flushed before each, median reported (0: not timed)")
      ->transform(decimal<long long>())->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the random inputs")->transform(decimal<std::uint64_t>())->capture_default_str();
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
  o.shape.seqlen_cache = std::max(1, o.cache_len);  // an empty cache still has a row of room
  o.splits = static_cast<int>(splits);
  o.reps = static_cast<int>(reps);
  o.dtype = *parse_dtype(dtype);
  if (std::string why = decode_unsupported(o.shape, o.dtype, std::max(1, o.splits)); !why.empty()) throw InputError(why);
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

int run(const Options& opt, const std::string& prog) {
  const DecodeShape& s = opt.shape;
  const std::size_t elem = dtype_bytes(opt.dtype);
  // The host's copies: q, k, v and O as floats, and the reference's rows (sampled).
  const std::uint64_t host_bytes = sizeof(float) * std::uint64_t(2 * s.q_elems() + 2 * s.cache_elems() + s.rows());
  require_host_memory(host_bytes, "this problem's host copies");
  if (std::string why = gpu_unavailable_reason(); !why.empty()) {
    std::cerr << prog << ": " << why << " This program needs a CUDA GPU.\n";
    return kExitNoGpu;
  }
  const DeviceInfo dev = query_device();
  const int splits =
      opt.splits > 0 ? opt.splits : num_splits(s.batch, s.heads_kv, opt.cache_len, dev.sm_count, s.row_blocks());
  const std::size_t ws_bytes = decode_workspace_bytes(s, splits);
  const std::uint64_t dev_bytes = elem * std::uint64_t(2 * s.q_elems() + 2 * s.cache_elems()) + sizeof(float) * s.rows() +
                                  sizeof(std::int32_t) * s.batch + ws_bytes;
  if (dev_bytes > dev.free_bytes)
    throw ResourceError("this problem needs " + shown_bytes(double(dev_bytes)) + " of GPU memory; " + dev.name + " has " +
                        shown_bytes(double(dev.free_bytes)) + " free");

  std::cout << "step 10_decode (decoding: split-KV on the tensor cores)\n  batch=" << s.batch << " heads=" << s.heads
            << " heads_kv=" << s.heads_kv << " cache_len=" << opt.cache_len << " new_tokens=" << s.new_tokens
            << " d=" << s.d << " " << dtype_name(opt.dtype) << (opt.causal ? " causal" : "") << " on " << dev.name << "\n"
            << "  splits " << splits
            << (opt.splits > 0 ? " (--splits)" : " (the split rule, " + std::to_string(dev.sm_count) + " SMs)")
            << ", CTAs " << std::int64_t(splits) * s.heads_kv * s.row_blocks() * s.batch << ", workspace "
            << shown_bytes(double(ws_bytes)) << "\n";

  const std::vector<std::int32_t> lens(static_cast<std::size_t>(s.batch), opt.cache_len);
  const DecodeHost host = random_decode_problem(s, lens, opt.dtype, opt.seed);
  DeviceTensor q(host.q.size(), opt.dtype), k(host.k.size(), opt.dtype), v(host.v.size(), opt.dtype),
      o(host.q.size(), opt.dtype);
  DeviceBuffer<float> lse(static_cast<std::size_t>(s.rows()));
  DeviceBuffer<float> ws(ws_bytes / sizeof(float));
  DeviceBuffer<std::int32_t> seqlens(lens.size());
  q.upload(host.q);
  k.upload(host.k);
  v.upload(host.v);
  seqlens.upload(lens.data(), lens.size());
  o.poison();  // NaN: an element the kernels do not write fails the check
  lse.poison();

  DecodeParams p;
  p.q = q.get();
  p.k_cache = k.get();
  p.v_cache = v.get();
  p.cache_seqlens = seqlens.get();
  p.cache_len = opt.cache_len;
  p.o = o.get();
  p.lse = lse.get();
  p.dtype = opt.dtype;
  p.shape = s;
  p.scale = default_scale(s.d);
  p.causal = opt.causal;
  p.num_splits = splits;
  p.workspace = ws.get();
  decode_forward(p);
  FS_CUDA_CHECK(cudaDeviceSynchronize());

  bool ok = true;
  if (opt.check) {
    const std::vector<float> got_o = o.download();
    std::vector<float> got_lse(static_cast<std::size_t>(s.rows()));
    lse.download(got_lse.data(), got_lse.size());
    const CheckReport report = verify_decode(host, p.scale, opt.causal, got_o.data(), got_lse.data(), opt.seed);
    std::cout << report.summary();
    ok = report.pass();
  }
  if (opt.reps > 0) {
    L2Flusher flusher(dev.l2_bytes);
    const Timing t = time_gpu([&] { decode_forward(p); }, p.stream, 3, opt.reps, &flusher);
    // The bytes a run must read: the cache's rows the sequences hold (K and V), q; it writes O and LSE.
    const double cache_bytes = 2.0 * double(elem) * double(s.batch) * opt.cache_len * s.heads_kv * s.d;
    const double bytes = cache_bytes + 2.0 * double(elem) * double(s.q_elems()) + sizeof(float) * double(s.rows());
    std::cout << std::fixed << std::setprecision(1) << "  time: median " << t.median_ms * 1e3 << " us (min "
              << t.min_ms * 1e3 << ", max " << t.max_ms * 1e3 << ", " << t.reps << " runs, L2 flushed); "
              << shown_bytes(bytes) << " of K, V, q and O: " << std::setprecision(0) << bytes / (t.median_ms * 1e-3) / 1e9
              << " GB/s\n" << std::defaultfloat;
  }
  if (!ok) {
    std::cout << "CHECK FAILED\n";
    return kExitCheckFailed;
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string prog = std::filesystem::path(argc > 0 ? argv[0] : "step10_decode").filename().string();
  try {
    const std::optional<Options> opt = parse(argc, argv);
    if (!opt) return kExitOk;
    return run(*opt, prog);
  } catch (const InputError& e) {
    std::cerr << prog << ": error: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const ResourceError& e) {
    std::cerr << prog << ": " << e.what() << "\n";
    return kExitNoGpu;
  } catch (const CudaError& e) {
    std::cerr << prog << ": CUDA error: " << e.what() << "\n";
    return e.code() == cudaErrorMemoryAllocation ? kExitNoGpu : kExitCheckFailed;
  } catch (const std::bad_alloc&) {
    std::cerr << prog << ": error: not enough host memory for this problem\n";
    return kExitBadInput;
  } catch (const std::exception& e) {  // none is expected; one line rather than an abort
    std::cerr << prog << ": internal error: " << e.what() << "\n";
    return kExitCheckFailed;
  }
}
