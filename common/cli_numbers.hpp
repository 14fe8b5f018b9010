// Numbers on the command line are decimal. CLI11 alone reads integers with strtoll(..., 0):
// "--seq 010" is octal 8, "0x10" is 16, and a value its type cannot hold saturates
// ("--seed 18446744073709551616" and "--seed -1" both become 18446744073709551615). These
// transforms run before CLI11's conversion: they accept plain decimal text that the option's
// type can hold (leading zeros read as decimal: "010" is 10) and refuse anything else with one
// line, which the programs report with exit code 2.
//
//   app.add_option("--seq", N, "sequence length")->transform(fs::decimal<long long>());
//   app.add_option("--scale", scale, "softmax scale")->transform(fs::decimal_real());
#pragma once

#include <CLI/CLI.hpp>

#include <charconv>
#include <iostream>
#include <limits>
#include <string>
#include <type_traits>

#include "common/errors.hpp"

namespace fs {

// Parses argv into `app`, as every program does: false when --help was asked for (the help is
// printed), and InputError, one line, for anything CLI11 refuses (exit code 2, not CLI11's
// 105-109 and a second line).
inline bool parse_command_line(CLI::App& app, int argc, const char* const* argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return false;
  } catch (const CLI::ParseError& e) {
    throw InputError(e.what());
  }
  return true;
}

// A size read as 64 bits (so that one past int is refused rather than wrapped around): at least
// 1 and at most `max`, or an InputError naming the option.
inline int size_option(const char* name, long long value, long long max) {
  if (value < 1) throw InputError(std::string(name) + " must be at least 1 (got " + std::to_string(value) + ")");
  if (value > max)
    throw InputError(std::string(name) + " must be at most " + std::to_string(max) + " (got " + std::to_string(value) + ")");
  return static_cast<int>(value);
}

// Integers of type T: [-]digits, the sign only where T is signed, within T's range.
template <typename T>
CLI::Validator decimal() {
  static_assert(std::is_integral_v<T>, "decimal<T>() is for integer options");
  return CLI::Validator(
      [](std::string& text) -> std::string {
        T value{};
        const char* end = text.data() + text.size();
        const auto [stop, ec] = std::from_chars(text.data(), end, value, 10);
        if (!text.empty() && text[0] == '-' && std::is_unsigned_v<T>)
          return "'" + text + "' is negative; expected a decimal integer from 0 to " +
                 std::to_string(std::numeric_limits<T>::max());
        if (ec == std::errc::result_out_of_range)
          return "'" + text + "' is out of range (" + std::to_string(std::numeric_limits<T>::min()) + " to " +
                 std::to_string(std::numeric_limits<T>::max()) + ")";
        if (text.empty() || ec != std::errc() || stop != end) return "'" + text + "' is not a decimal integer";
        text = std::to_string(value);  // what CLI11 converts: no leading zero left to read as octal
        return {};
      },
      "", "decimal");
}

// Real numbers: decimal or scientific notation ("0.5", "1e-3"), no hexadecimal ("0x1p3").
// NaN and infinities pass here; each option's own range check decides about them.
inline CLI::Validator decimal_real() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double value = 0;
        const char* end = text.data() + text.size();
        const auto [stop, ec] = std::from_chars(text.data(), end, value);
        if (text.empty() || ec == std::errc::invalid_argument || stop != end)
          return "'" + text + "' is not a decimal number";
        return {};
      },
      "", "decimal_real");
}

}  // namespace fs
