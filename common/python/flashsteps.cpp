// The Python module `flashsteps`, its native part _flashsteps: the fp64 CPU reference
// (common/reference.hpp) on any tensor that speaks DLPack — NumPy arrays, PyTorch CPU tensors, and
// others — with flash_attn_func's layout and argument names, so that a kernel's output can be
// checked against it in a few lines (docs/verify.md); and, where CUDA is, the kernels themselves
// (flashsteps_gpu.cpp, flashsteps.attention):
//
//   out, lse = flashsteps.reference(q, k, v, causal=True)         q (B, N, H, d), k, v (B, Nk, Hkv, d)
//   dq, dk, dv = flashsteps.reference_backward(q, k, v, dout, causal=True)
//   out, lse, s_dmask = flashsteps.reference(q, k, v, dropout_p=0.1, return_attn_probs=True)  # P, dropped < 0
//
// The inputs are read in place through DLPack (float32, float16 or bfloat16, any strides; the
// reference computes in double from their float32 values); the outputs are new float64 NumPy
// arrays. Bad shapes, dtypes, devices, values and keywords raise ValueError or TypeError with one
// line (common/python/arguments.hpp checks them, before anything is computed).
#include <dlpack/dlpack.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/attn_probs.hpp"
#include "common/dtype.hpp"
#include "common/errors.hpp"
#include "common/host_memory.hpp"
#include "common/parallel.hpp"
#include "common/python/arguments.hpp"
#include "common/python/dlpack_tensor.hpp"
#include "common/reference.hpp"
#include "common/verify.hpp"

namespace py = pybind11;

