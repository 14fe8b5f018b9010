// The Python module `flashsteps`, its native part _flashsteps: the fp64 CPU reference
// (common/reference.hpp) on any tensor that speaks DLPack — NumPy arrays, PyTorch CPU tensors, and
// others — with flash_attn_func's layout and argument names, so that a kernel's output can be
// checked against it in a few lines (docs/verify.md); and, where CUDA is, the kernels themselves
// (flashsteps_gpu.cpp, flashsteps.attention):
//
//   out, lse = flashsteps.reference(q, k, v, causal=True)         q (B, N, H, d), k, v (B, Nk, Hkv, d)
//   dq, dk, dv = flashsteps.reference_backward(q, k, v, dout, causal=True)
//
// The inputs are read in place through DLPack (float32, float16 or bfloat16, any strides; the
// reference computes in double from their float32 values); the outputs are new float64 NumPy
// arrays. Bad shapes, dtypes and devices raise ValueError or TypeError with one line.
#include <dlpack/dlpack.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/dtype.hpp"
#include "common/python/dlpack_tensor.hpp"
#include "common/reference.hpp"
#include "common/verify.hpp"

namespace py = pybind11;

namespace {

using fs::python::Borrowed;
using fs::python::shape_of;
using fs::python::shape_text;

// Integer offsets of a 1-D int32 tensor (cu_seqlens).
std::vector<std::int32_t> read_int32(const py::object& obj, const char* name) {
  Borrowed b(obj, name);
  const DLDataType d = b.t().dtype;
  if (b.ndim() != 1 || d.code != kDLInt || d.bits != 32 || d.lanes != 1)
    throw py::type_error(std::string(name) + ": expected a 1-D int32 tensor, got " + Borrowed::dtype_name(d) + " " + shape_of(b));
  if (b.t().device.device_type != kDLCPU) throw py::value_error(std::string(name) + ": the reference runs on the CPU; pass a CPU tensor");
  std::vector<std::int32_t> out(b.dim(0));
  const auto* base = reinterpret_cast<const unsigned char*>(b.address());
  for (std::int64_t i = 0; i < b.dim(0); ++i) std::memcpy(&out[i], base + 4 * i * b.stride(0), 4);
  return out;
}

// (B, N, H, d) — or (N, H, d) packed — into the reference's (B, H, N, d) float32 layout.
std::vector<float> to_bhnd(const Borrowed& b, bool packed) {
  const std::int64_t B = packed ? 1 : b.dim(0), N = b.dim(packed ? 0 : 1), H = b.dim(packed ? 1 : 2), d = b.dim(packed ? 2 : 3);
  const int o = packed ? -1 : 0;  // dimension index offset
  const std::int64_t sb = packed ? 0 : b.stride(0), sn = b.stride(o + 1), sh = b.stride(o + 2), sd = b.stride(o + 3);
  std::vector<float> out(B * H * N * d);
  for (std::int64_t ib = 0; ib < B; ++ib)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t c = 0; c < d; ++c) out[((ib * H + h) * N + n) * d + c] = b.at(ib * sb + n * sn + h * sh + c * sd);
  return out;
}

// The reference's (B, H, N, d) doubles back to (B, N, H, d) (or (N, H, d) packed).
py::array_t<double> from_bhnd(const std::vector<double>& x, std::int64_t B, std::int64_t H, std::int64_t N, std::int64_t d,
                              bool packed) {
  std::vector<py::ssize_t> shape = packed ? std::vector<py::ssize_t>{N, H, d} : std::vector<py::ssize_t>{B, N, H, d};
  py::array_t<double> out(shape);
  double* p = out.mutable_data();
  for (std::int64_t ib = 0; ib < B; ++ib)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t c = 0; c < d; ++c) p[((ib * N + n) * H + h) * d + c] = x[((ib * H + h) * N + n) * d + c];
  return out;
}

