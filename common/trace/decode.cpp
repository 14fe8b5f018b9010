#include "common/trace/decode.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "common/trace/names.hpp"
#include "common/trace/trace_io.hpp"

namespace fs::trace {

namespace {

// A range a trace file can hold (kMaxTimeNs): begin and end within it, the length too.
bool within_trace_time(double ts_ns, double dur_ns) {
  return std::fabs(ts_ns) <= kMaxTimeNs && dur_ns >= 0 && dur_ns <= kMaxTimeNs && std::fabs(ts_ns + dur_ns) <= kMaxTimeNs;
}

}  // namespace

void decode_kernels(const std::vector<KernelCapture>& launches, std::int64_t t0_ns, Trace& out) {
  out.kernels.clear();
  out.tracks.clear();
  out.events.clear();
  out.meta.events_dropped = 0;

  struct Sortable {
    std::size_t event;
    int kernel;
    double begin;
    int track;
    std::uint32_t local;
  };
  std::vector<Sortable> order;

  for (std::size_t k = 0; k < launches.size(); ++k) {
    const KernelCapture& kc = launches[k];
    const std::string what = "kernel " + std::to_string(k) + " (" + kc.kernel.name + ")";
    const int* grid = kc.kernel.grid;
    if (grid[0] < 1 || grid[1] < 1 || grid[2] < 1)
      throw TraceError(what + ": a grid of " + std::to_string(grid[0]) + " × " + std::to_string(grid[1]) + " × " +
                       std::to_string(grid[2]) + " CTAs");
    const int lanes = kc.kernel.lanes;
    if (lanes < 1 || lanes > kMaxLanes)
      throw TraceError(what + ": " + std::to_string(lanes) + " lanes per CTA (1 to " + std::to_string(kMaxLanes) + ")");
    if (!kc.kernel.lane_names.empty() && kc.kernel.lane_names.size() != std::size_t(lanes))
      throw TraceError(what + ": " + std::to_string(kc.kernel.lane_names.size()) + " lane names for " +
                       std::to_string(lanes) + " lanes");
    // "3 CTAs", or with lanes "3 CTAs × 3 lanes": what the headers are one per.
    const std::string per = lanes == 1 ? " CTAs" : " CTAs × " + std::to_string(lanes) + " lanes";
    // In double: exact for any real count of headers; a product past 2^53 matches none.
    const double ctas = double(grid[0]) * double(grid[1]) * double(grid[2]);
    if (double(kc.headers.size()) != ctas * lanes)
      throw TraceError(what + ": " + std::to_string(kc.headers.size()) + " headers for a grid of " +
                       std::to_string(grid[0]) + " × " + std::to_string(grid[1]) + " × " + std::to_string(grid[2]) + per);
    // headers × cap records, checked without the product (it may wrap around).
    const bool whole = kc.cap == 0 ? kc.records.empty()
                                   : kc.records.size() % kc.cap == 0 && kc.records.size() / kc.cap == kc.headers.size();
    if (!whole)
      throw TraceError(what + ": " + std::to_string(kc.records.size()) + " records for " +
                       std::to_string(std::uint64_t(ctas)) + per + " of " + std::to_string(kc.cap));
    // Header i is lane i % lanes of CTA i / lanes; "CTA 4" or "CTA 4 lane 2" in messages.
    auto slice_text = [&](std::size_t i) {
      return what + " CTA " + std::to_string(i / std::size_t(lanes)) +
             (lanes == 1 ? "" : " lane " + std::to_string(i % std::size_t(lanes)));
    };
    for (std::size_t i = 0; i < kc.headers.size(); ++i)
      if (kc.headers[i].count > 0 && kc.headers[i].sm > std::uint32_t(kMaxSm))
        throw TraceError(slice_text(i) + ": SM " + std::to_string(kc.headers[i].sm) +
                         " is not an SM of any GPU (at most " + std::to_string(kMaxSm) + ")");

    Kernel kn = kc.kernel;
    // In double: the differences of arbitrary 64-bit clock readings may not fit in 64 bits.
    kn.ts_ns = double(kc.launch_begin_ns) - double(t0_ns);
    kn.dur_ns = std::max(double(kc.launch_end_ns) - double(kc.launch_begin_ns), 0.0);
    if (!within_trace_time(kn.ts_ns, kn.dur_ns))
      throw TraceError(what + ": launched more than 11.6 days (kMaxTimeNs) from t0");
    out.kernels.push_back(kn);
    const int kernel_index = static_cast<int>(out.kernels.size()) - 1;

    // A slice's start: its header's, or its first record's if the header has none.
    auto slice_start = [&](std::size_t i) {
      const CtaHeader& h = kc.headers[i];
      std::uint64_t t = h.t_start;
      if (h.count > 0 && kc.cap > 0) {
        const std::uint64_t first = kc.records[i * kc.cap].t_end;
        if (t == 0 || first < t) t = first;
      }
      return t;
    };
    // The kernel's earliest start over every lane of every CTA.
    std::uint64_t g0 = std::numeric_limits<std::uint64_t>::max();
    for (std::size_t i = 0; i < kc.headers.size(); ++i)
      if (kc.headers[i].count > 0) g0 = std::min(g0, slice_start(i));
    // GPU time → host time, relative to t0.
    auto host = [&](std::uint64_t g) { return kn.ts_ns + double(std::int64_t(g - g0)); };

    for (std::size_t i = 0; i < kc.headers.size(); ++i) {
      const CtaHeader& h = kc.headers[i];
      if (h.count == 0) continue;
      Track tr;
      tr.kernel = kernel_index;
      tr.cta = static_cast<int>(i / std::size_t(lanes));
      tr.lane = static_cast<int>(i % std::size_t(lanes));
      tr.sm = static_cast<int>(h.sm);
      tr.dropped = h.count > kc.cap ? std::int64_t(h.count) - kc.cap : 0;
      out.meta.events_dropped += tr.dropped;
      out.tracks.push_back(tr);
      const int track = static_cast<int>(out.tracks.size()) - 1;

      std::uint64_t prev = slice_start(i);
      const std::uint32_t n = std::min(h.count, kc.cap);
      for (std::uint32_t j = 0; j < n; ++j) {
        const DeviceRecord& r = kc.records[i * kc.cap + j];
        auto at = [&] { return slice_text(i) + " record " + std::to_string(j); };  // for messages only
        if (!valid_kind(r.kind) || !valid_tensor(r.tensor))
          throw TraceError(at() + ": kind " + std::to_string(r.kind) + ", tensor " + std::to_string(r.tensor) +
                           " are not values device.cuh writes");
        if ((r.flags >> kRecordRoundShift) > kMaxRounds)
          throw TraceError(at() + ": round " + std::to_string((r.flags >> kRecordRoundShift) - 1) +
                           ", past the largest a clustering has, which device.cuh never writes");
        if (r.bh < 0 || r.row0 < 0 || r.rows < 0 || r.col0 < 0 || r.cols < 0 || r.sample_row < -1)
          throw TraceError(at() + ": a negative head, row or column, which device.cuh never writes");
        const std::uint64_t end = std::max(r.t_end, prev);
        Event e;
        e.track = track;
        e.kind = static_cast<Kind>(r.kind);
        e.tensor = static_cast<Tensor>(r.tensor);
        e.bh = r.bh;
        e.row0 = r.row0;
        e.rows = r.rows;
        e.col0 = r.col0;
        e.cols = r.cols;
        e.bytes = std::int64_t(r.bytes) | (std::int64_t(r.bytes_hi) << 32);
        e.cached = (r.flags & kRecordCached) != 0;
        e.round = (r.flags >> kRecordRoundShift) - 1;
        e.ts_ns = host(prev);
        e.dur_ns = double(end - prev);
        if (!within_trace_time(e.ts_ns, e.dur_ns))
          throw TraceError(at() + ": a time more than 11.6 days (kMaxTimeNs) from t0, a torn record");
        e.m = r.m;
        e.l = r.l;
        e.sample_row = r.sample_row;
        order.push_back({out.events.size(), kernel_index, e.ts_ns, track, j});
        out.events.push_back(e);
        prev = end;
      }
    }
  }

  std::sort(order.begin(), order.end(), [](const Sortable& a, const Sortable& b) {
    if (a.kernel != b.kernel) return a.kernel < b.kernel;
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.track != b.track) return a.track < b.track;
    return a.local < b.local;
  });
  std::vector<Event> sorted;
  sorted.reserve(out.events.size());
  for (std::size_t s = 0; s < order.size(); ++s) {
    sorted.push_back(out.events[order[s].event]);
    sorted.back().seq = static_cast<std::int64_t>(s);
  }
  out.events = std::move(sorted);
}

}  // namespace fs::trace
