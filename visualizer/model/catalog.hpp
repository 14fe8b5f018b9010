// The trace browser's list: the traces in docs/traces/ and every file or folder named on the
// command line, and which of them to open first.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fs::viz {

struct CatalogEntry {
  std::string path;
  std::string name;          // file name without the folder
  std::uintmax_t bytes = 0;
  bool from_command_line = false;  // named on the command line, or in a folder that was
  bool named = false;              // the file itself was named on the command line
};

// Files are listed as given (even if they do not exist: opening one then says why); folders
// contribute their *.json files, sorted by name. Duplicates are listed once.
std::vector<CatalogEntry> list_traces(const std::vector<std::string>& folders,
                                      const std::vector<std::string>& command_line);

// Why the command line's paths give nothing to open, in one line: a folder on it that holds
// no *.json trace ("<dir>: no trace files (*.json) in this folder"); empty when there is none.
// (Opening a shipped trace instead would hide the mistake.)
std::string command_line_problem(const std::vector<std::string>& command_line);

// What to open on start: the first file named on the command line; otherwise the tour's
// default step (a forward pass of step 04, then any step 04, then anything), looked for first
// in the command line's folders, then in the shipped traces; -1 when the list is empty.
int default_entry(const std::vector<CatalogEntry>& entries);

}  // namespace fs::viz
