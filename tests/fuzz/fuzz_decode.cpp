// The decoder of device records (common/trace/decode.hpp) on any record buffers: the input is
// a few launches, each a grid, a slice capacity and then headers and records as the device
// writes them. Kernels, tracks and events, or one TraceError — and what it decodes, the
// validator and the writer take without failing.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/trace/decode.hpp"
#include "common/trace/trace_io.hpp"
#include "common/trace/validate.hpp"
#include "tests/fuzz/fuzz_util.hpp"

namespace {

template <typename T>
T take(const std::uint8_t*& data, std::size_t& size) {
  T v{};
  const std::size_t n = size < sizeof v ? size : sizeof v;
  std::memcpy(&v, data, n);
  data += n;
  size -= n;
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using fs::trace::CtaHeader;
  using fs::trace::DeviceRecord;
  std::vector<fs::trace::KernelCapture> launches(1 + fs::fuzz::take_byte(data, size) % 3);
  const auto t0 = take<std::int64_t>(data, size);
  for (auto& k : launches) {
    k.kernel.name = "kernel";
    // Grids and capacities small enough to fill from the input, with their raw values' signs.
    k.kernel.grid[0] = take<std::int8_t>(data, size) % 9;
    k.kernel.grid[1] = 1 + take<std::uint8_t>(data, size) % 2;
    k.kernel.grid[2] = take<std::uint8_t>(data, size) % 4 == 0 ? -1 : 1;
    k.cap = take<std::uint8_t>(data, size) % 6;
    k.launch_begin_ns = take<std::int64_t>(data, size);
    k.launch_end_ns = take<std::int64_t>(data, size);
    const std::size_t ctas = take<std::uint8_t>(data, size) % 12;
    for (std::size_t c = 0; c < ctas; ++c) k.headers.push_back(take<CtaHeader>(data, size));
    const std::size_t records = ctas * k.cap + take<std::uint8_t>(data, size) % 2;  // sometimes one too many
    for (std::size_t r = 0; r < records; ++r) k.records.push_back(take<DeviceRecord>(data, size));
  }
  fs::trace::Trace t;
  t.meta.pass = "fwd";
  t.meta.B = t.meta.H = 1;
  t.meta.N = 16;
  t.meta.d = 4;
  try {
    fs::trace::decode_kernels(launches, t0, t);
  } catch (const fs::trace::TraceError&) {
    return 0;
  }
  (void)fs::trace::validate(t);
  const std::string text = fs::trace::trace_to_json(t);
  try {
    (void)fs::trace::parse_trace(text, "decoded");
  } catch (const fs::trace::TraceError& e) {
    std::fprintf(stderr, "decoded, written, refused: %s\n", e.what());
    std::abort();  // a decoded trace the writer writes and the reader refuses
  }
  return 0;
}
