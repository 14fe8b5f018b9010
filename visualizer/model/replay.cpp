#include "visualizer/model/replay.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <utility>

#include "common/problem.hpp"
#include "common/trace/names.hpp"

namespace fs::viz {

namespace {

int index_of(tr::Tensor t) { return int(t); }

// The on-chip effect of one event on a CTA's tiles (see resident_tiles). One slot per
// (tensor, residence): a new tile of K replaces the previous K tile, as a kernel's buffer
// would be overwritten. P̃ is the exception where the track's P̃V lags (pv_lags): there a tile
// of P̃ stays until the AccumulateO that uses it, the k-th P̃ the k-th's, beside the next tile's
// S or P̃. In a decoding trace a tile is gathered: one load per run of slots (K's pages, Q's rows
// of the group's heads), so a load right after a load of the same tensor (`prev`) adds to its tile.
void apply_residency(std::vector<ResidentTile>& slots, const tr::Meta& meta, const tr::Event& ev, int e,
                     bool pv_lags, const tr::Event* prev) {
  auto put = [&](tr::Tensor t, Residence where, std::int64_t bytes) {
    ResidentTile tile{t, where, ev.bh, ev.row0, ev.rows, ev.col0, ev.cols, bytes, e, ev.round};
    for (auto& s : slots)
      if (s.tensor == t && s.where == where) {
        s = tile;
        return;
      }
    slots.push_back(tile);
  };
  auto drop = [&](tr::Tensor t) {
    slots.erase(std::remove_if(slots.begin(), slots.end(),
                               [&](const ResidentTile& s) { return s.tensor == t && s.where == Residence::Regs; }),
                slots.end());
  };
  const std::int64_t area_bytes = std::int64_t(ev.rows) * ev.cols * register_element_bytes(meta, ev.tensor);
  const bool gathers = meta.cache.on() && prev && prev->kind == tr::Kind::Load && prev->tensor == ev.tensor;
  switch (ev.kind) {
    case tr::Kind::Load:
      if (gathers)
        for (auto& s : slots)
          if (s.tensor == ev.tensor && s.where == Residence::Smem) {
            s.rows += ev.rows;
            s.bytes += ev.bytes;
            s.event = e;
            ++s.loads;
            return;
          }
      put(ev.tensor, Residence::Smem, ev.bytes);
      break;
    case tr::Kind::ComputeS:
      // The previous tile's P̃ has been used by then (P̃V comes before the next S), unless the
      // track's P̃V lags: then it waits, beside this S, for its AccumulateO.
      if (!pv_lags) drop(tr::Tensor::P);
      put(tr::Tensor::S, Residence::Regs, area_bytes);
      break;
    case tr::Kind::Softmax:
      // P̃ = exp(S − m̃) overwrites S in the same registers; a P̃ still waiting for its P̃V stays.
      drop(tr::Tensor::S);
      if (pv_lags)
        slots.push_back({tr::Tensor::P, Residence::Regs, ev.bh, ev.row0, ev.rows, ev.col0, ev.cols, area_bytes, e, ev.round});
      else
        put(tr::Tensor::P, Residence::Regs, area_bytes);
      break;
    case tr::Kind::AccumulateO: {
      // Step 10 records its P̃V on no tensor: the accumulator is O's all the same (float32).
      const std::int64_t o_bytes = std::int64_t(ev.rows) * ev.cols * register_element_bytes(meta, tr::Tensor::O);
      // Where P̃V lags, it uses up the oldest P̃ (slots keep the order they were put in).
      if (pv_lags) {
        const auto p = std::find_if(slots.begin(), slots.end(),
                                    [](const ResidentTile& s) { return s.tensor == tr::Tensor::P && s.where == Residence::Regs; });
        if (p != slots.end()) slots.erase(p);
      }
      put(tr::Tensor::O, Residence::Regs, o_bytes);
      break;
    }
    case tr::Kind::Rescale: put(tr::Tensor::O, Residence::Regs, area_bytes); break;
    case tr::Kind::ComputeDP:
      drop(tr::Tensor::dS);
      put(tr::Tensor::dP, Residence::Regs, area_bytes);
      break;
    case tr::Kind::ComputeDS:
      drop(tr::Tensor::dP);
      put(tr::Tensor::dS, Residence::Regs, area_bytes);
      break;
    case tr::Kind::AccumulateDQ: put(tr::Tensor::dQ, Residence::Regs, area_bytes); break;
    case tr::Kind::AccumulateDK: put(tr::Tensor::dK, Residence::Regs, area_bytes); break;
    case tr::Kind::AccumulateDV: put(tr::Tensor::dV, Residence::Regs, area_bytes); break;
    case tr::Kind::Store:
    case tr::Kind::Skip:
    case tr::Kind::Wait: break;
  }
}

// Whether a track records P̃V j after S j+1 (step 09's fa3: QKᵀ j+1 issued before P̃V j): some
// ComputeS comes while a P̃ waits for its AccumulateO (more Softmax events than AccumulateO so
// far), and the track has as many AccumulateO events as Softmax ones in all, the k-th using the
// k-th P̃. Steps 04–08 record P̃V j before S j+1; a backward records no AccumulateO.
bool track_pv_lags(const tr::Trace& trace, const std::vector<int>& list) {
  int softmax = 0, accumulate = 0;
  bool lag = false;
  for (int i : list) {
    const auto& ev = trace.events[std::size_t(i)];
    if (ev.kind == tr::Kind::Softmax) ++softmax;
    if (ev.kind == tr::Kind::AccumulateO) {
      if (++accumulate > softmax) return false;  // a P̃V with no P̃ of its own: not this order
    }
    if (ev.kind == tr::Kind::ComputeS && softmax > accumulate) lag = true;
  }
  return lag && softmax == accumulate;
}

std::int64_t sum_bytes(const std::vector<ResidentTile>& slots, Residence where) {
  std::int64_t b = 0;
  for (const auto& s : slots)
    if (s.where == where) b += s.bytes;
  return b;
}

}  // namespace

std::int64_t Totals::read_total() const { return std::accumulate(read.begin(), read.end(), std::int64_t(0)); }
std::int64_t Totals::written_total() const {
  return std::accumulate(written.begin(), written.end(), std::int64_t(0));
}
std::int64_t Totals::cached_total() const {
  return std::accumulate(cached.begin(), cached.end(), std::int64_t(0));
}

const tr::TensorInfo* find_tensor(const tr::Meta& meta, tr::Tensor t) {
  for (const auto& ti : meta.tensors)
    if (ti.id == t) return &ti;
  return nullptr;
}

std::int64_t head_count(const tr::Meta& meta) {
  return std::max<std::int64_t>(1, std::int64_t(meta.B) * std::int64_t(meta.H));
}

int element_bytes(const tr::Meta& meta, tr::Tensor t) {
  if (const auto* ti = find_tensor(meta, t)) {
    std::int64_t elems = 1;
    for (auto s : ti->shape) elems *= s;
    if (elems > 0 && ti->bytes > 0 && ti->bytes % elems == 0) return int(ti->bytes / elems);
  }
  // Not listed: the format's rule (the row statistics and dQacc are float32, the rest the dtype's).
  return tr::element_bytes(t, meta.dtype);
}

bool fp8_forward(const tr::Meta& meta) {
  return meta.step.rfind("09", 0) == 0 && meta.variant == "fp8" && meta.pass != "bwd";
}

int register_element_bytes(const tr::Meta& meta, tr::Tensor t) {
  switch (t) {
    // The products' accumulators (mma, wgmma) are float32 whatever the inputs (steps 08 and 09,
    // fp8's too; the fp32 steps are float32 throughout): S = QKᵀ, dP = dO Vᵀ, O, dQ, dK, dV.
    case tr::Tensor::S:
    case tr::Tensor::dP:
    case tr::Tensor::O:
    case tr::Tensor::dQ:
    case tr::Tensor::dQacc:
    case tr::Tensor::dK:
    case tr::Tensor::dV: return 4;
    // P̃ is rounded to the A operand of P̃V: the input type (pack_p), but e4m3 in step 09's fp8
    // forward (pack_p_fp8), 1 byte whatever the problem's dtype. dS likewise to the input type.
    case tr::Tensor::P: return fp8_forward(meta) ? 1 : element_bytes(meta, t);
    default: return element_bytes(meta, t);
  }
}

bool score_like(tr::Tensor t) {
  return t == tr::Tensor::S || t == tr::Tensor::P || t == tr::Tensor::dP || t == tr::Tensor::dS;
}

bool is_matmul(tr::Kind k) {
  switch (k) {
    case tr::Kind::ComputeS:
    case tr::Kind::AccumulateO:
    case tr::Kind::ComputeDP:
    case tr::Kind::AccumulateDQ:
    case tr::Kind::AccumulateDK:
    case tr::Kind::AccumulateDV: return true;
    default: return false;
  }
}

Replay::Replay(tr::Trace trace) : trace_(std::move(trace)) {
  auto& ev = trace_.events;
  // The logical order is the event's index; put them in seq order if a producer did not.
  if (!std::is_sorted(ev.begin(), ev.end(), [](const tr::Event& a, const tr::Event& b) { return a.seq < b.seq; }))
    std::stable_sort(ev.begin(), ev.end(), [](const tr::Event& a, const tr::Event& b) { return a.seq < b.seq; });
  // Tracks named by events but missing from the table would index out of range: give them
  // a row so that a damaged trace still replays.
  int max_track = int(trace_.tracks.size()) - 1;
  for (const auto& e : ev) max_track = std::max(max_track, e.track);
  if (max_track >= int(trace_.tracks.size())) trace_.tracks.resize(std::size_t(max_track + 1));

  for (const auto& e : ev) {
    device_end_ns_ = std::max(device_end_ns_, e.ts_ns + std::max(0.0, e.dur_ns));
    has_stats_ = has_stats_ || std::isfinite(e.m);
  }
  device_begin_ns_ = ev.empty() ? 0 : device_end_ns_;
  for (const auto& e : ev) device_begin_ns_ = std::min(device_begin_ns_, e.ts_ns);
  end_ns_ = device_end_ns_;
  for (const auto& r : trace_.ranges) {
    end_ns_ = std::max(end_ns_, r.ts_ns + r.dur_ns);
    host_depth_ = std::max(host_depth_, r.depth + 1);
  }
  for (const auto& m : trace_.marks) end_ns_ = std::max(end_ns_, m.ts_ns);
  std::stable_sort(trace_.ranges.begin(), trace_.ranges.end(),
                   [](const tr::HostRange& a, const tr::HostRange& b) { return a.ts_ns < b.ts_ns; });
  clustered_ = usable_clustering(trace_.meta);
  // Negative bytes are the validator's finding; they move nothing here.
  for (const auto& u : trace_.meta.untraced) {
    untraced_read_ += std::max<std::int64_t>(0, u.read_bytes);
    untraced_written_ += std::max<std::int64_t>(0, u.write_bytes);
  }

  cache_ = CacheGeometry(trace_.meta);
  index_tracks();
  decode_ = DecodeSchedule(trace_, cache_, track_events_);
  index_flops();
  index_orders();
  index_residency();
  index_moved_bytes();
}

void Replay::index_moved_bytes() {
  // 0: no event moves the tensor yet; -1: its events disagree (or one is not whole elements).
  std::array<std::int64_t, tr::kTensorCount> seen{};
  for (const auto& e : trace_.events) {
    if ((e.kind != tr::Kind::Load && e.kind != tr::Kind::Store) || e.tensor == tr::Tensor::None || e.bytes <= 0) continue;
    auto& s = seen[std::size_t(index_of(e.tensor))];
    const std::int64_t elems = std::int64_t(std::max(e.rows, 0)) * std::max(e.cols, 0);
    const std::int64_t per = elems > 0 && e.bytes % elems == 0 ? e.bytes / elems : -1;
    s = s == 0 ? per : s == per ? s : -1;
  }
  for (int t = 0; t < tr::kTensorCount; ++t) {
    const std::int64_t s = seen[std::size_t(t)];
    moved_bytes_[std::size_t(t)] = s > 0 ? int(s) : element_bytes(trace_.meta, tr::Tensor(t));
  }
}

void Replay::index_tracks() {
  const auto& ev = trace_.events;
  const std::size_t T = trace_.tracks.size();
  track_events_.assign(T, {});
  std::vector<std::size_t> counts(T, 0);
  for (const auto& e : ev) ++counts[std::size_t(e.track)];
  for (std::size_t t = 0; t < T; ++t) track_events_[t].reserve(counts[t]);
  for (std::size_t i = 0; i < ev.size(); ++i) track_events_[std::size_t(ev[i].track)].push_back(int(i));

  t_begin_.assign(T, {});
  t_end_max_.assign(T, {});
  track_begin_.assign(T, 0);
  track_end_.assign(T, 0);
  track_round_.assign(T, -1);
  for (std::size_t t = 0; t < T; ++t) {
    const auto& list = track_events_[t];
    for (int e : list)
      if (ev[std::size_t(e)].round >= 0) {
        track_round_[t] = ev[std::size_t(e)].round;
        break;
      }
    auto& b = t_begin_[t];
    auto& en = t_end_max_[t];
    b.resize(list.size());
    en.resize(list.size());
    double run = -1e300;
    for (std::size_t k = 0; k < list.size(); ++k) {
      const auto& e = ev[std::size_t(list[k])];
      b[k] = e.ts_ns;
      run = std::max(run, e.ts_ns + std::max(0.0, e.dur_ns));
      en[k] = run;
    }
    if (!list.empty()) {
      track_begin_[t] = *std::min_element(b.begin(), b.end());
      track_end_[t] = en.back();
    }
  }

  // The lanes of each CTA, and when the CTA began (its earliest lane).
  std::map<std::pair<int, int>, int> cta_index;  // (kernel, CTA) → entry of ctas_
  track_cta_.assign(T, -1);
  for (std::size_t t = 0; t < T; ++t) {
    const auto& tk = trace_.tracks[t];
    const auto [it, added] = cta_index.emplace(std::make_pair(tk.kernel, tk.cta), int(ctas_.size()));
    if (added) ctas_.emplace_back();
    ctas_[std::size_t(it->second)].push_back(int(t));
    track_cta_[t] = it->second;
  }
  std::vector<double> cta_begin(ctas_.size(), 0);
  for (std::size_t c = 0; c < ctas_.size(); ++c) {
    auto& lanes = ctas_[c];
    std::stable_sort(lanes.begin(), lanes.end(),
                     [&](int a, int b) { return trace_.tracks[std::size_t(a)].lane < trace_.tracks[std::size_t(b)].lane; });
    cta_begin[c] = track_begin_[std::size_t(lanes.front())];
    for (int t : lanes)
      if (!track_events_[std::size_t(t)].empty()) cta_begin[c] = std::min(cta_begin[c], track_begin_[std::size_t(t)]);
  }

  // Group by SM, CTAs by start time, a CTA's lanes together; a track that never ran (no events,
  // unknown SM) goes to SM -1.
  std::vector<int> order(T);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const auto &ta = trace_.tracks[std::size_t(a)], &tb = trace_.tracks[std::size_t(b)];
    if (ta.sm != tb.sm) return ta.sm < tb.sm;
    const int ca = track_cta_[std::size_t(a)], cb = track_cta_[std::size_t(b)];
    if (cta_begin[std::size_t(ca)] != cta_begin[std::size_t(cb)]) return cta_begin[std::size_t(ca)] < cta_begin[std::size_t(cb)];
    if (ca != cb) return ctas_[std::size_t(ca)].front() < ctas_[std::size_t(cb)].front();
    return ta.lane < tb.lane;
  });
  track_group_.assign(T, -1);
  for (int t : order) {
    const int sm = trace_.tracks[std::size_t(t)].sm;
    if (sm_groups_.empty() || sm_groups_.back().sm != sm) sm_groups_.push_back({sm, {}, 0});
    auto& g = sm_groups_.back();
    if (g.tracks.empty() || track_cta_[std::size_t(g.tracks.back())] != track_cta_[std::size_t(t)]) ++g.ctas;
    g.tracks.push_back(t);
    track_group_[std::size_t(t)] = int(sm_groups_.size()) - 1;
    sm_count_ = std::max(sm_count_, sm + 1);
  }
}

