// The Python module's argument layer (common/python/arguments.hpp).
#include "common/python/arguments.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/errors.hpp"
#include "common/host_memory.hpp"
#include "common/plan.hpp"

namespace fs::python {

namespace {

constexpr std::int64_t kMaxInt = std::numeric_limits<int>::max();

float half_to_float(std::uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
  float v;
  if (exp == 0) v = std::ldexp(float(mant), -24);                    // zero, subnormal
  else if (exp == 31) v = mant ? NAN : INFINITY;                      // inf, NaN
  else v = std::ldexp(float(mant | 1024), exp - 25);
  return sign ? -v : v;
}

// The farthest element of `t` from its first, in elements, must be a number: Σ (dim − 1)·|stride|
// without overflow, and as bytes too (16 bytes an element, more than any dtype here).
void check_reach(const TensorArg& t) {
  std::int64_t reach = 0;
  for (int i = 0; i < t.ndim(); ++i) {
    if (t.dim(i) < 0) value_error(std::string(t.name()) + ": shape " + t.shape() + " has a negative dimension");
    const std::int64_t s = t.stride(i);
    const std::int64_t mag = s == std::numeric_limits<std::int64_t>::min() ? std::numeric_limits<std::int64_t>::max() : s < 0 ? -s : s;
    std::int64_t part = 0;
    if ((t.dim(i) > 1 && __builtin_mul_overflow(t.dim(i) - 1, mag, &part)) ||
        __builtin_add_overflow(reach, part, &reach) || reach > std::numeric_limits<std::int64_t>::max() / 16)
      value_error(std::string(t.name()) + ": its strides reach past any memory (shape " + t.shape() + ")");
  }
}

// "q: element (0, 3, 2, 1) is NaN": the first value of `x` (in the reference's (B, H, N, d) order)
// that is not finite, named in the caller's (B, N, H, d) order, or none.
void require_finite(const std::vector<float>& x, const char* name, std::int64_t H, std::int64_t N, std::int64_t d, bool packed) {
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isfinite(x[i])) continue;
    const std::int64_t at = std::int64_t(i), c = at % d, n = at / d % N, h = at / (d * N) % H, b = at / (d * N * H);
    const std::string where = packed ? "(" + std::to_string(n) + ", " + std::to_string(h) + ", " + std::to_string(c) + ")"
                                     : "(" + std::to_string(b) + ", " + std::to_string(n) + ", " + std::to_string(h) + ", " +
                                           std::to_string(c) + ")";
    value_error(std::string(name) + ": element " + where + " is " + (std::isnan(x[i]) ? "NaN" : x[i] > 0 ? "+inf" : "-inf") +
                "; the inputs must be finite (the reference would give that row O = 0 and LSE = -inf)");
  }
}

// (B, N, H, d) — or (N, H, d) packed — into the reference's (B, H, N, d) float32 layout.
std::vector<float> to_bhnd(const TensorArg& b, bool packed) {
  const std::int64_t B = packed ? 1 : b.dim(0), N = b.dim(packed ? 0 : 1), H = b.dim(packed ? 1 : 2), d = b.dim(packed ? 2 : 3);
  const int o = packed ? -1 : 0;  // dimension index offset
  const std::int64_t sb = packed ? 0 : b.stride(0), sn = b.stride(o + 1), sh = b.stride(o + 2), sd = b.stride(o + 3);
  std::vector<float> out(std::size_t(B * H * N * d));
  for (std::int64_t ib = 0; ib < B; ++ib)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t c = 0; c < d; ++c) out[std::size_t(((ib * H + h) * N + n) * d + c)] = b.at(ib * sb + n * sn + h * sh + c * sd);
  return out;
}