// One call's problem: the shapes read and checked, the inputs in the reference's layout, the options.
struct Problem {
  fs::Shape s;  // the queries': B, H, N, d
  int kv_heads = 0, kv_len = 0;
  bool packed = false;
  std::vector<float> q, k, v, dout;
  std::vector<float> slopes;
  std::vector<std::int32_t> cu_q, cu_k;
  fs::DType dtype = fs::DType::fp32;  // q's: where the plain float32 implementation rounds
  fs::AttnOptions opt;                // but its pointers into slopes, cu_q, cu_k (options_of)
};

Problem make_problem(const py::object& q_obj, const py::object& k_obj, const py::object& v_obj, const py::object* dout_obj,
                     double dropout_p, std::optional<double> softmax_scale, bool causal, std::pair<int, int> window,
                     double softcap, const py::object& alibi, const py::object& cu_q, const py::object& cu_k,
                     std::uint64_t seed) {
  Problem P;
  P.packed = !cu_q.is_none() || !cu_k.is_none();
  if (cu_q.is_none() != cu_k.is_none()) throw py::value_error("cu_seqlens_q and cu_seqlens_k go together");
  Borrowed q(q_obj, "q"), k(k_obj, "k"), v(v_obj, "v");
  for (const Borrowed* b : {&q, &k, &v}) b->require_cpu_float();
  const int rank = P.packed ? 3 : 4;
  const char* layout = P.packed ? "(total_tokens, heads, head_dim) with cu_seqlens" : "(batch, seqlen, heads, head_dim)";
  for (const Borrowed* b : {&q, &k, &v})
    if (b->ndim() != rank) throw py::value_error(std::string(b->name()) + ": expected " + layout + ", got shape " + shape_of(*b));
  const int o = P.packed ? -1 : 0;
  const std::int64_t B = P.packed ? 1 : q.dim(0), N = q.dim(o + 1), H = q.dim(o + 2), d = q.dim(o + 3);
  const std::int64_t Nk = k.dim(o + 1), Hk = k.dim(o + 2);
  for (const Borrowed* b : {&k, &v})
    if ((!P.packed && b->dim(0) != B) || b->dim(o + 3) != d || b->dim(o + 1) != Nk || b->dim(o + 2) != Hk)
      throw py::value_error(std::string(b->name()) + ": shape " + shape_of(*b) + " does not match k " + shape_of(k) + " and q " +
                            shape_of(q) + " (same batch and head_dim; k and v the same)");
  if (N < 1 || Nk < 1 || H < 1 || d < 1) throw py::value_error("q, k, v: every dimension must be at least 1");
  if (H % Hk != 0)
    throw py::value_error("q has " + std::to_string(H) + " heads, k and v " + std::to_string(Hk) + ": q's must be a multiple (GQA, MQA)");
  if (q.kernel_dtype() != k.kernel_dtype() || q.kernel_dtype() != v.kernel_dtype())
    throw py::type_error("q, k, v: one dtype for all three, as a kernel reads them");
  P.dtype = q.kernel_dtype();
  P.s = fs::Shape{int(B), int(H), int(N), int(d)};
  P.kv_heads = int(Hk);
  P.kv_len = int(Nk);
  P.q = to_bhnd(q, P.packed);
  P.k = to_bhnd(k, P.packed);
  P.v = to_bhnd(v, P.packed);
  if (dout_obj) {
    Borrowed g(*dout_obj, "dout");
    g.require_cpu_float();
    if (g.ndim() != rank || shape_of(g) != shape_of(q)) throw py::value_error("dout: shape " + shape_of(g) + " must be q's, " + shape_of(q));
    P.dout = to_bhnd(g, P.packed);
  }
  if (P.packed) {
    P.cu_q = read_int32(cu_q, "cu_seqlens_q");
    P.cu_k = read_int32(cu_k, "cu_seqlens_k");
    fs::python::require_prefix_sums<py::value_error>(P.cu_q, P.cu_k, N, Nk);
  }
  if (!alibi.is_none()) {
    Borrowed a(alibi, "alibi_slopes");
    a.require_cpu_float();
    if (a.ndim() != 1 || a.dim(0) != H)
      throw py::value_error("alibi_slopes: expected one slope per head, shape (" + std::to_string(H) + ",), got " + shape_of(a));
    for (std::int64_t h = 0; h < H; ++h) P.slopes.push_back(a.at(h * a.stride(0)));
  }
  if (!(dropout_p >= 0.0 && dropout_p < 1.0)) throw py::value_error("dropout_p must be in [0, 1)");
  if (!(softcap >= 0.0)) throw py::value_error("softcap must be 0 (off) or positive");
  if (window.first < -1 || window.second < -1) throw py::value_error("window_size: each side is -1 (unbounded) or at least 0");
  const float scale = softmax_scale ? float(*softmax_scale) : fs::default_scale(int(d));
  if (!(scale > 0.f) || !std::isfinite(scale)) throw py::value_error("softmax_scale must be positive and finite");
  P.opt = fs::AttnOptions(scale, causal, fs::Dropout{float(dropout_p), seed});
  P.opt.kv_heads = P.kv_heads;
  P.opt.kv_len = P.kv_len;
  P.opt.window_left = window.first;
  P.opt.window_right = window.second;
  P.opt.softcap = float(softcap);
  return P;
}

