// Replay: a loaded trace, indexed once so that any moment of it can be asked about quickly.
//
// A moment is a Cursor: a time in nanoseconds (real order) or a position in the trace's
// logical order (`seq`, one unit per event). The same questions have answers in both orders:
// which events are done, which one a CTA is in the middle of, which tiles it holds on chip,
// how many bytes have crossed the HBM boundary so far. Everything here is immutable after
// construction; what changes while playing (the per-cell coverage of the tensors) lives in
// coverage.hpp and is updated incrementally.
//
// Cost of a query, E events, T tracks: counters O(log E + 4096), a track's cursor O(log E),
// a track's resident tiles O(events of that track). Nothing scans the whole trace per frame.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/trace/trace.hpp"
#include "visualizer/model/clusters.hpp"
#include "visualizer/model/decode.hpp"

namespace fs::viz {

namespace tr = fs::trace;

enum class Order : std::uint8_t { Real, Logical };

// A moment of the replay. Real: x is ns since the trace's t0. Logical: x is a position in
// seq order; event k occupies [k, k+1), so at x = k + f event k is a fraction f done.
struct Cursor {
  Order order = Order::Real;
  double x = 0;
};

// Where a CTA is at a cursor: `done` of its events are finished; `active` (an index into
// the track's event list, or -1) is in progress, `frac` of the way through.
struct TrackCursor {
  int done = 0;
  int active = -1;
  double frac = 0;
  bool started = false;   // the CTA has begun (its first event has started)
  bool retired = false;   // every event of the CTA is done
};

// Cumulative HBM traffic and work after a prefix of events.
struct Totals {
  std::array<std::int64_t, tr::kTensorCount> read{};     // non-cached loads, per tensor
  std::array<std::int64_t, tr::kTensorCount> written{};  // stores, per tensor
  std::array<std::int64_t, tr::kTensorCount> cached{};   // re-reads the IO model leaves out
  double flops = 0;
  std::int64_t events = 0;

  std::int64_t read_total() const;
  std::int64_t written_total() const;
  std::int64_t cached_total() const;
};

// Where a tile sits on chip: loaded tiles are in shared memory, tiles a CTA computes (S, P,
// the O accumulator) live in registers.
enum class Residence : std::uint8_t { Smem, Regs };

struct ResidentTile {
  tr::Tensor tensor = tr::Tensor::None;
  Residence where = Residence::Smem;
  std::int32_t bh = 0, row0 = 0, rows = 0, col0 = 0, cols = 0;
  std::int64_t bytes = 0;
  int event = -1;  // the event (index into Trace::events) that put it there
  int round = -1;  // clustered steps: the round whose slots its rows are (Event::round)
  // Loads it was gathered from: a decoding trace's tile of keys is one load per run of slots (its
  // pages), and its consecutive loads of one tensor fill one tile (`rows` in all, row0 the first
  // load's); 1 elsewhere.
  int loads = 1;
};

// An SM and the tracks (CTAs of every kernel) that ran on it, by start time; the lanes of a CTA
// (tr::Kernel::lanes) one after another, in lane order.
struct SmGroup {
  int sm = -1;
  std::vector<int> tracks;
  int ctas = 0;  // the CTAs those tracks are (fewer than the tracks when CTAs record in lanes)
};

class Replay {
 public:
  explicit Replay(tr::Trace trace);

  const tr::Trace& trace() const { return trace_; }
  const tr::Meta& meta() const { return trace_.meta; }
  std::int64_t event_count() const { return std::int64_t(trace_.events.size()); }
  int track_count() const { return int(trace_.tracks.size()); }

  // The span a cursor moves over in each order: [0, end_ns] and [0, event_count].
  double end_ns() const { return end_ns_; }
  double device_begin_ns() const { return device_begin_ns_; }
  double device_end_ns() const { return device_end_ns_; }
  double extent(Order o) const { return o == Order::Real ? end_ns_ : double(event_count()); }

  // Converting a moment between the orders (for switching orders and for placing host
  // ranges on a logical axis): a time maps to the number of events finished by then, a
  // position to the time its event is that far through.
  double logical_at_time(double t_ns) const;
  double time_at_logical(double x) const;
  Cursor convert(Cursor c, Order to) const;