// Integer offsets of a 1-D int32 CPU tensor (cu_seqlens).
std::vector<std::int32_t> read_int32(const TensorArg& b) {
  const DLDataType d = b.t().dtype;
  if (b.ndim() != 1 || d.code != kDLInt || d.bits != 32 || d.lanes != 1)
    type_error(std::string(b.name()) + ": expected a 1-D int32 tensor, got " + TensorArg::dtype_name(d) + " " + b.shape());
  if (b.t().device.device_type != kDLCPU && b.t().device.device_type != kDLCUDAHost)
    value_error(std::string(b.name()) + ": the reference runs on the CPU; pass a CPU tensor");
  check_reach(b);
  if (b.dim(0) > kMaxInt) value_error(std::string(b.name()) + ": more offsets than an int counts");
  std::vector<std::int32_t> out(std::size_t(b.dim(0)));
  const auto* base = reinterpret_cast<const unsigned char*>(b.address());
  for (std::int64_t i = 0; i < b.dim(0); ++i) std::memcpy(&out[std::size_t(i)], base + 4 * i * b.stride(0), 4);
  return out;
}

}  // namespace

void value_error(const std::string& what) { throw ArgError(ArgError::Value, what); }
void type_error(const std::string& what) { throw ArgError(ArgError::Type, what); }

std::int64_t TensorArg::stride(int i) const {
  if (t_->strides) return t_->strides[i];
  std::int64_t s = 1;
  for (int j = ndim() - 1; j > i; --j)
    if (__builtin_mul_overflow(s, std::max<std::int64_t>(t_->shape[j], 1), &s)) return std::numeric_limits<std::int64_t>::max();
  return s;
}

std::string TensorArg::shape() const {
  std::vector<std::int64_t> dims;
  for (int i = 0; i < ndim(); ++i) dims.push_back(dim(i));
  return shape_text(dims);
}

void TensorArg::require_cpu_float() const {
  if (t_->device.device_type != kDLCPU && t_->device.device_type != kDLCUDAHost)
    value_error(std::string(name_) + ": the reference runs on the CPU; pass a CPU tensor (e.g. x.cpu())");
  const DLDataType d = t_->dtype;
  if (!is_kernel_float(d))
    type_error(std::string(name_) + ": expected float32, float16 or bfloat16 (the kernels' inputs); got " + dtype_name(d) +
               (d.code == kDLFloat && d.bits == 64 ? " — convert with .astype(numpy.float32) or .float()" : ""));
}

