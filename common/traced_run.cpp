#include "common/traced_run.hpp"

#include <algorithm>
#include <limits>
#include <optional>

#include "common/results.hpp"
#include "common/trace/clock.hpp"
#include "common/trace/names.hpp"
#include "common/recorder/nvtx.hpp"
#include "common/trace/trace_io.hpp"

namespace fs {

namespace {

std::string driver_text(int v) {
  if (v <= 0) return "unknown";
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

std::string backward_trace_path(const std::string& path) {
  std::string base = path;
  if (ends_with(base, ".json")) base.resize(base.size() - 5);
  if (ends_with(base, ".fwd")) base.resize(base.size() - 4);
  return base + ".bwd.json";
}

trace::Trace trace_of_run(const DeviceInfo& dev, const trace::DeviceSink& sink, const nvtx_tool::Capture& host) {
  trace::Trace t;
  trace::Meta& m = t.meta;
  m.gpu = dev.name;
  m.driver = driver_text(dev.driver_version);
  m.commit = build_commit();
  m.date = today_utc();
  m.Br = sink.Br();
  m.Bc = sink.Bc();
  m.sram_budget_bytes = static_cast<std::int64_t>(dev.smem_per_block_optin);
  m.smem_per_cta_bytes = sink.max_smem_per_cta();
  m.event_cap = sink.effective_cap();

  // t0: the first host range's start, or the first launch's when NVTX went to another tool.
  std::int64_t t0 = std::numeric_limits<std::int64_t>::max();
  for (const auto& r : host.ranges) t0 = std::min(t0, static_cast<std::int64_t>(r.ts_ns));
  for (const auto& k : sink.captures()) t0 = std::min(t0, k.launch_begin_ns);
  if (t0 == std::numeric_limits<std::int64_t>::max()) t0 = 0;

  trace::decode_kernels(sink.captures(), t0, t);
  t.ranges = host.ranges;
  t.marks = host.marks;
  t.buffers = host.buffers;
  for (auto& r : t.ranges) r.ts_ns -= double(t0);
  for (auto& mk : t.marks) mk.ts_ns -= double(t0);
  return t;
}

void list_tensors(trace::Trace& t, const std::vector<trace::Tensor>& io) {
  using trace::Tensor;
  trace::Meta& m = t.meta;
  std::vector<bool> listed(trace::kTensorCount, false);
  for (Tensor id : io) listed[static_cast<int>(id)] = true;
  for (const auto& e : t.events) listed[static_cast<int>(e.tensor)] = true;
  for (const auto& u : m.untraced)
    for (Tensor w : u.writes) listed[static_cast<int>(w)] = true;
  listed[static_cast<int>(Tensor::None)] = false;
  m.tensors.clear();
  for (int i = 0; i < trace::kTensorCount; ++i) {
    if (!listed[i]) continue;
    trace::TensorInfo ti;
    ti.id = static_cast<Tensor>(i);
    ti.shape = trace::tensor_shape(ti.id, m);
    ti.bytes = trace::shape_elems(ti.shape) * trace::element_bytes(ti.id, m.dtype);
    m.tensors.push_back(std::move(ti));
  }
}

trace::Trace build_trace(const StepInfo& step, const Shape& shape, const PassSettings& settings,
                         const DeviceInfo& dev, const std::string& pass, const trace::DeviceSink& sink,
                         const nvtx_tool::Capture& host, const SmyrfClusters* clusters) {
  trace::Trace t = trace_of_run(dev, sink, host);
  trace::Meta& m = t.meta;
  m.step = step.id;
  m.variant = step.variants.empty() ? "" : step.variants[settings.variant];
  m.pass = pass;
  m.B = shape.B;
  m.H = shape.H;
  m.N = shape.N;
  m.d = shape.d;
  m.causal = settings.causal;
  m.scale = settings.scale;
  m.dropout = settings.dropout.p;
  m.dtype = dtype_name(settings.dtype);
  if (settings.mask) m.block_mask = describe(*settings.mask);
  const IoCount io = pass_io(step, shape, settings, pass);
  m.io_read_bytes = io.read_bytes;
  m.io_write_bytes = io.write_bytes;
  if (clusters) {
    m.clusters.hashes = clusters->hashes;
    m.clusters.q_cluster = clusters->geo.q_cluster;
    m.clusters.k_cluster = clusters->geo.k_cluster;
    m.clusters.q_order = clusters->q_order;
    m.clusters.k_order = clusters->k_order;
  }
  if (step.untraced_io)
    for (const UntracedIo& u : step.untraced_io(shape, settings, pass)) {
      trace::Untraced x{u.name, u.read_bytes, u.write_bytes, {}};
      for (const std::string& name : u.writes) x.writes.push_back(*trace::tensor_from_name(name));
      m.untraced.push_back(std::move(x));
    }

  using trace::Tensor;
  const std::vector<Tensor> fwd = {Tensor::Q, Tensor::K, Tensor::V, Tensor::O, Tensor::LSE};
  const std::vector<Tensor> bwd = {Tensor::Q,  Tensor::K,  Tensor::V,  Tensor::O, Tensor::LSE,
                                   Tensor::dO, Tensor::dQ, Tensor::dK, Tensor::dV};
  list_tensors(t, pass == "fwd" ? fwd : bwd);
  return t;
}

std::vector<TraceFile> trace_case(const RunPlan& plan, const HostProblem& problem, const DeviceInfo& dev) {
  const StepInfo& step = plan.step();
  const Options& opt = plan.options();
  const PassSettings settings = plan.settings();
  std::vector<TraceFile> files;
  std::optional<SmyrfClusters> clusters;  // clustered steps: what the forward used
  auto finish = [&](const std::string& pass, const std::string& path, const trace::DeviceSink& sink) {
    const trace::Trace t = build_trace(step, problem.shape, settings, dev, pass, sink, nvtx_tool::stop(),
                                       clusters ? &*clusters : nullptr);
    trace::write_trace(t, path);
    files.push_back({path, pass, trace::validate(t)});
  };

  trace::DeviceSink fwd_sink(opt.trace_cap), bwd_sink(opt.trace_cap);
  try {
    nvtx_tool::start();
    std::optional<DeviceRun> run;
    {
      FS_NVTX_RANGE("set up: " + step.id);
      run.emplace(step, problem, settings, opt.backward);
    }
    run->set_trace(&fwd_sink);
    run->forward();
    run->sync();
    if (step.clustered) clusters = run->clusters();
    finish("fwd", opt.trace_path, fwd_sink);
    if (opt.backward) {
      nvtx_tool::start();
      run->set_trace(&bwd_sink);
      run->backward();
      run->sync();
      finish("bwd", backward_trace_path(opt.trace_path), bwd_sink);
    }
  } catch (...) {
    nvtx_tool::stop();  // the programs' other runs are not recorded
    throw;
  }
  return files;
}

}  // namespace fs
