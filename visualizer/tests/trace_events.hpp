// Appending a hand-built trace's events, for the tests' traces (dqacc_trace.hpp, tc_bwd_trace.hpp):
// one event of `dur_ns` at `now` (advanced past it), its bytes those of the tile in the trace's
// dtype for loads and stores, counted into the meta's HBM totals so that the trace validates.
#pragma once

#include <cstdint>

#include "common/trace/names.hpp"
#include "common/trace/trace.hpp"

namespace fs::viz::test {

inline void append_event(fs::trace::Trace& t, int track, fs::trace::Kind kind, fs::trace::Tensor tensor, int row0,
                         int rows, int col0, int cols, double& now, double dur_ns) {
  namespace tr = fs::trace;
  tr::Event e;
  e.track = track;
  e.kind = kind;
  e.tensor = tensor;
  e.row0 = row0;
  e.rows = rows;
  e.col0 = col0;
  e.cols = cols;
  if (kind == tr::Kind::Load || kind == tr::Kind::Store)
    e.bytes = std::int64_t(rows) * cols * tr::element_bytes(tensor, t.meta.dtype);
  e.seq = std::int64_t(t.events.size());
  e.ts_ns = now;
  e.dur_ns = dur_ns;
  now += dur_ns;
  t.events.push_back(e);
  (kind == tr::Kind::Load ? t.meta.io_read_bytes : t.meta.io_write_bytes) += e.bytes;
}

}  // namespace fs::viz::test