// P's options as the reference takes them: its dtype, and the pointers into P's own slopes and
// offsets, set here from the Problem where it lives (not in make_problem, whose P is returned by a
// move when the compiler does not construct it in place, which would leave &P.cu_q dangling).
fs::AttnOptions options_of(const Problem& P) {
  fs::AttnOptions opt = P.opt;
  opt.dtype = P.dtype;
  if (!P.slopes.empty()) opt.alibi_slopes = P.slopes.data();
  if (P.packed) {
    opt.cu_seqlens_q = &P.cu_q;
    opt.cu_seqlens_k = &P.cu_k;
  }
  return opt;
}

// The forward of P in T (double: the reference; float: the plain float32 implementation, rounding
// where a kernel of P's input dtype must), O in (B, H, N, d) order and LSE.
template <typename T>
void forward(const Problem& P, std::vector<T>& o, std::vector<T>& lse) {
  const fs::AttnOptions opt = options_of(P);
  py::gil_scoped_release unlocked;
  fs::reference_forward<T>(P.s, P.q.data(), P.k.data(), P.v.data(), opt, fs::all_indices(P.s.rows()), o, lse);
}

// dQ (B, H, N, d), dK and dV (B, H_kv, N_k, d) of P in T; a GQA group's heads add up.
template <typename T>
void gradients(const Problem& P, std::vector<T>& dq, std::vector<T>& dk, std::vector<T>& dv) {
  const fs::AttnOptions opt = options_of(P);
  const fs::Shape& s = P.s;
  const std::int64_t d = s.d, group = s.H / P.kv_heads;
  dq.assign(s.elems(), T(0));
  dk.assign(std::int64_t(s.B) * P.kv_heads * P.kv_len * d, T(0));
  dv.assign(dk.size(), T(0));
  py::gil_scoped_release unlocked;
  const auto q_rows = fs::all_indices(s.N), kv_rows = fs::all_indices(P.kv_len);
  std::vector<T> hq, hk, hv;
  for (std::int64_t bh = 0; bh < s.heads(); ++bh) {
    fs::reference_backward_head<T>(s, P.q.data(), P.k.data(), P.v.data(), P.dout.data(), opt, bh, q_rows, kv_rows, hq, hk, hv);
    std::copy(hq.begin(), hq.end(), dq.begin() + bh * s.N * d);
    const std::int64_t kvh = (bh / s.H) * P.kv_heads + (bh % s.H) / group;  // K/V head of query head bh mod H
    for (std::int64_t i = 0; i < std::int64_t(hk.size()); ++i) {
      dk[kvh * P.kv_len * d + i] += hk[i];
      dv[kvh * P.kv_len * d + i] += hv[i];
    }
  }
}

py::array_t<double> lse_array(const Problem& P, const std::vector<double>& lse) {
  std::vector<py::ssize_t> shape = P.packed ? std::vector<py::ssize_t>{P.s.H, P.s.N} : std::vector<py::ssize_t>{P.s.B, P.s.H, P.s.N};
  py::array_t<double> out(shape);
  std::memcpy(out.mutable_data(), lse.data(), lse.size() * sizeof(double));
  return out;
}