bool Replay::laned(int track) const {
  const int k = trace_.tracks[std::size_t(track)].kernel;
  return k >= 0 && k < int(trace_.kernels.size()) && trace_.kernels[std::size_t(k)].lanes > 1;
}

std::vector<ResidentTile> Replay::cta_tiles(int track, Cursor c) const {
  std::vector<ResidentTile> tiles;
  for (int t : lanes_of(track)) {
    const auto lane = resident_tiles(t, track_cursor(t, c).done);
    tiles.insert(tiles.end(), lane.begin(), lane.end());
  }
  return tiles;
}

void Replay::index_flops() {
  const auto& m = trace_.meta;
  if (cache_.on()) {
    // Decoding: the new tokens' rows against each sequence's keys, as the CTAs computed them.
    event_flops_.assign(trace_.events.size(), 0.0);
    pass_flops_ = 0;
    const double d = std::max(1, m.d);
    for (const auto& list : track_events_) {
      double keys = 0;  // the tile of the ComputeS before an AccumulateO
      for (int e : list) {
        const auto& ev = trace_.events[std::size_t(e)];
        if (ev.kind == tr::Kind::ComputeS) keys = std::max(0, ev.cols);
        if (ev.kind != tr::Kind::ComputeS && ev.kind != tr::Kind::AccumulateO) continue;
        const double f = 2 * d * std::max(0, ev.rows) * keys;
        event_flops_[std::size_t(e)] = f;
        pass_flops_ += f;
      }
    }
    return;
  }
  const Shape s{std::max(1, m.B), std::max(1, m.H), std::max(1, m.N), std::max(1, m.d)};
  pass_flops_ = m.pass == "bwd" ? backward_flops(s, m.causal) : forward_flops(s, m.causal);
  if (clustered_) pass_flops_ *= m.clusters.hashes * round_score_share(m);
  std::array<double, tr::kKindCount> area{};
  for (const auto& e : trace_.events)
    if (is_matmul(e.kind)) area[std::size_t(e.kind)] += double(e.rows) * e.cols;
  int kinds = 0;
  for (double a : area) kinds += a > 0;
  for (int k = 0; k < tr::kKindCount; ++k)
    flops_per_area_[std::size_t(k)] = area[std::size_t(k)] > 0 ? pass_flops_ / kinds / area[std::size_t(k)] : 0;
}

