#include "common/driver.hpp"

#include <filesystem>
#include <iomanip>
#include <iostream>
#include <new>
#include <optional>
#include <sstream>

#include "common/errors.hpp"
#include "common/npy.hpp"
#include "common/recorder/nvtx.hpp"
#include "common/tour.hpp"
#include "common/traced_run.hpp"
#include "common/varlen.hpp"

namespace fs {

bool CaseReport::pass() const {
  for (const auto& p : passes)
    if (p.check && !p.check->pass()) return false;
  return true;
}

namespace {

void require_fits(const StepInfo& step, const Shape& s, const PassSettings& settings, bool backward,
                  const DeviceInfo& dev) {
  const std::size_t need = device_bytes_needed(step, s, settings, backward);
  // Leave room for the L2 flush buffer and the CUDA context's own allocations.
  const std::size_t slack = 2 * dev.l2_bytes + (std::size_t(256) << 20);
  if (need + slack <= dev.free_bytes) return;
  const std::size_t ws = step.fwd_workspace(s, settings) + (backward ? step.bwd_workspace(s, settings) : 0);
  std::ostringstream msg;
  msg << "step " << step.id << " needs " << format_bytes(double(need)) << " of GPU memory for B=" << s.B
      << " H=" << s.H << " N=" << s.N << " d=" << s.d;
  if (ws) msg << " (" << format_bytes(double(ws)) << " of it workspace)";
  msg << ", but " << dev.name << " has " << format_bytes(double(dev.free_bytes)) << " free";
  if (!step.memory_note.empty()) msg << ". " << step.memory_note;
  throw ResourceError(msg.str());
}

}  // namespace

CaseReport run_case(const RunPlan& plan, const HostProblem& problem, const DeviceInfo& dev) {
  const StepInfo& step = plan.step();
  const Options& opt = plan.options();
  const Shape& s = problem.shape;
  const PassSettings settings = plan.settings();
  require_fits(step, s, settings, opt.backward, dev);
  BlockMaskView view;
  if (const BlockMask* mask = plan.mask()) view = {mask->dense.data(), mask->block_r, mask->block_c, mask->Tc};

  memory::reset_peak();
  DeviceRun run(step, problem, settings, opt.backward);
  run.forward();
  run.sync();
  // A clustered step is checked against the attention of the clusters it used.
  std::optional<SmyrfClusters> clusters;
  if (step.clustered) clusters = run.clusters();
  AttnOptions attn{settings.scale,  settings.causal, settings.dropout, plan.mask() ? &view : nullptr,
                   settings.dtype, clusters ? &*clusters : nullptr};
  attn.kv_heads = s.Hkv;
  attn.kv_len = s.Nk;
  attn.e4m3 = step.rounds_to_e4m3(settings.variant);
  const ScoreFeatures& features = settings.features;
  attn.window_left = features.window_left;
  attn.window_right = features.window_right;
  attn.softcap = features.softcap;
  if (!features.alibi_slopes.empty()) attn.alibi_slopes = features.alibi_slopes.data();
  attn.alibi_batch_stride = features.alibi_batch_stride;
  if (settings.packed.on()) {
    attn.cu_seqlens_q = &settings.packed.cu_q;
    attn.cu_seqlens_k = &settings.packed.cu_k;
  }
  PassReport fwd;
  fwd.pass = "fwd";
  fwd.io = plan.io("fwd");
  fwd.density = plan.density();
  fwd.peak_mem_bytes = static_cast<std::int64_t>(memory::peak_bytes());
  PassReport bwd;
  bwd.pass = "bwd";
  if (opt.backward) {
    run.backward();
    run.sync();
    bwd.io = plan.io("bwd");
    bwd.density = fwd.density;
    bwd.peak_mem_bytes = static_cast<std::int64_t>(memory::peak_bytes());
  }

  if (opt.check) {
    FS_NVTX_RANGE("check against the fp64 reference");
    const auto o = run.o(), lse = run.lse();
    fwd.check = verify_forward(s, attn, problem.q.data(), problem.k.data(), problem.v.data(),
                               o.data(), lse.data(), opt.seed);
    // Clusters hashed on the GPU: a sort of the fp64 hashes? (Given ones were checked when read.)
    if (clusters && !settings.clusters)
      fwd.check->tensors.push_back(
          judge_orders(smyrf_check_orders(s, problem.q.data(), problem.k.data(), settings.smyrf, *clusters)));
    if (opt.backward) {
      const auto dq = run.dq(), dk = run.dk(), dv = run.dv();
      bwd.check = verify_backward(s, attn, problem.q.data(), problem.k.data(), problem.v.data(),
                                  problem.dout.data(), dq.data(), dk.data(), dv.data(), opt.seed);
    }
  }

  if (!opt.save_dir.empty()) {
    FS_NVTX_RANGE("save outputs");
    // The plan checked the folder; what changed since (or a check cannot see) is one line too.
    std::error_code ec;
    std::filesystem::create_directories(opt.save_dir, ec);
    if (ec) throw InputError("--save " + opt.save_dir + ": cannot create the folder (" + ec.message() + ")");
    const std::vector<std::int64_t> t{s.B, s.H, s.N, s.d}, r{s.B, s.H, s.N}, kv{s.B, s.kv_heads(), s.keys(), s.d};
    write_npy_as(opt.save_dir + "/o.npy", opt.dtype, run.o().data(), t);
    write_npy(opt.save_dir + "/lse.npy", run.lse().data(), r);
    if (opt.backward) {
      write_npy_as(opt.save_dir + "/dq.npy", opt.dtype, run.dq().data(), t);
      write_npy_as(opt.save_dir + "/dk.npy", opt.dtype, run.dk().data(), kv);
      write_npy_as(opt.save_dir + "/dv.npy", opt.dtype, run.dv().data(), kv);
    }
    if (plan.mask()) write_block_mask(opt.save_dir + "/mask.npy", *plan.mask());
    if (clusters) write_smyrf_clusters(opt.save_dir, s, *clusters);
    if (settings.packed.on()) write_cu_seqlens_dir(opt.save_dir, settings.packed);
  }

  std::vector<PassReport> parts;  // fwd_prep, fwd_kernel
  if (opt.bench) {
    FS_NVTX_RANGE("benchmark");
    L2Flusher flusher(dev.l2_bytes);
    const FwdParams fp = run.fwd_params();
    fwd.timing = time_gpu([&] { step.forward(fp); }, fp.stream, opt.warmup, opt.reps, &flusher);
    // Block-sparse: the FLOPs of the kept blocks, the dense count × the mask's density (packed
    // sequences: the sum of each one's count).
    const double kept = fwd.density;
    fwd.tflops = tflops(kept * plan.flops("fwd"), fwd.timing->median_ms);
    if (step.rounds_to_e4m3(settings.variant)) {  // the quantizer alone, then the kernel alone on its output
      IoCount prep_io;
      if (step.untraced_io)
        for (const UntracedIo& u : step.untraced_io(s, settings, "fwd")) {
          prep_io.read_bytes += u.read_bytes;
          prep_io.write_bytes += u.write_bytes;
        }
      for (const FwdPart part : {FwdPart::kPrepare, FwdPart::kKernel}) {
        FwdParams pp = fp;
        pp.part = part;
        PassReport r;
        const bool kernel = part == FwdPart::kKernel;
        r.pass = kernel ? "fwd_kernel" : "fwd_prep";
        r.io = kernel ? IoCount{fwd.io.read_bytes - prep_io.read_bytes, fwd.io.write_bytes - prep_io.write_bytes} : prep_io;
        r.peak_mem_bytes = fwd.peak_mem_bytes;
        r.timing = time_gpu([&] { step.forward(pp); }, pp.stream, opt.warmup, opt.reps, &flusher);
        if (kernel) r.tflops = tflops(kept * plan.flops("fwd"), r.timing->median_ms);
        parts.push_back(r);
      }
    }
    if (opt.backward) {
      const BwdParams bp = run.bwd_params();
      bwd.timing = time_gpu([&] { step.backward(bp); }, bp.stream, opt.warmup, opt.reps, &flusher);
      bwd.tflops = tflops(kept * plan.flops("bwd"), bwd.timing->median_ms);
    }
  }

  CaseReport report;
  report.passes.push_back(fwd);
  report.passes.insert(report.passes.end(), parts.begin(), parts.end());
  if (opt.backward) report.passes.push_back(bwd);
  return report;
}

ResultRow result_row(const RunPlan& plan, const PassReport& pass, const DeviceInfo& dev) {
  const Options& opt = plan.options();
  ResultRow row;
  row.gpu = dev.name;
  row.step = plan.label();
  row.pass = pass.pass;
  row.dtype = dtype_name(opt.dtype);
  row.B = opt.shape.B;
  row.H = opt.shape.H;
  row.N = opt.shape.N;
  row.d = opt.shape.d;
  row.causal = opt.causal;
  row.dropout = opt.dropout;
  if (!plan.mask_label().empty()) {
    row.mask = plan.mask_label();
    row.density = pass.density;
  }
  row.median_ms = pass.timing ? pass.timing->median_ms : 0;
  row.tflops = pass.tflops;
  row.peak_mem_bytes = pass.peak_mem_bytes;
  row.hbm_bytes_model = pass.io.total();
  if (pass.check) row.max_err = pass.check->max_err();
  return row;
}

namespace {

int run_program(const StepInfo& step, Options opt, const std::string& prog) {
  HostProblem problem;
  if (!opt.load_dir.empty()) {
    problem = load_problem(opt.load_dir, opt.backward, opt.dtype);
    opt.shape = problem.shape;
    if (has_cu_seqlens(opt.load_dir)) opt.packed = read_cu_seqlens_dir(opt.load_dir);
  }
  // Decided once, with every check that needs no GPU: bad input is exit code 2, GPU or not.
  const RunPlan plan(step, opt);
  if (std::string why = gpu_unavailable_reason(); !why.empty()) {
    std::cerr << prog << ": " << why << " This program needs a CUDA GPU.\n";
    return kExitNoGpu;
  }
  const DeviceInfo dev = query_device();
  if (opt.load_dir.empty()) problem = random_problem(opt.shape, opt.seed, opt.backward, opt.dtype);

  const Shape& s = opt.shape;
  std::cout << "step " << step.id << " (" << step.title << ")";
  if (step.variants.size() > 1) std::cout << " [" << step.variants[opt.variant] << "]";
  std::cout << "\n  B=" << s.B << " H=" << s.H << " N=" << s.N << " d=" << s.d;
  if (s.keys() != s.N) std::cout << " Nk=" << s.keys();
  if (s.kv_heads() != s.H) std::cout << " Hkv=" << s.kv_heads();
  std::cout
            << (opt.causal ? " causal" : "") << " scale=" << opt.effective_scale();
  if (opt.dtype != DType::fp32) std::cout << " " << dtype_name(opt.dtype);
  if (opt.dropout > 0.f) std::cout << " dropout=" << opt.dropout;
  std::cout << " on " << dev.name << "\n";
  if (problem.rounded > 0)
    std::cout << "  " << problem.rounded << " input values were not " << dtype_name(opt.dtype)
              << " numbers: each was rounded to the nearest one\n";
  if (plan.mask()) std::cout << "  block mask " << plan.mask_label() << ": " << describe(*plan.mask()) << "\n";
  if (opt.packed.on()) std::cout << "  packed: " << describe(opt.packed) << "\n";
  if (const ScoreFeatures& f = plan.settings().features; f.on()) {
    std::cout << "  scores:";
    if (f.windowed())
      std::cout << " window (" << f.window_left << ", " << f.window_right << ") keeps " << std::setprecision(3)
                << 100 * plan.density() << std::defaultfloat << "% of the " << (opt.causal ? "causal " : "")
                << "scores;";
    if (f.softcap > 0.f) std::cout << " softcap " << f.softcap << ";";
    if (!f.alibi_slopes.empty())
      std::cout << " ALiBi, " << (opt.alibi_path.empty() ? "the standard slopes" : "slopes from " + opt.alibi_path)
                << (f.alibi_batch_stride ? ", a row per " + std::string(opt.packed.on() ? "sequence" : "batch") : "")
                << " (head 0: " << f.alibi_slopes.front() << ")";
    std::cout << "\n";
  }
  if (step.clustered) {
    const SmyrfParams& c = plan.settings().smyrf;
    std::cout << "  SMYRF: " << c.hashes << (c.hashes == 1 ? " round" : " rounds") << " of clusters of " << c.q_cluster
              << " queries × " << c.k_cluster << " keys, ";
    if (plan.given_clusters())
      std::cout << "the clusters saved in " << opt.load_dir;
    else
      std::cout << "hashed on the GPU (r = " << c.r << ", seed " << c.seed << ")";
    std::cout << "; " << std::setprecision(3) << 100 * plan.density() << std::defaultfloat
              << "% of the scores computed\n";
  }

  const CaseReport report = run_case(plan, problem, dev);
  for (const auto& p : report.passes) {
    std::cout << p.pass << ": HBM model " << format_bytes(double(p.io.total())) << ", device memory "
              << format_bytes(double(p.peak_mem_bytes)) << "\n";
    if (p.check) std::cout << p.check->summary();
    if (p.timing) {
      std::cout << std::fixed << std::setprecision(3) << "  time: median " << p.timing->median_ms
                << " ms (min " << p.timing->min_ms << ", max " << p.timing->max_ms << ", "
                << p.timing->reps << " runs, L2 flushed), " << std::setprecision(2) << p.tflops
                << " TFLOP/s\n"
                << std::defaultfloat;
      if (!opt.csv_path.empty()) append_csv(opt.csv_path, result_row(plan, p, dev));
    }
  }
  if (!opt.save_dir.empty()) std::cout << "saved outputs to " << opt.save_dir << "\n";
  bool traces_valid = true;
  if (!opt.trace_path.empty()) {
    for (const TraceFile& f : trace_case(plan, problem, dev)) {
      const auto& r = f.report;
      std::cout << "trace " << f.pass << ": " << f.path << ": " << r.summary() << "\n";
      if (r.dropped > 0)  // asked for by --trace-cap: reported, not a failure
        std::cout << "  incomplete: " << r.dropped << " events dropped at the cap of " << opt.trace_cap
                  << " per CTA (raise --trace-cap to record them)\n";
      else if (!r.ok()) {
        traces_valid = false;
        std::cout << "  TRACE INVALID: " << r.errors.front() << "\n";
      }
    }
    if (!nvtx_tool::attached())
      std::cout << "  NVTX is attached to another tool (NVTX_INJECTION64_PATH): the trace has no host ranges\n";
  }
  if (!report.pass()) {
    std::cout << "CHECK FAILED\n";
    return kExitCheckFailed;
  }
  if (!traces_valid) return kExitCheckFailed;
  return kExitOk;
}

}  // namespace

int run_guarded(const std::string& prog, const std::function<int()>& body) {
  try {
    return body();
  } catch (const InputError& e) {
    std::cerr << prog << ": error: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const ResourceError& e) {
    std::cerr << prog << ": " << e.what() << "\n";
    return kExitNoGpu;
  } catch (const CudaError& e) {
    std::cerr << prog << ": CUDA error: " << e.what() << "\n";
    return e.code() == cudaErrorMemoryAllocation ? kExitNoGpu : kExitCheckFailed;
  } catch (const std::bad_alloc&) {  // the plans check host memory first; this is the rest
    std::cerr << prog << ": error: not enough host memory for this problem\n";
    return kExitBadInput;
  } catch (const std::exception& e) {  // none is expected; one line rather than an abort
    std::cerr << prog << ": internal error: " << e.what() << "\n";
    return kExitCheckFailed;
  }
}

int step_main(const StepInfo& step, int argc, char** argv) {
  const std::string prog = std::filesystem::path(argv[0]).filename().string();
  if (argc > 1 && std::string(argv[1]) == "--tour") return tour_main({&step}, argc - 1, argv + 1, prog + " --tour");
  return run_guarded(prog, [&]() -> int {
    const auto opt = parse_options(step, argc, argv);
    return opt ? run_program(step, *opt, prog) : kExitOk;
  });
}

}  // namespace fs
