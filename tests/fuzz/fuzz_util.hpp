// What the fuzz targets share: the input as a file (the readers take paths, and their checks
// on the file itself are part of what is fuzzed), and a little input-splitting.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace fs::fuzz {

// One file per process, rewritten for every input: in /dev/shm (memory) where it exists.
inline const std::string& input_path(const char* suffix) {
  static const std::string path = std::string(::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") +
                                  "/flashsteps_fuzz_" + std::to_string(::getpid()) + suffix;
  return path;
}

inline const std::string& as_file(const std::uint8_t* data, std::size_t size, const char* suffix) {
  const std::string& path = input_path(suffix);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  if (std::fclose(f) != 0) std::abort();
  return path;
}

// Sends std::cout nowhere: --help prints the help, not worth the fuzzer's time (std::cout.clear()
// after each input: the stream stays good).
inline void quiet_stdout() {
  static std::ostringstream sink;
  std::cout.rdbuf(sink.rdbuf());
}

// argv from the input: its NUL-separated pieces after `program` (at most 40 of them).
inline std::vector<std::string> arguments(const char* program, const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args{program};
  std::string piece;
  for (std::size_t i = 0; i < size && args.size() < 40; ++i) {
    if (data[i] == 0) {
      args.push_back(piece);
      piece.clear();
    } else {
      piece += char(data[i]);
    }
  }
  if (!piece.empty()) args.push_back(piece);
  return args;
}

// Takes the first byte of the input (0 when there is none).
inline std::uint8_t take_byte(const std::uint8_t*& data, std::size_t& size) {
  if (size == 0) return 0;
  --size;
  return *data++;
}

}  // namespace fs::fuzz