namespace {

using fs::python::Borrowed;
using fs::python::Problem;

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

// The forward of P in T (double: the reference; float: the plain float32 implementation, rounding
// where a kernel of P's input dtype must), O in (B, H, N, d) order and LSE.
template <typename T>
void forward(const Problem& P, std::vector<T>& o, std::vector<T>& lse) {
  const fs::AttnOptions opt = fs::python::options_of(P);
  py::gil_scoped_release unlocked;
  fs::reference_forward<T>(P.s, P.q.data(), P.k.data(), P.v.data(), opt, fs::all_indices(P.s.rows()), o, lse);
}

// dQ (B, H, N, d), dK and dV (B, H_kv, N_k, d) of P in T; a GQA group's heads add up.
template <typename T>
void gradients(const Problem& P, std::vector<T>& dq, std::vector<T>& dk, std::vector<T>& dv) {
  const fs::AttnOptions opt = fs::python::options_of(P);
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

// The keywords every entry point takes, after its tensors: the numbers (fs::python::Keywords,
// checked) and the tensors among them.
struct Keywords {
  fs::python::Keywords kw;
  py::object alibi = py::none(), cu_q = py::none(), cu_k = py::none();
};

// The call's problem, its tensors borrowed for as long as they are read (the layer copies them).
Problem problem(const py::object& q_obj, const py::object& k_obj, const py::object& v_obj, const py::object* dout_obj,
                const Keywords& kw) {
  const Borrowed q(q_obj, "q"), k(k_obj, "k"), v(v_obj, "v");
  std::optional<Borrowed> dout, alibi, cu_q, cu_k;
  if (dout_obj) dout.emplace(*dout_obj, "dout");
  if (!kw.alibi.is_none()) alibi.emplace(kw.alibi, "alibi_slopes");
  if (!kw.cu_q.is_none()) cu_q.emplace(kw.cu_q, "cu_seqlens_q");
  if (!kw.cu_k.is_none()) cu_k.emplace(kw.cu_k, "cu_seqlens_k");
  auto ptr = [](const std::optional<Borrowed>& b) -> const fs::python::TensorArg* { return b ? &*b : nullptr; };
  return fs::python::reference_problem(q, k, v, ptr(dout), kw.kw, ptr(alibi), ptr(cu_q), ptr(cu_k));
}

// The attention probabilities' array (flash_attn's S_dmask, return_attn_probs=True): (batch, heads,
// seqlen_q, seqlen_k), or with packed sequences (sequences, heads, longest queries, longest keys),
// sequence b's P in its top-left corner; refused past kMaxAttnProbs entries, as the kernels' are.
std::vector<py::ssize_t> probs_dims(const Problem& P) {
  std::vector<py::ssize_t> dims{P.s.B, P.s.H, P.s.N, P.kv_len};
  if (P.packed) {
    dims[0] = py::ssize_t(P.cu_q.size()) - 1;
    dims[2] = dims[3] = 0;
    for (std::size_t b = 1; b < P.cu_q.size(); ++b) {
      dims[2] = std::max<py::ssize_t>(dims[2], P.cu_q[b] - P.cu_q[b - 1]);
      dims[3] = std::max<py::ssize_t>(dims[3], P.cu_k[b] - P.cu_k[b - 1]);
    }
  }
  const double entries = double(dims[0]) * double(dims[1]) * double(dims[2]) * double(dims[3]);
  if (entries > double(fs::kMaxAttnProbs))
    fs::python::value_error("return_attn_probs: batch·heads·seqlen_q·seqlen_k = " + std::to_string(std::int64_t(entries)) +
                            " entries, past the attention probabilities' limit of 2^28 = " +
                            std::to_string(fs::kMaxAttnProbs) + " (they are for tests and small problems)");
  fs::require_host_memory(std::uint64_t(entries) * 8, "return_attn_probs: the float64 probabilities");  // InputError
  return dims;
}

// P of every row by reference_probs_row in T (double: the reference; float: the plain float32
// implementation), the dropped entries negative, in probs_dims' layout.
template <typename T>
py::array_t<double> probs_array(const Problem& P, const std::vector<py::ssize_t>& dims) {
  py::array_t<double> out(dims);
  double* p = out.mutable_data();
  std::fill(p, p + out.size(), 0.0);
  const fs::AttnOptions opt = fs::python::options_of(P);
  const fs::Shape& s = P.s;
  const std::int64_t rows = dims[2], cols = dims[3];
  py::gil_scoped_release unlocked;
  fs::parallel_for(s.rows(), [&](std::int64_t row) {
    const std::int64_t bh = row / s.N, t = row % s.N;
    std::int64_t b = bh / s.H, i = t;
    if (P.packed) {  // the sequence of token t, and t's place in it
      b = std::upper_bound(P.cu_q.begin(), P.cu_q.end(), std::int32_t(t)) - P.cu_q.begin() - 1;
      i = t - P.cu_q[std::size_t(b)];
    }
    std::vector<T> prow;
    fs::reference_probs_row<T>(s, P.q.data(), P.k.data(), opt, row, prow);
    double* dst = p + ((b * s.H + bh % s.H) * rows + i) * cols;
    for (std::size_t j = 0; j < prow.size(); ++j) dst[j] = double(prow[j]);
  });
  return out;
}

// plain: the plain float32 implementation's result instead of the float64 one (the values check()
// measures err_fp32 with), in float64 arrays. probs: S_dmask as well (probs_array).
py::tuple reference(const py::object& q, const py::object& k, const py::object& v, const Keywords& kw, bool plain,
                    bool probs) {
  const Problem P = problem(q, k, v, nullptr, kw);
  const std::vector<py::ssize_t> dims = probs ? probs_dims(P) : std::vector<py::ssize_t>{};
  std::vector<double> o, lse;
  if (plain) {
    std::vector<float> o32, lse32;
    forward(P, o32, lse32);
    o.assign(o32.begin(), o32.end());
    lse.assign(lse32.begin(), lse32.end());
  } else {
    forward(P, o, lse);
  }
  py::array_t<double> out = from_bhnd(o, P.s.B, P.s.H, P.s.N, P.s.d, P.packed);
  if (!probs) return py::make_tuple(out, lse_array(P, lse));
  return py::make_tuple(out, lse_array(P, lse), plain ? probs_array<float>(P, dims) : probs_array<double>(P, dims));
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

// A kernel's output tensor, read in the reference's layout after its shape is checked.
std::vector<float> output(const py::object& obj, const char* name, const Problem& P, std::int64_t B, std::int64_t N,
                          std::int64_t H, bool lse, fs::DType* dtype = nullptr) {
  const Borrowed b(obj, name);
  std::vector<float> out = fs::python::kernel_output(b, P, B, N, H, lse);
  if (dtype) *dtype = b.kernel_dtype();
  return out;
}

py::dict check(const py::object& out, const py::object& q, const py::object& k, const py::object& v, const py::object& lse,
               const Keywords& kw) {
  const Problem P = problem(q, k, v, nullptr, kw);
  const fs::Shape& s = P.s;
  fs::DType out_dtype = fs::DType::fp32;
  const std::vector<float> o_k = output(out, "out", P, s.B, s.N, s.H, false, &out_dtype);
  std::vector<double> o64, l64;
  std::vector<float> o32, l32;
  forward(P, o64, l64);
  forward(P, o32, l32);
  fs::CheckReport r;
  r.coverage = "all " + std::to_string(s.rows()) + " rows";
  r.tensors.push_back(judged("O", o_k, o32, o64, fs::kForwardFactor, fs::kForwardFloor, out_dtype));
  if (!lse.is_none())
    r.tensors.push_back(judged("LSE", output(lse, "lse", P, s.B, s.N, s.H, true), l32, l64, fs::kForwardFactor,
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
    fs::DType dt = fs::DType::fp32;
    const std::vector<float> got = output(g, name, P, B, N, H, false, &dt);
    r.tensors.push_back(judged(name, got, f32, f64, fs::kBackwardFactor, fs::kBackwardFloor, dt));
  };
  one(dq, "dQ", s.B, s.N, s.H, q32, q64);
  one(dk, "dK", Bk, Nk, Hk, k32, k64);
  one(dv, "dV", Bk, Nk, Hk, v32, v64);
  return report(r);
}

}  // namespace

// The keywords, after flash_attn_func's: dropout_p, softmax_scale, causal, window_size, softcap,
// alibi_slopes ((heads) or (batch, heads)); flash_attn_varlen_func's cu_seqlens_q, cu_seqlens_k;
// and the dropout mask's seed.
// Each is taken as a Python object and read by fs::python::keywords: a value its C++ type cannot
// hold is one line, not pybind11's list of signatures.
#define FS_KEYWORDS                                                                                                  \
  py::arg("dropout_p") = 0.0, py::arg("softmax_scale") = py::none(), py::arg("causal") = false,                      \
      py::arg("window_size") = py::make_tuple(-1, -1), py::arg("softcap") = 0.0, py::arg("alibi_slopes") = py::none(), \
      py::arg("cu_seqlens_q") = py::none(), py::arg("cu_seqlens_k") = py::none(), py::arg("seed") = 1

Keywords keywords(const py::object& dropout_p, const py::object& scale, const py::object& causal, const py::object& window,
                  const py::object& softcap, py::object alibi, py::object cu_q, py::object cu_k, const py::object& seed) {
  return Keywords{fs::python::keywords(dropout_p, scale, causal, window, softcap, seed), std::move(alibi), std::move(cu_q),
                  std::move(cu_k)};
}

namespace fs::python {
void add_gpu(py::module_& m);     // flashsteps_gpu.cpp: the kernels on CUDA tensors
void add_probs(py::module_& m);   // flashsteps_probs.cpp: the attention probabilities of a call
void add_decode(py::module_& m);  // flashsteps_decode.cpp: step 10's, where it is built
}

// The native half of the package flashsteps (common/python/flashsteps/__init__.py is the other).
PYBIND11_MODULE(_flashsteps, m) {
  m.doc() = "flashsteps: the fp64 attention reference, and the project's tolerance rule, on DLPack tensors";
  // A refused argument (the layer's ArgError; a problem past the memory available, InputError) is
  // ValueError or TypeError with its one line.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const fs::python::ArgError& e) {
      PyErr_SetString(e.kind() == fs::python::ArgError::Type ? PyExc_TypeError : PyExc_ValueError, e.what());
    } catch (const fs::InputError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
  fs::python::add_gpu(m);
  fs::python::add_probs(m);
#ifdef FS_PYTHON_DECODE
  fs::python::add_decode(m);
#endif
  using O = const py::object&;
  m.def(
      "reference",
      [](O q, O k, O v, O p, O sc, O c, O w, O cap, py::object a, py::object cq, py::object ck, O seed, O plain,
         O probs) {
        return reference(q, k, v, keywords(p, sc, c, w, cap, a, cq, ck, seed), fs::python::flag(plain),
                         fs::python::flag(probs));
      },
      "Exact attention in float64 on the CPU, as flash_attn_func defines it: q (batch, seqlen_q, heads, head_dim), k\n"
      "and v (batch, seqlen_k, heads_k, head_dim), heads a multiple of heads_k; or, with cu_seqlens (int32 prefix sums),\n"
      "q (total_q, heads, head_dim) and k, v (total_k, heads_k, head_dim) as flash_attn_varlen_func takes them. Masks\n"
      "align to the bottom-right corner when seqlen_q != seqlen_k. alibi_slopes: (heads) or (batch, heads), a row per\n"
      "batch (with cu_seqlens, per sequence). Dropout uses the project's Philox mask of `seed`.\n"
      "Returns (out, lse): out like q, float64; lse (batch, heads, seqlen_q), or (heads, total_q) packed.\n"
      "plain=True: the plain float32 implementation instead, rounding where a kernel of q's dtype must (what check()\n"
      "measures err_fp32 with), its values in float64 arrays.\n"
      "return_attn_probs=True: (out, lse, S_dmask), S_dmask flash_attn's attention probabilities P = exp(S - lse),\n"
      "(batch, heads, seqlen_q, seqlen_k) float64 (packed: (sequences, heads, longest seqlen_q, longest seqlen_k), each\n"
      "sequence's P in its corner, zero past it), 0 where masked, negative where the dropout mask of `seed` dropped\n"
      "the entry (the sign bit: -0 too); at most 2^28 entries.",
      py::arg("q"), py::arg("k"), py::arg("v"), FS_KEYWORDS, py::arg("plain") = false,
      py::arg("return_attn_probs") = false);
  m.def(
      "reference_backward",
      [](O q, O k, O v, O dout, O p, O sc, O c, O w, O cap, py::object a, py::object cq, py::object ck, O seed) {
        return reference_backward(q, k, v, dout, keywords(p, sc, c, w, cap, a, cq, ck, seed));
      },
      "The gradients of sum(out * dout) in float64, (dq, dk, dv) shaped like q, k, v (dk, dv summed over a GQA group).\n"
      "The keywords are reference()'s.",
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("dout"), FS_KEYWORDS);
  m.def(
      "check",
      [](O out, O q, O k, O v, O lse, O p, O sc, O c, O w, O cap, py::object a, py::object cq, py::object ck, O seed) {
        return check(out, q, k, v, lse, keywords(p, sc, c, w, cap, a, cq, ck, seed));
      },
      "Checks a kernel's out (and lse) for q, k, v by the project's rule: max |out - fp64| <= 2 * max |fp32 - fp64| + floor,\n"
      "where fp32 is a plain float32 implementation of the same math that rounds where a kernel of q's dtype must.\n"
      "Returns a dict: ok, tensors (name, err, err_fp32, tol, non_finite, ok each) and a printable summary.",
      py::arg("out"), py::arg("q"), py::arg("k"), py::arg("v"), py::arg("lse") = py::none(), FS_KEYWORDS);
  m.def(
      "check_backward",
      [](O dq, O dk, O dv, O q, O k, O v, O dout, O p, O sc, O c, O w, O cap, py::object a, py::object cq, py::object ck,
         O seed) { return check_backward(dq, dk, dv, q, k, v, dout, keywords(p, sc, c, w, cap, a, cq, ck, seed)); },
      "check() for a kernel's gradients: factor 3 instead of 2.", py::arg("dq"), py::arg("dk"), py::arg("dv"), py::arg("q"),
      py::arg("k"), py::arg("v"), py::arg("dout"), FS_KEYWORDS);
  m.def(
      "alibi_slopes",
      [](O heads) {
        const std::vector<float> s = fs::python::alibi_slopes_of(fs::python::integer(heads, "heads", 1, std::int64_t(1) << 62));
        // The shape's form: pybind11 2.10's count form takes the item size from NumPy's descriptor,
        // whose layout NumPy 2 changed (every slope read back as the first).
        py::array_t<float> out(std::vector<py::ssize_t>{static_cast<py::ssize_t>(s.size())});
        std::memcpy(out.mutable_data(), s.data(), s.size() * sizeof(float));
        return out;
      },
      "The standard geometric ALiBi slopes of `heads` heads, float32.", py::arg("heads"));
  m.def(
      "_address", [](O t) { return fs::python::Borrowed(t, "tensor").address(); },
      "The address DLPack gives for a tensor's first element (the tests check that no copy was made).");
}