// The keywords every entry point takes, after its tensors.
struct Keywords {
  double dropout_p = 0.0;
  std::optional<double> softmax_scale;
  bool causal = false;
  std::pair<int, int> window{-1, -1};
  double softcap = 0.0;
  py::object alibi = py::none(), cu_q = py::none(), cu_k = py::none();
  std::uint64_t seed = 1;
};

Problem problem(const py::object& q, const py::object& k, const py::object& v, const py::object* dout, const Keywords& kw) {
  return make_problem(q, k, v, dout, kw.dropout_p, kw.softmax_scale, kw.causal, kw.window, kw.softcap, kw.alibi, kw.cu_q,
                      kw.cu_k, kw.seed);
}

// plain: the plain float32 implementation's result instead of the float64 one (the values check()
// measures err_fp32 with), in float64 arrays.
py::tuple reference(const py::object& q, const py::object& k, const py::object& v, const Keywords& kw, bool plain) {
  const Problem P = problem(q, k, v, nullptr, kw);
  std::vector<double> o, lse;
  if (plain) {
    std::vector<float> o32, lse32;
    forward(P, o32, lse32);
    o.assign(o32.begin(), o32.end());
    lse.assign(lse32.begin(), lse32.end());
  } else {
    forward(P, o, lse);
  }
  return py::make_tuple(from_bhnd(o, P.s.B, P.s.H, P.s.N, P.s.d, P.packed), lse_array(P, lse));
}

py::tuple reference_backward(const py::object& q, const py::object& k, const py::object& v, const py::object& dout,
                             const Keywords& kw) {
  const Problem P = problem(q, k, v, &dout, kw);
  std::vector<double> dq, dk, dv;
  gradients(P, dq, dk, dv);
  const fs::Shape& s = P.s;
  return py::make_tuple(from_bhnd(dq, s.B, s.H, s.N, s.d, P.packed), from_bhnd(dk, s.B, P.kv_heads, P.kv_len, s.d, P.packed),
                        from_bhnd(dv, s.B, P.kv_heads, P.kv_len, s.d, P.packed));
}

