// What the module's kernel calls share (flashsteps_gpu.cpp: steps 04, 05 and 08;
// flashsteps_decode.cpp: step 10): a CUDA tensor of the call, borrowed through DLPack for the launch
// stream; the tensors' GPU made current for the call; device memory in the stream's order; and a
// launcher's refusal turned into the caller's ValueError.
#pragma once

#include <cuda_runtime.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/check.hpp"
#include "common/problem.hpp"
#include "common/python/arguments.hpp"
#include "common/python/dlpack_tensor.hpp"

namespace fs::python {

namespace py = pybind11;

// The stream a tensor is handed over for, as DLPack numbers them: the launch stream's pointer, or
// 1 for the legacy default stream (whose pointer, 0, the protocol leaves ambiguous).
inline std::int64_t dlpack_stream(std::int64_t launch_stream) { return launch_stream == 0 ? 1 : launch_stream; }

struct Operand {
  Operand(const py::object& obj, const char* name, std::int64_t stream) : dl(dlpack_stream(stream)), t(obj, name, &dl) {
    if (t.t().device.device_type != kDLCUDA)
      throw py::value_error(std::string(name) + ": the kernels run on the GPU; pass a CUDA tensor (the CPU reference is "
                                                "flashsteps.reference)");
  }
  // dims: (batch, seqlen, heads, head_dim), or (tokens, heads, head_dim) for packed sequences.
  void expect(const std::vector<std::int64_t>& dims) const {
    bool same = t.ndim() == int(dims.size());
    for (int i = 0; same && i < t.ndim(); ++i) same = t.dim(i) == dims[i];
    if (!same) throw py::value_error(std::string(t.name()) + ": shape " + t.shape() + ", expected " + fs::python::shape_text(dims));
    if (t.stride(t.ndim() - 1) != 1 && dims.back() > 1)
      throw py::value_error(std::string(t.name()) + ": the last dimension (head_dim) must be contiguous (stride 1)");
  }
  // (batch, seqlen, heads, head_dim) or (tokens, heads, head_dim) → the kernels' (batch, head, row) strides.
  fs::Strides strides() const {
    return t.ndim() == 4 ? fs::Strides{t.stride(0), t.stride(2), t.stride(1)} : fs::Strides{0, t.stride(1), t.stride(0)};
  }
  void* data() const { return reinterpret_cast<void*>(t.address()); }
  std::int64_t dl;
  Borrowed t;
};

// The tensors' GPU current for the length of a call.
class OnDevice {
 public:
  explicit OnDevice(int device) {
    FS_CUDA_CHECK(cudaGetDevice(&before_));
    if (device != before_) FS_CUDA_CHECK(cudaSetDevice(device));
  }
  ~OnDevice() { cudaSetDevice(before_); }

 private:
  int before_ = 0;
};

// Device memory for one pass, allocated and freed in the stream's order.
class StreamBytes {
 public:
  StreamBytes(std::size_t bytes, cudaStream_t stream) : stream_(stream) {
    if (bytes) FS_CUDA_CHECK(cudaMallocAsync(&p_, bytes, stream));
  }
  ~StreamBytes() {
    if (p_) cudaFreeAsync(p_, stream_);
  }
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
  cudaStream_t stream_;
};

// A launcher's refusal of what it was handed (a layout off the 16-byte grid) is the caller's
// error; anything else the launch reports is the GPU's.
template <typename F>
void launched(F&& f) {
  try {
    f();
  } catch (const fs::CudaError& e) {
    if (e.code() == cudaErrorInvalidValue) throw py::value_error(e.what());
    throw;
  }
  FS_CUDA_CHECK(cudaGetLastError());
}

}  // namespace fs::python
