// A tensor handed over through DLPack, for the module's two halves: the fp64 reference
// (flashsteps.cpp) and the kernels on CUDA tensors (flashsteps_gpu.cpp).
#pragma once

#include <dlpack/dlpack.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/dtype.hpp"

namespace fs::python {

namespace py = pybind11;

// A tensor borrowed through DLPack for the length of one call: `__dlpack__()` hands over a
// capsule owning a DLManagedTensor, renamed "used_dltensor" once taken (the protocol's rule)
// and released by its deleter when this goes away.
class Borrowed {
 public:
  Borrowed(const py::object& obj, const char* name, const std::int64_t* stream = nullptr) : name_(name) {
    if (!py::hasattr(obj, "__dlpack__"))
      throw py::type_error(std::string(name) + ": expected a tensor with __dlpack__ (NumPy, PyTorch, CuPy, JAX), got " +
                           std::string(py::str(py::type::of(obj).attr("__name__"))));
    // stream: for a CUDA tensor, the stream its consumer runs on (the DLPack protocol; the
    // producer orders its pending work before it); none for a CPU tensor.
    py::capsule cap = stream ? obj.attr("__dlpack__")(py::arg("stream") = *stream) : obj.attr("__dlpack__")();
    if (std::strcmp(cap.name(), "dltensor") != 0) throw py::type_error(std::string(name) + ": __dlpack__ gave no dltensor capsule");
    managed_ = static_cast<DLManagedTensor*>(cap.get_pointer());
    PyCapsule_SetName(cap.ptr(), "used_dltensor");
  }
  Borrowed(const Borrowed&) = delete;
  Borrowed& operator=(const Borrowed&) = delete;
  ~Borrowed() {
    if (managed_ && managed_->deleter) managed_->deleter(managed_);
  }

  const DLTensor& t() const { return managed_->dl_tensor; }
  int ndim() const { return t().ndim; }
  std::int64_t dim(int i) const { return t().shape[i]; }
  // Stride of dimension i in elements (row-major when the producer gives none).
  std::int64_t stride(int i) const {
    if (t().strides) return t().strides[i];
    std::int64_t s = 1;
    for (int j = ndim() - 1; j > i; --j) s *= t().shape[j];
    return s;
  }
  const char* name() const { return name_; }
  std::uintptr_t address() const { return reinterpret_cast<std::uintptr_t>(t().data) + t().byte_offset; }

  // The reference reads the CPU's memory; a float tensor of 16 or 32 bits (one lane).
  void require_cpu_float() const {
    if (t().device.device_type != kDLCPU && t().device.device_type != kDLCUDAHost)
      throw py::value_error(std::string(name_) + ": the reference runs on the CPU; pass a CPU tensor (e.g. x.cpu())");
    const DLDataType d = t().dtype;
    const bool ok = d.lanes == 1 && ((d.code == kDLFloat && (d.bits == 32 || d.bits == 16)) || (d.code == kDLBfloat && d.bits == 16));
    if (!ok)
      throw py::type_error(std::string(name_) + ": expected float32, float16 or bfloat16 (the kernels' inputs); got " +
                           dtype_name(d) + (d.code == kDLFloat && d.bits == 64 ? " — convert with .astype(numpy.float32) or .float()" : ""));
  }
  // Element `offset` (in elements) as a float: float32 as is, 16-bit types widened exactly.
  float at(std::int64_t offset) const {
    const auto* base = reinterpret_cast<const unsigned char*>(address());
    const DLDataType d = t().dtype;
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

  // The kernel dtype a float tensor of 16 or 32 bits stands for.
  fs::DType kernel_dtype() const {
    const DLDataType d = t().dtype;
    return d.code == kDLBfloat ? fs::DType::bf16 : d.bits == 16 ? fs::DType::fp16 : fs::DType::fp32;
  }

  static std::string dtype_name(DLDataType d) {
    const char* kind = d.code == kDLFloat ? "float" : d.code == kDLBfloat ? "bfloat" : d.code == kDLInt ? "int" : d.code == kDLUInt ? "uint" : "type";
    return std::string(kind) + std::to_string(d.bits) + (d.lanes != 1 ? "x" + std::to_string(d.lanes) : "");
  }

 private:
  static float half_to_float(std::uint16_t h) {
    const int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
    float v;
    if (exp == 0) v = std::ldexp(float(mant), -24);                    // zero, subnormal
    else if (exp == 31) v = mant ? NAN : INFINITY;                      // inf, NaN
    else v = std::ldexp(float(mant | 1024), exp - 25);
    return sign ? -v : v;
  }
  const char* name_;
  DLManagedTensor* managed_ = nullptr;
};

inline std::string shape_text(const std::vector<std::int64_t>& dims) {
  std::string s = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + (dims.size() == 1 ? ",)" : ")");
}

inline std::string shape_of(const Borrowed& b) {
  std::vector<std::int64_t> dims;
  for (int i = 0; i < b.ndim(); ++i) dims.push_back(b.dim(i));
  return shape_text(dims);
}

// flash_attn_varlen_func's cu_seqlens_q, cu_seqlens_k: prefix sums of equal length (batch + 1), from 0,
// non-decreasing, to the tokens of q (n_q) and of k (n_k). Throws ValueError (pybind11) otherwise.
template <class ValueError>
void require_prefix_sums(const std::vector<std::int32_t>& cu_q, const std::vector<std::int32_t>& cu_k, std::int64_t n_q,
                         std::int64_t n_k) {
  if (cu_q.size() != cu_k.size() || cu_q.size() < 2 || cu_q.front() != 0 || cu_k.front() != 0 || cu_q.back() != n_q ||
      cu_k.back() != n_k)
    throw ValueError("cu_seqlens_q, cu_seqlens_k: prefix sums of equal length (batch + 1) from 0 to the tokens of q (" +
                     std::to_string(n_q) + ") and of k (" + std::to_string(n_k) + ")");
  for (std::size_t i = 1; i < cu_q.size(); ++i)
    if (cu_q[i] < cu_q[i - 1] || cu_k[i] < cu_k[i - 1]) throw ValueError("cu_seqlens: offsets must not decrease");
}

}  // namespace fs::python
