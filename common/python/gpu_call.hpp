// What the module's kernel calls share (flashsteps_gpu.cpp: steps 04, 05 and 08;
// flashsteps_decode.cpp: step 10): a CUDA tensor of the call, borrowed through DLPack for the launch
// stream; the tensors' GPU made current for the call; whether the stream is being captured into a
// CUDA graph; device memory for a pass, the caller's allocator's or in the stream's order; and a
// launcher's refusal turned into the caller's ValueError.
#pragma once

#include <cuda_runtime.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
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

// Whether `stream` is being captured into a CUDA graph (torch.cuda.graph, cudaStreamBeginCapture).
// While it is, nothing in the call may make the host wait for the GPU: values on the device (the
// offsets of packed sequences, a decoding's lengths and block table) are then not copied back to
// be checked, and what the grid needs of them comes from the shapes and the caller's bounds.
inline bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  FS_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

// Device memory for one pass. Where the caller gives `allocate` (a callable taking a byte count and
// returning a 1-D uint8 CUDA tensor of at least that many bytes: flashsteps/_ops.py passes
// torch.empty's), the memory is the caller's allocator's and the tensor is held for the length of
// the call: PyTorch's caching allocator hands it to the next user on this stream only after the
// kernels queued here, and while a CUDA graph is captured it comes from the graph's pool, which the
// graph keeps for its replays. Without one it is allocated and freed here in the stream's order
// (cudaMallocAsync), for attention_into's callers (CuPy, JAX), whose allocators this cannot reach.
class Workspace {
 public:
  Workspace(std::size_t bytes, std::int64_t stream, const py::object& allocate, int device)
      : stream_(reinterpret_cast<cudaStream_t>(stream)) {
    if (!bytes) return;
    if (allocate.is_none()) {
      FS_CUDA_CHECK(cudaMallocAsync(&p_, bytes, stream_));
      owned_ = true;
      return;
    }
    if (!PyCallable_Check(allocate.ptr()))
      throw py::type_error("workspace: a callable taking a byte count and returning a CUDA tensor, got " + type_name(allocate));
    tensor_ = allocate(bytes);
    const std::int64_t dl = dlpack_stream(stream);
    tensor_view_.emplace(tensor_, "workspace", &dl);
    const Borrowed& b = *tensor_view_;
    const DLDataType t = b.t().dtype;
    // 256 bytes: cudaMalloc's alignment, which the kernels' vector loads from the workspace assume.
    const bool ok = b.t().device.device_type == kDLCUDA && b.t().device.device_id == device && b.ndim() == 1 &&
                    t.bits == 8 && t.lanes == 1 && b.dim(0) >= std::int64_t(bytes) && (b.dim(0) < 2 || b.stride(0) == 1) &&
                    b.address() % 256 == 0;
    if (!ok)
      throw py::value_error("workspace: the allocator must return a contiguous 1-D 8-bit tensor of at least " +
                            std::to_string(bytes) + " bytes on q's GPU, 256-byte aligned; got " + Borrowed::dtype_name(t) +
                            " " + b.shape());
    p_ = reinterpret_cast<void*>(b.address());
  }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  ~Workspace() {
    if (owned_) cudaFreeAsync(p_, stream_);
  }
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
  cudaStream_t stream_;
  bool owned_ = false;
  py::object tensor_;                   // the caller's allocation, alive until the kernels are queued
  std::optional<Borrowed> tensor_view_;  // its DLPack view (released before tensor_: declared after it)
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
