#include "common/trace/validate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <new>
#include <numeric>
#include <set>
#include <sstream>
#include <tuple>

#include "common/trace/names.hpp"
#include "common/trace/trace_io.hpp"

namespace fs::trace {

namespace {

// At most this many messages of one kind; the rest are counted in one line.
constexpr int kPerKind = 5;
// Events may stray this far outside their kernel's launch range before it is worth a warning:
// %globaltimer ticks in 32 ns steps (1 µs on some GPUs) and launches are aligned, not measured.
constexpr double kKernelSlackNs = 2000;

std::string bytes_text(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::fabs(b) >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.2f %s" : "%.0f %s", b, units[u]);
  return buf;
}

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string out = "(";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + ")";
}

class Messages {
 public:
  explicit Messages(std::vector<std::string>& out) : out_(out) {}
  void add(const std::string& kind, const std::string& message) {
    if (++counts_[kind] <= kPerKind) out_.push_back(message);
  }
  void finish() {
    for (const auto& [kind, n] : counts_)
      if (n > kPerKind) out_.push_back("... and " + std::to_string(n - kPerKind) + " more " + kind + " problems");
  }

 private:
  std::vector<std::string>& out_;
  std::map<std::string, std::int64_t> counts_;
};

std::string track_text(const Trace& t, int track) {
  if (track < 0 || std::size_t(track) >= t.tracks.size()) return "track " + std::to_string(track);
  const Track& tr = t.tracks[track];
  const std::string k = (tr.kernel >= 0 && std::size_t(tr.kernel) < t.kernels.size())
                            ? t.kernels[tr.kernel].name
                            : "kernel " + std::to_string(tr.kernel);
  const bool laned = tr.lane != 0 || (tr.kernel >= 0 && std::size_t(tr.kernel) < t.kernels.size() &&
                                      t.kernels[std::size_t(tr.kernel)].lanes > 1);
  return "track " + std::to_string(track) + " (" + k + " CTA " + std::to_string(tr.cta) +
         (laned ? " · " + lane_name(t, tr) : "") + ")";
}

std::string event_text(const Event& e) {
  std::string s = "event seq " + std::to_string(e.seq) + " (" + kind_name(e.kind);
  if (e.tensor != Tensor::None) s += std::string(" ") + tensor_name(e.tensor);
  return s + ")";
}

// A half-open rectangle [y0, y1) × [x0, x1) of a grid, not empty.
struct Rect {
  std::int64_t y0, y1, x0, x1;
};

// The cells of [0, height) × [0, width) that no rectangle covers: how many, and the first in
// row-major order (y, x), or -1. A sweep over y with a segment tree over the x breakpoints
// counting how often each stretch of x is covered, so the cost grows with the number of
// rectangles (the file), never with the area they claim.
struct Gap {
  std::int64_t missing = 0, y = -1, x = -1;
};

class CoverTree {
 public:
  explicit CoverTree(std::vector<std::int64_t> xs) : xs_(std::move(xs)), n_(xs_.size() - 1) {
    add_.assign(4 * n_, 0);
    min_.assign(4 * n_, 0);
    min_len_.assign(4 * n_, 0);
    build(1, 0, n_);
  }
  // Adds v to the cover count of [x0, x1), both breakpoints.
  void add(std::int64_t x0, std::int64_t x1, int v) { update(1, 0, n_, index(x0), index(x1), v); }
  // How much of the x range has count zero, and where the first such stretch begins.
  std::int64_t zero_length() const { return min_[1] == 0 ? min_len_[1] : 0; }
  std::int64_t first_zero() const {
    std::size_t node = 1, lo = 0, hi = n_;
    std::int64_t above = 0;  // the adds of the nodes above `node`
    while (hi - lo > 1) {
      above += add_[node];
      const std::size_t mid = (lo + hi) / 2;
      if (min_[2 * node] + above == 0) {
        node = 2 * node, hi = mid;
      } else {
        node = 2 * node + 1, lo = mid;
      }
    }
    return xs_[lo];
  }

