// CUDA error checks that name the failing expression and its place.
//
//   FS_CUDA_CHECK(cudaMalloc(&p, bytes));   // throws fs::CudaError on failure
//   my_kernel<<<grid, block, 0, stream>>>(...);
//   FS_CHECK_LAUNCH();                      // after every launch: bad configuration,
//                                           // too much shared memory, ...
#pragma once

#include <cuda_runtime.h>

#include <sstream>
#include <stdexcept>
#include <string>

namespace fs {

// A CUDA runtime call failed. code() keeps the runtime's error so callers can tell
// "out of memory" (exit code 3) from a bug (exit code 1).
class CudaError : public std::runtime_error {
 public:
  CudaError(cudaError_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
  cudaError_t code() const { return code_; }

 private:
  cudaError_t code_;
};

[[noreturn]] inline void throw_cuda_error(cudaError_t code, const char* expr, const char* file, int line) {
  std::ostringstream msg;
  msg << file << ":" << line << ": " << expr << " failed: " << cudaGetErrorName(code) << " ("
      << cudaGetErrorString(code) << ")";
  throw CudaError(code, msg.str());
}

}  // namespace fs

#define FS_CUDA_CHECK(expr)                                                   \
  do {                                                                        \
    cudaError_t fs_err_ = (expr);                                             \
    if (fs_err_ != cudaSuccess) fs::throw_cuda_error(fs_err_, #expr, __FILE__, __LINE__); \
  } while (0)

// cudaPeekAtLastError reports launch-time errors without clearing sticky state; errors that
// happen while the kernel runs surface at the next synchronising call's FS_CUDA_CHECK.
#define FS_CHECK_LAUNCH() FS_CUDA_CHECK(cudaPeekAtLastError())