float TensorArg::at(std::int64_t offset) const {
  const auto* base = reinterpret_cast<const unsigned char*>(address());
  const DLDataType d = t_->dtype;
  if (d.bits == 32) {
    float f;
    std::memcpy(&f, base + 4 * offset, 4);
    return f;
  }
  std::uint16_t h;
  std::memcpy(&h, base + 2 * offset, 2);
  if (d.code == kDLBfloat) {
    const std::uint32_t u = std::uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  return half_to_float(h);
}

DType TensorArg::kernel_dtype() const {
  const DLDataType d = t_->dtype;
  return d.code == kDLBfloat ? DType::bf16 : d.bits == 16 ? DType::fp16 : DType::fp32;
}

std::string TensorArg::dtype_name(DLDataType d) {
  const char* kind = d.code == kDLFloat ? "float" : d.code == kDLBfloat ? "bfloat" : d.code == kDLInt ? "int" : d.code == kDLUInt ? "uint" : "type";
  return std::string(kind) + std::to_string(d.bits) + (d.lanes != 1 ? "x" + std::to_string(d.lanes) : "");
}

std::string shape_text(const std::vector<std::int64_t>& dims) {
  std::string s = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + (dims.size() == 1 ? ",)" : ")");
}

void check_keywords(const Keywords& kw) {
  if (!(kw.dropout_p >= 0.0 && kw.dropout_p < 1.0)) value_error("dropout_p must be in [0, 1)");
  if (!(kw.softcap >= 0.0) || !std::isfinite(float(kw.softcap))) value_error("softcap must be 0 (off) or positive and finite");
  if (kw.window_left < -1 || kw.window_right < -1 || kw.window_left > kMaxInt || kw.window_right > kMaxInt)
    value_error("window_size: each side is -1 (unbounded) or at least 0, and at most " + std::to_string(kMaxInt));
  if (kw.softmax_scale) {
    const float scale = float(*kw.softmax_scale);  // the kernels and the reference take a float32
    if (!(scale > 0.f) || !std::isfinite(scale)) value_error("softmax_scale must be positive and finite (as a float32)");
  }
}

void require_prefix_sums(const std::vector<std::int32_t>& cu_q, const std::vector<std::int32_t>& cu_k, std::int64_t n_q,
                         std::int64_t n_k) {
  if (cu_q.size() != cu_k.size() || cu_q.size() < 2 || cu_q.front() != 0 || cu_k.front() != 0 || cu_q.back() != n_q ||
      cu_k.back() != n_k)
    value_error("cu_seqlens_q, cu_seqlens_k: prefix sums of equal length (batch + 1) from 0 to the tokens of q (" +
                std::to_string(n_q) + ") and of k (" + std::to_string(n_k) + ")");
  for (std::size_t i = 1; i < cu_q.size(); ++i)
    if (cu_q[i] < cu_q[i - 1] || cu_k[i] < cu_k[i - 1]) value_error("cu_seqlens: offsets must not decrease");
}

Shape kernel_shape(const TensorArg& q, const TensorArg& k, bool packed) {
  const int rank = packed ? 3 : 4, o = packed ? -1 : 0;  // o: the dimension index offset
  if (q.ndim() != rank || k.ndim() != rank)
    value_error(std::string("q, k, v: expected ") +
                (packed ? "(total_tokens, heads, head_dim) with cu_seqlens" : "(batch, seqlen, heads, head_dim)") +
                ", got q " + q.shape() + ", k " + k.shape());
  const std::int64_t B = packed ? 1 : q.dim(0), N = q.dim(o + 1), H = q.dim(o + 2), d = q.dim(o + 3);
  const std::int64_t Nk = k.dim(o + 1), Hk = k.dim(o + 2), dk = k.dim(o + 3), Bk = packed ? 1 : k.dim(0);
  for (std::int64_t x : {B, N, H, d, Nk, Hk, dk, Bk})
    if (x < 1) value_error("q, k, v: every dimension must be at least 1; got q " + q.shape() + ", k " + k.shape());
  for (std::int64_t x : {B, N, H, d, Nk, Hk, dk, Bk})
    if (x > kMaxInt)
      value_error("q, k, v: every dimension must be at most " + std::to_string(kMaxInt) + " (the kernels index with int); got q " +
                  q.shape() + ", k " + k.shape());
  if (H % Hk != 0)
    value_error("q has " + std::to_string(H) + " heads, k and v " + std::to_string(Hk) + ": q's must be a multiple (GQA, MQA)");
  Shape s{int(B), int(H), int(N), int(d)};
  if (Nk != N) s.Nk = int(Nk);
  if (Hk != H) s.Hkv = int(Hk);
  return s;
}

Problem reference_problem(const TensorArg& q, const TensorArg& k, const TensorArg& v, const TensorArg* dout,
                          const Keywords& kw, const TensorArg* alibi, const TensorArg* cu_q, const TensorArg* cu_k) {
  Problem P;
  if (bool(cu_q) != bool(cu_k)) value_error("cu_seqlens_q and cu_seqlens_k go together");
  P.packed = cu_q != nullptr;
  for (const TensorArg* b : {&q, &k, &v}) b->require_cpu_float();
  const int rank = P.packed ? 3 : 4;
  const char* layout = P.packed ? "(total_tokens, heads, head_dim) with cu_seqlens" : "(batch, seqlen, heads, head_dim)";
  for (const TensorArg* b : {&q, &k, &v})
    if (b->ndim() != rank) value_error(std::string(b->name()) + ": expected " + layout + ", got shape " + b->shape());
  const int o = P.packed ? -1 : 0;
  for (const TensorArg* b : {&k, &v})
    if ((!P.packed && b->dim(0) != q.dim(0)) || b->dim(o + 3) != q.dim(o + 3) || b->dim(o + 1) != k.dim(o + 1) ||
        b->dim(o + 2) != k.dim(o + 2))
      value_error(std::string(b->name()) + ": shape " + b->shape() + " does not match k " + k.shape() + " and q " + q.shape() +
                  " (same batch and head_dim; k and v the same)");
  const Shape s = kernel_shape(q, k, P.packed);
  if (q.kernel_dtype() != k.kernel_dtype() || q.kernel_dtype() != v.kernel_dtype())
    type_error("q, k, v: one dtype for all three, as a kernel reads them");
  for (const TensorArg* b : {&q, &k, &v}) check_reach(*b);
  if (dout) {
    dout->require_cpu_float();
    if (dout->ndim() != rank || dout->shape() != q.shape())
      value_error("dout: shape " + dout->shape() + " must be q's, " + q.shape());
    check_reach(*dout);
  }
  check_keywords(kw);
  if (P.packed) {
    P.cu_q = read_int32(*cu_q);
    P.cu_k = read_int32(*cu_k);
    require_prefix_sums(P.cu_q, P.cu_k, s.N, s.keys());
  }
  // The reference computes every score: refused past kMaxReferenceWork, and past the memory of
  // the inputs' copies and the outputs (float64, and the float32 ones that check() compares).
  double pairs = double(s.N) * double(s.keys());
  if (P.packed) {
    pairs = 0;
    for (std::size_t b = 0; b + 1 < P.cu_q.size(); ++b)
      pairs += double(P.cu_q[b + 1] - P.cu_q[b]) * double(P.cu_k[b + 1] - P.cu_k[b]);
  }
  const double work = double(s.B) * s.H * s.d * pairs;
  if (work > double(kMaxReferenceWork))
    value_error("q, k, v: too large for the CPU reference: batch·heads·seqlen_q·seqlen_k·head_dim = " +
                std::to_string(std::int64_t(std::min(work, 9e18))) + " multiply-adds, at most 2^34 = " +
                std::to_string(kMaxReferenceWork) + " (about a minute of a CPU core in float64)");
  const std::uint64_t q_elems = std::uint64_t(s.elems()), kv_elems = std::uint64_t(s.kv_elems());
  try {
    require_host_memory(4 * (2 * q_elems + 2 * kv_elems) + 40 * (q_elems + 2 * kv_elems) + 24 * std::uint64_t(s.rows()),
                        "q, k, v: the reference's copies and outputs");
  } catch (const InputError& e) {
    value_error(e.what());
  }
  // ALiBi's slopes: (heads), or (batch, heads) — with packed sequences a row per sequence.
  int slopes_stride = 0;
  if (alibi) {
    alibi->require_cpu_float();
    const std::int64_t batches = P.packed ? std::int64_t(P.cu_q.size()) - 1 : s.B;
    const bool rows = alibi->ndim() == 2 && alibi->dim(0) == batches && alibi->dim(1) == s.H;
    if (!rows && (alibi->ndim() != 1 || alibi->dim(0) != s.H))
      value_error("alibi_slopes: expected one slope per head, shape " + shape_text({s.H}) + ", or a row of them per " +
                  (P.packed ? "sequence, (sequences, heads) = " : "batch, (batch, heads) = ") +
                  shape_text({batches, s.H}) + "; got " + alibi->shape());
    check_reach(*alibi);
    slopes_stride = rows ? s.H : 0;
    for (std::int64_t b = 0; b < (rows ? batches : 1); ++b)
      for (std::int64_t h = 0; h < s.H; ++h) {
        P.slopes.push_back(alibi->at(rows ? b * alibi->stride(0) + h * alibi->stride(1) : h * alibi->stride(0)));
        if (!std::isfinite(P.slopes.back()))
          value_error("alibi_slopes: the slope of head " + std::to_string(h) +
                      (rows ? " of " + std::string(P.packed ? "sequence " : "batch ") + std::to_string(b) : "") +
                      " is not finite");
      }
  }
  P.dtype = q.kernel_dtype();
  P.s = Shape{s.B, s.H, s.N, s.d};
  P.kv_heads = s.kv_heads();
  P.kv_len = s.keys();
  P.q = to_bhnd(q, P.packed);
  P.k = to_bhnd(k, P.packed);
  P.v = to_bhnd(v, P.packed);
  require_finite(P.q, "q", s.H, s.N, s.d, P.packed);
  require_finite(P.k, "k", P.kv_heads, P.kv_len, s.d, P.packed);
  require_finite(P.v, "v", P.kv_heads, P.kv_len, s.d, P.packed);
  if (dout) {
    P.dout = to_bhnd(*dout, P.packed);
    require_finite(P.dout, "dout", s.H, s.N, s.d, P.packed);
  }
  const float scale = kw.softmax_scale ? float(*kw.softmax_scale) : default_scale(s.d);
  P.opt = AttnOptions(scale, kw.causal, Dropout{float(kw.dropout_p), kw.seed});
  P.opt.kv_heads = P.kv_heads;
  P.opt.kv_len = P.kv_len;
  P.opt.window_left = int(kw.window_left);
  P.opt.window_right = int(kw.window_right);
  P.opt.softcap = float(kw.softcap);
  P.opt.alibi_batch_stride = slopes_stride;
  return P;
}

AttnOptions options_of(const Problem& P) {
  AttnOptions opt = P.opt;
  opt.dtype = P.dtype;
  if (!P.slopes.empty()) opt.alibi_slopes = P.slopes.data();
  if (P.packed) {
    opt.cu_seqlens_q = &P.cu_q;
    opt.cu_seqlens_k = &P.cu_k;
  }
  return opt;
}

std::vector<float> kernel_output(const TensorArg& b, const Problem& P, std::int64_t B, std::int64_t N, std::int64_t H,
                                 bool lse) {
  b.require_cpu_float();
  const bool packed = P.packed;
  const std::int64_t d = P.s.d;
  const std::vector<std::int64_t> want = lse ? (packed ? std::vector<std::int64_t>{H, N} : std::vector<std::int64_t>{B, H, N})
                                             : (packed ? std::vector<std::int64_t>{N, H, d} : std::vector<std::int64_t>{B, N, H, d});
  bool ok = b.ndim() == int(want.size());
  for (int i = 0; ok && i < b.ndim(); ++i) ok = b.dim(i) == want[i];
  if (!ok) value_error(std::string(b.name()) + ": shape " + b.shape() + ", expected " + shape_text(want));
  check_reach(b);
  if (!lse) return to_bhnd(b, packed);
  std::vector<float> out(std::size_t(b.dim(0) * (b.ndim() == 3 ? b.dim(1) * b.dim(2) : b.dim(1))));
  std::size_t i = 0;
  if (b.ndim() == 3) {
    for (std::int64_t x = 0; x < b.dim(0); ++x)
      for (std::int64_t y = 0; y < b.dim(1); ++y)
        for (std::int64_t z = 0; z < b.dim(2); ++z) out[i++] = b.at(x * b.stride(0) + y * b.stride(1) + z * b.stride(2));
  } else {
    for (std::int64_t x = 0; x < b.dim(0); ++x)
      for (std::int64_t y = 0; y < b.dim(1); ++y) out[i++] = b.at(x * b.stride(0) + y * b.stride(1));
  }
  return out;
}

std::vector<float> alibi_slopes_of(std::int64_t heads) {
  if (heads < 1 || heads > kMaxHeads)
    value_error("heads must be from 1 to " + std::to_string(kMaxHeads) + " (B·H in every step's grid); got " +
                std::to_string(heads));
  return alibi_slopes(int(heads));
}

}  // namespace fs::python
