// The tests' way to run a step program's option parser on a command line.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "steps/registry.hpp"

namespace fs::testing {

// parse({"--seq", "97"}) parses `step01_naive --seq 97`; another step by its number.
inline std::optional<Options> parse(std::initializer_list<const char*> args, const std::string& step = "01") {
  std::vector<const char*> argv{"step"};
  argv.insert(argv.end(), args);
  return parse_options(*find_step(step), static_cast<int>(argv.size()), argv.data());
}

}  // namespace fs::testing
