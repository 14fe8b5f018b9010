// What the module's two halves share on pybind11's side — the fp64 reference (flashsteps.cpp) and
// the kernels on CUDA tensors (flashsteps_gpu.cpp): a tensor borrowed through DLPack, and the
// keywords read from their Python objects. The checks themselves are the plain layer's
// (common/python/arguments.hpp), whose ArgError the module raises as ValueError or TypeError.
#pragma once

#include <dlpack/dlpack.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "common/python/arguments.hpp"

namespace fs::python {

namespace py = pybind11;

inline std::string type_name(const py::handle& obj) { return py::str(py::type::of(obj).attr("__name__")); }

// A tensor borrowed through DLPack for the length of one call: `__dlpack__()` hands over a
// capsule owning a DLManagedTensor, renamed "used_dltensor" once taken (the protocol's rule)
// and released by its deleter when this goes away.
class Borrowed : public TensorArg {
 public:
  // stream: for a CUDA tensor, the stream its consumer runs on (the DLPack protocol; the producer
  // orders its pending work before it). Asked only of a CUDA tensor, by __dlpack_device__ first:
  // a CPU tensor takes no stream (NumPy refuses any but None, with its own error).
  Borrowed(const py::object& obj, const char* name, const std::int64_t* stream = nullptr) : TensorArg(name) {
    if (!py::hasattr(obj, "__dlpack__"))
      type_error(std::string(name) + ": expected a tensor with __dlpack__ (NumPy, PyTorch, CuPy, JAX), got " + type_name(obj));
    if (stream && device_type(obj, name) != kDLCUDA)
      value_error(std::string(name) + ": the kernels run on the GPU; pass a CUDA tensor (the CPU reference is "
                                      "flashsteps.reference)");
    py::capsule cap = stream ? obj.attr("__dlpack__")(py::arg("stream") = *stream) : obj.attr("__dlpack__")();
    if (std::strcmp(cap.name(), "dltensor") != 0) type_error(std::string(name) + ": __dlpack__ gave no dltensor capsule");
    managed_ = static_cast<DLManagedTensor*>(cap.get_pointer());
    PyCapsule_SetName(cap.ptr(), "used_dltensor");
    reset(managed_->dl_tensor);
  }
  Borrowed(const Borrowed&) = delete;
  Borrowed& operator=(const Borrowed&) = delete;
  ~Borrowed() {
    if (managed_ && managed_->deleter) managed_->deleter(managed_);
  }

 private:
  // The protocol's __dlpack_device__(): (device type, device id); none: a producer that predates it.
  static int device_type(const py::object& obj, const char* name) {
    if (!py::hasattr(obj, "__dlpack_device__")) return kDLCUDA;
    try {
      return py::tuple(obj.attr("__dlpack_device__")())[0].cast<int>();
    } catch (const py::cast_error&) {
      type_error(std::string(name) + ": __dlpack_device__ gave no (device type, id)");
    }
  }
  DLManagedTensor* managed_ = nullptr;
};

// Keywords from their Python objects, each refused in one line where its C++ type cannot hold it
// (pybind11's own refusal lists every signature over several lines).
inline double number(const py::handle& x, const char* name) {
  const bool text_or_none = py::isinstance<py::str>(x) || x.is_none();
  try {
    if (!text_or_none) return x.cast<double>();  // float, int, NumPy's scalars: what has __float__
  } catch (const py::cast_error&) {
  }
  type_error(std::string(name) + ": expected a number, got " + type_name(x));
}

inline std::int64_t integer(const py::handle& x, const char* name, std::int64_t lo, std::int64_t hi) {
  if (!PyIndex_Check(x.ptr()) || py::isinstance<py::bool_>(x))
    type_error(std::string(name) + ": expected an integer, got " + type_name(x));
  const py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(x.ptr()));
  if (!index) throw py::error_already_set();
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow || v < lo || v > hi)
    value_error(std::string(name) + " must be from " + std::to_string(lo) + " to " + std::to_string(hi) + " (got " +
                std::string(py::str(index)) + ")");
  return v;
}

inline std::optional<double> optional_number(const py::handle& x, const char* name) {
  if (x.is_none()) return std::nullopt;
  return number(x, name);
}

inline std::optional<int> optional_int(const py::handle& x, const char* name) {
  if (x.is_none()) return std::nullopt;
  return int(integer(x, name, 0, std::numeric_limits<int>::max()));
}

inline std::string text(const py::handle& x, const char* name) {
  if (!py::isinstance<py::str>(x)) type_error(std::string(name) + ": expected a string, got " + type_name(x));
  return x.cast<std::string>();
}

inline bool flag(const py::handle& x) { return py::bool_(py::reinterpret_borrow<py::object>(x)); }

// window_size: (left, right), each an integer (check_keywords bounds them).
inline std::pair<std::int64_t, std::int64_t> window(const py::handle& x) {
  if (!py::isinstance<py::sequence>(x) || py::isinstance<py::str>(x) || py::len(x) != 2)
    type_error("window_size: expected (left, right), two integers; got " + type_name(x));
  const py::sequence seq = py::reinterpret_borrow<py::sequence>(x);
  constexpr std::int64_t lo = std::numeric_limits<std::int64_t>::min(), hi = std::numeric_limits<std::int64_t>::max();
  return {integer(seq[0], "window_size", lo, hi), integer(seq[1], "window_size", lo, hi)};
}

// The keywords every entry point takes (their defaults are the module's), checked.
inline Keywords keywords(const py::handle& dropout_p, const py::handle& softmax_scale, const py::handle& causal,
                         const py::handle& window_size, const py::handle& softcap, const py::handle& seed) {
  Keywords kw;
  kw.dropout_p = number(dropout_p, "dropout_p");
  kw.softmax_scale = optional_number(softmax_scale, "softmax_scale");
  kw.causal = flag(causal);
  std::tie(kw.window_left, kw.window_right) = window(window_size);
  kw.softcap = number(softcap, "softcap");
  if (!PyIndex_Check(seed.ptr()) || py::isinstance<py::bool_>(seed))
    type_error("seed: expected an integer, got " + type_name(seed));
  const py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(seed.ptr()));
  if (!index) throw py::error_already_set();
  const unsigned long long s = PyLong_AsUnsignedLongLong(index.ptr());
  if (PyErr_Occurred()) {
    PyErr_Clear();
    value_error("seed must be from 0 to 2^64 - 1 (got " + std::string(py::str(index)) + ")");
  }
  kw.seed = s;
  check_keywords(kw);
  return kw;
}

}  // namespace fs::python
