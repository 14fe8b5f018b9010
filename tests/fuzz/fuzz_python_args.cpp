// The Python module's argument layer (common/python/arguments.hpp), driven directly, as pybind11
// would hand it tensors: DLPack descriptions of any rank, dimensions (zero, past int), strides
// (zero, negative, huge), dtypes, devices; keywords of any value (NaN and infinities); packed
// sequences' offsets and ALiBi slopes. Each call builds the reference's problem or throws one
// ArgError; an accepted problem is what it claims to be, and the fp64 reference and the plain
// float32 one run it (its forward; the backward of the gradients' calls) without a fault.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "common/errors.hpp"
#include "common/python/arguments.hpp"
#include "common/reference.hpp"
#include "tests/fuzz/fuzz_util.hpp"

namespace {

using fs::fuzz::take_byte;
namespace py = fs::python;

struct Input {
  const std::uint8_t* data;
  std::size_t size;
  std::uint8_t byte() { return take_byte(data, size); }
  std::uint64_t u64() {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = v << 8 | byte();
    return v;
  }
};

// A dimension: mostly small, at times zero, negative, past int or past any memory.
std::int64_t dimension(Input& in) {
  static const std::int64_t big[] = {0, -1, 0x7fffffff, std::int64_t(1) << 31, std::int64_t(1) << 40, 131072, 65536};
  const std::uint8_t b = in.byte();
  return b < 224 ? 1 + b % 9 : big[b % 7];
}

std::int64_t stride(Input& in) {
  static const std::int64_t odd[] = {0, -1, -7, std::int64_t(1) << 40, std::numeric_limits<std::int64_t>::min(),
                                     std::numeric_limits<std::int64_t>::max()};
  const std::uint8_t b = in.byte();
  return b < 200 ? std::int64_t(b % 64) - 8 : odd[b % 6];
}

// A tensor the layer may read: its description and the memory its strides reach (the buffer is
// as large as the farthest element, the data pointer placed after the negative strides' reach);
// none when that reach is past kMaxElements (the layer then must refuse it before reading, or
// the description is not one a producer could give: skipped).
class FuzzTensor {
 public:
  static constexpr std::int64_t kMaxElements = std::int64_t(1) << 22;

  // rank < 0: any rank the input picks.
  FuzzTensor(Input& in, int rank, std::vector<std::int64_t> dims = {}) {
    const std::uint8_t kind = in.byte();
    if (dims.empty()) {
      const int n = rank >= 0 ? rank : kind % 6;
      for (int i = 0; i < n; ++i) dims.push_back(dimension(in));
    }
    shape_ = dims;
    const bool given_strides = in.byte() % 4 == 0;
    if (given_strides)
      for (std::size_t i = 0; i < shape_.size(); ++i) strides_.push_back(stride(in));
    static const DLDataType types[] = {{kDLFloat, 32, 1}, {kDLFloat, 16, 1}, {kDLBfloat, 16, 1}, {kDLFloat, 64, 1},
                                       {kDLInt, 32, 1},   {kDLInt, 8, 1},    {kDLFloat, 32, 2},  {kDLUInt, 16, 1}};
    const std::uint8_t t = in.byte();
    t_.dtype = t < 200 ? types[t % 3] : types[t % 8];
    const std::uint8_t dev = in.byte();
    t_.device = {dev < 240 ? kDLCPU : dev % 2 ? kDLCUDA : kDLCUDAHost, 0};
    t_.ndim = int(shape_.size());
    t_.shape = shape_.data();
    t_.strides = given_strides ? strides_.data() : nullptr;
    // The reach, as the layer computes a row-major stride where none is given.
    std::int64_t lo = 0, hi = 0;
    for (std::size_t i = 0; i < shape_.size(); ++i) {
      if (shape_[i] < 0) {
        valid_ = true;  // the layer refuses a negative dimension before it reads
        return;
      }
      if (shape_[i] == 0) return;  // no element: nothing to read (valid_ stays false; see below)
    }
    bool over = false;
    for (std::size_t i = 0; i < shape_.size(); ++i) {
      std::int64_t s = 1;
      if (given_strides) {
        s = strides_[i];
      } else {
        for (std::size_t j = i + 1; j < shape_.size(); ++j) over = over || __builtin_mul_overflow(s, shape_[j], &s);
      }
      if (shape_[i] == 1) continue;  // one index, 0: its stride reaches nothing
      std::int64_t part = 0;
      if (s == std::numeric_limits<std::int64_t>::min() || __builtin_mul_overflow(shape_[i] - 1, s < 0 ? -s : s, &part)) {
        over = true;
        break;
      }
      over = over || __builtin_add_overflow(s < 0 ? lo : hi, s < 0 ? -part : part, s < 0 ? &lo : &hi);
    }
    const int bytes = (t_.dtype.bits * t_.dtype.lanes + 7) / 8;
    std::int64_t span = 0;  // the reach, as the layer counts it: at most INT64_MAX / 16, or refused
    over = over || __builtin_sub_overflow(hi, lo, &span) || span > std::numeric_limits<std::int64_t>::max() / 16;
    if (over || span + 1 > kMaxElements) {
      valid_ = over;  // past any memory: the layer must refuse it; past ours only: skipped
      return;
    }
    memory_.resize(std::size_t((span + 1) * bytes));
    const std::uint8_t fill = in.byte();
    for (std::size_t i = 0; i < memory_.size(); ++i) memory_[i] = std::uint8_t(fill < 250 ? (i * 37 + fill) % 61 : fill * i);
    t_.data = memory_.data() - lo * bytes;
    t_.byte_offset = 0;
    valid_ = true;
  }
  // Whether the layer may be handed it: backed, or refused by the layer before any read.
  bool usable() const { return valid_ || empty(); }
  bool empty() const {
    for (std::int64_t d : shape_)
      if (d == 0) return true;
    return false;
  }
  const DLTensor& dl() const { return t_; }

