// The visualizer's model without any GL or ImGui: synthetic traces that add up to the IO
// model, the state at a moment (tiles on chip, bytes so far, m and ℓ), seeking back and forth,
// real time against logical order, and two traces kept in step by progress.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <tuple>
#include <utility>
#include <filesystem>
#include <fstream>

#include "common/io_model.hpp"
#include "common/problem.hpp"
#include "common/trace/names.hpp"
#include "common/trace/trace_io.hpp"
#include "common/trace/validate.hpp"
#include "visualizer/model/catalog.hpp"
#include "visualizer/model/coverage.hpp"
#include "visualizer/model/document.hpp"
#include "visualizer/model/io_formulas.hpp"
#include "visualizer/model/labels.hpp"
#include "visualizer/model/playback.hpp"
#include "visualizer/model/replay.hpp"
#include "visualizer/model/running_stats.hpp"
#include "visualizer/model/smem_pipeline.hpp"
#include "visualizer/model/synthetic.hpp"
#include "visualizer/tests/dqacc_trace.hpp"
#include "visualizer/tests/tc_bwd_trace.hpp"
#include "visualizer/tests/trace_events.hpp"

using namespace fs::viz;
namespace tr = fs::trace;

namespace {

SyntheticSpec flash_spec(int N = 256, int d = 32, bool causal = false) {
  SyntheticSpec s;
  s.step = SyntheticStep::Flash;
  s.N = N;
  s.d = d;
  s.Br = 32;
  s.Bc = 32;
  s.H = 2;
  s.sms = 4;
  s.causal = causal;
  return s;
}

// Step 07's forward: two heads, so that the orders' per-head offsets count.
SyntheticSpec smyrf_spec(int hashes = 4, int cluster = 32) {
  SyntheticSpec s;
  s.step = SyntheticStep::Smyrf;
  s.N = 256;
  s.d = 32;
  s.H = 2;
  s.hashes = hashes;
  s.cluster = cluster;
  s.sms = 4;
  return s;
}

SyntheticSpec naive_spec(int N = 64, int d = 32) {
  SyntheticSpec s;
  s.step = SyntheticStep::Naive;
  s.N = N;
  s.d = d;
  s.sms = 4;
  return s;
}

bool done_real(const tr::Event& e, double t) { return e.ts_ns + e.dur_ns <= t; }

// The totals of the events done at a real time, by brute force.
Totals brute_totals(const Replay& r, Cursor c) {
  Totals t;
  for (std::size_t i = 0; i < r.trace().events.size(); ++i) {
    const auto& e = r.trace().events[i];
    const bool done = c.order == Order::Real ? done_real(e, c.x) : double(i) < std::floor(c.x);
    if (!done) continue;
    if (e.kind == tr::Kind::Load) (e.cached ? t.cached : t.read)[std::size_t(e.tensor)] += e.bytes;
    if (e.kind == tr::Kind::Store) t.written[std::size_t(e.tensor)] += e.bytes;
    ++t.events;
  }
  return t;
}

bool same_cells(const TensorGrid& a, const TensorGrid& b) {
  for (std::size_t c = 0; c < a.cells.size(); ++c) {
    const auto &x = a.cells[c], &y = b.cells[c];
    if (x.read != y.read || x.cached != y.cached || x.written != y.written || x.computed != y.computed ||
        x.skipped != y.skipped)
      return false;
  }
  return true;
}

bool same_cells(const Coverage& a, const Coverage& b, int rounds = 0) {
  for (std::size_t g = 0; g < a.grids().size(); ++g)
    if (!same_cells(a.grids()[g], b.grids()[g])) return false;
  for (int round = 0; round < rounds; ++round)
    for (bool sorted : {true, false})
      if (!same_cells(*a.round_scores(round, sorted), *b.round_scores(round, sorted))) return false;
  return true;
}

}  // namespace

TEST_CASE("synthetic traces move exactly the IO model's bytes", "[viz][synthetic]") {
  SECTION("step 01: S and P through HBM, L2 re-reads marked cached") {
    for (int N : {17, 64, 97}) {
      const Replay r(make_synthetic_trace(naive_spec(N)));
      const auto io = fs::io_standard_forward(fs::Shape{1, 1, N, 32});
      REQUIRE(r.grand_totals().read_total() == io.read_bytes);
      REQUIRE(r.grand_totals().written_total() == io.write_bytes);
      REQUIRE(r.meta().io_read_bytes == io.read_bytes);
      REQUIRE(r.grand_totals().written[std::size_t(tr::Tensor::S)] == std::int64_t(N) * N * 4);
      REQUIRE(r.grand_totals().cached_total() > 0);
    }
  }
  SECTION("step 04: O and LSE written once, S never") {
    for (bool causal : {false, true})
      for (int N : {100, 256}) {
        const Replay r(make_synthetic_trace(flash_spec(N, 32, causal)));
        const auto io = io_flash_fa2(N, 32, 2, 32, 32, causal);
        const auto project = fs::io_flash2_forward(fs::Shape{1, 2, N, 32}, causal, 32, 32);
        REQUIRE(io.read == double(project.read_bytes));
        REQUIRE(io.write == double(project.write_bytes));
        REQUIRE(double(r.grand_totals().read_total()) == io.read);
        REQUIRE(double(r.grand_totals().written_total()) == io.write);
        REQUIRE(r.grand_totals().written[std::size_t(tr::Tensor::S)] == 0);
        REQUIRE(r.grand_totals().written[std::size_t(tr::Tensor::O)] == 2LL * N * 32 * 4);
      }
  }
}

TEST_CASE("synthetic traces keep the format's invariants", "[viz][synthetic]") {
  for (const auto& spec : {flash_spec(), naive_spec()}) {
    const auto t = make_synthetic_trace(spec);
    for (std::size_t i = 0; i < t.events.size(); ++i) REQUIRE(t.events[i].seq == std::int64_t(i));
    // On one track each event begins where the previous one ended, on 32 ns timer steps.
    std::vector<double> last_end(t.tracks.size(), -1);
    for (const auto& e : t.events) {
      REQUIRE(std::fmod(e.ts_ns, 32.0) == 0.0);
      if (last_end[std::size_t(e.track)] >= 0) REQUIRE(e.ts_ns == last_end[std::size_t(e.track)]);
      last_end[std::size_t(e.track)] = e.ts_ns + e.dur_ns;
    }
    // Tracks are ordered by SM.
    for (std::size_t k = 1; k < t.tracks.size(); ++k) REQUIRE(t.tracks[k - 1].sm <= t.tracks[k].sm);
  }
}

TEST_CASE("the state at a time: bytes so far match the events finished by then", "[viz][replay]") {
  const Replay r(make_synthetic_trace(flash_spec()));
  const double t0 = r.device_begin_ns(), t1 = r.device_end_ns();
  for (double f : {0.0, 0.013, 0.25, 0.5, 0.77, 1.0}) {
    const Cursor c{Order::Real, t0 + f * (t1 - t0)};
    const Totals a = r.totals(c), b = brute_totals(r, c);
    REQUIRE(a.events == b.events);
    REQUIRE(a.read == b.read);
    REQUIRE(a.written == b.written);
    REQUIRE(a.cached == b.cached);
  }
  REQUIRE(r.totals({Order::Real, t0 - 1}).events == 0);
  REQUIRE(r.totals({Order::Real, t1}).read_total() == r.meta().io_read_bytes);
}

TEST_CASE("the tiles a CTA holds follow its loads and its on-chip work", "[viz][replay]") {
  const Replay r(make_synthetic_trace(flash_spec()));
  const int track = 0;
  const auto& list = r.track_events(track);
  REQUIRE(list.size() > 6);
  auto event = [&](int k) { return r.trace().events[std::size_t(list[std::size_t(k)])]; };
  // Events of a flash CTA: load Q_i, then per key tile: load K_j, load V_j, S, softmax, ...
  REQUIRE(event(0).kind == tr::Kind::Load);
  REQUIRE(event(0).tensor == tr::Tensor::Q);

  auto tiles = r.resident_tiles(track, 3);  // Q_i, K_0, V_0 loaded
  REQUIRE(tiles.size() == 3);
  for (const auto& t : tiles) REQUIRE(t.where == Residence::Smem);
  REQUIRE(r.smem_after(track, 3) == 3 * 32 * 32 * 4);

  tiles = r.resident_tiles(track, 4);  // + S_i0 computed on chip
  REQUIRE(std::count_if(tiles.begin(), tiles.end(), [](auto& t) { return t.tensor == tr::Tensor::S; }) == 1);
  tiles = r.resident_tiles(track, 5);  // softmax: P̃ replaces S in registers
  REQUIRE(std::count_if(tiles.begin(), tiles.end(), [](auto& t) { return t.tensor == tr::Tensor::S; }) == 0);
  REQUIRE(std::count_if(tiles.begin(), tiles.end(), [](auto& t) { return t.tensor == tr::Tensor::P; }) == 1);

  tiles = r.resident_tiles(track, 10);  // the next S: the last P̃ is used up, gone
  REQUIRE(std::count_if(tiles.begin(), tiles.end(), [](auto& t) { return t.tensor == tr::Tensor::P; }) == 0);
  REQUIRE(std::count_if(tiles.begin(), tiles.end(), [](auto& t) { return t.tensor == tr::Tensor::S; }) == 1);

  tiles = r.resident_tiles(track, 9);  // the second K tile replaced the first
  const auto k = std::find_if(tiles.begin(), tiles.end(), [](auto& t) { return t.tensor == tr::Tensor::K; });
  REQUIRE(k != tiles.end());
  REQUIRE(k->row0 == 32);
  // A retired CTA holds nothing.
  REQUIRE(r.resident_tiles(track, int(list.size())).empty());
  REQUIRE(r.smem_after(track, int(list.size())) == 0);
}

TEST_CASE("a CTA's cursor agrees with its events in both orders", "[viz][replay]") {
  const Replay r(make_synthetic_trace(flash_spec()));
  for (int track : {0, 3, r.track_count() - 1}) {
    const auto& list = r.track_events(track);
    for (std::size_t k = 0; k < list.size(); k += 5) {
      const auto& e = r.trace().events[std::size_t(list[k])];
      // Logical: at seq + 0.5 the event is half done and everything before it on the track is done.
      const auto lc = r.track_cursor(track, {Order::Logical, double(list[k]) + 0.5});
      REQUIRE(lc.done == int(k));
      REQUIRE(lc.active == int(k));
      REQUIRE(lc.frac == Approx(0.5));
      // Real: just after it ends, it is done.
      const auto rc = r.track_cursor(track, {Order::Real, e.ts_ns + e.dur_ns});
      REQUIRE(rc.done >= int(k) + 1);
    }
    REQUIRE(r.track_cursor(track, {Order::Real, r.end_ns()}).retired);
    REQUIRE(!r.track_cursor(track, {Order::Logical, 0}).retired);
  }
}

TEST_CASE("seeking back and forth gives the state that replaying from the start gives", "[viz][coverage]") {
  for (const auto& spec : {flash_spec(), naive_spec(), flash_spec(128, 32, true), smyrf_spec()}) {
    const Replay r(make_synthetic_trace(spec));
    Coverage moving(r);
    const double E = double(r.event_count());
    const std::vector<double> stops = {0.9 * E, 0.1 * E, 0.5 * E, E, 0, 0.33 * E, 0.34 * E, 0.2 * E};
    for (double x : stops) {
      moving.seek(r, {Order::Logical, x});
      Coverage fresh(r);
      fresh.seek(r, {Order::Logical, x});
      REQUIRE(same_cells(moving, fresh, r.rounds()));
    }
    // And across an order switch.
    const Cursor real{Order::Real, 0.5 * (r.device_begin_ns() + r.device_end_ns())};
    moving.seek(r, real);
    Coverage fresh(r);
    fresh.seek(r, real);
    REQUIRE(same_cells(moving, fresh, r.rounds()));
  }
}

TEST_CASE("the ghost score matrix: computed on chip, written to HBM, or skipped", "[viz][coverage]") {
  const int N = 128;
  SECTION("step 04 computes every tile of S and writes none") {
    const Replay r(make_synthetic_trace(flash_spec(N)));
    Coverage cov(r);
    cov.seek(r, {Order::Logical, double(r.event_count())});
    const auto* S = cov.grid(tr::Tensor::S);
    REQUIRE(S);
    REQUIRE(!S->in_hbm);
    std::int64_t computed = 0, written = 0;
    for (const auto& c : S->cells) computed += c.computed, written += c.written;
    REQUIRE(computed == 2LL * N * N);
    REQUIRE(written == 0);
  }
  SECTION("causal step 04 skips the tiles above the diagonal") {
    const Replay r(make_synthetic_trace(flash_spec(N, 32, true)));
    Coverage cov(r);
    cov.seek(r, {Order::Logical, double(r.event_count())});
    std::int64_t computed = 0, skipped = 0;
    for (const auto& c : cov.grid(tr::Tensor::S)->cells) computed += c.computed, skipped += c.skipped;
    const std::int64_t T = N / 32, kept = T * (T + 1) / 2;
    REQUIRE(computed == 2 * kept * 32 * 32);
    REQUIRE(skipped == 2LL * N * N - computed);
  }
  SECTION("step 01 writes all of S and P") {
    const Replay r(make_synthetic_trace(naive_spec(N)));
    Coverage cov(r);
    cov.seek(r, {Order::Logical, double(r.event_count())});
    const auto* S = cov.grid(tr::Tensor::S);
    REQUIRE(S->in_hbm);
    for (int i = 0; i < S->grid_rows; ++i)
      for (int j = 0; j < S->grid_cols; ++j) REQUIRE(S->at(0, i, j).written == S->cell_area(i, j));
    std::int64_t p = 0;
    for (const auto& c : cov.grid(tr::Tensor::P)->cells) p += c.written;
    REQUIRE(p == std::int64_t(N) * N);
  }
}

TEST_CASE("logical order and real time: conversions and done sets", "[viz][replay]") {
  const Replay r(make_synthetic_trace(naive_spec()));
  const double t = 0.5 * (r.device_begin_ns() + r.device_end_ns());
  std::int64_t by_time = 0;
  for (const auto& e : r.trace().events) by_time += done_real(e, t);
  REQUIRE(r.done_count({Order::Real, t}) == by_time);
  REQUIRE(r.logical_at_time(t) == double(by_time));
  // In logical order the done set is a prefix of seq: exactly floor(x) events.
  REQUIRE(r.done_count({Order::Logical, 123.7}) == 123);
  // Round trip: the time of a position maps back to at most that many events done.
  for (double x : {10.0, double(r.event_count() / 2), double(r.event_count() - 1)}) {  // inside the trace
    const double tt = r.time_at_logical(x);
    REQUIRE(tt >= r.trace().events[std::size_t(x)].ts_ns);
    REQUIRE(r.convert({Order::Logical, x}, Order::Real).x == tt);
  }
  // Many events share a 32 ns timer step: real order cannot tell them apart, logical can.
  std::int64_t ties = 0;
  for (std::size_t i = 1; i < r.trace().events.size(); ++i)
    ties += r.trace().events[i].ts_ns == r.trace().events[i - 1].ts_ns;
  REQUIRE(ties > 0);
}

