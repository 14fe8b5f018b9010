// Trace files (common/trace/trace_io.hpp, validate.hpp) on any text: the reader gives a trace
// or one TraceError; the validator's report and the writer never fail on what the reader
// accepts; and what the writer writes, the reader reads back to the same counts.
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "common/trace/trace_io.hpp"
#include "common/trace/validate.hpp"
#include "tests/fuzz/fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  fs::trace::Trace t;
  try {
    t = fs::trace::parse_trace(text, "fuzz");
  } catch (const fs::trace::TraceError&) {
    return 0;
  }
  const fs::trace::ValidationReport report = fs::trace::validate(t);
  (void)report.summary();
  const std::string again = fs::trace::trace_to_json(t);
  try {
    const fs::trace::Trace u = fs::trace::parse_trace(again, "fuzz (written back)");
    if (u.events.size() != t.events.size() || u.tracks.size() != t.tracks.size() ||
        u.kernels.size() != t.kernels.size() || u.ranges.size() != t.ranges.size() ||
        u.buffers.size() != t.buffers.size())
      std::abort();
  } catch (const fs::trace::TraceError& e) {
    std::fprintf(stderr, "read, written, refused: %s\n", e.what());
    std::abort();  // the writer wrote what the reader refuses
  }
  // The file path too: a regular file of this text reads as the text does.
  try {
    (void)fs::trace::read_trace(fs::fuzz::as_file(data, size, ".json"));
  } catch (const fs::trace::TraceError&) {
    std::abort();  // parse_trace took it above
  }
  return 0;
}