  // Events of the whole trace done at a cursor: the length of the prefix of that order's
  // event sequence (seq order, or real order = by end time).
  std::int64_t done_count(Cursor c) const;
  // The event at position k of an order's sequence.
  int event_in_order(Order o, std::int64_t k) const {
    return o == Order::Logical ? int(k) : time_order_[std::size_t(k)];
  }
  // Whether any event is in progress at time t, and the first begin after t (end_ns() if
  // none): playback skips the idle gaps between kernels with these.
  bool busy_at(double t_ns) const;
  double next_begin_after(double t_ns) const;
  // The end time of the k-th event to finish.
  double end_in_time_order(std::int64_t k) const { return time_order_end_[std::size_t(k)]; }
  Totals totals(Cursor c) const;
  Totals totals_prefix(Order o, std::int64_t k) const;
  const Totals& grand_totals() const { return grand_; }
  // HBM traffic of the pass that no event records (Meta::untraced: a library's sort, memsets),
  // which the IO model counts: with it the grand totals are the model's. It has no time, so it
  // is in no cursor's totals.
  std::int64_t untraced_read() const { return untraced_read_; }
  std::int64_t untraced_written() const { return untraced_written_; }
  // Fraction of the pass's FLOPs done, and the cursor at which a fraction is reached.
  double flops_fraction(Cursor c) const;
  Cursor cursor_at_flops_fraction(double f, Order o) const;

  // Tracks (CTAs).
  const std::vector<int>& track_events(int track) const { return track_events_[std::size_t(track)]; }
  TrackCursor track_cursor(int track, Cursor c) const;
  double track_begin_ns(int track) const { return track_begin_[std::size_t(track)]; }
  double track_end_ns(int track) const { return track_end_[std::size_t(track)]; }
  // The tiles a CTA holds after its first `done` events; empty once it has retired.
  std::vector<ResidentTile> resident_tiles(int track, int done) const;
  // Bytes a CTA holds on chip (shared memory, registers) after its first `done` events.
  std::int64_t smem_after(int track, int done) const;
  std::int64_t regs_after(int track, int done) const;
  std::int64_t peak_smem() const { return peak_smem_; }
  // Whether the track records P̃V j after S j+1 (step 09's fa3 and fp8 consumers: QKᵀ j+1 is
  // issued before P̃V j), so that P̃ j stays in registers, beside S j+1 and P̃ j+1, until the
  // AccumulateO that uses it. Otherwise (steps 04–08: P̃V j, then S j+1) P̃ stays until the next S.
  bool pv_lags(int track) const { return pv_lags_[std::size_t(track)] != 0; }

  // Lanes (tr::Kernel::lanes): the tracks of a track's CTA, by lane, the track itself among them
  // (just it, for a kernel of one lane); whether its kernel records in lanes; and the tiles the
  // CTA holds at a cursor, over all its lanes, each at its own place: the producer's loads in
  // shared memory, the consumers' S, P̃ and O in registers.
  const std::vector<int>& lanes_of(int track) const { return ctas_[std::size_t(track_cta_[std::size_t(track)])]; }
  bool laned(int track) const;
  std::vector<ResidentTile> cta_tiles(int track, Cursor c) const;

  // Per-track search arrays, aligned with track_events(track): begin times, end times as a
  // running maximum (so a binary search is valid even if a track's events overlap), seq.
  const std::vector<double>& track_begins(int track) const { return t_begin_[std::size_t(track)]; }
  const std::vector<double>& track_ends(int track) const { return t_end_max_[std::size_t(track)]; }

  // SMs in ascending id, each with its tracks.
  const std::vector<SmGroup>& sm_groups() const { return sm_groups_; }
  int sm_count() const { return sm_count_; }  // max %smid + 1
  int sm_group_of_track(int track) const { return track_group_[std::size_t(track)]; }

  // Host ranges sorted by begin time, and the deepest nesting level.
  int host_depth() const { return host_depth_; }

  // Whether the trace carries online-softmax statistics (m, ℓ of a sampled row).
  bool has_running_stats() const { return has_stats_; }

  // Clustered steps (step 07): whether the trace's orders can place its round events
  // (usable_clustering), the orders that place a tile of `t` in head bh and round `round` (none
  // when they cannot), and the row a slot stands for (the slot itself when it is a row).
  bool clustered() const { return clustered_; }
  int rounds() const { return clustered_ ? trace_.meta.clusters.hashes : 0; }
  SlotOrders slot_orders(tr::Tensor t, int bh, int round) const {
    return clustered_ ? fs::viz::slot_orders(trace_.meta, t, bh, round) : SlotOrders{};
  }
  int row_of_slot(tr::Tensor t, int bh, int round, int slot) const;
  // Whether a tile of `t` has a place: rows always, a round's slots when the orders place them
  // (the coverage and the outlines leave the others out rather than draw slots as rows).
  bool placeable(tr::Tensor t, int bh, int round) const { return round < 0 || slot_orders(t, bh, round).mapped(); }
  // The round a CTA works in (its kernel runs one round), or -1 for a CTA of no round (the
  // hashes, the backward's preprocess).
  int track_round(int track) const { return track_round_[std::size_t(track)]; }
  // The round to show at a cursor while following a CTA: its own, or, for a CTA of no round,
  // that of the last event done with one (0 before any): always one of the clustering's.
  int round_to_follow(int track, Cursor c) const;

  // Decoding traces (step 10): the KV cache's geometry (on() false for any other trace) and the
  // roles of the kernels' CTAs (the split kernel's by sequence, K/V head and split).
  const CacheGeometry& cache() const { return cache_; }
  const DecodeSchedule& decode() const { return decode_; }