TEST_CASE("playback steps one event, plays to the end, loops", "[viz][playback]") {
  const Replay r(make_synthetic_trace(flash_spec()));
  Playback p;
  p.set_order(r, Order::Logical);
  p.rewind(r);
  REQUIRE(p.cursor().x == 0);
  p.step(r, +1);
  p.step(r, +1);
  REQUIRE(r.done_count(p.cursor()) == 2);
  p.step(r, -1);
  REQUIRE(r.done_count(p.cursor()) == 1);

  p.set_order(r, Order::Real);
  p.rewind(r);
  for (int i = 0; i < 20; ++i) {
    const auto before = r.done_count(p.cursor());
    p.step(r, +1);
    REQUIRE(r.done_count(p.cursor()) > before);
  }
  for (int i = 0; i < 10; ++i) {
    const auto before = r.done_count(p.cursor());
    p.step(r, -1);
    REQUIRE(r.done_count(p.cursor()) < before);
  }

  p.rewind(r);
  p.set_playing(true);
  p.advance(r, Playback::kSecondsAt1x / 2);
  REQUIRE(p.fraction(r) == Approx(0.5).margin(1e-6));
  p.advance(r, Playback::kSecondsAt1x);
  REQUIRE(p.fraction(r) == 1.0);
  REQUIRE(!p.playing());
  p.set_loop(true);
  p.set_playing(true);
  p.advance(r, 0.1);
  REQUIRE(p.fraction(r) == 0.0);

  // Skipping idle time: a gap between kernels is jumped over while playing.
  {
    const Replay n(make_synthetic_trace(naive_spec()));
    Playback q;
    q.rewind(n);
    q.set_playing(true);
    const auto& kernels = n.trace().kernels;
    // Just after the first kernel's last event, nothing runs until the second kernel.
    double last_end = 0;
    for (const auto& e : n.trace().events)
      if (n.trace().tracks[std::size_t(e.track)].kernel == 0) last_end = std::max(last_end, e.ts_ns + e.dur_ns);
    q.seek(n, {Order::Real, last_end});
    REQUIRE(!n.busy_at(last_end + 1));
    q.advance(n, 1e-9);
    REQUIRE(q.cursor().x >= kernels[1].ts_ns);
    REQUIRE(n.busy_at(q.cursor().x + 1));
  }

  // Switching order keeps the moment: the same events are done.
  p.seek_fraction(r, 0.4);
  const auto done = r.done_count(p.cursor());
  p.set_order(r, Order::Logical);
  REQUIRE(r.done_count(p.cursor()) == done);
}

TEST_CASE("compare mode keeps two traces at the same progress", "[viz][compare]") {
  const Replay naive(make_synthetic_trace(naive_spec(128)));
  const Replay flash(make_synthetic_trace(flash_spec(128)));
  for (SyncBy by : {SyncBy::Work, SyncBy::Events, SyncBy::Time})
    for (Order o : {Order::Real, Order::Logical})
      for (double p : {0.0, 0.1, 0.5, 0.9, 1.0}) {
        INFO("sync " << int(by) << " order " << int(o) << " p " << p);
        // Real time moves in 32 ns steps that finish several events at once: step 01's
        // pv_kernel has 16 CTAs here, each 1/32 of the work, and two can end on one step.
        // Time in logical order goes through the events finished by then, which lags by
        // the events in flight (32 CTAs at once here).
        const double margin = o == Order::Real ? 0.07 : by == SyncBy::Time ? 0.05 : 1e-9;
        REQUIRE(progress(naive, cursor_at_progress(naive, p, by, o), by) == Approx(p).margin(margin));
        REQUIRE(progress(flash, cursor_at_progress(flash, p, by, o), by) == Approx(p).margin(margin));
      }
  // The lesson in numbers: halfway through the work, step 01 has written all of S to HBM;
  // step 04 never writes any.
  const Cursor a = cursor_at_progress(naive, 0.5, SyncBy::Work, Order::Logical);
  const Cursor b = cursor_at_progress(flash, 0.5, SyncBy::Work, Order::Logical);
  REQUIRE(naive.totals(a).written[std::size_t(tr::Tensor::S)] >= 128LL * 128 * 4 * 95 / 100);
  REQUIRE(flash.totals(b).written[std::size_t(tr::Tensor::S)] == 0);
  REQUIRE(naive.totals(a).written_total() > 10 * flash.totals(b).written_total());
}

TEST_CASE("running statistics: m never falls, rescale is exp(m_old - m_new)", "[viz][softmax]") {
  const Replay r(make_synthetic_trace(flash_spec(512)));
  REQUIRE(r.has_running_stats());
  const auto pts = running_stats(r, 0);
  REQUIRE(pts.size() == 512 / 32);
  REQUIRE(pts.front().rescale == 0.0);
  for (std::size_t k = 1; k < pts.size(); ++k) {
    REQUIRE(pts[k].m >= pts[k - 1].m);
    REQUIRE(pts[k].rescale == Approx(std::exp(pts[k - 1].m - pts[k].m)));
    REQUIRE(pts[k].rescale <= 1.0);
    REQUIRE(pts[k].l >= 1.0);
  }
  const Replay n(make_synthetic_trace(naive_spec()));
  REQUIRE(!n.has_running_stats());
  REQUIRE(running_stats(n, 0).empty());
}

TEST_CASE("IO formulas: Theorem 2 and Proposition 4 with our constants", "[viz][io]") {
  for (int N : {128, 1024, 4096}) {
    const auto io = fs::io_standard_forward(fs::Shape{1, 2, N, 64});
    IoShape s;
    s.N = N;
    s.d = 64;
    s.heads = 2;
    REQUIRE(io_standard(s).read == double(io.read_bytes));
    REQUIRE(io_standard(s).write == double(io.write_bytes));
  }
  // Algorithm 1 in closed form against the project's IO model, for shapes that tile evenly
  // and shapes that do not.
  for (int N : {256, 1000, 4096})
    for (double kib : {16.0, 100.0, 228.0}) {
      IoShape s;
      s.N = N;
      s.d = 64;
      s.heads = 3;
      s.sram_bytes = kib * 1024;
      const Tiles t = paper_tiles(N, 64, s.sram_bytes);
      const auto project = fs::io_flash1_forward(fs::Shape{1, 3, N, 64}, false, t.Br, t.Bc);
      REQUIRE(io_flash(s).read == double(project.read_bytes));
      REQUIRE(io_flash(s).write == double(project.write_bytes));
    }
  IoShape s;
  s.N = 4096;
  s.d = 64;
  // More SRAM, fewer passes over Q and O: Θ(N²d²/M).
  double prev = 1e300;
  for (double kb : {16.0, 32.0, 64.0, 128.0, 228.0}) {
    s.sram_bytes = kb * 1024;
    const double now = io_flash(s).total();
    REQUIRE(now < prev);
    prev = now;
  }
  s.sram_bytes = 100 * 1024;
  REQUIRE(io_flash(s).total() < io_standard(s).total());
  s.sparsity = 1;
  REQUIRE(io_block_sparse(s).total() == io_flash(s).total());
  s.sparsity = 0;
  REQUIRE(io_block_sparse(s).read == (2 * 4096.0 * 64 + 2 * 4096.0) * 4);
  // Algorithm 1's tiles: B_c = ⌈M/4d⌉, B_r = min(B_c, d).
  const Tiles t = paper_tiles(4096, 64, 100 * 1024);
  REQUIRE(t.Bc == 100);
  REQUIRE(t.Br == 64);
}

TEST_CASE("the trace browser lists folders and command-line files, the tour's default first", "[viz][catalog]") {
  namespace stdfs = std::filesystem;
  const auto dir = stdfs::temp_directory_path() / "fs_viz_catalog_test";
  stdfs::remove_all(dir);
  stdfs::create_directories(dir);
  for (const char* n : {"01_naive.fwd.json", "04_online_softmax.bwd.json", "04_online_softmax.fwd.json",
                        "04_online_softmax_fa2.fwd.json", "notes.txt"})
    std::ofstream(dir / n) << "{}";
  auto list = list_traces({dir.string()}, {});
  REQUIRE(list.size() == 4);
  REQUIRE(list[std::size_t(default_entry(list))].name == "04_online_softmax.fwd.json");
  list = list_traces({dir.string()}, {(dir / "01_naive.fwd.json").string(), "missing.json"});
  REQUIRE(list.size() == 5);  // the duplicate is listed once
  REQUIRE(list[std::size_t(default_entry(list))].name == "01_naive.fwd.json");
  REQUIRE(default_entry({}) == -1);
  // A folder on the command line: its step 04 trace comes before the shipped ones.
  const auto mine = dir / "mine";
  stdfs::create_directories(mine);
  for (const char* n : {"step01_naive_fwd.json", "step04_online_softmax_fwd.json"}) std::ofstream(mine / n) << "{}";
  list = list_traces({dir.string()}, {mine.string()});
  const auto& pick = list[std::size_t(default_entry(list))];
  REQUIRE(pick.name == "step04_online_softmax_fwd.json");
  REQUIRE(pick.from_command_line);
  stdfs::remove_all(dir);
}

TEST_CASE("a document starts at the first device event with a first-kernel CTA selected", "[viz][document]") {
  auto doc = make_document(make_synthetic_trace(naive_spec()), "synthetic:naive");
  REQUIRE(doc->cursor().x == doc->replay->device_begin_ns());
  const auto& track = doc->replay->trace().tracks[std::size_t(doc->selected_track)];
  REQUIRE(track.kernel == 0);
  REQUIRE(track.cta == 0);
  REQUIRE(doc->title.find("01_naive") != std::string::npos);
}

TEST_CASE("synthetic traces survive the file format and pass the validator", "[viz][trace_io]") {
  namespace stdfs = std::filesystem;
  const auto dir = stdfs::temp_directory_path() / "fs_viz_io_test";
  stdfs::create_directories(dir);
  for (const auto& spec : {naive_spec(), flash_spec(), flash_spec(128, 32, true)}) {
    const auto path = (dir / "t.json").string();
    fs::trace::write_trace(make_synthetic_trace(spec), path);
    std::string error;
    auto doc = load_document(path, error);
    REQUIRE(doc);
    INFO((doc->warnings.empty() ? std::string() : doc->warnings.front()));
    REQUIRE(doc->warnings.empty());
    const Replay fresh(make_synthetic_trace(spec));
    REQUIRE(doc->replay->event_count() == fresh.event_count());
    REQUIRE(doc->replay->grand_totals().read == fresh.grand_totals().read);
  }
  SECTION("a malformed file is one line of error, not an exception") {
    const auto path = (dir / "bad.json").string();
    std::ofstream(path) << "{\"traceEvents\": [";
    std::string error;
    REQUIRE(!load_document(path, error));
    REQUIRE(error.find("bad.json") != std::string::npos);
    REQUIRE(error.find('\n') == std::string::npos);
    REQUIRE(!load_document((dir / "missing.json").string(), error));
    REQUIRE(!error.empty());
  }
  stdfs::remove_all(dir);
}

// Step 09's forward: N = 512 gives each CTA four key tiles (eight in all over its two stages
// twice), so that the producer fills both stages and waits.
SyntheticSpec hopper_spec(bool causal = false) {
  SyntheticSpec s;
  s.step = SyntheticStep::Hopper;
  s.N = 512;
  s.d = 128;
  s.H = 2;
  s.sms = 4;
  s.causal = causal;
  return s;
}

TEST_CASE("a synthetic step 09 trace records each warpgroup as a lane and passes the validator", "[viz][synthetic][lanes]") {
  for (const bool causal : {false, true}) {
    const tr::Trace t = make_synthetic_trace(hopper_spec(causal));
    const auto report = tr::validate(tr::parse_trace(tr::trace_to_json(t)));
    INFO((report.errors.empty() ? std::string() : report.errors.front()));
    REQUIRE(report.ok());
    REQUIRE(report.warnings.empty());
    REQUIRE(t.kernels.size() == 1);
    REQUIRE(t.kernels[0].lanes == 3);
    REQUIRE(t.kernels[0].lane_names == std::vector<std::string>{"producer", "consumer 0", "consumer 1"});
    // Eight CTAs (4 query tiles × 2 heads), each in three lanes.
    REQUIRE(t.tracks.size() == 24);
    for (const auto& e : t.events) {
      const int lane = t.tracks[std::size_t(e.track)].lane;
      // The producer copies and waits; the consumers wait, compute and store their rows.
      if (lane == 0)
        REQUIRE((e.kind == tr::Kind::Load || e.kind == tr::Kind::Wait || e.kind == tr::Kind::Skip));
      else
        REQUIRE(e.kind != tr::Kind::Load);
    }
  }
}

TEST_CASE("the consumers take the tensor cores in turn: one's softmax under the other's products", "[viz][synthetic][lanes]") {
  const Replay r(make_synthetic_trace(hopper_spec()));
  const auto& lanes = r.lanes_of(0);
  REQUIRE(lanes.size() == 3);
  REQUIRE(r.laned(0));
  // The products (S = QKᵀ and P̃V) of the two consumers never overlap in time.
  std::vector<std::pair<double, double>> products;
  int producer_waits = 0, softmax_under_product = 0;
  for (int lane : lanes)
    for (int e : r.track_events(lane)) {
      const auto& ev = r.trace().events[std::size_t(e)];
      if (ev.kind == tr::Kind::ComputeS || ev.kind == tr::Kind::AccumulateO) products.emplace_back(ev.ts_ns, ev.ts_ns + ev.dur_ns);
      if (lane == lanes[0] && ev.kind == tr::Kind::Wait) ++producer_waits;
    }
  std::sort(products.begin(), products.end());
  REQUIRE(products.size() == 2 * 2 * 4);  // two consumers, two products, four key tiles
  for (std::size_t i = 1; i < products.size(); ++i) REQUIRE(products[i].first >= products[i - 1].second);
  for (int e : r.track_events(lanes[1])) {
    const auto& ev = r.trace().events[std::size_t(e)];
    if (ev.kind != tr::Kind::Softmax) continue;
    for (int o : r.track_events(lanes[2])) {
      const auto& p = r.trace().events[std::size_t(o)];
      if ((p.kind == tr::Kind::ComputeS || p.kind == tr::Kind::AccumulateO) && p.ts_ns < ev.ts_ns + ev.dur_ns &&
          ev.ts_ns < p.ts_ns + p.dur_ns)
        ++softmax_under_product;
    }
  }
  REQUIRE(softmax_under_product > 0);
  // With two stages and four tiles, the producer waits for a stage to be freed.
  REQUIRE(producer_waits > 0);
  // The SM's one CTA counts once, though it is three tracks.
  REQUIRE(r.sm_groups()[std::size_t(r.sm_group_of_track(0))].ctas == 2);  // 8 CTAs over 4 SMs
}

TEST_CASE("a CTA in lanes holds its producer's tiles in SRAM and its consumers' in registers", "[viz][replay][lanes]") {
  const Replay r(make_synthetic_trace(hopper_spec()));
  const auto& lanes = r.lanes_of(0);
  // Just after consumer 0's first softmax: Q, K_0, V_0 (and more) in SRAM, the consumers' P̃.
  int softmax = -1;
  for (int e : r.track_events(lanes[1]))
    if (r.trace().events[std::size_t(e)].kind == tr::Kind::Softmax) {
      softmax = e;
      break;
    }
  REQUIRE(softmax >= 0);
  const auto& ev = r.trace().events[std::size_t(softmax)];
  const auto tiles = r.cta_tiles(lanes[2], {Order::Real, ev.ts_ns + ev.dur_ns});
  auto count = [&](tr::Tensor t, Residence where) {
    return std::count_if(tiles.begin(), tiles.end(), [&](const ResidentTile& x) { return x.tensor == t && x.where == where; });
  };
  REQUIRE(count(tr::Tensor::Q, Residence::Smem) == 1);
  REQUIRE(count(tr::Tensor::K, Residence::Smem) == 1);
  REQUIRE(count(tr::Tensor::P, Residence::Regs) >= 1);
  REQUIRE(count(tr::Tensor::S, Residence::Smem) == 0);
  // The same tiles from whichever lane is followed.
  REQUIRE(r.cta_tiles(lanes[0], {Order::Real, ev.ts_ns + ev.dur_ns}).size() == tiles.size());
  // A trace of one lane: a CTA's tiles are its track's.
  const Replay flash(make_synthetic_trace(flash_spec()));
  const TrackCursor tc = flash.track_cursor(0, {Order::Real, flash.track_end_ns(0) * 0.5});
  REQUIRE(flash.lanes_of(0) == std::vector<int>{0});
  REQUIRE(flash.cta_tiles(0, {Order::Real, flash.track_end_ns(0) * 0.5}).size() == flash.resident_tiles(0, tc.done).size());
}

