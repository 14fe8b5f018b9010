#include "common/check.hpp"

#include <sstream>

namespace fs {

void throw_cuda_error(cudaError_t code, const char* expr, const char* file, int line) {
  std::ostringstream msg;
  msg << file << ":" << line << ": " << expr << " failed: " << cudaGetErrorName(code) << " ("
      << cudaGetErrorString(code) << ")";
  throw CudaError(code, msg.str());
}

}  // namespace fs