// A kernel's output tensor, B × N rows of H heads × d (or N × H × d packed; an LSE (B, H, N) or
// (H, N)), checked against that shape and read in the reference's layout.
std::vector<float> output(const py::object& obj, const char* name, bool packed, std::int64_t B, std::int64_t N,
                          std::int64_t H, std::int64_t d, bool lse) {
  Borrowed b(obj, name);
  b.require_cpu_float();
  const std::vector<std::int64_t> want = lse ? (packed ? std::vector<std::int64_t>{H, N} : std::vector<std::int64_t>{B, H, N})
                                             : (packed ? std::vector<std::int64_t>{N, H, d} : std::vector<std::int64_t>{B, N, H, d});
  bool ok = b.ndim() == int(want.size());
  for (int i = 0; ok && i < b.ndim(); ++i) ok = b.dim(i) == want[i];
  if (!ok) throw py::value_error(std::string(name) + ": shape " + shape_of(b) + ", expected " + shape_text(want));
  if (!lse) return to_bhnd(b, packed);
  std::vector<float> out(b.dim(0) * (b.ndim() == 3 ? b.dim(1) * b.dim(2) : b.dim(1)));
  std::int64_t i = 0;
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

template <typename K>
fs::TensorCheck judged(const char* name, const std::vector<K>& kernel, const std::vector<float>& fp32,
                       const std::vector<double>& fp64, double factor, double floor, fs::DType dtype) {
  fs::ErrorStat ek, ef;
  for (std::size_t i = 0; i < fp64.size(); ++i) {
    ek.add(double(kernel[i]), fp64[i]);
    ef.add(double(fp32[i]), fp64[i]);
  }
  return fs::judge(name, ek, ef, factor, floor, dtype);
}

py::dict report(const fs::CheckReport& r) {
  py::list tensors;
  for (const fs::TensorCheck& t : r.tensors) {
    py::dict d;
    d["name"] = t.name;
    d["err"] = t.err;
    d["err_fp32"] = t.err_fp32;
    d["tol"] = t.tol;
    d["non_finite"] = t.bad;
    d["ok"] = t.pass();
    tensors.append(d);
  }
  py::dict out;
  out["ok"] = r.pass();
  out["tensors"] = tensors;
  out["summary"] = r.summary();
  return out;
}

py::dict check(const py::object& out, const py::object& q, const py::object& k, const py::object& v, const py::object& lse,
               const Keywords& kw) {
  const Problem P = problem(q, k, v, nullptr, kw);
  const fs::Shape& s = P.s;
  const fs::DType out_dtype = Borrowed(out, "out").kernel_dtype();
  const std::vector<float> o_k = output(out, "out", P.packed, s.B, s.N, s.H, s.d, false);
  std::vector<double> o64, l64;
  std::vector<float> o32, l32;
  forward(P, o64, l64);
  forward(P, o32, l32);
  fs::CheckReport r;
  r.coverage = "all " + std::to_string(s.rows()) + " rows";
  r.tensors.push_back(judged("O", o_k, o32, o64, fs::kForwardFactor, fs::kForwardFloor, out_dtype));
  if (!lse.is_none())
    r.tensors.push_back(judged("LSE", output(lse, "lse", P.packed, s.B, s.N, s.H, s.d, true), l32, l64, fs::kForwardFactor,
                               fs::kForwardFloor, fs::DType::fp32));
  return report(r);
}

py::dict check_backward(const py::object& dq, const py::object& dk, const py::object& dv, const py::object& q,
                        const py::object& k, const py::object& v, const py::object& dout, const Keywords& kw) {
  const Problem P = problem(q, k, v, &dout, kw);
  const fs::Shape& s = P.s;
  std::vector<double> q64, k64, v64;
  std::vector<float> q32, k32, v32;
  gradients(P, q64, k64, v64);
  gradients(P, q32, k32, v32);
  fs::CheckReport r;
  r.coverage = "all " + std::to_string(s.rows()) + " rows";
  const std::int64_t Bk = s.B, Nk = P.kv_len, Hk = P.kv_heads;
  auto one = [&](const py::object& g, const char* name, std::int64_t B, std::int64_t N, std::int64_t H, const std::vector<float>& f32,
                 const std::vector<double>& f64) {
    const fs::DType dt = Borrowed(g, name).kernel_dtype();
    r.tensors.push_back(judged(name, output(g, name, P.packed, B, N, H, s.d, false), f32, f64, fs::kBackwardFactor,
                               fs::kBackwardFloor, dt));
  };
  one(dq, "dQ", s.B, s.N, s.H, q32, q64);
  one(dk, "dK", Bk, Nk, Hk, k32, k64);
  one(dv, "dV", Bk, Nk, Hk, v32, v64);
  return report(r);
}

}  // namespace

// The keywords, after flash_attn_func's: dropout_p, softmax_scale, causal, window_size, softcap,
// alibi_slopes; flash_attn_varlen_func's cu_seqlens_q, cu_seqlens_k; and the dropout mask's seed.
#define FS_KEYWORDS                                                                                                  \
  py::arg("dropout_p") = 0.0, py::arg("softmax_scale") = py::none(), py::arg("causal") = false,                      \
      py::arg("window_size") = std::pair<int, int>{-1, -1}, py::arg("softcap") = 0.0, py::arg("alibi_slopes") = py::none(), \
      py::arg("cu_seqlens_q") = py::none(), py::arg("cu_seqlens_k") = py::none(), py::arg("seed") = 1

Keywords keywords(double dropout_p, std::optional<double> scale, bool causal, std::pair<int, int> window, double softcap,
                  py::object alibi, py::object cu_q, py::object cu_k, std::uint64_t seed) {
  return Keywords{dropout_p, scale, causal, window, softcap, std::move(alibi), std::move(cu_q), std::move(cu_k), seed};
}

namespace fs::python {
void add_gpu(py::module_& m);  // flashsteps_gpu.cpp: the kernels on CUDA tensors
}