// Issue 14: a 67 KB trace declaring H = 1048576 made the visualizer allocate 14.6 GB (43 s): its
// cells were sized by the heads the file declares. They are sized by the heads its events touch.
TEST_CASE("a trace declaring a million heads opens with cells for the heads its events touch", "[viz][coverage]") {
  for (const auto& [B, H] : {std::pair<int, int>{1, 1 << 20}, {65536, 65536}}) {  // B·H past INT_MAX too
    tr::Trace t = make_synthetic_trace(flash_spec(64, 32));
    t.meta.B = B;
    t.meta.H = H;
    const auto start = std::chrono::steady_clock::now();
    auto doc = make_document(std::move(t), "declared heads");
    REQUIRE(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 5.0);
    for (const auto& g : doc->coverage->grids()) {
      REQUIRE(g.heads == std::int64_t(B) * H);
      REQUIRE(g.touched.size() <= 2);  // the synthetic trace's two heads
      REQUIRE(g.cells.size() == g.touched.size() * std::size_t(g.grid_rows) * std::size_t(g.grid_cols));
    }
    // An untouched head reads as zeros.
    const auto* q = doc->coverage->grid(tr::Tensor::Q);
    REQUIRE(q);
    REQUIRE(q->at(1 << 19, 0, 0).read == 0);
  }
}

TEST_CASE("the moment to show is seq, frac or t with a finite decimal number in range, and nothing else", "[viz][document]") {
  auto doc = make_document(make_synthetic_trace(naive_spec()), "synthetic:naive");
  Cursor c;
  std::string error;
  for (const char* good : {"seq:0", "seq:10", "frac:0", "frac:0.5", "frac:1", "t:1000", "t:-5"}) {
    INFO(good);
    REQUIRE(parse_moment(good, *doc, c, error));
  }
  REQUIRE(parse_moment("seq:" + std::to_string(doc->replay->event_count()), *doc, c, error));
  for (const char* bad : {"frac:nan", "frac:-nan", "frac:inf", "frac:1.5", "frac:-0.1", "t:nan", "t:inf", "seq:-1",
                          "seq:0x10", "seq:1.5", "seq:99999999999999999999", "frac:", "frac:0x1p-1", "frac:0.5x",
                          "when:3", "frac"}) {
    INFO(bad);
    error.clear();
    REQUIRE_FALSE(parse_moment(bad, *doc, c, error));
    REQUIRE_THAT(error, Catch::StartsWith(std::string("--at ") + bad + ": "));
  }
  REQUIRE_FALSE(parse_moment("seq:" + std::to_string(doc->replay->event_count() + 1), *doc, c, error));
}

// Issue 14: an empty folder on the command line silently opened a shipped trace instead.
TEST_CASE("a folder on the command line without traces is named as the problem", "[viz][catalog]") {
  namespace stdfs = std::filesystem;
  const auto dir = stdfs::temp_directory_path() / "fs_viz_empty_test";
  stdfs::remove_all(dir);
  stdfs::create_directories(dir / "empty");
  stdfs::create_directories(dir / "full");
  std::ofstream(dir / "full" / "t.json") << "{}";
  REQUIRE(command_line_problem({(dir / "empty").string()}) ==
          (dir / "empty").string() + ": no trace files (*.json) in this folder");
  REQUIRE(command_line_problem({(dir / "full").string()}).empty());
  REQUIRE(command_line_problem({(dir / "full" / "t.json").string(), "missing.json"}).empty());  // files: opened, or refused when opened
  stdfs::remove_all(dir);
}

namespace {

std::string shipped_trace(const std::string& name) { return std::string(FS_SOURCE_DIR) + "/docs/traces/" + name; }

// A tensor-core forward CTA by hand: Load Q, then per K tile at `keys` (its walk) Load K, Load V,
// compute S, softmax, rescale, P̃V; then Store O and LSE. One CTA, 100 ns an event.
tr::Trace tc_trace(int Br, int Bc, int d, int threads, std::int64_t smem, const std::string& variant,
                   const std::vector<int>& keys, const std::string& dtype = "bf16") {
  tr::Trace t;
  auto& m = t.meta;
  m.step = "08_tensor_cores";
  m.variant = variant;
  m.pass = "fwd";
  m.dtype = dtype;
  m.B = m.H = 1;
  m.N = 256;
  m.d = d;
  m.Br = Br;
  m.Bc = Bc;
  m.smem_per_cta_bytes = smem;
  tr::Kernel k;
  k.name = "tc_forward_kernel";
  k.grid[0] = m.N / Br;
  k.block[0] = threads;
  k.smem_bytes = smem;
  t.kernels.push_back(k);
  t.tracks.push_back(tr::Track{0, 0, 0, 0, 0});
  double now = 1000;
  auto add = [&](tr::Kind kind, tr::Tensor tensor, int row0, int rows, int col0, int cols) {
    test::append_event(t, 0, kind, tensor, row0, rows, col0, cols, now, 100);
  };
  add(tr::Kind::Load, tr::Tensor::Q, 0, Br, 0, d);
  for (int j0 : keys) {
    add(tr::Kind::Load, tr::Tensor::K, j0, Bc, 0, d);
    add(tr::Kind::Load, tr::Tensor::V, j0, Bc, 0, d);
    add(tr::Kind::ComputeS, tr::Tensor::S, 0, Br, j0, Bc);
    add(tr::Kind::Softmax, tr::Tensor::P, 0, Br, j0, Bc);
    add(tr::Kind::Rescale, tr::Tensor::O, 0, Br, 0, d);
    add(tr::Kind::AccumulateO, tr::Tensor::O, 0, Br, 0, d);
  }
  add(tr::Kind::Store, tr::Tensor::O, 0, Br, 0, d);
  add(tr::Kind::Store, tr::Tensor::LSE, 0, Br, 0, 1);
  return t;
}

// Track `track` with its event number `i` (its position in the track's list) in progress.
TrackCursor during(const Replay& r, int track, int i) {
  const int e = r.track_events(track)[std::size_t(i)];
  return r.track_cursor(track, Cursor{Order::Logical, double(e) + 0.5});
}

// The position in track `track`'s list of its n-th event of this kind (and tensor, for loads).
int nth(const Replay& r, int track, tr::Kind kind, int n, tr::Tensor tensor = tr::Tensor::None) {
  const auto& list = r.track_events(track);
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto& e = r.trace().events[std::size_t(list[i])];
    if (e.kind == kind && (tensor == tr::Tensor::None || e.tensor == tensor) && n-- == 0) return int(i);
  }
  FAIL("no such event");
  return -1;
}

void check_stage(const PipelineView& v, int stage, StageState state, int tile, int key0 = -1) {
  INFO("stage " << stage);
  REQUIRE(std::size_t(stage) < v.stages.size());
  const auto& s = v.stages[std::size_t(stage)];
  REQUIRE(int(s.state) == int(state));
  REQUIRE(s.tile == tile);
  if (key0 >= 0) REQUIRE(s.key0 == key0);
}

}  // namespace

TEST_CASE("step 08's shared memory: stages, P's place and the warps' rows, from the trace", "[viz][pipeline]") {
  struct Expect {
    const char* variant;
    int stages;
    bool p_in_smem;
    bool from_variant;  // 48 KiB fits both 1 stage + P in SRAM and 2 stages + P in registers at d = 64
    int q_in_regs;
  };
  for (const auto& x : {Expect{"r1_mma", 1, true, true, 0}, Expect{"r2_swizzle", 1, true, true, 0},
                        Expect{"r3_pipeline", 2, true, false, 0}, Expect{"r4_p_in_regs", 2, false, true, 0},
                        Expect{"fa2", 2, false, true, 1}, Expect{"deterministic", 2, false, true, 1},
                        Expect{"key_warps", 2, false, true, 1}}) {
    INFO(x.variant);
    const auto t = tr::read_trace(shipped_trace(std::string("08_tensor_cores_") + x.variant + ".fwd.json"));
    const SmemPipeline L = derive_smem_pipeline(t, 0);
    INFO(L.why_not);
    REQUIRE(L.valid);
    REQUIRE(L.stages == x.stages);
    REQUIRE(L.p_in_smem == x.p_in_smem);
    REQUIRE(L.from_variant == x.from_variant);
    REQUIRE(L.q_in_regs == x.q_in_regs);
    REQUIRE(L.warps == 4);  // 128 threads
    REQUIRE(L.rows_per_warp == 32);
    REQUIRE(L.warp_row0(3) == 96);
    REQUIRE(L.total_bytes() == t.kernels[0].smem_bytes);
  }
  SECTION("a size only one layout fits needs no variant") {
    // Br = 64, d = 64: 1 stage + P in SRAM is 32 KiB, 2 stages + P in registers 40 KiB.
    for (const auto& [smem, stages, p] : {std::tuple<int, int, bool>{32768, 1, true}, {40960, 2, false},
                                          {24576, 1, false}, {49152, 2, true}}) {
      const SmemPipeline L = derive_smem_pipeline(tc_trace(64, 64, 64, 128, smem, "tomorrow", {0}), 0);
      INFO(smem << " " << L.why_not);
      REQUIRE(L.valid);
      REQUIRE(L.stages == stages);
      REQUIRE(L.p_in_smem == p);
      REQUIRE_FALSE(L.from_variant);
      REQUIRE(L.q_in_regs == -1);
      REQUIRE(L.rows_per_warp == 16);
    }
    // A variant whose table entry the trace contradicts: the trace wins.
    const SmemPipeline L = derive_smem_pipeline(tc_trace(64, 64, 64, 128, 40960, "r1_mma", {0}), 0);
    REQUIRE(L.valid);
    REQUIRE(L.stages == 2);
    REQUIRE_FALSE(L.p_in_smem);
    REQUIRE(L.q_in_regs == -1);
  }
  SECTION("what the trace cannot settle is not guessed") {
    // 48 KiB at Br = 2d, an unknown variant: one stage or two?
    auto L = derive_smem_pipeline(tc_trace(128, 64, 64, 128, 49152, "tomorrow", {0}), 0);
    REQUIRE_FALSE(L.valid);
    REQUIRE(L.why_not.find("does not say") != std::string::npos);
    L = derive_smem_pipeline(tc_trace(128, 64, 64, 128, 50000, "fa2", {0}), 0);  // no layout
    REQUIRE_FALSE(L.valid);
    REQUIRE(L.why_not.find("fits no layout") != std::string::npos);
    L = derive_smem_pipeline(tc_trace(64, 64, 64, 96, 40960, "fa2", {0}), 0);  // 3 warps: 64 rows do not split
    REQUIRE_FALSE(L.valid);
    REQUIRE(L.why_not.find("warp") != std::string::npos);
    // fp32 steps keep their own drawing, whatever their size.
    L = derive_smem_pipeline(tc_trace(64, 64, 64, 128, 40960, "fa2", {0}, "fp32"), 0);
    REQUIRE_FALSE(L.valid);
    REQUIRE(L.why_not.empty());
  }
}

TEST_CASE("issue 52: a layout search over sizes no GPU gives a CTA ends at once", "[viz][pipeline]") {
  // The reader takes shared memory up to its byte limit and blocks of 1024 threads a dimension;
  // the dQ kernel's search for Br = 16·MT·warps ran MT up to 2^40 (and br past int) on 2^50 bytes
  // and one warp, every frame of the memory panel.
  auto t = tr::read_trace(shipped_trace("08_tensor_cores_deterministic.bwd.json"));
  int dq = -1;
  for (std::size_t i = 0; i < t.kernels.size(); ++i)
    if (t.kernels[i].name == "tc_dq_kernel") dq = int(i);
  REQUIRE(dq >= 0);
  REQUIRE(derive_smem_pipeline(t, dq).valid);
  const auto start = std::chrono::steady_clock::now();
  for (const auto& [threads, smem] : {std::pair<int, std::int64_t>{32, std::int64_t(1) << 50}, {32, std::int64_t(1) << 31},
                                      {1024, std::int64_t(1) << 50}, {32, 232448}}) {
    for (auto& k : t.kernels) {
      k.block[0] = threads;
      k.block[1] = threads == 1024 ? 1024 : 1;
      k.smem_bytes = smem;
    }
    for (int kernel = 0; kernel < int(t.kernels.size()); ++kernel) {
      INFO(threads << " threads, " << smem << " bytes, kernel " << t.kernels[std::size_t(kernel)].name);
      const SmemPipeline L = derive_smem_pipeline(t, kernel);
      if (kernel == dq) REQUIRE_FALSE(L.valid);
    }
  }
  REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
}

