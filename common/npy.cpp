#include "common/npy.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "common/dtype.hpp"
#include "common/errors.hpp"
#include "common/files.hpp"

namespace fs {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw InputError(path + ": " + what);
}

// The value of `key` in the header dict, as the raw text up to the next top-level ',' or '}'.
std::string dict_value(const std::string& header, const std::string& key, const std::string& path) {
  const std::string quoted[2] = {"'" + key + "'", "\"" + key + "\""};
  std::size_t at = std::string::npos;
  for (const auto& k : quoted)
    if ((at = header.find(k)) != std::string::npos) {
      at += k.size();
      break;
    }
  if (at == std::string::npos) fail(path, "header has no '" + key + "' entry; not a .npy file?");
  at = header.find(':', at);
  if (at == std::string::npos) fail(path, "malformed header near '" + key + "'");
  ++at;
  int depth = 0;
  std::size_t end = at;
  for (; end < header.size(); ++end) {
    const char c = header[end];
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
  }
  std::string value = header.substr(at, end - at);
  const auto first = value.find_first_not_of(" \t");
  const auto last = value.find_last_not_of(" \t");
  return first == std::string::npos ? "" : value.substr(first, last - first + 1);
}

std::vector<std::int64_t> parse_shape(const std::string& text, const std::string& path) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')')
    fail(path, "malformed shape " + text);
  std::vector<std::int64_t> shape;
  std::stringstream in(text.substr(1, text.size() - 2));
  std::string item;
  while (std::getline(in, item, ',')) {
    const auto first = item.find_first_not_of(" \t");
    if (first == std::string::npos) continue;  // "(5,)" has an empty last item
    item = item.substr(first, item.find_last_not_of(" \t") - first + 1);
    std::size_t used = 0;
    long long dim = -1;
    try {
      dim = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || dim < 0) fail(path, "malformed shape " + text);
    shape.push_back(dim);
  }
  return shape;
}

// Bytes per element of the dtypes the readers can accept; 0 for any other.
int item_size_of(const std::string& dtype) {
  if (dtype == "|b1" || dtype == "|u1") return 1;
  if (dtype == "<f2") return 2;
  if (dtype == "<i4" || dtype == "<f4") return 4;
  if (dtype == "<i8" || dtype == "<f8") return 8;
  return 0;
}

// What the header says about the data that follows it.
struct Header {
  std::string dtype;                 // descr without quotes
  int item_size = 0;
  std::vector<std::int64_t> shape;
  std::int64_t count = 0;            // elements
};

// Opens `path` into `in`, reads and checks the header (magic, version, dtype one of
// `accepted`, C order, shape, and that the file holds exactly the data the shape needs),
// and leaves `in` at the first byte of data.
Header read_header(std::ifstream& in, const std::string& path, const std::vector<std::string>& accepted,
                   const std::string& rejection) {
  for (const auto& dtype : accepted)
    if (item_size_of(dtype) == 0) throw std::logic_error("read_npy_raw: cannot read dtype " + dtype);
  const std::int64_t file_size = static_cast<std::int64_t>(require_input_file(path));
  in.open(path, std::ios::binary);
  if (!in) fail(path, "cannot open (" + std::string(std::strerror(errno)) + ")");

  char magic[8] = {};
  in.read(magic, 8);
  if (!in || std::memcmp(magic, "\x93NUMPY", 6) != 0) fail(path, "not a .npy file (bad magic)");
  const int major = static_cast<unsigned char>(magic[6]);
  std::uint32_t header_len = 0;
  if (major == 1) {
    unsigned char b[2];
    in.read(reinterpret_cast<char*>(b), 2);
    header_len = b[0] | (b[1] << 8);
  } else if (major == 2 || major == 3) {
    unsigned char b[4];
    in.read(reinterpret_cast<char*>(b), 4);
    header_len = b[0] | (b[1] << 8) | (b[2] << 16) | (std::uint32_t(b[3]) << 24);
  } else {
    fail(path, "unsupported .npy version " + std::to_string(major));
  }
  if (!in || header_len > file_size) fail(path, "truncated header");
  std::string header(header_len, '\0');
  in.read(header.data(), header_len);
  if (!in) fail(path, "truncated header");

  Header h;
  const std::string descr = dict_value(header, "descr", path);
  if (descr.size() >= 2 && (descr.front() == '\'' || descr.front() == '"') && descr.back() == descr.front())
    h.dtype = descr.substr(1, descr.size() - 2);
  if (std::find(accepted.begin(), accepted.end(), h.dtype) == accepted.end())
    fail(path, "dtype " + descr + " " + rejection);
  h.item_size = item_size_of(h.dtype);
  if (dict_value(header, "fortran_order", path) != "False")
    fail(path, "Fortran order is not supported; save it with np.ascontiguousarray(arr)");

  h.shape = parse_shape(dict_value(header, "shape", path), path);
  h.count = 1;
  for (auto dim : h.shape) {
    if (dim != 0 && h.count > (std::int64_t(1) << 40) / dim) fail(path, "absurd shape " + shape_string(h.shape));
    h.count *= dim;
  }
  const std::int64_t data_at = in.tellg();
  const std::int64_t want = h.count * h.item_size;
  const std::int64_t have = file_size - data_at;
  if (have < want)
    fail(path, "truncated: shape " + shape_string(h.shape) + " needs " + std::to_string(want) +
                   " bytes of data, the file has " + std::to_string(have));
  if (have > want)
    fail(path, "has " + std::to_string(have - want) + " bytes more than its shape " +
                   shape_string(h.shape) + " needs");
  return h;
}

