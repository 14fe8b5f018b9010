// Trace files: the model of trace.hpp written as Chrome Trace Event JSON and read back
// (docs/trace-format.md, schema 1).
//
//   fs::trace::write_trace(trace, "step01.json");
//   fs::trace::Trace t = fs::trace::read_trace("step01.json");   // throws TraceError
//
// The reader checks form, not meaning: what it returns has every field present with the right
// type, sizes within sane limits and every index (event → track, track → kernel) in range, so
// a viewer can use it without further checks. Whether the trace adds up (nesting, byte totals,
// seq without gaps, ranges inside their tensors) is the validator's job (validate.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/errors.hpp"
#include "common/trace/trace.hpp"

namespace fs::trace {

// A trace file that cannot be read: one line naming the file, where in it, and what is wrong.
// It is an InputError, so the programs report it with exit code 2.
class TraceError : public InputError {
 public:
  using InputError::InputError;
};

// The file could not be read at all: missing, not a regular file, or larger than the memory
// available to read it. (A file that was read but is no valid trace is a plain TraceError.)
class TraceUnreadable : public TraceError {
 public:
  using TraceError::TraceError;
};

// The file's JSON text. Timestamps are written in microseconds with nanosecond resolution.
std::string trace_to_json(const Trace& trace);

// Writes all of the file or none of it (a temporary file renamed into place).
// Throws TraceError when the file cannot be written.
void write_trace(const Trace& trace, const std::string& path);

// Parses a trace from its JSON text; `source` names it in errors. Throws TraceError
// (TraceUnreadable when the memory available cannot hold its parse).
// Timestamps come back rounded to whole nanoseconds.
Trace parse_trace(std::string_view text, const std::string& source = "trace");

// Reads and parses a trace file. Throws TraceError (missing file, not a regular file, truncated
// or invalid JSON, unknown schema version, missing fields, wrong types, absurd sizes, more
// memory than is available).
Trace read_trace(const std::string& path);

// The most lanes a kernel's CTAs may record in (Kernel::lanes): a lane is at least one warp, and
// a CTA has at most 32.
constexpr int kMaxLanes = 32;

// The largest trace file read_trace accepts: far above any trace a step writes at a shape a
// person can follow, low enough that a corrupt size cannot exhaust memory.
constexpr std::int64_t kMaxTraceFileBytes = std::int64_t(2) << 30;
// What reading costs beside the text depends on the JSON's shape: a step program's trace needs
// about 15 times its text, a JSON of empty objects about 130 times. parse_trace (and so read_trace) scans the text
// first and refuses, with "needs X GiB" (TraceUnreadable, exit code 2), a text whose parse would
// take more than the memory available; if memory still runs out while parsing (the machine's other
// processes), that is a TraceUnreadable too, never an exception that escapes.

}  // namespace fs::trace