TEST_CASE("step 08's stages in flight: the tile computed, the tile loading, from the CTA's events", "[viz][pipeline]") {
  SECTION("two stages (r3_pipeline on the H200): tile t+1 lands while tile t is computed") {
    const Replay r(tr::read_trace(shipped_trace("08_tensor_cores_r3_pipeline.fwd.json")));
    const SmemPipeline L = derive_smem_pipeline(r.trace(), 0);
    REQUIRE(L.stages == 2);
    const int tr0 = 0;
    // Loading Q: nothing issued into the stages yet.
    auto v = pipeline_at(r, L, tr0, during(r, tr0, nth(r, tr0, tr::Kind::Load, 0, tr::Tensor::Q)));
    REQUIRE(v.tiles == 4);
    REQUIRE_FALSE(v.q_loaded);
    check_stage(v, 0, StageState::Empty, -1);
    check_stage(v, 1, StageState::Empty, -1);
    // Waiting for tile 0, with tile 1 already issued into stage 1.
    v = pipeline_at(r, L, tr0, during(r, tr0, nth(r, tr0, tr::Kind::Load, 0, tr::Tensor::K)));
    REQUIRE(v.q_loaded);
    REQUIRE(v.computing == -1);
    check_stage(v, 0, StageState::Loading, 0, 0);
    REQUIRE(v.stages[0].waited_on);
    check_stage(v, 1, StageState::Loading, 1, 64);
    REQUIRE_FALSE(v.stages[1].waited_on);
    REQUIRE(v.in_flight == 1);
    // S of tile 1 (keys 64..127) from stage 1, while tile 2 (keys 128..191) arrives in stage 0.
    v = pipeline_at(r, L, tr0, during(r, tr0, nth(r, tr0, tr::Kind::ComputeS, 1)));
    REQUIRE(v.computing == 1);
    REQUIRE(v.in_flight == 2);
    check_stage(v, 1, StageState::Computing, 1, 64);
    check_stage(v, 0, StageState::Loading, 2, 128);
    REQUIRE_FALSE(v.stages[0].waited_on);
    // P̃ of tile 1 through shared memory: written and read back during P̃V.
    v = pipeline_at(r, L, tr0, during(r, tr0, nth(r, tr0, tr::Kind::AccumulateO, 1)));
    REQUIRE(v.p_tile == 1);
    REQUIRE(v.p_live);
    REQUIRE(v.computing == 1);
    // The last tile: nothing left to prefetch; stage 0 keeps tile 2's spent bytes.
    v = pipeline_at(r, L, tr0, during(r, tr0, nth(r, tr0, tr::Kind::ComputeS, 3)));
    REQUIRE(v.computing == 3);
    REQUIRE(v.in_flight == -1);
    check_stage(v, 1, StageState::Computing, 3, 192);
    check_stage(v, 0, StageState::Free, 2, 128);
    REQUIRE(v.p_tile == 2);
    REQUIRE_FALSE(v.p_live);
    // Storing O: the loop is over.
    v = pipeline_at(r, L, tr0, during(r, tr0, nth(r, tr0, tr::Kind::Store, 0)));
    REQUIRE(v.computing == -1);
    check_stage(v, 1, StageState::Free, 3);
    // The second CTA (query rows 128..255) walks the same keys.
    v = pipeline_at(r, L, 1, during(r, 1, nth(r, 1, tr::Kind::Softmax, 0)));
    check_stage(v, 0, StageState::Computing, 0, 0);
    check_stage(v, 1, StageState::Loading, 1, 64);
    // Retired: its shared memory is gone.
    v = pipeline_at(r, L, tr0, r.track_cursor(tr0, Cursor{Order::Logical, double(r.event_count())}));
    check_stage(v, 0, StageState::Empty, -1);
    check_stage(v, 1, StageState::Empty, -1);
  }
  SECTION("one stage (r1_mma): load, then compute; nothing in flight while computing") {
    const Replay r(tr::read_trace(shipped_trace("08_tensor_cores_r1_mma.fwd.json")));
    const SmemPipeline L = derive_smem_pipeline(r.trace(), 0);
    REQUIRE(L.stages == 1);
    auto v = pipeline_at(r, L, 0, during(r, 0, nth(r, 0, tr::Kind::ComputeS, 1)));
    REQUIRE(v.stages.size() == 1);
    check_stage(v, 0, StageState::Computing, 1, 64);
    REQUIRE(v.in_flight == -1);
    v = pipeline_at(r, L, 0, during(r, 0, nth(r, 0, tr::Kind::Load, 2, tr::Tensor::K)));
    check_stage(v, 0, StageState::Loading, 2, 128);
    REQUIRE(v.stages[0].waited_on);
    REQUIRE(v.computing == -1);
  }
  SECTION("P in registers (fa2): no P tile in shared memory") {
    const Replay r(tr::read_trace(shipped_trace("08_tensor_cores_fa2.fwd.json")));
    const SmemPipeline L = derive_smem_pipeline(r.trace(), 0);
    const auto v = pipeline_at(r, L, 0, during(r, 0, nth(r, 0, tr::Kind::AccumulateO, 2)));
    REQUIRE(v.p_tile == -1);
    REQUIRE_FALSE(v.p_live);
    check_stage(v, 0, StageState::Computing, 2, 128);
    check_stage(v, 1, StageState::Loading, 3, 192);
  }
  SECTION("a walk that leaves tiles out, in real time: tiles are the CTA's Load K events") {
    // Keys 0, 128, 192 (a block-sparse row), two stages (40 KiB at Br = d = 64).
    const Replay r(tc_trace(64, 64, 64, 128, 40960, "tomorrow", {0, 128, 192}));
    const SmemPipeline L = derive_smem_pipeline(r.trace(), 0);
    REQUIRE(L.stages == 2);
    // Event i spans [1000 + 100 i, 1100 + 100 i): event 3 (S of tile 0) at 1350.
    auto v = pipeline_at(r, L, 0, r.track_cursor(0, Cursor{Order::Real, 1350}));
    REQUIRE(v.tiles == 3);
    check_stage(v, 0, StageState::Computing, 0, 0);
    check_stage(v, 1, StageState::Loading, 1, 128);
    // Event 7 is Load K of tile 1: tile 2 (keys 192..) goes into stage 0 as tile 0 is done.
    v = pipeline_at(r, L, 0, r.track_cursor(0, Cursor{Order::Real, 1750}));
    check_stage(v, 1, StageState::Loading, 1, 128);
    REQUIRE(v.stages[1].waited_on);
    check_stage(v, 0, StageState::Loading, 2, 192);
    REQUIRE(v.in_flight == 2);
    REQUIRE(v.p_tile == -1);  // 40 KiB here is P in registers
    // Not started: empty.
    v = pipeline_at(r, L, 0, r.track_cursor(0, Cursor{Order::Real, 500}));
    check_stage(v, 0, StageState::Empty, -1);
  }
}

namespace {

// The first track of kernel `kernel` whose CTA is `cta`.
int track_of(const Replay& r, int kernel, int cta) {
  for (int i = 0; i < r.track_count(); ++i)
    if (r.trace().tracks[std::size_t(i)].kernel == kernel && r.trace().tracks[std::size_t(i)].cta == cta) return i;
  FAIL("no such track");
  return -1;
}

// A step 08 dQ kernel with no events: its tiles come from its grid and shared memory.
tr::Trace tc_dq_kernel_trace(int N, int d, int grid, int threads, std::int64_t smem, const std::string& step = "08_tensor_cores") {
  tr::Trace t;
  t.meta.step = step;
  t.meta.variant = "deterministic";
  t.meta.pass = "bwd";
  t.meta.dtype = "bf16";
  t.meta.B = t.meta.H = 1;
  t.meta.N = N;
  t.meta.d = d;
  t.meta.Br = t.meta.Bc = 64;  // the dK/dV kernel's, as set_tiles records them
  tr::Kernel k;
  k.name = "tc_dq_kernel";
  k.grid[0] = grid;
  k.block[0] = threads;
  k.smem_bytes = smem;
  t.kernels.push_back(k);
  return t;
}

// tc_dkdv_smem_kernel as backward_configs.cuh has it for fa2 (atomic) and deterministic:
// DkdvSmemConfig<E, 64, 128, 128, 8, 4, 2> and DkdvSmemConfig<E, 128, 128, 64, 8, 4, 2>.
test::TcBwdSpec smem_pds_spec(int d, bool atomic = true) {
  test::TcBwdSpec s;
  s.d = d;
  s.keys = 128;
  s.queries = d == 64 ? 128 : 64;
  s.warps = 8;
  s.atomic = atomic;
  s.variant = atomic ? "fa2" : "deterministic";
  return s;
}

// The shipped backward trace of step 08's variant v, and its dK/dV kernel's layout (kernel 1).
std::pair<tr::Trace, SmemPipeline> shipped_dkdv(const std::string& v) {
  auto t = tr::read_trace(shipped_trace("08_tensor_cores_" + v + ".bwd.json"));
  REQUIRE(t.kernels.size() == 3);
  SmemPipeline L = derive_smem_pipeline(t, 1);
  INFO(L.why_not);
  REQUIRE(L.valid);
  return {std::move(t), L};
}

}  // namespace

TEST_CASE("step 08's backward shared memory: the dK/dV and dQ kernels' layouts, from the trace", "[viz][pipeline][bwd]") {
  SECTION("the shipped trace of tc_dkdv_kernel: key_warps") {
    for (const char* v : {"key_warps"}) {
      INFO(v);
      const auto [t, L] = shipped_dkdv(v);
      REQUIRE(L.kernel == SmemKernel::Dkdv);
      REQUIRE(L.Br == 64);  // queries a stage
      REQUIRE(L.Bc == 64);  // keys a CTA
      REQUIRE(L.warps == 4);
      REQUIRE(L.rows_per_warp == 16);
      REQUIRE(L.warp_row0(3) == 48);
      REQUIRE(L.stages == 2);
      REQUIRE(L.split == 1);
      REQUIRE(L.cols() == 64);
      REQUIRE(L.atomic_dq);
      REQUIRE(L.kv_in_regs == 1);  // backward_configs.cuh at d = 64
      REQUIRE(L.ds_bytes() == 64 * 64 * 2);
      REQUIRE(L.total_bytes() == 58368);
      REQUIRE(L.total_bytes() == t.kernels[1].smem_bytes);
      REQUIRE(L.dq_row_tiles == 2);
      REQUIRE(L.dq_row_groups() == 2);  // each warp adds 32 queries × 32 of the 64 columns of dQ
      REQUIRE(L.dq_cols() == 32);
      // The preprocess and convert kernels stream nothing: their own drawing, no complaint.
      for (int k : {0, 2}) {
        const SmemPipeline other = derive_smem_pipeline(t, k);
        REQUIRE_FALSE(other.valid);
        REQUIRE(other.why_not.empty());
      }
    }
  }
  SECTION("the shipped traces of tc_dkdv_smem_kernel: fa2 (atomic), the rungs (whose backward is fa2's), "
          "deterministic, and its dQ kernel") {
    for (const char* v : {"fa2", "r1_mma", "r2_swizzle", "r3_pipeline", "r4_p_in_regs", "deterministic"}) {
      INFO(v);
      const bool atomic = std::string(v) != "deterministic";
      const auto [t, L] = shipped_dkdv(v);
      REQUIRE(L.kernel == SmemKernel::DkdvSmem);
      REQUIRE(L.Br == 128);
      REQUIRE(L.Bc == 128);
      REQUIRE(L.warps == 8);
      REQUIRE(L.row_groups == 4);  // warps of 32 keys × 64 queries (Sᵀ), × 32 columns (dK, dV)
      REQUIRE(L.warp_queries() == 64);
      REQUIRE(L.warp_cols() == 32);
      REQUIRE(L.atomic_dq == atomic);
      REQUIRE(L.total_bytes() == 165888);
      REQUIRE(L.total_bytes() == t.kernels[1].smem_bytes);
    }
    const auto t = tr::read_trace(shipped_trace("08_tensor_cores_deterministic.bwd.json"));
    REQUIRE(t.kernels[2].name == "tc_dq_kernel");
    const SmemPipeline dq = derive_smem_pipeline(t, 2);
    INFO(dq.why_not);
    REQUIRE(dq.valid);
    REQUIRE(dq.kernel == SmemKernel::Dq);
    REQUIRE(dq.Br == 64);  // from its grid (4 CTAs over N = 256) and its 48 KiB
    REQUIRE(dq.Bc == 64);
    REQUIRE(dq.rows_per_warp == 16);
    REQUIRE_FALSE(dq.from_variant);
    REQUIRE(dq.total_bytes() == 49152);
    REQUIRE(dq.kept_tensors() == std::vector<tr::Tensor>{tr::Tensor::Q, tr::Tensor::dO});
    REQUIRE(dq.stage_tensors() == std::vector<tr::Tensor>{tr::Tensor::K, tr::Tensor::V});
  }
  SECTION("d = 256: a key tile's CTAs in pairs, from the grid; 8 warps at d = 128") {
    test::TcBwdSpec s;
    s.d = 256;
    s.split = 2;
    const auto t = test::tc_dkdv_trace(s);
    SmemPipeline L = derive_smem_pipeline(t, 0);
    INFO(L.why_not);
    REQUIRE(L.valid);
    REQUIRE(L.split == 2);
    REQUIRE(L.cols() == 128);
    REQUIRE(L.kv_in_regs == 0);
    REQUIRE(L.total_bytes() == t.kernels[0].smem_bytes);
    s.d = 128;
    s.split = 1;
    s.warps = 8;
    L = derive_smem_pipeline(test::tc_dkdv_trace(s), 0);
    REQUIRE(L.valid);
    REQUIRE(L.Bc == 128);
    REQUIRE(L.warp_row0(7) == 112);
    REQUIRE(L.dq_row_tiles == 2);
    REQUIRE(L.dq_col_groups() == 4);  // warps w, w + 2, w + 4, w + 6 add the same 32 queries, 32 columns each
    REQUIRE(L.dq_cols() == 32);
    REQUIRE(L.kv_in_regs == 0);
    // A table entry the trace contradicts (4 warps at d = 128) is not believed.
    s.warps = 4;
    L = derive_smem_pipeline(test::tc_dkdv_trace(s), 0);
    REQUIRE(L.valid);
    REQUIRE(L.kv_in_regs == -1);
    s.warps = 8;
    s.step = "09_something_else";  // the table is step 08's
    REQUIRE(derive_smem_pipeline(test::tc_dkdv_trace(s), 0).kv_in_regs == -1);
    // A variant the table does not know: how many rows of dQ each warp adds is not guessed.
    s.step = "08_tensor_cores";
    s.variant = "tomorrow";
    L = derive_smem_pipeline(test::tc_dkdv_trace(s), 0);
    REQUIRE(L.valid);
    REQUIRE(L.kv_in_regs == -1);
    REQUIRE(L.dq_row_tiles == 0);
  }
  SECTION("tc_dkdv_smem_kernel: P and dS through SRAM, its warps in rows of keys, at backward_configs.cuh's tiles") {
    struct Want {
      int d, Br, warp_queries, warp_cols, dq_row_groups;
      std::int64_t total;
    };
    for (const Want& w : {Want{64, 128, 64, 32, 4, 165888}, Want{128, 64, 32, 64, 2, 164864}})
      for (bool atomic : {true, false}) {
        INFO("d = " << w.d << (atomic ? ", fa2" : ", deterministic"));
        const auto t = test::tc_dkdv_trace(smem_pds_spec(w.d, atomic));
        const SmemPipeline L = derive_smem_pipeline(t, 0);
        INFO(L.why_not);
        REQUIRE(L.valid);
        REQUIRE(L.kernel == SmemKernel::DkdvSmem);
        REQUIRE(L.dkdv());
        REQUIRE(L.Br == w.Br);  // queries a stage
        REQUIRE(L.Bc == 128);   // keys a CTA
        REQUIRE(L.warps == 8);
        REQUIRE(L.split == 1);
        // The size is the same with or without atomics: the trace's dQacc says which.
        REQUIRE(L.atomic_dq == atomic);
        REQUIRE(L.p_in_smem);
        REQUIRE(L.p_bytes() == 2 * 128 * w.Br);
        REQUIRE(L.ds_bytes() == 2 * 128 * w.Br);
        REQUIRE(L.total_bytes() == w.total);  // DkdvSmemConfig::smem_bytes
        REQUIRE(L.total_bytes() == t.kernels[0].smem_bytes);
        REQUIRE(L.kept_tensors() == std::vector<tr::Tensor>{tr::Tensor::K, tr::Tensor::V});
        REQUIRE(L.kv_in_regs == 0);  // read from SRAM for every query tile
        // 2, 4 or 8 rows of warps fit the tiles; the table's kKeyGroups = 4 is the one.
        REQUIRE(L.from_variant);
        REQUIRE(L.row_groups == 4);
        REQUIRE(L.rows_per_warp == 32);
        REQUIRE(L.band_warps() == 2);
        REQUIRE(L.warp_queries() == w.warp_queries);
        REQUIRE(L.warp_cols() == w.warp_cols);
        // Warp 5: keys 32..63, the second half of the queries and of the columns.
        REQUIRE(L.warp_row0(5) == 32);
        REQUIRE(L.warp_query0(5) == w.warp_queries);
        REQUIRE(L.warp_col0(5) == w.warp_cols);
        // Every key × query of Sᵀ, and every key × column of dK and dV, is one warp's.
        std::vector<int> st(std::size_t(L.Bc * L.Br)), dk(std::size_t(L.Bc * L.d));
        bool inside = true;
        auto take = [&](std::vector<int>& tile, int k, int c, int cols) {
          inside = inside && k < L.Bc && c < cols;
          if (inside) ++tile[std::size_t(k * cols + c)];
        };
        for (int wp = 0; wp < L.warps; ++wp)
          for (int k = L.warp_row0(wp); k < L.warp_row0(wp) + L.rows_per_warp; ++k) {
            for (int q = L.warp_query0(wp); q < L.warp_query0(wp) + L.warp_queries(); ++q) take(st, k, q, L.Br);
            for (int c = L.warp_col0(wp); c < L.warp_col0(wp) + L.warp_cols(); ++c) take(dk, k, c, L.d);
          }
        REQUIRE(inside);
        REQUIRE(std::all_of(st.begin(), st.end(), [](int n) { return n == 1; }));
        REQUIRE(std::all_of(dk.begin(), dk.end(), [](int n) { return n == 1; }));
        REQUIRE(L.dq_row_tiles == 2);
        REQUIRE(L.dq_row_groups() == w.dq_row_groups);
        REQUIRE(L.dq_cols() == 32);
      }
    // key_warps: tc_dkdv_kernel at the tiles fa2 had, its registers as the table says.
    for (int d : {64, 128}) {
      test::TcBwdSpec s;
      s.d = d;
      s.warps = d == 64 ? 4 : 8;
      s.variant = "key_warps";
      const SmemPipeline L = derive_smem_pipeline(test::tc_dkdv_trace(s), 0);
      REQUIRE(L.valid);
      REQUIRE(L.kernel == SmemKernel::Dkdv);
      REQUIRE_FALSE(L.p_in_smem);
      REQUIRE(L.row_groups == L.warps);
      REQUIRE(L.warp_queries() == 64);  // all of the stage's queries, all of the columns
      REQUIRE(L.warp_cols() == d);
      REQUIRE(L.kv_in_regs == (d == 64 ? 1 : 0));
      REQUIRE(L.dq_row_tiles == 2);
      REQUIRE_FALSE(L.from_variant);
    }
    // Tiles the table does not have at d = 128 (64 keys, 4 warps): several layouts fit, and
    // none is guessed; the shared memory is still the kernel's.
    auto s = smem_pds_spec(128);
    s.keys = 64;
    s.warps = 4;
    SmemPipeline L = derive_smem_pipeline(test::tc_dkdv_trace(s), 0);
    INFO(L.why_not);
    REQUIRE(L.valid);
    REQUIRE(L.row_groups == 0);
    REQUIRE(L.rows_per_warp == 0);
    REQUIRE(L.band_warps() == 0);
    REQUIRE_FALSE(L.from_variant);
    REQUIRE(L.dq_row_tiles == 0);
    REQUIRE(L.total_bytes() == 2 * (2 * 64 * 128 + 4 * 64 * 128 + 2 * 64 * 64) + 16 * 64);
    // Nor at a variant the table does not know.
    s = smem_pds_spec(64);
    s.variant = "tomorrow";
    L = derive_smem_pipeline(test::tc_dkdv_trace(s), 0);
    REQUIRE(L.valid);
    REQUIRE(L.row_groups == 0);
    // Where one layout alone fits (2 warps over 32 keys × 16 queries), it is the one.
    s = smem_pds_spec(64);
    s.variant = "tomorrow";
    s.keys = 32;
    s.queries = 16;
    s.warps = 2;
    L = derive_smem_pipeline(test::tc_dkdv_trace(s), 0);
    REQUIRE(L.valid);
    REQUIRE(L.row_groups == 2);
    REQUIRE(L.rows_per_warp == 16);
    REQUIRE(L.warp_queries() == 16);
    REQUIRE_FALSE(L.from_variant);
  }
  SECTION("tc_dkdv_smem_kernel: what does not fit is said, not drawn") {
    auto t = test::tc_dkdv_trace(smem_pds_spec(64));
    t.kernels[0].smem_bytes -= 2 * 128 * 128;  // tc_dkdv_kernel's atomic size: no P tile
    SmemPipeline L = derive_smem_pipeline(t, 0);
    REQUIRE_FALSE(L.valid);
    REQUIRE(L.why_not.find("fits no layout") != std::string::npos);
    REQUIRE(L.why_not.find("P and dSᵀ") != std::string::npos);
    t = test::tc_dkdv_trace(smem_pds_spec(64));
    t.kernels[0].block[0] = 96;  // 3 warps: no rows of them split 128 keys × 128 queries
    L = derive_smem_pipeline(t, 0);
    REQUIRE_FALSE(L.valid);
    REQUIRE(L.why_not.find("3 warps do not split 128 keys × 128 queries") != std::string::npos);
    t = test::tc_dkdv_trace(smem_pds_spec(128));
    t.kernels[0].grid[0] = 4;  // two CTAs a key tile: this kernel never splits d
    L = derive_smem_pipeline(t, 0);
    REQUIRE_FALSE(L.valid);
    REQUIRE(L.why_not.find("not one for each of the 2 key tiles") != std::string::npos);
    t = test::tc_dkdv_trace(smem_pds_spec(128));
    t.meta.Bc = 120;
    REQUIRE(derive_smem_pipeline(t, 0).why_not.find("not whole 16-row mma tiles") != std::string::npos);
  }
  SECTION("the dQ kernel's tiles where grid and shared memory fit two: backward_configs.cuh decides") {
    // N = 32: one CTA whether it has 64 rows or 128; 48 KiB is 64 rows + 64 keys or 128 + 32.
    SmemPipeline L = derive_smem_pipeline(tc_dq_kernel_trace(32, 64, 1, 128, 49152), 0);
    INFO(L.why_not);
    REQUIRE(L.valid);
    REQUIRE(L.from_variant);
    REQUIRE(L.Br == 64);
    REQUIRE(L.Bc == 64);
    L = derive_smem_pipeline(tc_dq_kernel_trace(32, 64, 1, 128, 49152, "tomorrow"), 0);
    REQUIRE_FALSE(L.valid);
    REQUIRE(L.why_not.find("does not say") != std::string::npos);
    // N = 256 and two CTAs: 128 rows, and 48 KiB leaves 32 keys a stage.
    L = derive_smem_pipeline(tc_dq_kernel_trace(256, 64, 2, 128, 49152, "tomorrow"), 0);
    REQUIRE(L.valid);
    REQUIRE(L.Br == 128);
    REQUIRE(L.Bc == 32);
    REQUIRE(L.rows_per_warp == 32);
    REQUIRE_FALSE(L.from_variant);
  }
  SECTION("what does not fit is said, not drawn") {
    test::TcBwdSpec s;
    auto t = test::tc_dkdv_trace(s);
    t.kernels[0].smem_bytes += 16;
    auto L = derive_smem_pipeline(t, 0);
    REQUIRE_FALSE(L.valid);
    REQUIRE(L.why_not.find("fits no layout") != std::string::npos);
    t = test::tc_dkdv_trace(s);
    t.kernels[0].block[0] = 256;  // 8 warps: 128 keys, not the trace's 64
    L = derive_smem_pipeline(t, 0);
    REQUIRE_FALSE(L.valid);
    REQUIRE(L.why_not.find("16 keys each") != std::string::npos);
    t = test::tc_dkdv_trace(s);
    t.kernels[0].grid[0] = 6;  // 4 key tiles
    REQUIRE(derive_smem_pipeline(t, 0).why_not.find("do not split") != std::string::npos);
    REQUIRE(derive_smem_pipeline(tc_dq_kernel_trace(256, 64, 4, 128, 50000), 0).why_not.find("fit no tile") !=
            std::string::npos);
    // fp32 steps keep their own drawing.
    t = test::tc_dkdv_trace(s);
    t.meta.dtype = "fp32";
    L = derive_smem_pipeline(t, 0);
    REQUIRE_FALSE(L.valid);
    REQUIRE(L.why_not.empty());
  }
}

