// Files the programs read and write. Inputs must be regular files: a FIFO blocks a reader
// forever and a pipe (`--mask <(...)`) cannot be sized. Outputs are written whole or not at
// all: into a temporary file beside the final one, every write, the fsync and the close
// checked, then renamed into place, so a full disk or a missing folder leaves nothing at the
// final path. Problems are one line, "<path>: <what>", thrown as InputError (exit code 2).
//
//   fs::write_file_atomic("out/o.npy", {{header.data(), header.size()}, {data, bytes}});
//   fs::append_file("results.csv", line);                  // all of the line or none of it
//   if (auto why = fs::output_dir_problem("out"); !why.empty()) ...   // before any work
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fs {

// Why `path` cannot be read as an input file ("cannot open (No such file or directory)", "is
// a directory, not a file", "is a pipe or FIFO, not a regular file; ..."), or empty when it can.
std::string input_file_problem(const std::string& path);

// Throws InputError("<path>: <problem>") unless `path` is a readable regular file; returns its
// size in bytes.
std::uint64_t require_input_file(const std::string& path);

// Why no file can be written at `path` (its folder is missing or not writable; `path` is a
// folder, a FIFO or another file that is not regular, or a symbolic link to nothing), or empty
// when one can. Checks without creating anything.
std::string output_file_problem(const std::string& path);

// Why `dir` cannot receive output files: it exists and is not a writable folder, or it does
// not exist and its nearest existing parent is not a writable folder (the program would create
// it) or is a symbolic link to nothing. Empty when it can. Checks without creating anything.
std::string output_dir_problem(const std::string& dir);

struct ByteSpan {
  const void* data = nullptr;
  std::size_t size = 0;
};

// Writes the concatenation of `parts` to `path`, all of it or none of it (see the top of this
// file). Throws InputError("<path>: cannot write (<reason>)"); `path` is then as it was.
void write_file_atomic(const std::string& path, const std::vector<ByteSpan>& parts);
inline void write_file_atomic(const std::string& path, std::string_view text) {
  write_file_atomic(path, {{text.data(), text.size()}});
}

// Appends `text` to `path`, creating it if missing; on any failure the file is cut back to its
// length before the append and InputError("<path>: cannot append (<reason>)") is thrown.
void append_file(const std::string& path, std::string_view text);

}  // namespace fs
