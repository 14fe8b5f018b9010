// The layout check of the kernels that move rows in 16-byte pieces (float4 loads and stores,
// cp.async, TMA): steps 04–09, whatever their element type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/check.hpp"
#include "common/problem.hpp"

namespace fs {

// A tensor's strides as the kernels read them: its own, or the contiguous (B, heads, rows, d)
// layout's where left at zero (Strides::or_dense). Every row must start on a 16-byte boundary:
// the address and the strides multiples of 16 / elem_bytes elements. Throws CudaError (invalid
// value) otherwise, naming `who` and the tensor.
inline Strides row_aligned_strides(const std::string& who, const char* name, const void* t, const Strides& st,
                                   int heads, int rows, int d, std::size_t elem_bytes) {
  const Strides s = st.or_dense(heads, rows, d);
  const std::int64_t chunk = 16 / static_cast<std::int64_t>(elem_bytes);  // elements in 16 bytes
  if (reinterpret_cast<std::uintptr_t>(t) % 16 != 0 || s.batch % chunk != 0 || s.head % chunk != 0 || s.row % chunk != 0)
    throw CudaError(cudaErrorInvalidValue, who + ": " + name +
                                               ": every row must start on a 16-byte boundary (its address and strides "
                                               "a multiple of " + std::to_string(chunk) +
                                               (elem_bytes == 4 ? " floats)" : " elements)"));
  return s;
}

}  // namespace fs