TEST_CASE("step 08's backward stages: the tile computed and in flight, dSᵀ and dQ's atomics, from the events",
          "[viz][pipeline][bwd]") {
  SECTION("tc_dkdv_kernel (key_warps on the H200): query tiles through two stages, K and V kept") {
    const Replay r(tr::read_trace(shipped_trace("08_tensor_cores_key_warps.bwd.json")));
    const SmemPipeline L = derive_smem_pipeline(r.trace(), 1);
    REQUIRE(L.valid);
    const int k1 = track_of(r, 1, 1);  // keys 64..127
    // Issuing K and V: no stage issued yet, nothing landed.
    auto v = pipeline_at(r, L, k1, during(r, k1, nth(r, k1, tr::Kind::Load, 0, tr::Tensor::K)));
    REQUIRE(v.tiles == 4);
    REQUIRE(v.kept_row0 == 64);
    REQUIRE(v.kept_rows == 64);
    REQUIRE(v.col0 == 0);
    REQUIRE_FALSE(v.kept_loaded);
    check_stage(v, 0, StageState::Empty, -1);
    check_stage(v, 1, StageState::Empty, -1);
    // Waiting for query tile 0 (K and V land with it); tile 1 is not issued until it has.
    v = pipeline_at(r, L, k1, during(r, k1, nth(r, k1, tr::Kind::Load, 0, tr::Tensor::Q)));
    REQUIRE_FALSE(v.kept_loaded);
    check_stage(v, 0, StageState::Loading, 0, 0);
    REQUIRE(v.stages[0].waited_on);
    check_stage(v, 1, StageState::Empty, -1);
    REQUIRE(v.in_flight == -1);
    // Sᵀ of tile 0 from stage 0, tile 1 (queries 64..127) in flight into stage 1.
    v = pipeline_at(r, L, k1, during(r, k1, nth(r, k1, tr::Kind::ComputeS, 0)));
    REQUIRE(v.kept_loaded);
    REQUIRE(v.computing == 0);
    check_stage(v, 0, StageState::Computing, 0, 0);
    check_stage(v, 1, StageState::Loading, 1, 64);
    REQUIRE(v.in_flight == 1);
    REQUIRE(v.ds_tile == -1);
    // Waiting for tile 1: stage 0 keeps tile 0's spent bytes (tile 2 goes there after the wait).
    v = pipeline_at(r, L, k1, during(r, k1, nth(r, k1, tr::Kind::Load, 1, tr::Tensor::Q)));
    REQUIRE(v.computing == -1);
    check_stage(v, 1, StageState::Loading, 1, 64);
    REQUIRE(v.stages[1].waited_on);
    check_stage(v, 0, StageState::Free, 0, 0);
    REQUIRE(v.ds_phase == DsPhase::Spent);
    REQUIRE(v.ds_tile == 0);
    REQUIRE(v.dq_atomic_tile == -1);
    // dSᵀ of tile 1: written with dV and dK, read back for dQ with the atomics, then spent.
    v = pipeline_at(r, L, k1, during(r, k1, nth(r, k1, tr::Kind::AccumulateDV, 1)));
    REQUIRE(v.ds_tile == 1);
    REQUIRE(v.ds_row0 == 64);
    REQUIRE(v.ds_phase == DsPhase::Writing);
    check_stage(v, 1, StageState::Computing, 1, 64);
    check_stage(v, 0, StageState::Loading, 2, 128);
    v = pipeline_at(r, L, k1, during(r, k1, nth(r, k1, tr::Kind::AccumulateDK, 1)));
    REQUIRE(v.ds_phase == DsPhase::Written);
    v = pipeline_at(r, L, k1, during(r, k1, nth(r, k1, tr::Kind::Load, 1, tr::Tensor::dQacc)));
    REQUIRE(v.ds_phase == DsPhase::Reading);
    REQUIRE(v.dq_atomic_tile == 1);
    REQUIRE(v.computing == 1);
    v = pipeline_at(r, L, k1, during(r, k1, nth(r, k1, tr::Kind::Store, 1, tr::Tensor::dQacc)));
    REQUIRE(v.ds_phase == DsPhase::Spent);
    REQUIRE(v.dq_atomic_tile == 1);
    REQUIRE(v.computing == 1);  // the atomics are tile 1's work: tile 2 is not waited on yet
    // The last tile: nothing left to issue; storing dK and dV: the loop is over.
    v = pipeline_at(r, L, k1, during(r, k1, nth(r, k1, tr::Kind::ComputeS, 3)));
    REQUIRE(v.computing == 3);
    REQUIRE(v.in_flight == -1);
    check_stage(v, 1, StageState::Computing, 3, 192);
    check_stage(v, 0, StageState::Free, 2, 128);
    v = pipeline_at(r, L, k1, during(r, k1, nth(r, k1, tr::Kind::Store, 0, tr::Tensor::dK)));
    REQUIRE(v.computing == -1);
    REQUIRE(v.kept_loaded);
    check_stage(v, 1, StageState::Free, 3);
    // Retired: its shared memory is gone.
    v = pipeline_at(r, L, k1, r.track_cursor(k1, Cursor{Order::Logical, double(r.event_count())}));
    check_stage(v, 0, StageState::Empty, -1);
    REQUIRE(v.ds_tile == -1);
  }
  SECTION("the deterministic tc_dkdv_kernel: no dSᵀ; the dQ kernel: Q and dO kept, key tiles through the stages") {
    test::TcBwdSpec s;
    s.atomic = false;
    s.variant = "deterministic";
    const Replay rk(test::tc_dkdv_trace(s));
    const SmemPipeline dkdv = derive_smem_pipeline(rk.trace(), 0);
    REQUIRE(dkdv.valid);
    REQUIRE_FALSE(dkdv.ds_in_smem());
    const int k0 = track_of(rk, 0, 0);
    auto v = pipeline_at(rk, dkdv, k0, during(rk, k0, nth(rk, k0, tr::Kind::AccumulateDV, 1)));
    REQUIRE(v.ds_tile == -1);
    REQUIRE(v.ds_phase == DsPhase::None);
    check_stage(v, 1, StageState::Computing, 1, 64);
    const Replay r(tr::read_trace(shipped_trace("08_tensor_cores_deterministic.bwd.json")));
    const SmemPipeline dq = derive_smem_pipeline(r.trace(), 2);
    const int q1 = track_of(r, 2, 1);  // rows 64..127
    v = pipeline_at(r, dq, q1, during(r, q1, nth(r, q1, tr::Kind::Load, 0, tr::Tensor::dO)));
    REQUIRE(v.kept_row0 == 64);
    REQUIRE_FALSE(v.kept_loaded);
    check_stage(v, 0, StageState::Empty, -1);
    v = pipeline_at(r, dq, q1, during(r, q1, nth(r, q1, tr::Kind::Load, 0, tr::Tensor::K)));
    REQUIRE_FALSE(v.kept_loaded);  // Q and dO land with key tile 0
    check_stage(v, 0, StageState::Loading, 0, 0);
    REQUIRE(v.stages[0].waited_on);
    v = pipeline_at(r, dq, q1, during(r, q1, nth(r, q1, tr::Kind::AccumulateDQ, 0)));
    REQUIRE(v.kept_loaded);
    check_stage(v, 0, StageState::Computing, 0, 0);
    check_stage(v, 1, StageState::Loading, 1, 64);
    REQUIRE(v.dq_atomic_tile == -1);
    v = pipeline_at(r, dq, q1, during(r, q1, nth(r, q1, tr::Kind::Store, 0, tr::Tensor::dQ)));
    REQUIRE(v.computing == -1);
    check_stage(v, 1, StageState::Free, 3, 192);
  }
  SECTION("tc_dkdv_smem_kernel (fa2 on the H200): P and dSᵀ written by the warps' blocks, read by their keys, dSᵀ again for dQ") {
    const Replay r(tr::read_trace(shipped_trace("08_tensor_cores_fa2.bwd.json")));
    const SmemPipeline L = derive_smem_pipeline(r.trace(), 1);
    REQUIRE(L.valid);
    const int k1 = track_of(r, 1, 1);  // keys 128..255
    auto v = pipeline_at(r, L, k1, during(r, k1, nth(r, k1, tr::Kind::ComputeS, 0)));
    REQUIRE(v.tiles == 2);
    REQUIRE(v.kept_row0 == 128);
    REQUIRE(v.col0 == 0);
    check_stage(v, 0, StageState::Computing, 0, 0);
    check_stage(v, 1, StageState::Loading, 1, 128);
    REQUIRE(v.ds_tile == -1);
    REQUIRE(v.p_phase == DsPhase::None);
    v = pipeline_at(r, L, k1, during(r, k1, nth(r, k1, tr::Kind::ComputeDS, 0)));
    REQUIRE(v.ds_tile == 0);
    REQUIRE(v.ds_row0 == 0);
    REQUIRE(v.ds_phase == DsPhase::Writing);
    REQUIRE(v.p_phase == DsPhase::Writing);
    v = pipeline_at(r, L, k1, during(r, k1, nth(r, k1, tr::Kind::AccumulateDV, 0)));
    REQUIRE(v.ds_phase == DsPhase::Operand);
    REQUIRE(v.p_phase == DsPhase::Operand);
    // dV and dK are done with both; dSᵀ waits for dQ's share.
    v = pipeline_at(r, L, k1, during(r, k1, nth(r, k1, tr::Kind::AccumulateDK, 0)));
    REQUIRE(v.ds_phase == DsPhase::Written);
    REQUIRE(v.p_phase == DsPhase::Spent);
    v = pipeline_at(r, L, k1, during(r, k1, nth(r, k1, tr::Kind::Load, 0, tr::Tensor::dQacc)));
    REQUIRE(v.ds_phase == DsPhase::Reading);
    REQUIRE(v.p_phase == DsPhase::Spent);
    REQUIRE(v.dq_atomic_tile == 0);
    v = pipeline_at(r, L, k1, during(r, k1, nth(r, k1, tr::Kind::ComputeS, 1)));
    REQUIRE(v.ds_tile == 0);  // tile 0's bytes until tile 1's are written
    REQUIRE(v.ds_phase == DsPhase::Spent);
    REQUIRE(v.p_phase == DsPhase::Spent);
    REQUIRE(v.dq_atomic_tile == -1);
    check_stage(v, 1, StageState::Computing, 1, 128);
    v = pipeline_at(r, L, k1, during(r, k1, nth(r, k1, tr::Kind::ComputeDS, 1)));
    REQUIRE(v.ds_tile == 1);
    REQUIRE(v.ds_row0 == 128);
    REQUIRE(v.ds_phase == DsPhase::Writing);
    // Deterministic: dSᵀ is spent with P once dV and dK have read it.
    const Replay rd(tr::read_trace(shipped_trace("08_tensor_cores_deterministic.bwd.json")));
    const SmemPipeline D = derive_smem_pipeline(rd.trace(), 1);
    REQUIRE(D.valid);
    const int d1 = track_of(rd, 1, 1);
    v = pipeline_at(rd, D, d1, during(rd, d1, nth(rd, d1, tr::Kind::AccumulateDV, 0)));
    REQUIRE(v.ds_phase == DsPhase::Operand);
    v = pipeline_at(rd, D, d1, during(rd, d1, nth(rd, d1, tr::Kind::AccumulateDK, 0)));
    REQUIRE(v.ds_phase == DsPhase::Spent);
    REQUIRE(v.p_phase == DsPhase::Spent);
    REQUIRE(v.dq_atomic_tile == -1);
  }
  SECTION("d = 256: each CTA of a pair, its half of the columns") {
    test::TcBwdSpec s;
    s.d = 256;
    s.split = 2;
    const Replay r(test::tc_dkdv_trace(s));
    const SmemPipeline L = derive_smem_pipeline(r.trace(), 0);
    for (int cta = 0; cta < 8; ++cta) {
      const int t = track_of(r, 0, cta);
      const auto v = pipeline_at(r, L, t, during(r, t, nth(r, t, tr::Kind::ComputeS, 1)));
      const auto& dk = r.trace().events[std::size_t(r.track_events(t)[std::size_t(nth(r, t, tr::Kind::AccumulateDK, 0))])];
      INFO("CTA " << cta);
      REQUIRE(v.col0 == dk.col0);  // blockIdx.x % kSplit · kCols, as the kernel's events say
      REQUIRE(v.kept_row0 == cta / 2 * 64);
    }
  }
}