 private:
  DLTensor t_{};
  std::vector<std::int64_t> shape_, strides_;
  std::vector<std::uint8_t> memory_;
  bool valid_ = false;
};

double number(Input& in) {
  static const double odd[] = {0.0, -0.0, 1.0, -1.0, 0.1, 0.999999, 1e-50, 1e50, 3.5e38, INFINITY, -INFINITY, NAN};
  const std::uint8_t b = in.byte();
  if (b < 128) return odd[b % 12];
  double v;
  const std::uint64_t bits = in.u64();
  std::memcpy(&v, &bits, 8);
  return v;
}

std::int64_t reach(Input& in) {
  static const std::int64_t odd[] = {-1, 0, 1, 3, -2, 0x7fffffff, std::int64_t(1) << 31, std::numeric_limits<std::int64_t>::min()};
  return odd[in.byte() % 8];
}

// The offsets of packed sequences over `tokens`: prefix sums, or now and then not.
void offsets(Input& in, std::int64_t tokens, std::vector<std::int32_t>& values) {
  const int count = 1 + in.byte() % 5;
  values.assign(std::size_t(count) + 1, 0);
  for (int b = 1; b <= count; ++b)
    values[std::size_t(b)] = std::int32_t(b == count ? tokens : std::min<std::int64_t>(tokens, in.byte() % 8));
  std::sort(values.begin(), values.end());
  if (in.byte() > 230) values[std::size_t(in.byte()) % values.size()] = std::int32_t(in.u64());  // not a prefix sum
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Input in{data, size};
  const std::uint8_t call = in.byte() % 6;
  if (call == 5) {  // flashsteps.alibi_slopes
    static const std::int64_t heads[] = {-1, 0, 1, 2, 3, 6, 8, 100, 65535, 65536, std::int64_t(1) << 30, std::int64_t(1) << 40};
    try {
      const std::vector<float> s = py::alibi_slopes_of(heads[in.byte() % 12]);
      for (float x : s)
        if (!(x > 0.f && x < 1.f)) std::abort();
    } catch (const py::ArgError&) {
    }
    return 0;
  }
  const bool packed = in.byte() % 3 == 0;
  const int rank = in.byte() < 230 ? (packed ? 3 : 4) : -1;
  FuzzTensor q(in, rank), k(in, rank), v(in, rank);
  std::optional<FuzzTensor> dout, out, alibi;
  if (call == 1 || call == 3 || in.byte() > 240) dout.emplace(in, rank);
  if (call == 2 || call == 3) out.emplace(in, rank);
  if (in.byte() > 200) {  // ALiBi's slopes: (heads), mostly q's; or (batch, heads), mostly q's batch
    std::vector<std::int64_t> dims{in.byte() > 40 ? q.dl().ndim > 2 ? q.dl().shape[q.dl().ndim - 2] : 1 : dimension(in)};
    if (in.byte() > 128)
      dims.insert(dims.begin(), in.byte() > 40 && !packed && q.dl().ndim == 4 ? q.dl().shape[0] : dimension(in));
    alibi.emplace(in, -1, dims);
  }
  py::Keywords kw;
  kw.dropout_p = in.byte() > 128 ? 0.0 : number(in);
  if (in.byte() > 128) kw.softmax_scale = number(in);
  kw.causal = in.byte() % 2;
  kw.window_left = in.byte() > 128 ? -1 : reach(in);
  kw.window_right = in.byte() > 128 ? -1 : reach(in);
  kw.softcap = in.byte() > 128 ? 0.0 : number(in);
  kw.seed = in.u64();
  // Offsets for packed calls, over q's and k's tokens as the input gives them.
  std::vector<std::int32_t> cu_q_values, cu_k_values;
  DLTensor cu_q_dl{}, cu_k_dl{};
  std::vector<std::int64_t> cu_q_shape, cu_k_shape;
  const bool with_offsets = packed && q.dl().ndim >= 1 && k.dl().ndim >= 1;
  if (with_offsets) {
    offsets(in, q.dl().shape[0], cu_q_values);
    offsets(in, k.dl().shape[0], cu_k_values);
    cu_q_shape = {std::int64_t(cu_q_values.size())};
    cu_k_shape = {std::int64_t(cu_k_values.size())};
    cu_q_dl = {cu_q_values.data(), {kDLCPU, 0}, 1, {kDLInt, 32, 1}, cu_q_shape.data(), nullptr, 0};
    cu_k_dl = {cu_k_values.data(), {kDLCPU, 0}, 1, {kDLInt, in.byte() > 250 ? std::uint8_t(64) : std::uint8_t(32), 1},
               cu_k_shape.data(), nullptr, 0};
  }
  for (const FuzzTensor* t : {&q, &k, &v})
    if (!t->usable()) return 0;
  for (const auto* t : {&dout, &out, &alibi})
    if (*t && !(*t)->usable()) return 0;

  const py::TensorArg tq(q.dl(), "q"), tk(k.dl(), "k"), tv(v.dl(), "v");
  std::optional<py::TensorArg> tdout, talibi, tcu_q, tcu_k;
  if (dout) tdout.emplace(dout->dl(), "dout");
  if (alibi) talibi.emplace(alibi->dl(), "alibi_slopes");
  if (with_offsets) {
    tcu_q.emplace(cu_q_dl, "cu_seqlens_q");
    tcu_k.emplace(cu_k_dl, "cu_seqlens_k");
  }
  auto ptr = [](const std::optional<py::TensorArg>& t) { return t ? &*t : nullptr; };
  try {
    if (call == 4) {  // the kernels' shapes (flashsteps_gpu.cpp)
      const fs::Shape s = py::kernel_shape(tq, tk, packed);
      if (s.B < 1 || s.H < 1 || s.N < 1 || s.d < 1 || s.keys() < 1 || s.kv_heads() < 1 || s.H % s.kv_heads() != 0) std::abort();
      return 0;
    }
    const py::Problem P = py::reference_problem(tq, tk, tv, call == 1 || call == 3 ? ptr(tdout) : nullptr, kw, ptr(talibi),
                                                ptr(tcu_q), ptr(tcu_k));
    // What an accepted problem claims.
    const fs::Shape& s = P.s;
    if (s.B < 1 || s.H < 1 || s.N < 1 || s.d < 1 || P.kv_heads < 1 || P.kv_len < 1 || s.H % P.kv_heads != 0) std::abort();
    if (P.q.size() != std::size_t(s.elems()) || P.k.size() != std::size_t(s.B) * P.kv_heads * P.kv_len * s.d ||
        P.v.size() != P.k.size())
      std::abort();
    for (const auto* x : {&P.q, &P.k, &P.v, &P.dout})
      for (float f : *x)
        if (!std::isfinite(f)) std::abort();
    // (H) slopes, or (B, H) ones (packed: a row per sequence) with a batch stride of H.
    const std::size_t batches = P.packed ? P.cu_q.size() - 1 : std::size_t(s.B);
    if (P.opt.alibi_batch_stride != 0 && (P.opt.alibi_batch_stride != s.H || P.slopes.empty())) std::abort();
    if (!P.slopes.empty() && P.slopes.size() != (P.opt.alibi_batch_stride ? batches : 1) * std::size_t(s.H)) std::abort();
    if (!(P.opt.scale > 0.f) || !std::isfinite(P.opt.scale) || !(P.opt.dropout.p >= 0.f && P.opt.dropout.p < 1.f)) std::abort();
    // The reference on it, when it is small (the fuzzer's time is for inputs, not for arithmetic).
    const double work = double(s.rows()) * P.kv_len * s.d;
    if (work > 20000) return 0;
    const fs::AttnOptions opt = py::options_of(P);
    std::vector<double> o64, l64;
    std::vector<float> o32, l32;
    fs::reference_forward<double>(s, P.q.data(), P.k.data(), P.v.data(), opt, fs::all_indices(s.rows()), o64, l64);
    fs::reference_forward<float>(s, P.q.data(), P.k.data(), P.v.data(), opt, fs::all_indices(s.rows()), o32, l32);
    if (o64.size() != std::size_t(s.elems()) || l64.size() != std::size_t(s.rows())) std::abort();
    if (call == 2 && out) (void)py::kernel_output(py::TensorArg(out->dl(), "out"), P, s.B, s.N, s.H, false);
    if (call == 1 || call == 3) {
      std::vector<double> hq, hk, hv;
      for (std::int64_t bh = 0; bh < s.heads(); ++bh)
        fs::reference_backward_head<double>(s, P.q.data(), P.k.data(), P.v.data(), P.dout.data(), opt, bh, fs::all_indices(s.N),
                                            fs::all_indices(P.kv_len), hq, hk, hv);
      if (call == 3 && out) (void)py::kernel_output(py::TensorArg(out->dl(), "dQ"), P, s.B, s.N, s.H, false);
    }
  } catch (const py::ArgError& e) {
    if (std::strchr(e.what(), '\n')) std::abort();  // one line
  }
  return 0;
}