// The `bytes` of data that read_header left `in` at.
void read_data(std::ifstream& in, const std::string& path, void* dst, std::int64_t bytes) {
  in.read(static_cast<char*>(dst), bytes);
  if (!in) fail(path, "read error");
}

// Writes all of the file or none of it: header for `descr`, then count · item_size bytes,
// into a temporary file renamed into place.
void write_any(const std::string& path, const std::string& descr, int item_size, const void* data,
               const std::vector<std::int64_t>& shape) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape_string(shape) + ", }";
  // Magic (6) + version (2) + length (2) + header + '\n' is padded to a multiple of 64.
  const std::size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';

  std::int64_t count = 1;
  for (auto dim : shape) count *= dim;

  const unsigned char len[2] = {static_cast<unsigned char>(header.size() & 0xFF),
                                static_cast<unsigned char>(header.size() >> 8)};
  write_file_atomic(path, {{"\x93NUMPY\x01\x00", 8},
                           {len, 2},
                           {header.data(), header.size()},
                           {data, static_cast<std::size_t>(count) * static_cast<std::size_t>(item_size)}});
}

}  // namespace

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string out = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + (shape.size() == 1 ? ",)" : ")");
}

NpyArray read_npy(const std::string& path) {
  std::ifstream in;
  const Header h = read_header(in, path, {"<f4"}, "is not float32; save it with arr.astype(np.float32)");
  NpyArray arr;
  arr.shape = h.shape;
  arr.data.resize(h.count);
  read_data(in, path, arr.data.data(), h.count * std::int64_t(sizeof(float)));
  return arr;
}

NpyRaw read_npy_raw(const std::string& path, const std::vector<std::string>& accepted,
                    const std::string& rejection) {
  std::ifstream in;
  const Header h = read_header(in, path, accepted, rejection);
  NpyRaw raw;
  raw.dtype = h.dtype;
  raw.item_size = h.item_size;
  raw.shape = h.shape;
  raw.bytes.resize(h.count * h.item_size);
  read_data(in, path, raw.bytes.data(), h.count * h.item_size);
  return raw;
}

double NpyRaw::value(std::int64_t index) const {
  const unsigned char* at = bytes.data() + index * item_size;
  // memcpy, not a cast: the bytes have no alignment. The file is little-endian, as is the host.
  auto load = [at](auto zero) {
    std::memcpy(&zero, at, sizeof(zero));
    return static_cast<double>(zero);
  };
  if (dtype == "|b1" || dtype == "|u1") return load(std::uint8_t{});
  if (dtype == "<i4") return load(std::int32_t{});
  if (dtype == "<i8") return load(std::int64_t{});
  if (dtype == "<f4") return load(float{});
  if (dtype == "<f2") {
    float x;
    decode(DType::fp16, at, &x, 1);
    return x;
  }
  if (dtype == "<f8") return load(double{});
  throw std::logic_error("NpyRaw::value: dtype " + dtype + " is not one read_npy_raw reads");
}

void write_npy(const std::string& path, const float* data, const std::vector<std::int64_t>& shape) {
  write_any(path, "<f4", sizeof(float), data, shape);
}

NpyArray read_npy_f16_or_f32(const std::string& path) {
  const NpyRaw raw = read_npy_raw(path, {"<f2", "<f4"},
                                  "is neither float16 nor float32; save it with arr.astype(np.float16)");
  NpyArray arr;
  arr.shape = raw.shape;
  arr.data.resize(raw.elements());
  decode(raw.dtype == "<f2" ? DType::fp16 : DType::fp32, raw.bytes.data(), arr.data.data(), arr.data.size());
  return arr;
}

void write_npy_as(const std::string& path, DType dtype, const float* data, const std::vector<std::int64_t>& shape) {
  if (dtype != DType::fp16) return write_npy(path, data, shape);  // bf16 values are float32 values
  std::int64_t count = 1;
  for (auto dim : shape) count *= dim;
  std::vector<unsigned char> half(count * 2);
  encode(DType::fp16, data, half.data(), count);
  write_any(path, "<f2", 2, half.data(), shape);
}

void write_npy_u8(const std::string& path, const std::uint8_t* data, const std::vector<std::int64_t>& shape) {
  write_any(path, "|u1", 1, data, shape);
}

void write_npy_i32(const std::string& path, const std::int32_t* data, const std::vector<std::int64_t>& shape) {
  write_any(path, "<i4", sizeof(std::int32_t), data, shape);
}

}  // namespace fs