// dQacc (trace tensor 17): the float32 (B, H, N, d) buffer a 16-bit backward adds dQ up in.
TEST_CASE("a 16-bit backward's dQacc: a float32 N×d grid in HBM with its own bytes", "[viz][coverage][dqacc]") {
  namespace stdfs = std::filesystem;
  const int N = 64, d = 16, tiles = 2;
  const auto dir = stdfs::temp_directory_path() / "fs_viz_dqacc_test";
  stdfs::create_directories(dir);
  const auto path = (dir / "dqacc.bwd.json").string();
  tr::write_trace(test::dqacc_trace(N, d, 32), path);  // the file format names it too
  std::string error;
  auto doc = load_document(path, error);
  REQUIRE(doc);
  INFO((doc->warnings.empty() ? std::string() : doc->warnings.front()));
  REQUIRE(doc->warnings.empty());
  const Replay& r = *doc->replay;
  REQUIRE(element_bytes(r.meta(), tr::Tensor::dQacc) == 4);
  REQUIRE(element_bytes(r.meta(), tr::Tensor::dQ) == 2);
  const auto* g = doc->coverage->grid(tr::Tensor::dQacc);
  REQUIRE(g);
  REQUIRE(g->in_hbm);
  REQUIRE(g->rows == N);
  REQUIRE(g->cols == d);
  doc->playback.seek(r, Cursor{Order::Logical, double(r.event_count())});
  doc->sync();
  // Every K tile's CTA adds into every row of dQacc; the rounding kernel reads it once.
  for (int gr = 0; gr < g->grid_rows; ++gr)
    for (int gc = 0; gc < g->grid_cols; ++gc) {
      REQUIRE(g->at(0, gr, gc).written == tiles * g->cell_area(gr, gc));
      REQUIRE(g->at(0, gr, gc).read == g->cell_area(gr, gc));
    }
  const auto& all = r.grand_totals();
  REQUIRE(all.written[std::size_t(tr::Tensor::dQacc)] == std::int64_t(tiles) * N * d * 4);
  REQUIRE(all.read[std::size_t(tr::Tensor::dQacc)] == std::int64_t(N) * d * 4);
  REQUIRE(all.written[std::size_t(tr::Tensor::dQ)] == std::int64_t(N) * d * 2);
  stdfs::remove_all(dir);

  SECTION("a trace whose meta leaves tensors out: sizes from the dtype, dQacc float32 still") {
    tr::Trace t = test::dqacc_trace(N, d, 32);
    t.meta.tensors.clear();
    const Replay bare(std::move(t));
    REQUIRE(element_bytes(bare.meta(), tr::Tensor::dQacc) == 4);
    REQUIRE(element_bytes(bare.meta(), tr::Tensor::dQ) == 2);
    REQUIRE(element_bytes(bare.meta(), tr::Tensor::LSE) == 4);
    const Coverage cov(bare);
    const auto* gb = cov.grid(tr::Tensor::dQacc);
    REQUIRE(gb);  // named by its events
    REQUIRE(gb->cols == d);
  }
}

// Step 07 (SMYRF): events of round ρ name their rows by slots of ρ's sorted orders.
namespace {

// The row slot `s` of head bh, round ρ stands for, read straight from the trace's orders.
int order_row(const tr::Meta& m, bool keys, int bh, int round, int slot) {
  const auto& order = keys ? m.clusters.k_order : m.clusters.q_order;
  return order[std::size_t((bh * m.clusters.hashes + round) * m.N + slot)];
}

// The first event of a kind on a tensor in a round and head.
int first_event(const Replay& r, tr::Kind kind, tr::Tensor t, int round, int bh) {
  for (std::size_t i = 0; i < r.trace().events.size(); ++i) {
    const auto& e = r.trace().events[i];
    if (e.kind == kind && e.tensor == t && e.round == round && e.bh == bh) return int(i);
  }
  FAIL("no such event");
  return -1;
}

std::int64_t overlap(int a0, int a1, int b0, int b1) { return std::max(0, std::min(a1, b1) - std::max(a0, b0)); }

}  // namespace

TEST_CASE("a synthetic SMYRF trace passes the validator: its events and the sort's untraced bytes are the IO model", "[viz][smyrf]") {
  tr::Trace t = make_synthetic_trace(smyrf_spec());
  const auto report = tr::validate(t);
  INFO((report.errors.empty() ? std::string() : report.errors.front()));
  REQUIRE(report.ok());
  REQUIRE(report.untraced_read_bytes > 0);
  const Replay r(std::move(t));
  REQUIRE(r.clustered());
  REQUIRE(r.rounds() == 4);
  // The sort no event records: 2 sides × 4 rounds × N rows × 2 heads, a key and an index each.
  REQUIRE(r.untraced_read() == 2 * 4 * 256 * 2 * 8);
  REQUIRE(r.untraced_written() == 2 * 4 * 256 * 2 * 4);
  REQUIRE(r.grand_totals().read_total() + r.untraced_read() == r.meta().io_read_bytes);
  REQUIRE(r.grand_totals().written_total() + r.untraced_written() == r.meta().io_write_bytes);
  REQUIRE(r.grand_totals().read_total() < r.meta().io_read_bytes);  // the events alone fall short
  REQUIRE(r.grand_totals().read[std::size_t(tr::Tensor::Order)] > 0);
  REQUIRE(r.grand_totals().written[std::size_t(tr::Tensor::SortKey)] == 2LL * 256 * 2 * 4 * 8);
  // FLOPs: 4 rounds, each computing 8 clusters of 32 × 32 of the 256 × 256 scores (1/8).
  REQUIRE(round_score_share(r.meta()) == Approx(0.125));
  REQUIRE(r.pass_flops() == Approx(0.5 * fs::forward_flops(fs::Shape{1, 2, 256, 32}, false)));

  SECTION("through the file format: the clusters and the untraced traffic survive") {
    namespace stdfs = std::filesystem;
    const auto dir = stdfs::temp_directory_path() / "fs_viz_smyrf_test";
    stdfs::create_directories(dir);
    const auto path = (dir / "smyrf.fwd.json").string();
    tr::write_trace(make_synthetic_trace(smyrf_spec()), path);
    std::string error;
    auto doc = load_document(path, error);
    REQUIRE(doc);
    INFO((doc->warnings.empty() ? std::string() : doc->warnings.front()));
    REQUIRE(doc->warnings.empty());
    REQUIRE(doc->replay->clustered());
    REQUIRE(doc->replay->untraced_read() == r.untraced_read());
    REQUIRE(doc->replay->meta().clusters.q_order == r.meta().clusters.q_order);
    stdfs::remove_all(dir);
  }
}

TEST_CASE("a round's slots map to rows through its query or key order", "[viz][smyrf]") {
  const Replay r(make_synthetic_trace(smyrf_spec()));
  const auto& m = r.meta();
  for (int bh : {0, 1})
    for (int round : {0, 3}) {
      const SlotOrders q = r.slot_orders(tr::Tensor::Q, bh, round), k = r.slot_orders(tr::Tensor::dK, bh, round);
      const SlotOrders s = r.slot_orders(tr::Tensor::S, bh, round);
      REQUIRE(q.rows);
      REQUIRE(!q.cols);
      REQUIRE(s.cols);
      for (int slot : {0, 17, 255}) {
        REQUIRE(q.rows[slot] == order_row(m, false, bh, round, slot));
        REQUIRE(k.rows[slot] == order_row(m, true, bh, round, slot));
        REQUIRE(s.rows[slot] == order_row(m, false, bh, round, slot));
        REQUIRE(s.cols[slot] == order_row(m, true, bh, round, slot));
        REQUIRE(r.row_of_slot(tr::Tensor::V, bh, round, slot) == order_row(m, true, bh, round, slot));
        REQUIRE(r.row_of_slot(tr::Tensor::LSE, bh, round, slot) == order_row(m, false, bh, round, slot));
      }
      // The orders' own rows are slots; no round is rows.
      REQUIRE(!r.slot_orders(tr::Tensor::Order, bh, round).mapped());
      REQUIRE(!r.slot_orders(tr::Tensor::Q, bh, -1).mapped());
      REQUIRE(!r.slot_orders(tr::Tensor::Q, bh, 4).mapped());
    }
  // The runs of rows a block of slots stands for, ascending and merged.
  const std::int32_t order[] = {5, 3, 4, 9, 0, 1};
  REQUIRE(row_runs(order, 0, 6) == std::vector<std::pair<int, int>>{{0, 2}, {3, 6}, {9, 10}});
  REQUIRE(row_runs(order, 1, 2) == std::vector<std::pair<int, int>>{{3, 5}});
  REQUIRE(row_runs(nullptr, 7, 3) == std::vector<std::pair<int, int>>{{7, 10}});
  // What the panels print.
  const auto& e = r.trace().events[std::size_t(first_event(r, tr::Kind::Softmax, tr::Tensor::P, 2, 1))];
  REQUIRE(tile_label(e).find("round 2 slots") != std::string::npos);
  REQUIRE(sample_row_label(r, e) == "row " + std::to_string(order_row(m, false, 1, 2, e.sample_row)) + " (slot " +
                                        std::to_string(e.sample_row) + " of round 2)");
}

TEST_CASE("a gathered tile is drawn at the rows it gathers: stripes, not a block", "[viz][smyrf][coverage]") {
  const Replay r(make_synthetic_trace(smyrf_spec()));
  const auto& m = r.meta();
  for (tr::Tensor t : {tr::Tensor::Q, tr::Tensor::K, tr::Tensor::V}) {
    INFO(tensor_label(t));
    const int e = first_event(r, tr::Kind::Load, t, 1, 1);
    const auto& ev = r.trace().events[std::size_t(e)];
    Coverage cov(r);
    cov.seek(r, {Order::Logical, double(e)});
    const TensorGrid before = *cov.grid(t);
    cov.seek(r, {Order::Logical, double(e) + 1});
    const TensorGrid& after = *cov.grid(t);
    REQUIRE(after.cell_rows == 2);  // as fine as the grid allows: 256 rows in 128 cells
    REQUIRE(after.grid_cols == 1);
    // Every slot's row, found in the order by hand, got its d elements; nothing else did.
    std::vector<std::int64_t> expect(std::size_t(after.grid_rows), 0);
    for (int slot = ev.row0; slot < ev.row0 + ev.rows; ++slot)
      expect[std::size_t(order_row(m, tr::key_side(t), 1, 1, slot) / after.cell_rows)] += m.d;
    int first = -1, last = -1, touched = 0;
    for (int gr = 0; gr < after.grid_rows; ++gr) {
      REQUIRE(after.at(1, gr, 0).read - before.at(1, gr, 0).read == expect[std::size_t(gr)]);
      REQUIRE(after.at(0, gr, 0).read == before.at(0, gr, 0).read);  // the other head is untouched
      if (expect[std::size_t(gr)] == 0) continue;
      first = first < 0 ? gr : first;
      last = gr;
      ++touched;
    }
    // Scattered: more cells than a block of as many rows would cover, with gaps between them.
    REQUIRE(touched > ev.rows / after.cell_rows + 1);
    REQUIRE(last - first + 1 > touched);
  }
}

TEST_CASE("in sorted order a round's scores are its clusters on the diagonal, in the original order the same scores scattered", "[viz][smyrf][coverage]") {
  const Replay r(make_synthetic_trace(smyrf_spec()));
  const auto& m = r.meta();
  const int N = m.N;
  const auto boxes = cluster_boxes(m);
  REQUIRE(boxes.size() == 8);
  Coverage cov(r);
  REQUIRE(!cov.round_scores(4, true));
  cov.seek(r, {Order::Logical, double(r.event_count())});
  const TensorGrid& all = *cov.grid(tr::Tensor::S);
  std::vector<std::int64_t> all_rounds(all.cells.size() / 2, 0);  // head 1's cells
  for (int round = 0; round < r.rounds(); ++round) {
    INFO("round " << round);
    const TensorGrid& sorted = *cov.round_scores(round, true);
    REQUIRE(sorted.cell_rows == 32);  // the round's tiles: 32 query slots × 16 key slots
    REQUIRE(sorted.cell_cols == 16);
    for (int gi = 0; gi < sorted.grid_rows; ++gi)
      for (int gj = 0; gj < sorted.grid_cols; ++gj) {
        std::int64_t in_clusters = 0;
        for (const auto& b : boxes)
          in_clusters += overlap(gi * 32, gi * 32 + 32, b.q0, b.q1) * overlap(gj * 16, gj * 16 + 16, b.k0, b.k1);
        const auto& c = sorted.at(1, gi, gj);
        REQUIRE(c.computed == in_clusters);
        REQUIRE(c.skipped == sorted.cell_area(gi, gj) - in_clusters);
        if (gi == gj / 2) REQUIRE(in_clusters == sorted.cell_area(gi, gj));  // the diagonal, whole
      }
    // The original order, pair by pair: query i meets key j when their slots share a cluster.
    const TensorGrid& original = *cov.round_scores(round, false);
    REQUIRE(original.cell_rows == 2);
    REQUIRE(original.cell_cols == 2);
    std::vector<int> q_slot(static_cast<std::size_t>(N)), k_slot(static_cast<std::size_t>(N));
    for (int slot = 0; slot < N; ++slot) {
      q_slot[std::size_t(order_row(m, false, 1, round, slot))] = slot;
      k_slot[std::size_t(order_row(m, true, 1, round, slot))] = slot;
    }
    std::vector<std::int64_t> expect(std::size_t(original.grid_rows * original.grid_cols), 0);
    for (int i = 0; i < N; ++i)
      for (int j = 0; j < N; ++j)
        if (q_slot[std::size_t(i)] / 32 == k_slot[std::size_t(j)] / 32) ++expect[std::size_t((i / 2) * original.grid_cols + j / 2)];
    int diagonal = 0, computed_cells = 0;
    for (int gi = 0; gi < original.grid_rows; ++gi)
      for (int gj = 0; gj < original.grid_cols; ++gj) {
        const std::int64_t want = expect[std::size_t(gi * original.grid_cols + gj)];
        REQUIRE(original.at(1, gi, gj).computed == want);
        REQUIRE(original.at(1, gi, gj).skipped == 4 - want);
        all_rounds[std::size_t(gi * original.grid_cols + gj)] += want;
        computed_cells += want > 0;
        diagonal += want > 0 && std::abs(gi - gj) < 16;  // within a cluster's width of the diagonal
      }
    // Scattered: the computed scores are everywhere, not near the diagonal.
    REQUIRE(diagonal < computed_cells / 3);
  }
  // S holds every round's computed scores in the original order, and no skips (a round's say
  // nothing of the others').
  for (int gi = 0; gi < all.grid_rows; ++gi)
    for (int gj = 0; gj < all.grid_cols; ++gj) {
      REQUIRE(all.at(1, gi, gj).computed == all_rounds[std::size_t(gi * all.grid_cols + gj)]);
      REQUIRE(all.at(1, gi, gj).skipped == 0);
    }
}