// The native half of the package flashsteps (common/python/flashsteps/__init__.py is the other).
PYBIND11_MODULE(_flashsteps, m) {
  m.doc() = "flashsteps: the fp64 attention reference, and the project's tolerance rule, on DLPack tensors";
  fs::python::add_gpu(m);
  using O = const py::object&;
  using Scale = std::optional<double>;
  using Window = std::pair<int, int>;
  m.def(
      "reference",
      [](O q, O k, O v, double p, Scale sc, bool c, Window w, double cap, py::object a, py::object cq, py::object ck,
         std::uint64_t seed, bool plain) { return reference(q, k, v, keywords(p, sc, c, w, cap, a, cq, ck, seed), plain); },
      "Exact attention in float64 on the CPU, as flash_attn_func defines it: q (batch, seqlen_q, heads, head_dim), k\n"
      "and v (batch, seqlen_k, heads_k, head_dim), heads a multiple of heads_k; or, with cu_seqlens (int32 prefix sums),\n"
      "q (total_q, heads, head_dim) and k, v (total_k, heads_k, head_dim) as flash_attn_varlen_func takes them. Masks\n"
      "align to the bottom-right corner when seqlen_q != seqlen_k. Dropout uses the project's Philox mask of `seed`.\n"
      "Returns (out, lse): out like q, float64; lse (batch, heads, seqlen_q), or (heads, total_q) packed.\n"
      "plain=True: the plain float32 implementation instead, rounding where a kernel of q's dtype must (what check()\n"
      "measures err_fp32 with), its values in float64 arrays.",
      py::arg("q"), py::arg("k"), py::arg("v"), FS_KEYWORDS, py::arg("plain") = false);
  m.def(
      "reference_backward",
      [](O q, O k, O v, O dout, double p, Scale sc, bool c, Window w, double cap, py::object a, py::object cq, py::object ck,
         std::uint64_t seed) { return reference_backward(q, k, v, dout, keywords(p, sc, c, w, cap, a, cq, ck, seed)); },
      "The gradients of sum(out * dout) in float64, (dq, dk, dv) shaped like q, k, v (dk, dv summed over a GQA group).\n"
      "The keywords are reference()'s.",
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("dout"), FS_KEYWORDS);
  m.def(
      "check",
      [](O out, O q, O k, O v, O lse, double p, Scale sc, bool c, Window w, double cap, py::object a, py::object cq,
         py::object ck, std::uint64_t seed) { return check(out, q, k, v, lse, keywords(p, sc, c, w, cap, a, cq, ck, seed)); },
      "Checks a kernel's out (and lse) for q, k, v by the project's rule: max |out - fp64| <= 2 * max |fp32 - fp64| + floor,\n"
      "where fp32 is a plain float32 implementation of the same math that rounds where a kernel of q's dtype must.\n"
      "Returns a dict: ok, tensors (name, err, err_fp32, tol, non_finite, ok each) and a printable summary.",
      py::arg("out"), py::arg("q"), py::arg("k"), py::arg("v"), py::arg("lse") = py::none(), FS_KEYWORDS);
  m.def(
      "check_backward",
      [](O dq, O dk, O dv, O q, O k, O v, O dout, double p, Scale sc, bool c, Window w, double cap, py::object a,
         py::object cq, py::object ck, std::uint64_t seed) {
        return check_backward(dq, dk, dv, q, k, v, dout, keywords(p, sc, c, w, cap, a, cq, ck, seed));
      },
      "check() for a kernel's gradients: factor 3 instead of 2.", py::arg("dq"), py::arg("dk"), py::arg("dv"), py::arg("q"),
      py::arg("k"), py::arg("v"), py::arg("dout"), FS_KEYWORDS);
  m.def(
      "alibi_slopes",
      [](int heads) {
        if (heads < 1) throw py::value_error("heads must be at least 1");
        const std::vector<float> s = fs::alibi_slopes(heads);
        py::array_t<float> out(static_cast<py::ssize_t>(s.size()));
        std::memcpy(out.mutable_data(), s.data(), s.size() * sizeof(float));
        return out;
      },
      "The standard geometric ALiBi slopes of `heads` heads, float32.", py::arg("heads"));
  m.def(
      "_address", [](O t) { return Borrowed(t, "tensor").address(); },
      "The address DLPack gives for a tensor's first element (the tests check that no copy was made).");
}