double Replay::event_flops(int e) const {
  if (!event_flops_.empty()) return event_flops_[std::size_t(e)];
  const auto& ev = trace_.events[std::size_t(e)];
  return flops_per_area_[std::size_t(ev.kind)] * double(ev.rows) * ev.cols;
}

void Replay::apply(Totals& t, int e) const {
  const auto& ev = trace_.events[std::size_t(e)];
  const auto ti = std::size_t(index_of(ev.tensor));
  if (ev.kind == tr::Kind::Load) (ev.cached ? t.cached : t.read)[ti] += ev.bytes;
  if (ev.kind == tr::Kind::Store) t.written[ti] += ev.bytes;
  t.flops += event_flops(e);
  ++t.events;
}

void Replay::index_orders() {
  const auto& ev = trace_.events;
  const std::size_t E = ev.size();
  time_order_.resize(E);
  std::iota(time_order_.begin(), time_order_.end(), 0);
  auto end_of = [&](int i) { return ev[std::size_t(i)].ts_ns + std::max(0.0, ev[std::size_t(i)].dur_ns); };
  std::stable_sort(time_order_.begin(), time_order_.end(), [&](int a, int b) { return end_of(a) < end_of(b); });
  time_order_end_.resize(E);
  for (std::size_t k = 0; k < E; ++k) time_order_end_[k] = end_of(time_order_[k]);
  begins_sorted_.resize(E);
  for (std::size_t k = 0; k < E; ++k) begins_sorted_[k] = ev[k].ts_ns;
  std::sort(begins_sorted_.begin(), begins_sorted_.end());

  for (int o = 0; o < 2; ++o) {
    const Order order = o == 0 ? Order::Real : Order::Logical;
    auto& cps = checkpoints_[o];
    auto& cum = cum_flops_[o];
    cps.clear();
    cum.resize(E + 1);
    Totals t;
    cum[0] = 0;
    for (std::size_t k = 0; k < E; ++k) {
      if (std::int64_t(k) % kCheckpoint == 0) cps.push_back(t);
      const int e = event_in_order(order, std::int64_t(k));
      apply(t, e);
      cum[k + 1] = t.flops;
    }
    if (std::int64_t(E) % kCheckpoint == 0) cps.push_back(t);
    grand_ = t;
  }
}