TEST_CASE("replaying a clustered trace lights up a round's tiles as they are computed", "[viz][smyrf][coverage]") {
  const Replay r(make_synthetic_trace(smyrf_spec()));
  const int e = first_event(r, tr::Kind::ComputeS, tr::Tensor::S, 1, 0);
  const auto& ev = r.trace().events[std::size_t(e)];
  Coverage cov(r);
  auto computed = [&](int round, int bh) {
    std::int64_t n = 0;
    const TensorGrid& g = *cov.round_scores(round, true);
    for (int gi = 0; gi < g.grid_rows; ++gi)
      for (int gj = 0; gj < g.grid_cols; ++gj) n += g.at(bh, gi, gj).computed;
    return n;
  };
  cov.seek(r, {Order::Logical, double(e)});
  const std::int64_t round1_before = computed(1, 0);
  cov.seek(r, {Order::Logical, double(e) + 1});
  REQUIRE(computed(1, 0) - round1_before == std::int64_t(ev.rows) * ev.cols);
  const TensorGrid& g = *cov.round_scores(1, true);
  REQUIRE(g.at(0, ev.row0 / g.cell_rows, ev.col0 / g.cell_cols).computed > 0);
  REQUIRE(computed(2, 0) == 0);  // round 2 has not begun
  REQUIRE(computed(0, 0) == std::int64_t(8) * 32 * 32);  // round 0 is done
  // Which round to show: a round kernel's CTA's own; a hash CTA's, the last one done (0 first).
  REQUIRE(r.track_round(ev.track) == 1);
  REQUIRE(r.round_to_follow(ev.track, {Order::Logical, 0}) == 1);
  const int hash_track = r.trace().events[std::size_t(first_event(r, tr::Kind::Store, tr::Tensor::SortKey, -1, 0))].track;
  REQUIRE(r.track_round(hash_track) == -1);
  REQUIRE(r.round_to_follow(hash_track, {Order::Logical, 0}) == 0);
  REQUIRE(r.round_to_follow(hash_track, {Order::Logical, double(e) + 1}) == 1);
}

TEST_CASE("a clustering that cannot place its rounds draws nothing at the wrong rows", "[viz][smyrf][coverage]") {
  for (int damage = 0; damage < 4; ++damage) {
    INFO("damage " << damage);
    tr::Trace t = make_synthetic_trace(smyrf_spec());
    if (damage == 0) t.meta.clusters.q_order.pop_back();      // too short
    if (damage == 1) t.meta.clusters.k_order[77] = 256;        // a row past N
    if (damage == 2) t.meta.clusters.hashes = tr::kMaxRounds + 1;
    if (damage == 3) t.meta.B = t.meta.H = 1 << 30;            // heads · hashes · N past 64 bits
    const Replay r(std::move(t));
    REQUIRE(!r.clustered());
    REQUIRE(r.rounds() == 0);
    REQUIRE(!r.slot_orders(tr::Tensor::Q, 0, 0).mapped());
    Coverage cov(r);
    REQUIRE(!cov.round_scores(0, true));
    cov.seek(r, {Order::Logical, double(r.event_count())});
    // Q: the norms and the hashes read every row, the rounds' gathers are left out.
    const TensorGrid& q = *cov.grid(tr::Tensor::Q);
    for (int gr = 0; gr < q.grid_rows; ++gr) REQUIRE(q.at(0, gr, 0).read == 2 * q.cell_area(gr, 0));
    std::int64_t scores = 0;
    for (const auto& c : cov.grid(tr::Tensor::S)->cells) scores += c.computed + c.skipped;
    REQUIRE(scores == 0);
  }
}

TEST_CASE("step 09's shared memory: the kernels' layouts, from the trace", "[viz][pipeline][lanes]") {
  tr::Trace t = make_synthetic_trace(hopper_spec());
  // The synthetic trace's size counts the tiles alone: Q + 2 stages × (K + V).
  SmemPipeline L = derive_smem_pipeline(t, 0);
  REQUIRE(L.valid);
  REQUIRE(L.kernel == SmemKernel::HopperForward);
  REQUIRE(L.stages == 2);
  REQUIRE(L.tiles_only);
  REQUIRE(!L.o_in_smem);
  // The kernel's own (HopperConfig::kSmemBytes): 1024 + tiles + O + 8 · (2 + 4 · kStages); fp8's
  // Vᵀ stage holds whole boxes of 128 keys (kVBoxes · 128 · d).
  auto fwd_bytes = [](int e, int d, int bc, int st) {
    const int v_keys = e == 1 ? (bc + 127) / 128 * 128 : bc;
    return 1024 + std::int64_t(e) * (128 * d + st * (bc + v_keys) * d) + (d <= 128 ? 2 * 128 * d : 0) + 8 * (2 + 4 * st);
  };
  struct Case {
    const char* variant;
    int d, bc, stages, e;
  };
  for (const auto& c : {Case{"fa3", 64, 128, 4, 2}, Case{"fa3", 128, 128, 2, 2}, Case{"fa3", 256, 64, 2, 2},
                        Case{"ws_pingpong", 128, 128, 2, 2}, Case{"fp8", 128, 224, 2, 1}, Case{"fp8", 128, 128, 4, 1},
                        Case{"wgmma", 128, 128, 2, 2}}) {
    INFO(c.variant << " d = " << c.d);
    // The wgmma rung has no producer warpgroup: two warpgroups, its copies in consumer 0.
    t.kernels[0].block[0] = std::string(c.variant) == "wgmma" ? 256 : 384;
    t.meta.variant = c.variant;
    t.meta.d = c.d;
    t.meta.Bc = c.bc;
    t.kernels[0].smem_bytes = fwd_bytes(c.e, c.d, c.bc, c.stages);
    L = derive_smem_pipeline(t, 0);
    REQUIRE(L.valid);
    REQUIRE(L.stages == c.stages);
    REQUIRE(!L.tiles_only);
    REQUIRE(L.o_in_smem == (c.d <= 128));
    REQUIRE(L.elem_bytes == c.e);
    REQUIRE(L.total_bytes() == t.kernels[0].smem_bytes);
  }
  // The backward (HopperBwdConfig::kSmemBytes) at d = 128: 64 queries a stage.
  t.kernels[0].block[0] = 384;
  t.kernels[0].name = "hopper_backward_kernel";
  t.meta.pass = "bwd";
  t.meta.variant = "fa3";
  t.meta.d = 128;
  t.meta.Br = 64;
  t.meta.Bc = 128;
  t.kernels[0].smem_bytes = 1024 + 2 * (2 * 128 * 128 + 2 * 2 * 64 * 128 + 2 * 128 * 64) + 4 * (2 * 64 * 64 + 2 * 2 * 64) + 8 * 5;
  L = derive_smem_pipeline(t, 0);
  REQUIRE(L.valid);
  REQUIRE(L.kernel == SmemKernel::HopperBackward);
  REQUIRE(L.stages == 2);
  // What the trace cannot say is said: a size that fits nothing, a CTA recorded as one lane.
  t.kernels[0].smem_bytes += 8;
  L = derive_smem_pipeline(t, 0);
  REQUIRE(!L.valid);
  REQUIRE(L.why_not.find("fits no number of stages") != std::string::npos);
  t.kernels[0].lanes = 1;
  L = derive_smem_pipeline(t, 0);
  REQUIRE(!L.valid);
  REQUIRE(L.why_not.find("lane") != std::string::npos);
}

TEST_CASE("step 09's stages: which tile each K and V stage holds, from the CTA's lanes", "[viz][pipeline][lanes]") {
  const Replay r(make_synthetic_trace(hopper_spec()));  // 4 key tiles a CTA, 2 stages
  const SmemPipeline L = derive_smem_pipeline(r.trace(), 0);
  REQUIRE(L.valid);
  const auto& lanes = r.lanes_of(0);
  const int prod = lanes[0], c0 = lanes[1], c1 = lanes[2];
  auto at = [&](int track, int i) {
    return Cursor{Order::Logical, double(r.track_events(track)[std::size_t(i)]) + 0.5};
  };
  // While the producer issues K_1: stage 0 holds tile 0, stage 1 tile 1, issued.
  auto v = pipeline_at(r, L, c0, at(prod, nth(r, prod, tr::Kind::Load, 1, tr::Tensor::K)));
  REQUIRE(v.tiles == 4);
  check_stage(v, 1, StageState::Loading, 1, 128);
  REQUIRE(v.stages[0].tile == 0);
  // The same moment from any lane of the CTA.
  const auto from_producer = pipeline_at(r, L, prod, at(prod, nth(r, prod, tr::Kind::Load, 1, tr::Tensor::K)));
  REQUIRE(from_producer.stages[1].tile == 1);
  // While consumer 0 computes S_1: K's stage 1 is in use; its V, tile 1's, is not yet.
  v = pipeline_at(r, L, c0, at(c0, nth(r, c0, tr::Kind::ComputeS, 1)));
  check_stage(v, 1, StageState::Computing, 1, 128);
  REQUIRE(v.v_stages[1].tile == 1);
  REQUIRE(v.v_stages[1].state != StageState::Free);
  // Once both consumers' P̃V of tile 1 has ended, and the producer issued K_3 into stage 1.
  const Cursor later = at(prod, nth(r, prod, tr::Kind::Load, 3, tr::Tensor::K));
  v = pipeline_at(r, L, c0, later);
  check_stage(v, 1, StageState::Loading, 3, 384);
  // K's stage 0 holds tile 2 (the CTA's third), stage 1 tile 3: i mod kStages.
  REQUIRE(v.stages[0].tile == 2);
  // A stage is freed only when both consumers are done: K_0 after consumer 1's S_0 too.
  const Cursor c0_done = Cursor{Order::Logical, double(r.track_events(c0)[std::size_t(nth(r, c0, tr::Kind::ComputeS, 0))]) + 1.0};
  const TrackCursor c1_at = r.track_cursor(c1, c0_done);
  v = pipeline_at(r, L, c0, c0_done);
  if (c1_at.done <= nth(r, c1, tr::Kind::ComputeS, 0)) REQUIRE(v.stages[0].state == StageState::Computing);
  // After the CTA retires it holds nothing.
  v = pipeline_at(r, L, c0, Cursor{Order::Logical, double(r.event_count())});
  REQUIRE(v.stages[0].state == StageState::Empty);
}

// Step 09's fp8 forward (Fp8Cfg): e4m3 Q, K and Vᵀ, tiles of 224 keys (kE4m3BlockKV) through two
// stages; Vᵀ in whole boxes of 128 keys, two a tile, the second's last 32 columns never read.
TEST_CASE("step 09's fp8 forward: two stages of 224 keys, Vᵀ in boxes of 128, from the recorded trace", "[viz][pipeline][lanes]") {
  const Replay r(tr::read_trace(shipped_trace("09_hopper_fp8.fwd.json")));
  const tr::Trace& t = r.trace();
  REQUIRE(t.meta.variant == "fp8");
  REQUIRE(t.meta.Bc == 224);
  REQUIRE(t.kernels[0].smem_bytes == 173136);
  SmemPipeline L = derive_smem_pipeline(t, 0);
  INFO(L.why_not);
  REQUIRE(L.valid);
  REQUIRE(L.kernel == SmemKernel::HopperForward);
  REQUIRE(L.fp8);
  REQUIRE(L.elem_bytes == 1);
  REQUIRE(L.stages == 2);
  REQUIRE(!L.tiles_only);
  REQUIRE(L.o_in_smem);
  REQUIRE(L.vt_keys() == 256);
  REQUIRE(L.total_bytes() == 173136);
  // Q 16 KiB + 2 × (K 28 KiB + Vᵀ 32 KiB) + O 32 KiB, with the slack and 10 barriers.
  std::int64_t q = 0, k = 0, v = 0, o = 0, other = 0;
  for (const auto& g : L.regions()) {
    switch (g.tensor) {
      case tr::Tensor::Q: q += g.bytes; break;
      case tr::Tensor::K:
        REQUIRE(g.bytes == 224 * 128);
        k += g.bytes;
        break;
      case tr::Tensor::V:
        REQUIRE(g.rows == 128);
        REQUIRE(g.cols == 256);
        REQUIRE(g.cols_read == 224);
        REQUIRE(g.bytes == 32 * 1024);
        v += g.bytes;
        break;
      case tr::Tensor::O: o += g.bytes; break;
      default: other += g.bytes;
    }
  }
  REQUIRE(q == 16 * 1024);
  REQUIRE(k == 2 * 28 * 1024);
  REQUIRE(v == 2 * 32 * 1024);
  REQUIRE(o == 32 * 1024);
  REQUIRE(other == 1024 + 8 * (2 + 4 * 2));
  // The stages hold tiles of 224 keys: while the producer issues K 1, stage 1 holds keys 224–447.
  const auto& lanes = r.lanes_of(0);
  const int prod = lanes[0];
  const Cursor at_k1{Order::Logical, double(r.track_events(prod)[std::size_t(nth(r, prod, tr::Kind::Load, 1, tr::Tensor::K))]) + 0.5};
  const auto v1 = pipeline_at(r, L, lanes[1], at_k1);
  check_stage(v1, 1, StageState::Loading, 1, 224);
  REQUIRE(v1.stages[1].keys == 224);
  // Without its size, the table's entry (Fp8Cfg at d = 128) says two stages.
  tr::Trace no_size = t;
  no_size.kernels[0].smem_bytes = 0;
  no_size.meta.smem_per_cta_bytes = 0;
  L = derive_smem_pipeline(no_size, 0);
  REQUIRE(L.valid);
  REQUIRE(L.from_table);
  REQUIRE(L.stages == 2);
  // Tiles the kernel cannot have (S's wgmma is m64n64, m64n128 or fp8's m64n224) are said so.
  tr::Trace odd = t;
  odd.meta.Bc = 192;
  L = derive_smem_pipeline(odd, 0);
  REQUIRE(!L.valid);
  REQUIRE(L.why_not.find("not step 09's") != std::string::npos);
  odd.meta.variant = "fa3";
  odd.meta.Bc = 224;
  REQUIRE(!derive_smem_pipeline(odd, 0).valid);
}