  // FLOPs the trace's pass does (the papers' convention; a clustered pass computes only its
  // rounds' clusters of the N×N scores, round_score_share of them per round), and the FLOPs one
  // event accounts for: the pass's total split evenly over the matmul kinds present, then over
  // each kind's events by tile area. (An event names one tile, not its contraction length, so
  // this is the one split that holds for every step's encoding.) A decoding pass is N new tokens
  // against each sequence's keys, not N×N: there each ComputeS event of r rows and k keys is
  // 2·d·r·k FLOPs, the AccumulateO after it (whose tile is r × d) as many, and the pass their sum.
  double pass_flops() const { return pass_flops_; }
  double event_flops(int e) const;

  // Element size of `t` in HBM as the pass's loads and stores move it: the bytes per element
  // (bytes / (rows · cols)) that every event moving `t` records, where they all record the same
  // whole number; element_bytes where no event moves `t` or they disagree. It is not
  // element_bytes where the kernel reads a copy in another type: step 09's fp8 forward reads Q, K
  // and Vᵀ as e4m3, 1 byte, from the workspace its quantizer writes, while Meta::tensors lists
  // the bf16 tensors the quantizer read.
  int moved_element_bytes(tr::Tensor t) const { return moved_bytes_[std::size_t(t)]; }

 private:
  void index_tracks();
  void index_orders();
  void index_flops();
  void index_residency();
  void index_moved_bytes();
  void apply(Totals& t, int e) const;

  tr::Trace trace_;
  double end_ns_ = 0, device_begin_ns_ = 0, device_end_ns_ = 0;
  std::vector<int> time_order_;        // events by (end, seq)
  std::vector<double> time_order_end_;  // their end times, ascending
  std::vector<double> begins_sorted_;   // every event's begin, ascending
  std::vector<std::vector<int>> track_events_;
  std::vector<std::vector<double>> t_begin_, t_end_max_;
  std::vector<std::vector<std::int32_t>> smem_after_, regs_after_;
  std::vector<char> pv_lags_;  // per track: pv_lags(track)
  std::vector<double> track_begin_, track_end_;
  std::vector<int> track_group_;
  std::vector<std::vector<int>> ctas_;  // the tracks of each (kernel, CTA), by lane
  std::vector<int> track_cta_;          // track → its entry of ctas_
  std::vector<SmGroup> sm_groups_;
  int sm_count_ = 0;
  int host_depth_ = 0;
  bool has_stats_ = false;
  bool clustered_ = false;
  std::int64_t untraced_read_ = 0, untraced_written_ = 0;
  std::vector<int> track_round_;
  std::int64_t peak_smem_ = 0;
  std::array<int, tr::kTensorCount> moved_bytes_{};  // moved_element_bytes, per tensor

  static constexpr std::int64_t kCheckpoint = 4096;
  std::vector<Totals> checkpoints_[2];  // [order][k / kCheckpoint]
  std::vector<double> cum_flops_[2];    // [order][k]: FLOPs of the first k events
  std::array<double, tr::kKindCount> flops_per_area_{};
  std::vector<double> event_flops_;  // decoding traces: per event (event_flops)
  double pass_flops_ = 0;
  CacheGeometry cache_;
  DecodeSchedule decode_;
  Totals grand_;
};

// Element size of a tensor in this trace: bytes / elements from Meta::tensors; for a tensor it
// does not list, the format's rule for its dtype (float32 for LSE, D, m, l and dQacc).
int element_bytes(const tr::Meta& meta, tr::Tensor t);
// Whether the trace is step 09's fp8 forward: its quantizer rounds Q, K and V to e4m3 (1 byte an
// element; V written as Vᵀ) before the kernel, which rounds P̃ to e4m3 too for P̃V, whatever the
// problem's dtype (Meta::dtype, bf16 or fp16, that of the tensors Meta::tensors lists).
bool fp8_forward(const tr::Meta& meta);
// Element size of a tile of `t` that a CTA computes in registers (ResidentTile::bytes), as the
// kernel holds it there, not as the tensor is stored: the products' accumulators (S, dP, O, dQ,
// dK, dV) in float32 whatever the dtype; P̃ and dS in the input type, P̃ in 1 byte (e4m3) in
// step 09's fp8 forward; the rest element_bytes.
int register_element_bytes(const tr::Meta& meta, tr::Tensor t);
// The TensorInfo of `t`, or nullptr.
const tr::TensorInfo* find_tensor(const tr::Meta& meta, tr::Tensor t);
// B·H of the trace, at least 1 (64-bit: a file may declare sizes whose product overflows int).
std::int64_t head_count(const tr::Meta& meta);
bool is_matmul(tr::Kind k);
// Whether a tensor is an N×N matrix of queries × keys (S, P, dP, dS).
bool score_like(tr::Tensor t);

}  // namespace fs::viz