 private:
  std::size_t index(std::int64_t x) const {
    return std::size_t(std::lower_bound(xs_.begin(), xs_.end(), x) - xs_.begin());
  }
  void build(std::size_t node, std::size_t lo, std::size_t hi) {
    if (hi - lo == 1) {
      min_len_[node] = xs_[hi] - xs_[lo];
      return;
    }
    const std::size_t mid = (lo + hi) / 2;
    build(2 * node, lo, mid);
    build(2 * node + 1, mid, hi);
    min_len_[node] = min_len_[2 * node] + min_len_[2 * node + 1];
  }
  void update(std::size_t node, std::size_t lo, std::size_t hi, std::size_t a, std::size_t b, int v) {
    if (b <= lo || hi <= a) return;
    if (a <= lo && hi <= b) {
      add_[node] += v;
      min_[node] += v;
      return;
    }
    const std::size_t mid = (lo + hi) / 2;
    update(2 * node, lo, mid, a, b, v);
    update(2 * node + 1, mid, hi, a, b, v);
    const std::int64_t l = min_[2 * node], r = min_[2 * node + 1], m = std::min(l, r);
    min_[node] = m + add_[node];
    min_len_[node] = (l == m ? min_len_[2 * node] : 0) + (r == m ? min_len_[2 * node + 1] : 0);
  }

  std::vector<std::int64_t> xs_;  // breakpoints, ascending; leaf i is [xs_[i], xs_[i+1])
  std::size_t n_;                 // leaves
  std::vector<std::int64_t> add_, min_, min_len_;
};

Gap uncovered(const std::vector<Rect>& rects, std::int64_t height, std::int64_t width) {
  std::vector<std::int64_t> xs{0, width};
  for (const Rect& r : rects) xs.insert(xs.end(), {r.x0, r.x1});
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  CoverTree tree(std::move(xs));
  struct Edge {
    std::int64_t y;
    int v;
    const Rect* r;
  };
  std::vector<Edge> edges;
  edges.reserve(2 * rects.size());
  for (const Rect& r : rects) edges.insert(edges.end(), {{r.y0, +1, &r}, {r.y1, -1, &r}});
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.y < b.y; });
  Gap gap;
  std::int64_t y = 0;
  auto span = [&](std::int64_t until) {  // rows [y, until) under the current cover
    const std::int64_t zero = tree.zero_length();
    if (until > y && zero > 0) {
      gap.missing += zero * (until - y);
      if (gap.y < 0) gap.y = y, gap.x = tree.first_zero();
    }
    y = std::max(y, until);
  };
  for (std::size_t i = 0; i < edges.size();) {
    span(edges[i].y);
    for (const std::int64_t at = edges[i].y; i < edges.size() && edges[i].y == at; ++i)
      tree.add(edges[i].r->x0, edges[i].r->x1, edges[i].v);
  }
  span(height);
  return gap;
}

}  // namespace

std::string ValidationReport::summary() const {
  std::ostringstream out;
  out << events << " events on " << tracks << " tracks (" << kernels << " kernel" << (kernels == 1 ? "" : "s")
      << "), " << host_ranges << " host ranges; HBM read " << bytes_text(double(read_bytes));
  if (untraced_read_bytes) out << " + " << bytes_text(double(untraced_read_bytes)) << " untraced";
  const std::int64_t reads = read_bytes + untraced_read_bytes, writes = write_bytes + untraced_write_bytes;
  out << (reads == model_read_bytes ? " = model" : " ≠ model " + bytes_text(double(model_read_bytes)))
      << ", written " << bytes_text(double(write_bytes));
  if (untraced_write_bytes) out << " + " << bytes_text(double(untraced_write_bytes)) << " untraced";
  out << (writes == model_write_bytes ? " = model" : " ≠ model " + bytes_text(double(model_write_bytes)));
  if (cached_bytes) out << "; " << bytes_text(double(cached_bytes)) << " cached re-reads";
  if (dropped) out << "; " << dropped << " events dropped";
  return out.str();
}