namespace {

// One CTA of one lane: per key tile S, softmax, then P̃V; `lag`: fa3's order, P̃V j after S j+1
// and softmax j+1 (the last P̃V after the loop).
tr::Trace pv_trace(int tiles, bool lag) {
  tr::Trace t;
  auto& m = t.meta;
  m.step = "09_hopper";
  m.variant = "fa3";
  m.pass = "fwd";
  m.dtype = "bf16";
  m.B = m.H = 1;
  m.N = 64 * tiles;
  m.d = 64;
  m.Br = 64;
  m.Bc = 64;
  tr::Kernel k;
  k.name = "test_kernel";
  k.grid[0] = 1;
  k.block[0] = 128;
  t.kernels.push_back(k);
  t.tracks.push_back(tr::Track{0, 0, 0, 0, 0});
  double now = 1000;
  auto add = [&](tr::Kind kind, tr::Tensor tensor, int row0, int rows, int col0, int cols) {
    test::append_event(t, 0, kind, tensor, row0, rows, col0, cols, now, 100);
  };
  add(tr::Kind::Load, tr::Tensor::Q, 0, 64, 0, 64);
  for (int j = 0; j < tiles; ++j) {
    add(tr::Kind::Load, tr::Tensor::K, 64 * j, 64, 0, 64);
    add(tr::Kind::Load, tr::Tensor::V, 64 * j, 64, 0, 64);
    add(tr::Kind::ComputeS, tr::Tensor::S, 0, 64, 64 * j, 64);
    add(tr::Kind::Softmax, tr::Tensor::P, 0, 64, 64 * j, 64);
    if (!lag || j > 0) {
      add(tr::Kind::AccumulateO, tr::Tensor::O, 0, 64, 0, 64);
      add(tr::Kind::Rescale, tr::Tensor::O, 0, 64, 0, 64);
    }
  }
  if (lag) add(tr::Kind::AccumulateO, tr::Tensor::O, 0, 64, 0, 64);
  add(tr::Kind::Store, tr::Tensor::O, 0, 64, 0, 64);
  return t;
}

// The key tiles (col0 / 64) of the P̃ tiles in registers, and whether S is there.
std::vector<int> p_tiles(const std::vector<ResidentTile>& tiles, bool* s = nullptr) {
  std::vector<int> out;
  if (s) *s = false;
  for (const auto& x : tiles) {
    if (x.where != Residence::Regs) continue;
    if (x.tensor == tr::Tensor::P) out.push_back(x.col0 / 64);
    if (x.tensor == tr::Tensor::S && s) *s = true;
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

// Step 09's fa3 issues QKᵀ j+1 before P̃V j (intra-warpgroup overlap): P̃ j is still live while S
// j+1 and its softmax are computed, until the AccumulateO that uses it. Steps 04–08 record P̃V j
// before S j+1, and there P̃ stays until the next S, as it always has.
TEST_CASE("P̃ stays in registers until its P̃V, in the order the events were recorded", "[viz][replay][lanes]") {
  SECTION("P̃V j after S j+1") {
    const Replay r(pv_trace(3, true));
    REQUIRE(r.pv_lags(0));
    const auto& list = r.track_events(0);
    auto after = [&](int i) { return r.resident_tiles(0, i + 1); };
    bool s = false;
    // After S 1: P̃ 0 waits for its P̃V beside S 1.
    REQUIRE(p_tiles(after(nth(r, 0, tr::Kind::ComputeS, 1)), &s) == std::vector<int>{0});
    REQUIRE(s);
    // After softmax 1: P̃ 0 and P̃ 1, no S.
    REQUIRE(p_tiles(after(nth(r, 0, tr::Kind::Softmax, 1)), &s) == std::vector<int>{0, 1});
    REQUIRE(!s);
    // P̃V 0 uses up P̃ 0.
    REQUIRE(p_tiles(after(nth(r, 0, tr::Kind::AccumulateO, 0))) == std::vector<int>{1});
    // After S 2: P̃ 1 beside S 2; the last P̃V (after the loop) uses up the last P̃.
    REQUIRE(p_tiles(after(nth(r, 0, tr::Kind::ComputeS, 2)), &s) == std::vector<int>{1});
    REQUIRE(s);
    REQUIRE(p_tiles(after(nth(r, 0, tr::Kind::AccumulateO, 2))).empty());
    // The registers count both tiles while both are live (O not yet: P̃V 0 comes next).
    const int k = nth(r, 0, tr::Kind::Softmax, 1);
    REQUIRE(r.regs_after(0, k + 1) == 2 * 64 * 64 * 2);
    REQUIRE(int(list.size()) > k + 1);
  }
  SECTION("P̃V j before S j+1: unchanged") {
    const Replay r(pv_trace(3, false));
    REQUIRE(!r.pv_lags(0));
    bool s = false;
    // P̃ 0 stays after its P̃V until S 1 takes its place.
    REQUIRE(p_tiles(r.resident_tiles(0, nth(r, 0, tr::Kind::AccumulateO, 0) + 1)) == std::vector<int>{0});
    REQUIRE(p_tiles(r.resident_tiles(0, nth(r, 0, tr::Kind::ComputeS, 1) + 1), &s).empty());
    REQUIRE(s);
  }
  SECTION("the recorded traces: step 09's fa3 and fp8 consumers lag, nothing before step 09 does") {
    for (const char* name : {"09_hopper_fa3.fwd.json", "09_hopper_fp8.fwd.json"}) {
      INFO(name);
      const Replay r(tr::read_trace(shipped_trace(name)));
      const auto& lanes = r.lanes_of(0);
      REQUIRE(lanes.size() == 3);
      REQUIRE(!r.pv_lags(lanes[0]));
      REQUIRE(r.pv_lags(lanes[1]));
      REQUIRE(r.pv_lags(lanes[2]));
      // Consumer 0 just after its S 1: S 1 and P̃ 0 in its registers.
      const int c0 = lanes[1];
      const int e = r.track_events(c0)[std::size_t(nth(r, c0, tr::Kind::ComputeS, 1))];
      const auto& ev = r.trace().events[std::size_t(e)];
      bool s = false;
      REQUIRE(p_tiles(r.resident_tiles(c0, nth(r, c0, tr::Kind::ComputeS, 1) + 1), &s) == std::vector<int>{0});
      REQUIRE(s);
      // The same from the CTA's tiles over all its lanes at that moment.
      const auto tiles = r.cta_tiles(lanes[0], {Order::Logical, double(e) + 1.0});
      REQUIRE(std::count_if(tiles.begin(), tiles.end(), [&](const ResidentTile& x) {
                return x.where == Residence::Regs && x.tensor == tr::Tensor::S && x.row0 == ev.row0;
              }) == 1);
    }
    for (const auto& entry : std::filesystem::directory_iterator(std::string(FS_SOURCE_DIR) + "/docs/traces")) {
      const std::string name = entry.path().filename().string();
      if (entry.path().extension() != ".json" || name.rfind("09_", 0) == 0) continue;
      INFO(name);
      const Replay r(tr::read_trace(entry.path().string()));
      for (int k = 0; k < r.track_count(); ++k) REQUIRE(!r.pv_lags(k));
    }
  }
}

// A register card counts its tile as the kernel holds it, not as the tensor is stored: the
// products' accumulators (S = QKᵀ, dP, O, dQ, dK, dV; mma, wgmma) in float32 whatever the dtype;
// P̃ and dS rounded to the input type for the next product, but P̃ in e4m3 in step 09's fp8
// forward (pack_p_fp8), though its trace's dtype is bf16.
TEST_CASE("register cards: accumulators in float32, P̃ in the input type, fp8's P̃ in one byte", "[viz][replay][lanes]") {
  struct Case {
    const char* name;
    int p_bytes;
  };
  for (const Case c : {Case{"09_hopper_fp8.fwd.json", 1}, Case{"09_hopper_fa3.fwd.json", 2},
                       Case{"08_tensor_cores_r4_p_in_regs.fwd.json", 2}, Case{"04_online_softmax_fa2.fwd.json", 4}}) {
    INFO(c.name);
    const Replay r(tr::read_trace(shipped_trace(c.name)));
    // The stored tensors keep the problem's element size (fp8's trace lists S and P in bf16).
    const int stored = r.meta().dtype == "bf16" ? 2 : 4;
    REQUIRE(element_bytes(r.meta(), tr::Tensor::S) == stored);
    REQUIRE(element_bytes(r.meta(), tr::Tensor::P) == stored);
    for (tr::Tensor t : {tr::Tensor::S, tr::Tensor::O}) REQUIRE(register_element_bytes(r.meta(), t) == 4);
    REQUIRE(register_element_bytes(r.meta(), tr::Tensor::P) == c.p_bytes);
    // A computing lane (step 09: consumer 0) just after its first S, its softmax, its P̃V.
    const int track = r.laned(0) ? r.lanes_of(0)[1] : 0;
    auto reg_tile = [&](int done, tr::Tensor t) {
      for (const auto& x : r.resident_tiles(track, done))
        if (x.where == Residence::Regs && x.tensor == t) return x;
      FAIL("no such tile in registers");
      return ResidentTile{};
    };
    const ResidentTile s = reg_tile(nth(r, track, tr::Kind::ComputeS, 0) + 1, tr::Tensor::S);
    REQUIRE(s.bytes == std::int64_t(s.rows) * s.cols * 4);
    const ResidentTile p = reg_tile(nth(r, track, tr::Kind::Softmax, 0) + 1, tr::Tensor::P);
    REQUIRE(p.bytes == std::int64_t(p.rows) * p.cols * c.p_bytes);
    const ResidentTile o = reg_tile(nth(r, track, tr::Kind::AccumulateO, 0) + 1, tr::Tensor::O);
    REQUIRE(o.bytes == std::int64_t(o.rows) * o.cols * 4);
  }
  // A 16-bit backward: dP and dK, dV, dQ accumulate in float32; dS is rounded to bf16.
  {
    const Replay r(tr::read_trace(shipped_trace("08_tensor_cores_key_warps.bwd.json")));
    REQUIRE(r.meta().dtype == "bf16");
    for (tr::Tensor t : {tr::Tensor::dP, tr::Tensor::dQ, tr::Tensor::dK, tr::Tensor::dV})
      REQUIRE(register_element_bytes(r.meta(), t) == 4);
    REQUIRE(register_element_bytes(r.meta(), tr::Tensor::dS) == 2);
    int track = -1;
    for (int k = 0; k < r.track_count() && track < 0; ++k)
      for (int e : r.track_events(k))
        if (r.trace().events[std::size_t(e)].kind == tr::Kind::AccumulateDK) track = k;
    REQUIRE(track >= 0);
    bool dp = false, dk = false;
    for (int done = 1; done <= int(r.track_events(track).size()) && !(dp && dk); ++done)
      for (const auto& x : r.resident_tiles(track, done)) {
        if (x.where != Residence::Regs) continue;
        if (x.tensor == tr::Tensor::dP) dp = x.bytes == std::int64_t(x.rows) * x.cols * 4;
        if (x.tensor == tr::Tensor::dK) dk = x.bytes == std::int64_t(x.rows) * x.cols * 4;
        if (x.tensor == tr::Tensor::dS) REQUIRE(x.bytes == std::int64_t(x.rows) * x.cols * 2);
      }
    REQUIRE(dp);
    REQUIRE(dk);
  }
  // Only the forward of step 09's fp8 variant rounds P̃ to e4m3.
  tr::Meta m;
  m.step = "09_hopper";
  m.variant = "fp8";
  m.pass = "fwd";
  m.dtype = "bf16";
  REQUIRE(register_element_bytes(m, tr::Tensor::P) == 1);
  m.variant = "fa3";
  REQUIRE(register_element_bytes(m, tr::Tensor::P) == 2);
  m.step = "08_tensor_cores";
  m.variant = "fp8";
  REQUIRE(register_element_bytes(m, tr::Tensor::P) == 2);
}

// HBM sizes a tensor as the pass's loads and stores move it. Step 09's fp8 forward lists Q, K and
// V in bf16 (the tensors its quantizer reads, untraced), but its kernel reads the quantizer's
// e4m3 copies (V as Vᵀ), and its loads record 1 byte an element; O and LSE are written as listed.
TEST_CASE("HBM: fp8's Q, K and V are read as e4m3, a byte an element, as its loads record", "[viz][replay][hbm]") {
  const Replay r(tr::read_trace(shipped_trace("09_hopper_fp8.fwd.json")));
  REQUIRE(r.meta().dtype == "bf16");
  REQUIRE(fp8_forward(r.meta()));
  const Coverage cov(r);
  // The bytes of one head's tensor, as the HBM picture labels them under it.
  auto head_bytes = [&](tr::Tensor t) {
    const auto* g = cov.grid(t);
    REQUIRE(g);
    return std::int64_t(g->rows) * g->cols * r.moved_element_bytes(t);
  };
  // What head 0's loads and stores of a tensor move.
  auto moved_in_head0 = [&](tr::Tensor t) {
    std::int64_t bytes = 0;
    for (const auto& e : r.trace().events)
      if ((e.kind == tr::Kind::Load || e.kind == tr::Kind::Store) && e.tensor == t && e.bh == 0) bytes += e.bytes;
    return bytes;
  };
  const std::int64_t Nd = std::int64_t(r.meta().N) * r.meta().d;
  for (tr::Tensor t : {tr::Tensor::Q, tr::Tensor::K, tr::Tensor::V}) {
    INFO(tensor_label(t));
    REQUIRE(element_bytes(r.meta(), t) == 2);  // as listed
    REQUIRE(r.moved_element_bytes(t) == 1);    // as read
    REQUIRE(moved_element_type(r, t) == "e4m3");
    REQUIRE(head_bytes(t) == Nd);
  }
  // Each CTA reads its query tile of Q once: one head's Q, in e4m3.
  REQUIRE(moved_in_head0(tr::Tensor::Q) == head_bytes(tr::Tensor::Q));
  // O in bf16 and LSE in float32, written once each.
  REQUIRE(r.moved_element_bytes(tr::Tensor::O) == 2);
  REQUIRE(r.moved_element_bytes(tr::Tensor::LSE) == 4);
  for (tr::Tensor t : {tr::Tensor::O, tr::Tensor::LSE}) {
    INFO(tensor_label(t));
    REQUIRE(moved_element_type(r, t).empty());
    REQUIRE(moved_in_head0(t) == head_bytes(t));
  }

  // fa3's forward moves every tensor as listed: Q, K, V and O in bf16.
  const Replay fa3(tr::read_trace(shipped_trace("09_hopper_fa3.fwd.json")));
  REQUIRE_FALSE(fp8_forward(fa3.meta()));
  for (tr::Tensor t : {tr::Tensor::Q, tr::Tensor::K, tr::Tensor::V, tr::Tensor::O}) {
    INFO(tensor_label(t));
    REQUIRE(fa3.moved_element_bytes(t) == 2);
    REQUIRE(moved_element_type(fa3, t).empty());
  }
  REQUIRE(fa3.moved_element_bytes(tr::Tensor::LSE) == 4);

  SECTION("loads that disagree on the element size leave the listed one") {
    tr::Trace t = tr::read_trace(shipped_trace("09_hopper_fp8.fwd.json"));
    for (auto& e : t.events)
      if (e.kind == tr::Kind::Load && e.tensor == tr::Tensor::K) {
        e.bytes *= 2;
        break;
      }
    const Replay odd(std::move(t));
    REQUIRE(odd.moved_element_bytes(tr::Tensor::K) == 2);
    REQUIRE(moved_element_type(odd, tr::Tensor::K).empty());
    REQUIRE(odd.moved_element_bytes(tr::Tensor::Q) == 1);
  }
  SECTION("1-byte loads outside step 09's fp8 forward are not named e4m3") {
    tr::Trace t = tr::read_trace(shipped_trace("09_hopper_fp8.fwd.json"));
    t.meta.variant = "fa3";
    const Replay other(std::move(t));
    REQUIRE(other.moved_element_bytes(tr::Tensor::Q) == 1);
    REQUIRE(moved_element_type(other, tr::Tensor::Q) == "1-byte");
  }
}