void Replay::index_residency() {
  const std::size_t T = trace_.tracks.size();
  smem_after_.assign(T, {});
  regs_after_.assign(T, {});
  pv_lags_.assign(T, false);
  for (std::size_t t = 0; t < T; ++t) pv_lags_[t] = track_pv_lags(trace_, track_events_[t]);
  std::vector<ResidentTile> slots;
  for (std::size_t t = 0; t < T; ++t) {
    slots.clear();
    const auto& list = track_events_[t];
    smem_after_[t].resize(list.size());
    regs_after_[t].resize(list.size());
    for (std::size_t k = 0; k < list.size(); ++k) {
      apply_residency(slots, trace_.meta, trace_.events[std::size_t(list[k])], list[k], pv_lags_[t],
                      k > 0 ? &trace_.events[std::size_t(list[k - 1])] : nullptr);
      const std::int64_t sm = sum_bytes(slots, Residence::Smem);
      smem_after_[t][k] = std::int32_t(std::min<std::int64_t>(sm, INT32_MAX));
      regs_after_[t][k] = std::int32_t(std::min<std::int64_t>(sum_bytes(slots, Residence::Regs), INT32_MAX));
      peak_smem_ = std::max(peak_smem_, sm);
    }
  }
}

bool Replay::busy_at(double t_ns) const {
  // Events begun by t minus events ended by t; a zero-length event is never in progress.
  const auto begun = std::upper_bound(begins_sorted_.begin(), begins_sorted_.end(), t_ns) - begins_sorted_.begin();
  const auto ended = std::upper_bound(time_order_end_.begin(), time_order_end_.end(), t_ns) - time_order_end_.begin();
  return begun > ended;
}

