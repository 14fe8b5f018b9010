#include "common/harness.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <utility>

#include "common/errors.hpp"
#include "common/npy.hpp"
#include "common/random.hpp"

namespace fs {

HostProblem random_problem(const Shape& s, std::uint64_t seed, bool with_dout, DType dtype) {
  HostProblem p;
  p.shape = s;
  p.dtype = dtype;
  p.q.resize(s.elems());
  for (auto* t : {&p.k, &p.v}) t->resize(s.kv_elems());
  fill_normal(p.q, seed, 1);
  fill_normal(p.k, seed, 2);
  fill_normal(p.v, seed, 3);
  if (with_dout) {
    p.dout.resize(s.elems());
    fill_normal(p.dout, seed, 4);
  }
  for (auto* t : {&p.q, &p.k, &p.v, &p.dout}) round_all(dtype, *t);
  return p;
}

void validate_shape(const Shape& s) {
  if (s.B < 1 || s.H < 1 || s.N < 1 || s.d < 1 || s.Nk < 0 || s.Hkv < 0)
    throw InputError("every size must be at least 1");
  if (s.H % s.kv_heads() != 0)
    throw InputError("the query heads (" + std::to_string(s.H) + ") must be a multiple of the K/V heads (" +
                     std::to_string(s.kv_heads()) + ")");
  // 2^40 elements (4 TiB of float32) is beyond any GPU; past it the byte counts could overflow.
  const double elems = double(s.B) * s.d * std::max(double(s.H) * s.N, double(s.kv_heads()) * s.keys());
  if (elems > double(std::int64_t(1) << 40))
    throw InputError("B·H·N·d = " + std::to_string(elems) + " elements is beyond any GPU's memory");
}

HostProblem load_problem(const std::string& dir, bool with_dout, DType dtype) {
  HostProblem p;
  p.dtype = dtype;
  // q.npy (and do.npy) are (B, H, N, d); k.npy and v.npy (B, Hkv, Nk, d), the same B and d.
  std::vector<std::int64_t> q_shape, kv_shape;
  auto load = [&](const char* name, std::vector<float>& into, std::vector<std::int64_t>& shape, const char* like) {
    const std::string path = dir + "/" + name;
    NpyArray a = dtype == DType::fp16 ? read_npy_f16_or_f32(path) : read_npy(path);
    if (a.shape.size() != 4)
      throw InputError(path + ": shape " + shape_string(a.shape) + " is not 4-D (B, H, N, d)");
    for (auto dim : a.shape)
      if (dim < 1 || dim > 0x7fffffff) throw InputError(path + ": shape " + shape_string(a.shape) + " has a size outside 1..2^31-1");
    if (shape.empty()) {
      shape = a.shape;
    } else if (a.shape != shape) {
      throw InputError(path + ": shape " + shape_string(a.shape) + " differs from " + like + "'s " + shape_string(shape));
    }
    into = std::move(a.data);
    p.rounded += round_all(dtype, into);
  };
  load("q.npy", p.q, q_shape, "q.npy");
  load("k.npy", p.k, kv_shape, "k.npy");
  load("v.npy", p.v, kv_shape, "k.npy");
  if (with_dout) load("do.npy", p.dout, q_shape, "q.npy");
  if (kv_shape[0] != q_shape[0] || kv_shape[3] != q_shape[3])
    throw InputError(dir + "/k.npy: shape " + shape_string(kv_shape) + " has another batch or head dimension than q.npy's " +
                     shape_string(q_shape));
  p.shape = {int(q_shape[0]), int(q_shape[1]), int(q_shape[2]), int(q_shape[3])};
  if (kv_shape != q_shape) {
    p.shape.Hkv = int(kv_shape[1]);
    p.shape.Nk = int(kv_shape[2]);
  }
  validate_shape(p.shape);
  // NaN or an infinity in an input (or a value past fp16's range, once rounded) would make every
  // output NaN, and a check against the reference would fail for a reason that is not the
  // kernel's (README, "Using a step").
  const std::pair<const char*, const std::vector<float>*> inputs[] = {
      {"q.npy", &p.q}, {"k.npy", &p.k}, {"v.npy", &p.v}, {"do.npy", &p.dout}};
  for (const auto& [name, data] : inputs)
    for (std::size_t i = 0; i < data->size(); ++i) {
      const float x = (*data)[i];
      if (std::isfinite(x)) continue;
      const bool kv = data == &p.k || data == &p.v;
      const std::int64_t d = p.shape.d, n = kv ? p.shape.keys() : p.shape.N, h = kv ? p.shape.kv_heads() : p.shape.H,
                         at = std::int64_t(i);
      throw InputError(dir + "/" + name + ": element (" + std::to_string(at / (d * n * h)) + ", " +
                       std::to_string(at / (d * n) % h) + ", " + std::to_string(at / d % n) + ", " +
                       std::to_string(at % d) + ") is " + (std::isnan(x) ? "NaN" : x > 0 ? "+inf" : "-inf") +
                       (dtype == DType::fp32 ? "" : std::string(" in ") + dtype_name(dtype)) +
                       "; the inputs must be finite");
    }
  return p;
}

std::size_t device_bytes_needed(const StepInfo& step, const Shape& s, const PassSettings& settings, bool backward) {
  const std::size_t t = s.elems() * dtype_bytes(settings.dtype), kv = s.kv_elems() * dtype_bytes(settings.dtype);
  const std::size_t row = s.rows() * sizeof(float);
  std::size_t bytes = 2 * t + 2 * kv + row + step.fwd_workspace(s, settings);  // q o, k v, lse
  if (backward) bytes += 2 * t + 2 * kv + step.bwd_workspace(s, settings);     // dO dq, dk dv
  return bytes + (settings.packed.cu_q.size() + settings.packed.cu_k.size()) * sizeof(std::int32_t) +
         settings.features.alibi_slopes.size() * sizeof(float);
}

BlockMask effective_mask(const StepInfo& step, const Shape& s, const BlockMask* mask) {
  return mask ? *mask : pattern_dense(s.N, step.mask_block(s.d));
}

IoCount pass_io(const StepInfo& step, const Shape& s, const PassSettings& settings, const std::string& pass) {
  const bool fwd = pass == "fwd";
  const PackedSeqs& packed = settings.packed;
  if (!packed.on()) return fwd ? step.io_forward(s, settings) : step.io_backward(s, settings);
  PassSettings each = settings;  // a sequence is a problem of its own
  each.packed = {};
  const std::int64_t e = dtype_bytes(settings.dtype), f = sizeof(float);
  IoCount sum;
  for (int b = 0; b < packed.count(); ++b) {
    const std::int64_t n = packed.queries(b), nk = packed.keys(b);
    if (n > 0 && nk > 0) {
      const Shape one = packed.sequence(s, b);
      const IoCount io = fwd ? step.io_forward(one, each) : step.io_backward(one, each);
      sum.read_bytes += io.read_bytes;
      sum.write_bytes += io.write_bytes;
    } else if (fwd) {
      sum.write_bytes += n * s.H * (s.d * e + f);  // O, LSE
    } else {
      sum.write_bytes += (n * s.H + 2 * nk * s.kv_heads()) * s.d * e;  // dQ; dK, dV
    }
  }
  return sum;
}

DeviceRun::DeviceRun(const StepInfo& step, const HostProblem& problem, const PassSettings& settings,
                     bool backward, cudaStream_t stream)
    : step_(step), shape_(problem.shape), settings_(settings), stream_(stream) {
  // What the settings ask for was checked once, by the plan (common/plan.hpp); here it is set up.
  if (step.block_sparse) {  // the mask's lists, once, for every pass
    const BlockMask mask = effective_mask(step, shape_, settings.mask);
    const BlockLists l = to_lists(mask, settings.causal);
    auto upload = [](DeviceBuffer<int>& b, const std::vector<int>& v) {
      b = DeviceBuffer<int>(std::max<std::size_t>(1, v.size()));
      if (!v.empty()) b.upload(v.data(), v.size());
    };
    upload(row_ptr_, l.row_ptr);
    upload(col_idx_, l.col_idx);
    upload(col_ptr_, l.col_ptr);
    upload(row_idx_, l.row_idx);
    sparse_ = {mask.block_r, mask.block_c, mask.Tr, mask.Tc, row_ptr_.get(), col_idx_.get(), col_ptr_.get(), row_idx_.get()};
  }
  if (settings.clusters) {  // given clusters (--load), once, for every pass
    const SmyrfClusters& c = *settings.clusters;
    given_orders_ = DeviceBuffer<std::int32_t>(c.q_order.size() + c.k_order.size());
    FS_CUDA_CHECK(cudaMemcpy(given_orders_.get(), c.q_order.data(), c.q_order.size() * sizeof(std::int32_t),
                             cudaMemcpyHostToDevice));
    FS_CUDA_CHECK(cudaMemcpy(given_orders_.get() + c.q_order.size(), c.k_order.data(),
                             c.k_order.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice));
  }
  const ScoreFeatures& f = settings.features;
  if (f.on()) {  // the score features, once, for every pass; a reach past N is the same as N
    mods_.window_left = clamp_reach(f.window_left, shape_.N, shape_.keys());
    mods_.window_right = clamp_reach(f.window_right, shape_.N, shape_.keys());
    mods_.softcap = f.softcap;
    if (!f.alibi_slopes.empty()) {
      alibi_ = DeviceBuffer<float>(f.alibi_slopes.size());
      alibi_.upload(f.alibi_slopes.data(), f.alibi_slopes.size());
      mods_.alibi_slopes = alibi_.get();
      mods_.alibi_batch_stride = f.alibi_batch_stride;
    }
  }
  if (settings.packed.on()) {  // the sequences' offsets, once, for every pass
    const PackedSeqs& pk = settings.packed;
    cu_q_ = DeviceBuffer<std::int32_t>(pk.cu_q.size());
    cu_k_ = DeviceBuffer<std::int32_t>(pk.cu_k.size());
    cu_q_.upload(pk.cu_q.data(), pk.cu_q.size());
    cu_k_.upload(pk.cu_k.data(), pk.cu_k.size());
    packed_ = {cu_q_.get(), cu_k_.get(), pk.count(), pk.max_queries(), pk.max_keys()};
  }
  const std::size_t n = shape_.elems();
  {
    FS_NVTX_RANGE("allocate Q, K, V, O, LSE, forward workspace");
    q_ = DeviceTensor(n, settings.dtype);
    k_ = DeviceTensor(shape_.kv_elems(), settings.dtype);
    v_ = DeviceTensor(shape_.kv_elems(), settings.dtype);
    o_ = DeviceTensor(n, settings.dtype);
    lse_ = DeviceBuffer<float>(shape_.rows());
    fwd_ws_ = DeviceBuffer<unsigned char>(step.fwd_workspace(shape_, settings));
  }
  names_.add(q_.get(), q_.bytes(), "Q");
  names_.add(k_.get(), k_.bytes(), "K");
  names_.add(v_.get(), v_.bytes(), "V");
  names_.add(o_.get(), o_.bytes(), "O");
  names_.add(lse_.get(), lse_.bytes(), "LSE");
  names_.add(fwd_ws_.get(), fwd_ws_.bytes(), "forward workspace");
  {
    FS_NVTX_RANGE("upload Q, K, V");
    q_.upload(problem.q);
    k_.upload(problem.k);
    v_.upload(problem.v);
  }
  if (backward) {
    if (problem.dout.size() != n) throw InputError("the backward needs dO (do.npy)");
    dout_host_ = &problem.dout;
  }
}

FwdParams DeviceRun::fwd_params() const {
  FwdParams p;
  p.q = q_.get();
  p.k = k_.get();
  p.v = v_.get();
  p.o = o_.get();
  p.lse = lse_.get();
  p.dtype = settings_.dtype;
  p.shape = shape_;
  p.scale = settings_.scale;
  p.causal = settings_.causal;
  p.variant = settings_.variant;
  p.dropout = settings_.dropout;
  p.sparse = sparse_;
  p.smyrf = settings_.smyrf;
  p.mods = mods_;
  p.smyrf_orders = given_orders_.get();
  p.workspace = fwd_ws_.get();
  p.stream = stream_;
  p.trace = trace_;
  p.packed = packed_;
  return p;
}

BwdParams DeviceRun::bwd_params() const {
  BwdParams p;
  p.q = q_.get();
  p.k = k_.get();
  p.v = v_.get();
  p.o = o_.get();
  p.lse = lse_.get();
  p.dout = dout_.get();
  p.dq = dq_.get();
  p.dk = dk_.get();
  p.dv = dv_.get();
  p.dtype = settings_.dtype;
  p.shape = shape_;
  p.scale = settings_.scale;
  p.causal = settings_.causal;
  p.variant = settings_.variant;
  p.dropout = settings_.dropout;
  p.sparse = sparse_;
  p.smyrf = settings_.smyrf;
  p.mods = mods_;
  p.fwd_workspace = fwd_ws_.get();
  p.workspace = bwd_ws_.get();
  p.stream = stream_;
  p.trace = trace_;
  p.packed = packed_;
  return p;
}

void DeviceRun::forward() {
  {
    FS_NVTX_RANGE("poison O, LSE");
    o_.poison(stream_);
    lse_.poison(stream_);
  }
  FS_NVTX_RANGE("forward: " + step_.id);
  step_.forward(fwd_params());
}

void DeviceRun::backward() {
  if (!dout_host_) throw InputError("this run was set up without a backward pass");
  if (!dout_.get()) {  // first backward: its buffers, so that a forward alone never holds them
    const std::size_t n = shape_.elems();
    {
      FS_NVTX_RANGE("allocate dO, dQ, dK, dV, backward workspace");
      dout_ = DeviceTensor(n, settings_.dtype);
      dq_ = DeviceTensor(n, settings_.dtype);
      dk_ = DeviceTensor(shape_.kv_elems(), settings_.dtype);
      dv_ = DeviceTensor(shape_.kv_elems(), settings_.dtype);
      bwd_ws_ = DeviceBuffer<unsigned char>(step_.bwd_workspace(shape_, settings_));
    }
    names_.add(dout_.get(), dout_.bytes(), "dO");
    names_.add(dq_.get(), dq_.bytes(), "dQ");
    names_.add(dk_.get(), dk_.bytes(), "dK");
    names_.add(dv_.get(), dv_.bytes(), "dV");
    names_.add(bwd_ws_.get(), bwd_ws_.bytes(), "backward workspace");
    FS_NVTX_RANGE("upload dO");
    dout_.upload(*dout_host_);
  }
  {
    FS_NVTX_RANGE("poison dQ, dK, dV");
    dq_.poison(stream_);
    dk_.poison(stream_);
    dv_.poison(stream_);
  }
  FS_NVTX_RANGE("backward: " + step_.id);
  step_.backward(bwd_params());
}

void DeviceRun::sync() const {
  FS_NVTX_RANGE("synchronise");
  FS_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

std::vector<float> DeviceRun::to_host(const DeviceTensor& t, const char* what) {
  FS_NVTX_RANGE(what);
  return t.download();
}

SmyrfClusters DeviceRun::clusters() const {
  FS_NVTX_RANGE("download the clusters");
  if (!step_.cluster_orders) throw std::logic_error("step " + step_.id + " has no clusters");
  SmyrfClusters c = SmyrfClusters::sized(shape_, settings_.smyrf);
  const std::size_t n = c.q_order.size();
  const std::int32_t* orders = step_.cluster_orders(fwd_ws_.get(), shape_, settings_);
  FS_CUDA_CHECK(cudaMemcpy(c.q_order.data(), orders, n * sizeof(std::int32_t), cudaMemcpyDeviceToHost));
  FS_CUDA_CHECK(cudaMemcpy(c.k_order.data(), orders + n, n * sizeof(std::int32_t), cudaMemcpyDeviceToHost));
  return c;
}

std::vector<float> DeviceRun::lse() const {
  FS_NVTX_RANGE("download LSE");
  std::vector<float> h(lse_.size());
  lse_.download(h.data(), h.size());
  return h;
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.2f %s" : "%.0f %s", bytes, units[u]);
  return buf;
}

}  // namespace fs
