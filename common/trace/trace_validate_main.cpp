// trace_validate FILE...: one line per trace file, OK with what it holds, or its first error.
// Exit code 0 only when every file is valid; 1 when one was read and is not a valid trace; 2 on
// bad input: bad usage, or a file that cannot be read at all (missing, not a regular file, more
// than the memory available can read), which wins over 1.
//
//   $ trace_validate good.json cut.json
//   good.json: OK: 16 events on 4 tracks (3 kernels), 7 host ranges; HBM read 224 B = model, ...
//   cut.json: INVALID: truncated JSON: parse error at line 9, column 40: ...
#include <CLI/CLI.hpp>

#include <iostream>
#include <string>
#include <vector>

#include "common/trace/validate.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Checks flashsteps trace files (docs/trace-format.md): well formed, schema known, events "
               "nested per track, every tile movement accounted for, bytes equal to the IO model."};
  std::vector<std::string> files;
  bool all = false;
  app.add_option("FILE", files, "trace files (.json)")->required();
  app.add_flag("-a,--all", all, "print every error and warning, not only the first error");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {  // one line and exit code 2, as every program's
    std::cerr << "trace_validate: error: " << e.what() << "\n";
    return 2;
  }

  bool every_ok = true, every_readable = true;
  for (const auto& file : files) {
    const auto report = fs::trace::validate_file(file);
    every_ok = every_ok && report.ok();
    every_readable = every_readable && !report.unreadable;
    if (report.ok()) {
      std::cout << file << ": OK: " << report.summary();
      if (!report.warnings.empty()) std::cout << " (" << report.warnings.size() << " warnings)";
      std::cout << "\n";
    } else {
      // The reader's messages already name the file.
      std::string first = report.errors.front();
      if (first.rfind(file + ": ", 0) == 0) first.erase(0, file.size() + 2);
      std::cout << file << ": INVALID: " << first;
      if (report.errors.size() > 1) std::cout << " (and " << report.errors.size() - 1 << " more)";
      std::cout << "\n";
    }
    if (all) {
      for (std::size_t i = report.ok() ? 0 : 1; i < report.errors.size(); ++i)
        std::cout << "  error: " << report.errors[i] << "\n";
      for (const auto& w : report.warnings) std::cout << "  warning: " << w << "\n";
    }
  }
  return !every_readable ? 2 : every_ok ? 0 : 1;
}