double Replay::next_begin_after(double t_ns) const {
  const auto it = std::upper_bound(begins_sorted_.begin(), begins_sorted_.end(), t_ns);
  return it == begins_sorted_.end() ? end_ns_ : *it;
}

double Replay::logical_at_time(double t_ns) const {
  return double(std::upper_bound(time_order_end_.begin(), time_order_end_.end(), t_ns) - time_order_end_.begin());
}

double Replay::time_at_logical(double x) const {
  const std::int64_t E = event_count();
  if (E == 0) return 0;
  if (x <= 0) return trace_.events.front().ts_ns;
  const std::int64_t k = std::int64_t(std::floor(x));
  if (k >= E) return device_end_ns_;
  const auto& e = trace_.events[std::size_t(k)];
  return e.ts_ns + (x - double(k)) * std::max(0.0, e.dur_ns);
}

Cursor Replay::convert(Cursor c, Order to) const {
  if (c.order == to) return c;
  return {to, to == Order::Logical ? logical_at_time(c.x) : time_at_logical(c.x)};
}

std::int64_t Replay::done_count(Cursor c) const {
  const std::int64_t E = event_count();
  if (c.order == Order::Logical) return std::clamp<std::int64_t>(std::int64_t(std::floor(c.x)), 0, E);
  return std::int64_t(logical_at_time(c.x));
}

