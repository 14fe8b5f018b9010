// The trace validator: whether a trace adds up. The reader (trace_io.hpp) has already checked
// its form; this checks its meaning:
//
//   schema      the version is known, the pass is "fwd", "bwd" or "host" (a host-only trace of
//               the shared NVTX tool), sizes are positive
//   tensors     each listed once, shaped as the pass's layout says, bytes = elements × 4
//   kernels     grid and block of at least 1; 1 to kMaxLanes lanes, lane_names empty or one per lane
//   tracks      one per (kernel, CTA, lane) inside the kernel's grid and lanes; dropped counts add
//               up to meta.events_dropped, and any dropped event is an error (the trace is incomplete)
//   events      seq is 0, 1, 2, ... without gaps; on each track events are in seq order and
//               never overlap; ranges lie inside their tensor; every load and store names a
//               tensor of meta.tensors; only loads and stores move bytes, and no more than their
//               tile holds; a wait names no tensor
//   host        NVTX ranges are properly nested
//   clusters    a clustered step's orders (meta.clusters): each head's and round's a
//               permutation of the rows; an event's round names one of them
//   bytes       Σ non-cached load bytes = meta.io_read_bytes and Σ non-cached store bytes =
//               meta.io_write_bytes (the step's IO model for this shape and pass), with the
//               traffic of meta.untraced (a library's sort, memsets) added
//   coverage    every element of the pass's outputs (O and LSE forward; dQ, dK, dV backward)
//               is stored by some event (a clustered event's slots through its round's order)
//               or written whole by an untraced step: every tile movement is accounted for
//   cache       a decoding trace's KV cache (meta.cache): lengths within the room, the block table's
//               pages (or batch_idx's sequences) inside the cache, and every load or store of K or V
//               on slots that hold a key of some sequence
//
//   const auto report = fs::trace::validate(trace);
//   if (!report.ok()) std::cerr << report.errors.front() << "\n";
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/trace/trace.hpp"

namespace fs::trace {

struct ValidationReport {
  std::vector<std::string> errors;    // what is wrong; at most a few of each kind, then a count
  std::vector<std::string> warnings;  // suspicious but allowed (e.g. events outside their kernel's range)

  // What the trace holds, for the one-line summary.
  std::int64_t events = 0, tracks = 0, kernels = 0, host_ranges = 0;
  std::int64_t read_bytes = 0, write_bytes = 0;  // non-cached loads and stores
  std::int64_t cached_bytes = 0;                 // re-reads the IO model does not count
  std::int64_t untraced_read_bytes = 0, untraced_write_bytes = 0;  // Meta::untraced, counted in the totals
  std::int64_t model_read_bytes = 0, model_write_bytes = 0;
  std::int64_t dropped = 0;
  bool unreadable = false;  // validate_file: the file could not be read at all (TraceUnreadable)

  bool ok() const { return errors.empty(); }
  // "1234 events on 352 tracks (3 kernels), 91 host ranges; HBM read 1.25 MiB = model,
  //  written 1.00 MiB = model; 2.3 MiB cached re-reads"
  std::string summary() const;
};

ValidationReport validate(const Trace& trace);

// Reads `path` and validates it: a file the reader refuses gives a report whose one error is
// the reader's message (and `unreadable` when the file could not be read at all).
ValidationReport validate_file(const std::string& path);

}  // namespace fs::trace
