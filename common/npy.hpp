// .npy files (NumPy's format, version 1.0 to 3.0), float32 in C order only, so users can feed
// their own tensors and read ours back:   np.load("o.npy"),  torch.from_numpy(...).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

std::string shape_string(const std::vector<std::int64_t>& shape);  // "(2, 4, 128, 64)"

}  // namespace fs