Totals Replay::totals_prefix(Order o, std::int64_t k) const {
  k = std::clamp<std::int64_t>(k, 0, event_count());
  const auto& cps = checkpoints_[o == Order::Real ? 0 : 1];
  const std::int64_t c = std::min<std::int64_t>(k / kCheckpoint, std::int64_t(cps.size()) - 1);
  Totals t = cps[std::size_t(c)];
  for (std::int64_t i = c * kCheckpoint; i < k; ++i) apply(t, event_in_order(o, i));
  return t;
}

Totals Replay::totals(Cursor c) const { return totals_prefix(c.order, done_count(c)); }

// Between the k-th and the (k+1)-th event to finish, real time counts the (k+1)-th in
// proportion, so that the fraction moves smoothly and cursor_at_flops_fraction inverts it.
double Replay::flops_fraction(Cursor c) const {
  const auto& cum = cum_flops_[c.order == Order::Real ? 0 : 1];
  if (pass_flops_ <= 0 || cum.back() <= 0) return 0;
  const std::int64_t k = done_count(c);
  double f = cum[std::size_t(k)];
  if (k < event_count()) {
    double into = c.x - double(k);
    if (c.order == Order::Real) {
      const double a = k > 0 ? time_order_end_[std::size_t(k) - 1] : device_begin_ns_;
      const double b = time_order_end_[std::size_t(k)];
      into = b > a ? (c.x - a) / (b - a) : 0.0;
    }
    f += std::clamp(into, 0.0, 1.0) * (cum[std::size_t(k) + 1] - cum[std::size_t(k)]);
  }
  return f / cum.back();
}

