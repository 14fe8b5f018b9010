// .npy files (NumPy's format, version 1.0 to 3.0), C order only, so users can feed their own
// tensors and read ours back:   np.load("o.npy"),  torch.from_numpy(...). Tensors are float32;
// the generic reader below also takes the integer and bool arrays of block masks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.hpp"

namespace fs {

struct NpyArray {
  std::vector<std::int64_t> shape;
  std::vector<float> data;
};

// Throws InputError naming the file and what is wrong with it: missing, not .npy, a dtype
// other than little-endian float32, Fortran order, truncated, or longer than its header says.
NpyArray read_npy(const std::string& path);

// Writes all of the file or none of it (a temporary file renamed into place).
// Throws InputError when the file cannot be written.
void write_npy(const std::string& path, const float* data, const std::vector<std::int64_t>& shape);

// A tensor for an fp16 run: float16 (<f2) or float32 (<f4) data, as float32 values.
NpyArray read_npy_f16_or_f32(const std::string& path);

// A tensor of a run's dtype: fp16 as float16 (<f2); fp32 and bf16 (whose values float32 holds
// exactly) as float32. As write_npy otherwise.
void write_npy_as(const std::string& path, DType dtype, const float* data, const std::vector<std::int64_t>& shape);

// Any C-order array, as its dtype, shape and raw little-endian bytes.
struct NpyRaw {
  std::string dtype;                 // the header's descr without quotes: "<f4", "|u1", "|b1", ...
  int item_size = 0;                 // bytes per element
  std::vector<std::int64_t> shape;
  std::vector<unsigned char> bytes;  // (elements · item_size)

  std::int64_t elements() const { return std::int64_t(bytes.size()) / item_size; }
  // Element `index` (flat, C order) as a double; exact for every value of |b1, |u1, <i4, <f4
  // and for <i8 up to 2^53. Defined for the dtypes read_npy_raw can accept.
  double value(std::int64_t index) const;
};

// Reads a .npy file whose dtype is one of `accepted`: "|b1", "|u1", "<i4", "<i8", "<f2", "<f4", "<f8".
// Any other dtype fails with "<path>: dtype '<x>' <rejection>", so `rejection` says what was
// expected and how to get it: "is not float32; save it with arr.astype(np.float32)". Every
// other problem (missing, not .npy, Fortran order, truncated, ...) throws as read_npy does.
NpyRaw read_npy_raw(const std::string& path, const std::vector<std::string>& accepted,
                    const std::string& rejection);

// write_npy for uint8 (dtype |u1): all of the file or none of it.
void write_npy_u8(const std::string& path, const std::uint8_t* data, const std::vector<std::int64_t>& shape);
// ... and for int32 (dtype <i4).
void write_npy_i32(const std::string& path, const std::int32_t* data, const std::vector<std::int64_t>& shape);

std::string shape_string(const std::vector<std::int64_t>& shape);  // "(2, 4, 128, 64)"

}  // namespace fs