ValidationReport validate(const Trace& t) {
  ValidationReport rep;
  Messages err(rep.errors), warn(rep.warnings);
  const Meta& m = t.meta;
  rep.events = static_cast<std::int64_t>(t.events.size());
  rep.tracks = static_cast<std::int64_t>(t.tracks.size());
  rep.kernels = static_cast<std::int64_t>(t.kernels.size());
  rep.host_ranges = static_cast<std::int64_t>(t.ranges.size());
  rep.model_read_bytes = m.io_read_bytes;
  rep.model_write_bytes = m.io_write_bytes;

  // --- schema -------------------------------------------------------------------------
  if (m.schema_version != kSchemaVersion)
    err.add("schema", "schema version " + std::to_string(m.schema_version) + " is not known (this validator knows " +
                          std::to_string(kSchemaVersion) + ")");
  if (m.pass != "fwd" && m.pass != "bwd" && m.pass != "host")
    err.add("schema", "pass is '" + m.pass + "', not \"fwd\", \"bwd\" or \"host\"");
  // Past 2^40 elements (as common/harness.cpp) the byte counts below could overflow.
  const bool shape_ok = m.B >= 1 && m.H >= 1 && m.N >= 1 && m.d >= 1 &&
                        double(m.B) * m.H * m.N * std::max(m.N, m.d) <= double(std::int64_t(1) << 40);
  if (!shape_ok)
    err.add("schema", "shape B=" + std::to_string(m.B) + " H=" + std::to_string(m.H) + " N=" + std::to_string(m.N) +
                          " d=" + std::to_string(m.d) + " has a size below 1 or is beyond any GPU");
  if (m.event_cap < 0 || m.events_dropped < 0) err.add("schema", "event_cap and events_dropped must not be negative");
  if (!valid_dtype(m.dtype)) err.add("schema", "dtype is '" + m.dtype + "', not fp32, bf16 or fp16");
  const std::int64_t heads = std::int64_t(m.B) * m.H;

  // --- tensors ------------------------------------------------------------------------
  std::map<Tensor, const TensorInfo*> listed;
  for (const auto& ti : m.tensors) {
    const auto id = static_cast<unsigned>(ti.id);
    if (ti.id == Tensor::None || !valid_tensor(id)) {
      err.add("tensor", "otherData.tensors lists a tensor with no valid name (id " + std::to_string(id) + ")");
      continue;
    }
    if (!listed.emplace(ti.id, &ti).second)
      err.add("tensor", std::string("tensor ") + tensor_name(ti.id) + " is listed twice");
    if (!shape_ok) continue;
    const auto want = tensor_shape(ti.id, m);
    if (ti.shape != want)
      err.add("tensor", std::string("tensor ") + tensor_name(ti.id) + " has shape " + shape_text(ti.shape) +
                            ", but the layout for this shape is " + shape_text(want));
    else if (const int e = element_bytes(ti.id, m.dtype); ti.bytes != shape_elems(want) * e)
      err.add("tensor", std::string("tensor ") + tensor_name(ti.id) + " has " + std::to_string(ti.bytes) + " bytes, but " +
                            shape_text(want) + " of " + std::to_string(e) + "-byte elements is " +
                            std::to_string(shape_elems(want) * e));
  }

  // --- the clustering (step 07): every (head, round) of each order a permutation of [0, N) ---
  const Clustering& cl = m.clusters;
  bool clusters_ok = false;
  if (cl.on() && shape_ok) {
    const std::int64_t n = heads * cl.hashes * m.N;
    clusters_ok = cl.hashes <= kMaxRounds && cl.q_cluster >= 1 && cl.q_cluster <= m.N && cl.k_cluster >= 1 &&
                  cl.k_cluster <= m.N && std::int64_t(cl.q_order.size()) == n && std::int64_t(cl.k_order.size()) == n;
    if (!clusters_ok)
      err.add("clusters", "the clustering's rounds, cluster sizes or order lengths do not fit the shape (" +
                              std::to_string(cl.hashes) + " rounds, clusters " + std::to_string(cl.q_cluster) + " × " +
                              std::to_string(cl.k_cluster) + ", orders of " + std::to_string(n) + " entries expected)");
    for (const auto* order : {&cl.q_order, &cl.k_order}) {
      if (!clusters_ok) break;
      std::vector<char> seen(std::size_t(m.N));
      for (std::int64_t seg = 0; seg < heads * cl.hashes; ++seg) {
        std::fill(seen.begin(), seen.end(), 0);
        bool perm = true;
        for (std::int64_t s = 0; s < m.N && perm; ++s) {
          const std::int32_t row = (*order)[std::size_t(seg * m.N + s)];
          perm = row >= 0 && row < m.N && !seen[std::size_t(row)];
          if (perm) seen[std::size_t(row)] = 1;
        }
        if (!perm) {
          err.add("clusters", std::string(order == &cl.q_order ? "q_order" : "k_order") + " of head " +
                                  std::to_string(seg / cl.hashes) + ", round " + std::to_string(seg % cl.hashes) +
                                  " is not a permutation of the rows");
          clusters_ok = false;
        }
      }
    }
  }
  // --- the KV cache (decoding): its geometry, and which slots hold a key of some sequence ---
  const KvCache& kv = m.cache;
  std::vector<char> key_slot;  // slot → holds key j < lengths[b] of some sequence b (empty: not checked)
  if (kv.on() && shape_ok) {
    const std::size_t errors_before = rep.errors.size();
    if (m.H % kv.heads_kv != 0) err.add("cache", "H = " + std::to_string(m.H) + " is not a multiple of heads_kv = " + std::to_string(kv.heads_kv));
    if (kv.splits < 1) err.add("cache", "splits must be at least 1");
    if (kv.seqlen_cache < 1 || kv.slots < 1) err.add("cache", "seqlen_cache and slots must be at least 1");
    if (std::int64_t(kv.lengths.size()) != m.B) err.add("cache", "lengths has " + std::to_string(kv.lengths.size()) + " entries, not B = " + std::to_string(m.B));
    for (std::size_t b = 0; b < kv.lengths.size(); ++b)
      if (kv.lengths[b] < 0 || kv.lengths[b] > kv.seqlen_cache)
        err.add("cache", "sequence " + std::to_string(b) + " holds " + std::to_string(kv.lengths[b]) + " keys, outside [0, seqlen_cache]");
    if (kv.paged()) {
      const int per = kv.blocks_per_seq(m.B);
      if (kv.page_size < 1 || kv.slots % kv.page_size != 0) err.add("cache", "slots are not whole pages of page_size");
      else if (kv.block_table.size() % std::size_t(m.B) != 0 || std::int64_t(per) * kv.page_size < kv.seqlen_cache)
        err.add("cache", "the block table's rows hold fewer than seqlen_cache keys");
      for (std::int32_t page : kv.block_table)
        if (page < 0 || kv.page_size < 1 || std::int64_t(page) * kv.page_size >= kv.slots) {
          err.add("cache", "the block table names page " + std::to_string(page) + ", outside the cache");
          break;
        }
    } else {
      if (kv.slots % kv.seqlen_cache != 0) err.add("cache", "a contiguous cache's slots are not whole sequences of seqlen_cache");
      if (!kv.batch_idx.empty() && std::int64_t(kv.batch_idx.size()) != m.B) err.add("cache", "batch_idx has not B entries");
      for (std::int32_t c : kv.batch_idx)
        if (c < 0 || std::int64_t(c) * kv.seqlen_cache >= kv.slots) {
          err.add("cache", "batch_idx names cache sequence " + std::to_string(c) + ", outside the cache");
          break;
        }
    }
    if (rep.errors.size() == errors_before) {
      key_slot.assign(std::size_t(kv.slots), 0);
      for (int b = 0; b < m.B; ++b)
        for (int j = 0; j < kv.lengths[std::size_t(b)]; ++j) key_slot[std::size_t(kv.slot(b, j))] = 1;
    }
  }

  // The row a clustered event's slot stands for (Event::round).
  auto row_of = [&](const Event& e, std::int64_t slot) -> std::int64_t {
    const auto& order = key_side(e.tensor) ? cl.k_order : cl.q_order;
    return order[std::size_t((e.bh * cl.hashes + e.round) * m.N + slot)];
  };

  // --- kernels and tracks ---------------------------------------------------------------
  for (std::size_t k = 0; k < t.kernels.size(); ++k) {
    const Kernel& kn = t.kernels[k];
    for (int a = 0; a < 3; ++a)
      if (kn.grid[a] < 1 || kn.block[a] < 1)
        err.add("kernel", "kernel " + std::to_string(k) + " (" + kn.name + ") has a grid or block size below 1");
    if (!(kn.dur_ns >= 0) || !std::isfinite(kn.ts_ns))
      err.add("kernel", "kernel " + std::to_string(k) + " (" + kn.name + ") has no valid time range");
    if (kn.lanes < 1 || kn.lanes > kMaxLanes)
      err.add("kernel", "kernel " + std::to_string(k) + " (" + kn.name + ") has " + std::to_string(kn.lanes) +
                            " lanes per CTA (1 to " + std::to_string(kMaxLanes) + ")");
    if (!kn.lane_names.empty() && kn.lane_names.size() != std::size_t(kn.lanes))
      err.add("kernel", "kernel " + std::to_string(k) + " (" + kn.name + ") names " +
                            std::to_string(kn.lane_names.size()) + " lanes, but has " + std::to_string(kn.lanes) +
                            " (lane_names is empty or one per lane)");
  }
  std::set<std::tuple<int, int, int>> seen_lanes;
  std::int64_t dropped = 0;
  for (std::size_t i = 0; i < t.tracks.size(); ++i) {
    const Track& tr = t.tracks[i];
    const std::string what = track_text(t, static_cast<int>(i));
    if (tr.kernel < 0 || std::size_t(tr.kernel) >= t.kernels.size()) {
      err.add("track", what + " names kernel " + std::to_string(tr.kernel) + ", which does not exist");
      continue;
    }
    const Kernel& kn = t.kernels[tr.kernel];
    const std::int64_t ctas = std::int64_t(kn.grid[0]) * kn.grid[1] * kn.grid[2];
    if (tr.cta < 0 || tr.cta >= ctas)
      err.add("track", what + ": CTA " + std::to_string(tr.cta) + " is outside the grid of " + std::to_string(ctas));
    if (tr.lane < 0 || tr.lane >= kn.lanes)
      err.add("track", what + ": lane " + std::to_string(tr.lane) + " is not one of the kernel's " +
                           std::to_string(kn.lanes));
    if (!seen_lanes.emplace(tr.kernel, tr.cta, tr.lane).second)
      err.add("track", what + " repeats a (kernel, CTA, lane) of another track");
    if (tr.dropped < 0) err.add("track", what + " has a negative dropped count");
    dropped += std::max<std::int64_t>(tr.dropped, 0);
  }
  rep.dropped = std::max(dropped, m.events_dropped);
  if (dropped != m.events_dropped)
    err.add("dropped", "the tracks' dropped counts add up to " + std::to_string(dropped) + ", but events_dropped is " +
                           std::to_string(m.events_dropped));
  if (rep.dropped > 0)
    err.add("dropped", std::to_string(rep.dropped) + " events were dropped because CTA slices of " +
                           std::to_string(m.event_cap) +
                           " records were full: the trace is incomplete (record it again with a larger --trace-cap)");

  // --- events -------------------------------------------------------------------------
  std::vector<double> track_end(t.tracks.size(), -INFINITY);
  std::vector<std::int64_t> track_last(t.tracks.size(), -1);
  bool seq_reported = false;
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const Event& e = t.events[i];
    if (e.seq != static_cast<std::int64_t>(i) && !seq_reported) {
      err.add("seq", "seq must run 0, 1, 2, ... without gaps, but event " + std::to_string(i) + " has seq " +
                         std::to_string(e.seq));
      seq_reported = true;
    }
    const std::string what = event_text(e);
    if (!valid_kind(static_cast<unsigned>(e.kind))) {
      err.add("event", what + " has an unknown kind");
      continue;
    }
    if (!valid_tensor(static_cast<unsigned>(e.tensor))) {
      err.add("event", what + " names an unknown tensor");
      continue;
    }
    if (!std::isfinite(e.ts_ns) || !(e.dur_ns >= 0) || !std::isfinite(e.dur_ns))
      err.add("event", what + " has no valid time range");
    if (e.round >= 0) {
      if (!cl.on() || e.round >= cl.hashes)
        err.add("clusters", what + " is in round " + std::to_string(e.round) + ", but the trace's clustering has " +
                                std::to_string(cl.hashes) + " rounds");
      else if (e.tensor == Tensor::Order || e.tensor == Tensor::SortKey)
        err.add("clusters", what + ": the rows of " + tensor_name(e.tensor) + " are slots already (round −1)");
    } else if (e.round != -1) {
      err.add("event", what + " has round " + std::to_string(e.round) + " (rounds are 0, 1, ... or −1 for none)");
    }

    const bool moves = e.kind == Kind::Load || e.kind == Kind::Store;
    if (moves) {
      if (e.tensor == Tensor::None) {
        err.add("tensor", what + " moves bytes but names no tensor");
      } else if (!listed.count(e.tensor)) {
        err.add("tensor", what + " names " + tensor_name(e.tensor) + ", which otherData.tensors does not list");
      }
      if (e.bytes < 0) err.add("bytes", what + " has negative bytes");
      if (e.cached && e.kind == Kind::Store) err.add("bytes", what + " is a store marked cached: only re-reads are");
      const int eb = element_bytes(e.tensor, m.dtype);
      // rows·cols fits in 62 bits, rows·cols·eb may not: compare in whole elements.
      const std::int64_t tile_elems = std::int64_t(std::max(e.rows, 0)) * std::max(e.cols, 0);
      if ((e.bytes + eb - 1) / eb > tile_elems)
        err.add("bytes", what + " moves " + std::to_string(e.bytes) + " bytes, more than its " +
                             std::to_string(e.rows) + "×" + std::to_string(e.cols) + " tile of " + std::to_string(eb) +
                             "-byte elements holds");
      if (e.kind == Kind::Load)
        (e.cached ? rep.cached_bytes : rep.read_bytes) += e.bytes;
      else
        rep.write_bytes += e.bytes;
    } else if (e.bytes != 0) {
      err.add("bytes", what + " is not a load or store but moves " + std::to_string(e.bytes) + " bytes");
    }
    // A wait is a lane idle at a barrier: its tile (rows, cols) may say what it waits for, but it
    // works on no tensor, so nothing counts it as touching one.
    if (e.kind == Kind::Wait && e.tensor != Tensor::None)
      err.add("tensor", what + " is a wait but names a tensor: a wait works on none");

    if (e.tensor != Tensor::None && shape_ok) {
      const auto shape = tensor_shape(e.tensor, m);
      const std::int64_t row_end = shape[2], col_end = shape.size() == 4 ? shape[3] : 1;
      const bool inside = e.bh >= 0 && e.bh < shape[0] * shape[1] && e.row0 >= 0 && e.rows >= 0 &&
                          std::int64_t(e.row0) + e.rows <= row_end && e.col0 >= 0 && e.cols >= 0 &&
                          std::int64_t(e.col0) + e.cols <= col_end;
      if (!inside)
        err.add("range", what + ": head " + std::to_string(e.bh) + ", rows [" + std::to_string(e.row0) + ", " +
                             std::to_string(std::int64_t(e.row0) + e.rows) + "), cols [" + std::to_string(e.col0) +
                             ", " + std::to_string(std::int64_t(e.col0) + e.cols) + ") is outside " +
                             tensor_name(e.tensor) + " " + shape_text(shape));
    }

    // A decoding trace's cache rows: a load or store of K or V touches only slots that hold a key
    // of some sequence (through its block table or batch index): no read of a stale page, no append
    // past a sequence's keys.
    if (!key_slot.empty() && moves && (e.tensor == Tensor::K || e.tensor == Tensor::V) && e.row0 >= 0 && e.rows > 0 &&
        std::int64_t(e.row0) + e.rows <= kv.slots)
      for (std::int64_t r = e.row0; r < std::int64_t(e.row0) + e.rows; ++r)
        if (!key_slot[std::size_t(r)]) {
          err.add("cache", what + " touches slot " + std::to_string(r) + ", which holds no sequence's key");
          break;
        }

    if (e.track < 0 || std::size_t(e.track) >= t.tracks.size()) {
      err.add("track", what + " is on track " + std::to_string(e.track) + ", which does not exist");
      continue;
    }
    // One track is one CTA's sequence: in seq order, each event begins where (or after) the
    // previous one ended. Times are whole nanoseconds; allow rounding of 1 ns.
    if (e.ts_ns < track_end[e.track] - 1.0)
      err.add("overlap", track_text(t, e.track) + ": " + what + " begins at " + std::to_string(e.ts_ns) +
                             " ns, before seq " + std::to_string(track_last[e.track]) + " ends at " +
                             std::to_string(track_end[e.track]) + " ns");
    track_end[e.track] = std::max(track_end[e.track], e.ts_ns + e.dur_ns);
    track_last[e.track] = e.seq;
    const Track& tr = t.tracks[e.track];
    if (tr.kernel >= 0 && std::size_t(tr.kernel) < t.kernels.size()) {
      const Kernel& kn = t.kernels[tr.kernel];
      if (e.ts_ns < kn.ts_ns - kKernelSlackNs || e.ts_ns + e.dur_ns > kn.ts_ns + kn.dur_ns + kKernelSlackNs)
        warn.add("timing", what + " lies outside its kernel's launch range [" + std::to_string(kn.ts_ns) + ", " +
                               std::to_string(kn.ts_ns + kn.dur_ns) + "] ns");
    }
  }

  // --- host ranges --------------------------------------------------------------------
  {
    std::vector<std::size_t> order(t.ranges.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      if (t.ranges[a].ts_ns != t.ranges[b].ts_ns) return t.ranges[a].ts_ns < t.ranges[b].ts_ns;
      return t.ranges[a].dur_ns > t.ranges[b].dur_ns;
    });
    std::vector<std::size_t> open;
    for (std::size_t i : order) {
      const HostRange& r = t.ranges[i];
      if (!std::isfinite(r.ts_ns) || !(r.dur_ns >= 0)) {
        err.add("host", "host range '" + r.name + "' has no valid time range");
        continue;
      }
      while (!open.empty() && t.ranges[open.back()].ts_ns + t.ranges[open.back()].dur_ns <= r.ts_ns) open.pop_back();
      if (!open.empty()) {
        const HostRange& outer = t.ranges[open.back()];
        if (r.ts_ns + r.dur_ns > outer.ts_ns + outer.dur_ns)
          err.add("host", "host range '" + r.name + "' starts inside '" + outer.name + "' but ends after it");
      }
      if (r.depth != static_cast<int>(open.size()))
        err.add("host", "host range '" + r.name + "' has depth " + std::to_string(r.depth) + " but is nested " +
                            std::to_string(open.size()) + " deep");
      open.push_back(i);
    }
  }

  // --- bytes against the IO model (what no event records, counted as the model does) ----
  std::set<Tensor> written_whole;
  for (const Untraced& u : m.untraced) {
    if (u.read_bytes < 0 || u.write_bytes < 0) err.add("bytes", "untraced '" + u.name + "' has negative bytes");
    rep.untraced_read_bytes += std::max<std::int64_t>(u.read_bytes, 0);
    rep.untraced_write_bytes += std::max<std::int64_t>(u.write_bytes, 0);
    for (Tensor w : u.writes) {
      if (!listed.count(w)) err.add("tensor", "untraced '" + u.name + "' writes " + tensor_name(w) + ", which otherData.tensors does not list");
      written_whole.insert(w);
    }
  }
  const std::int64_t reads = rep.read_bytes + rep.untraced_read_bytes, writes = rep.write_bytes + rep.untraced_write_bytes;
  const std::string untraced_r = rep.untraced_read_bytes ? " (with " + std::to_string(rep.untraced_read_bytes) + " untraced)" : "";
  const std::string untraced_w = rep.untraced_write_bytes ? " (with " + std::to_string(rep.untraced_write_bytes) + " untraced)" : "";
  if (reads != m.io_read_bytes)
    err.add("model", "non-cached loads move " + std::to_string(reads) + " bytes" + untraced_r +
                         ", but the IO model reads " + std::to_string(m.io_read_bytes) + " (" +
                         (reads > m.io_read_bytes ? "a re-read not marked cached?" : "a load not recorded?") + ")");
  if (writes != m.io_write_bytes)
    err.add("model", "stores move " + std::to_string(writes) + " bytes" + untraced_w + ", but the IO model writes " +
                         std::to_string(m.io_write_bytes));

  // --- every output element stored ----------------------------------------------------
  if (shape_ok && (m.pass == "fwd" || m.pass == "bwd")) {
    const std::vector<Tensor> outputs = m.pass == "fwd" ? std::vector<Tensor>{Tensor::O, Tensor::LSE}
                                                        : std::vector<Tensor>{Tensor::dQ, Tensor::dK, Tensor::dV};
    for (Tensor out : outputs) {
      if (!listed.count(out)) {
        err.add("coverage", std::string("the pass's output ") + tensor_name(out) + " is not among otherData.tensors");
        continue;
      }
      if (written_whole.count(out)) continue;  // an untraced step (a memset) wrote all of it
      const auto shape = tensor_shape(out, m);
      const std::int64_t elems = shape_elems(shape), rows = shape[2], cols = shape.size() == 4 ? shape[3] : 1;
      std::vector<Rect> stores;  // in (head·rows + row, col)
      for (const Event& e : t.events) {
        if (e.kind != Kind::Store || e.tensor != out) continue;
        if (e.bh < 0 || e.bh >= heads || e.row0 < 0 || e.col0 < 0 || e.rows <= 0 || e.cols <= 0 ||
            std::int64_t(e.row0) + e.rows > rows || std::int64_t(e.col0) + e.cols > cols)
          continue;  // empty, or reported above
        if (e.round >= 0) {  // slots: the rows they stand for, one by one
          if (!clusters_ok || e.round >= cl.hashes || rows != m.N) continue;  // reported above
          for (std::int64_t s = e.row0; s < std::int64_t(e.row0) + e.rows; ++s) {
            const std::int64_t y = e.bh * rows + row_of(e, s);
            stores.push_back({y, y + 1, e.col0, std::int64_t(e.col0) + e.cols});
          }
          continue;
        }
        const std::int64_t y0 = e.bh * rows + e.row0;
        stores.push_back({y0, y0 + e.rows, e.col0, std::int64_t(e.col0) + e.cols});
      }
      const Gap gap = uncovered(stores, heads * rows, cols);
      if (gap.missing > 0)
        err.add("coverage", std::string(tensor_name(out)) + ": " + std::to_string(gap.missing) + " of " +
                                std::to_string(elems) + " elements are stored by no event (the first: head " +
                                std::to_string(gap.y / rows) + ", row " + std::to_string(gap.y % rows) + ", col " +
                                std::to_string(gap.x) + ")");
    }
  }

  err.finish();
  warn.finish();
  return rep;
}

ValidationReport validate_file(const std::string& path) {
  try {
    return validate(read_trace(path));
  } catch (const TraceUnreadable& e) {
    ValidationReport rep;
    rep.errors.push_back(e.what());
    rep.unreadable = true;
    return rep;
  } catch (const TraceError& e) {
    ValidationReport rep;
    rep.errors.push_back(e.what());
    return rep;
  } catch (const std::bad_alloc&) {
    ValidationReport rep;
    rep.errors.push_back(path + ": not enough memory to validate this trace");
    rep.unreadable = true;
    return rep;
  }
}

}  // namespace fs::trace