Cursor Replay::cursor_at_flops_fraction(double f, Order o) const {
  const auto& cum = cum_flops_[o == Order::Real ? 0 : 1];
  const std::int64_t E = event_count();
  if (E == 0 || cum.back() <= 0) return {o, 0};
  const double target = std::clamp(f, 0.0, 1.0) * cum.back();
  // The first event whose completion reaches the target.
  const auto it = std::lower_bound(cum.begin() + 1, cum.end(), target);
  const std::int64_t k = std::min<std::int64_t>(it - cum.begin() - 1, E - 1);
  const double span = cum[std::size_t(k) + 1] - cum[std::size_t(k)];
  const double into = span > 0 ? (target - cum[std::size_t(k)]) / span : 1.0;
  if (o == Order::Logical) return {o, double(k) + into};
  const double a = k > 0 ? time_order_end_[std::size_t(k) - 1] : device_begin_ns_;
  const double b = time_order_end_[std::size_t(k)];
  // At exactly b the event is done; stay just short of it unless the target is the end.
  return {o, into >= 1.0 ? b : a + into * (b - a)};
}

TrackCursor Replay::track_cursor(int track, Cursor c) const {
  TrackCursor tc;
  const auto& list = track_events_[std::size_t(track)];
  const int n = int(list.size());
  if (n == 0) return tc;
  if (c.order == Order::Real) {
    const auto& ends = t_end_max_[std::size_t(track)];
    const auto& begins = t_begin_[std::size_t(track)];
    tc.done = int(std::upper_bound(ends.begin(), ends.end(), c.x) - ends.begin());
    if (tc.done < n && begins[std::size_t(tc.done)] <= c.x) {
      tc.active = tc.done;
      const auto& e = trace_.events[std::size_t(list[std::size_t(tc.done)])];
      tc.frac = e.dur_ns > 0 ? std::clamp((c.x - e.ts_ns) / e.dur_ns, 0.0, 1.0) : 1.0;
    }
    tc.started = begins.front() <= c.x;
  } else {
    const std::int64_t k = std::int64_t(std::floor(c.x));
    tc.done = int(std::lower_bound(list.begin(), list.end(), k) - list.begin());
    if (tc.done < n && list[std::size_t(tc.done)] == k) {
      tc.active = tc.done;
      tc.frac = c.x - double(k);
    }
    tc.started = list.front() <= k;
  }
  tc.retired = tc.done >= n;
  return tc;
}

int Replay::row_of_slot(tr::Tensor t, int bh, int round, int slot) const {
  const SlotOrders o = slot_orders(t, bh, round);
  return o.rows && slot >= 0 && slot < trace_.meta.N ? o.rows[slot] : slot;
}

int Replay::round_to_follow(int track, Cursor c) const {
  // A round the clustering lacks (the validator's finding) is none.
  auto known = [&](int round) { return round >= 0 && round < rounds(); };
  if (track >= 0 && track < track_count() && known(track_round_[std::size_t(track)])) return track_round_[std::size_t(track)];
  // The CTAs of no round run before the rounds (the hashes, the preprocess): a short way back.
  for (std::int64_t k = done_count(c); k-- > 0;) {
    const int round = trace_.events[std::size_t(event_in_order(c.order, k))].round;
    if (known(round)) return round;
  }
  return 0;
}

std::vector<ResidentTile> Replay::resident_tiles(int track, int done) const {
  std::vector<ResidentTile> slots;
  const auto& list = track_events_[std::size_t(track)];
  if (done >= int(list.size())) return slots;
  for (int k = 0; k < done; ++k)
    apply_residency(slots, trace_.meta, trace_.events[std::size_t(list[std::size_t(k)])], list[std::size_t(k)],
                    pv_lags_[std::size_t(track)], k > 0 ? &trace_.events[std::size_t(list[std::size_t(k) - 1])] : nullptr);
  return slots;
}

std::int64_t Replay::smem_after(int track, int done) const {
  const auto& v = smem_after_[std::size_t(track)];
  if (done <= 0 || done >= int(v.size())) return 0;
  return v[std::size_t(done) - 1];
}

std::int64_t Replay::regs_after(int track, int done) const {
  const auto& v = regs_after_[std::size_t(track)];
  if (done <= 0 || done >= int(v.size())) return 0;
  return v[std::size_t(done) - 1];
}

}  // namespace fs::viz
