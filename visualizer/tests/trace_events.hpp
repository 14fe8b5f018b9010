// Appending a hand-built trace's events, for the tests' traces (dqacc_trace.hpp, tc_bwd_trace.hpp):
// one event of `dur_ns` at `now` (advanced past it), its bytes those of the tile in the trace's
// dtype for loads and stores, counted into the meta's HBM totals so that the trace validates.
#pragma once

#include <cstdint>

#include "common/trace/trace.hpp"
#include "tests/trace_fixtures.hpp"

namespace fs::viz::test {

inline void append_event(fs::trace::Trace& t, int track, fs::trace::Kind kind, fs::trace::Tensor tensor, int row0,
                         int rows, int col0, int cols, double& now, double dur_ns) {
  fs::trace::Event e = fs::test::tile_event(track, kind, tensor, row0, rows, col0, cols, now, dur_ns, t.meta.dtype);
  e.seq = std::int64_t(t.events.size());
  now += dur_ns;
  t.events.push_back(e);
  (kind == fs::trace::Kind::Load ? t.meta.io_read_bytes : t.meta.io_write_bytes) += e.bytes;
}

}  // namespace fs::viz::test
