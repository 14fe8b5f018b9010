// The device-record decoder on synthetic record buffers: tracks only for CTAs (and their lanes)
// that recorded, events chained from each one's start, kernels placed at their launch ranges, seq
// in logical order, full slices counted as dropped, and records device.cuh cannot write refused.
#include <catch2/catch.hpp>

#include <cmath>
#include <utility>
#include <vector>

#include "common/trace/decode.hpp"
#include "common/trace/trace_io.hpp"

namespace {

using fs::trace::CtaHeader;
using fs::trace::DeviceRecord;
using fs::trace::Kind;
using fs::trace::KernelCapture;
using fs::trace::Tensor;

DeviceRecord record(std::uint64_t t_end, Kind kind, Tensor tensor, int row0, int rows, std::uint64_t bytes,
                    bool cached = false) {
  DeviceRecord r{};
  r.t_end = t_end;
  r.bytes = static_cast<std::uint32_t>(bytes);
  r.bytes_hi = static_cast<std::uint8_t>(bytes >> 32);
  r.kind = static_cast<std::uint8_t>(kind);
  r.tensor = static_cast<std::uint8_t>(tensor);
  r.flags = cached ? fs::trace::kRecordCached : 0;
  r.row0 = row0;
  r.rows = rows;
  r.cols = 64;
  r.sample_row = -1;
  r.m = r.l = NAN;
  return r;
}

// A grid of 3 CTAs with slices of 4 records: CTA 0 records 3 events, CTA 1 records 6 (two
// past its slice), CTA 2 none. GPU clock around 5e9 ns, host launch range [1000, 9000].
KernelCapture capture() {
  KernelCapture kc;
  kc.kernel.name = "flash_kernel";
  kc.kernel.grid[0] = 3;
  kc.kernel.block[0] = 128;
  kc.launch_begin_ns = 1000;
  kc.launch_end_ns = 9000;
  kc.cap = 4;
  kc.headers = {CtaHeader{3, 7, 5'000'000'100}, CtaHeader{6, 2, 5'000'000'000}, CtaHeader{0, 0, 0}};
  kc.records.resize(12);
  kc.records[0] = record(5'000'000'164, Kind::Load, Tensor::Q, 0, 64, 16384);
  kc.records[1] = record(5'000'000'196, Kind::Load, Tensor::K, 0, 64, 16384);
  kc.records[2] = record(5'000'000'500, Kind::ComputeS, Tensor::S, 0, 64, 0);
  kc.records[4] = record(5'000'000'032, Kind::Load, Tensor::Q, 64, 64, 16384);
  kc.records[5] = record(5'000'000'032, Kind::Load, Tensor::K, 0, 64, 16384, true);
  kc.records[6] = record(5'000'000'010, Kind::ComputeS, Tensor::S, 64, 64, 0);  // runs backwards: clamped
  kc.records[7] = record(5'000'000'400, Kind::Store, Tensor::O, 64, 64, (std::uint64_t(1) << 33) + 5);
  return kc;
}

}  // namespace

TEST_CASE("records decode into one track per CTA that recorded, chained from its start", "[trace][decode]") {
  fs::trace::Trace t;
  fs::trace::decode_kernels({capture()}, 400, t);
  REQUIRE(t.kernels.size() == 1);
  REQUIRE(t.kernels[0].ts_ns == 600);   // launch range relative to t0 = 400
  REQUIRE(t.kernels[0].dur_ns == 8000);
  REQUIRE(t.tracks.size() == 2);        // CTA 2 recorded nothing
  REQUIRE((t.tracks[0].cta == 0 && t.tracks[0].sm == 7 && t.tracks[0].dropped == 0));
  REQUIRE((t.tracks[1].cta == 1 && t.tracks[1].sm == 2 && t.tracks[1].dropped == 2));
  REQUIRE(t.meta.events_dropped == 2);
  REQUIRE(t.events.size() == 7);

  // The kernel's earliest GPU time (CTA 1's start, 5e9) lands on its launch range's start.
  std::vector<const fs::trace::Event*> cta0, cta1;
  for (const auto& e : t.events) (e.track == 0 ? cta0 : cta1).push_back(&e);
  REQUIRE(cta1.front()->ts_ns == 600);
  REQUIRE(cta1.front()->dur_ns == 32);
  REQUIRE(cta0.front()->ts_ns == 700);  // CTA 0 started 100 ns later
  REQUIRE(cta0.front()->dur_ns == 64);
  for (const auto* track : {&cta0, &cta1})
    for (std::size_t i = 1; i < track->size(); ++i)
      REQUIRE((*track)[i]->ts_ns == (*track)[i - 1]->ts_ns + (*track)[i - 1]->dur_ns);
  REQUIRE(cta1[2]->dur_ns == 0);        // the record whose time ran backwards
  REQUIRE(cta1[3]->bytes == (std::int64_t(1) << 33) + 5);
  REQUIRE(cta1[1]->cached);
  REQUIRE(std::isnan(cta1[1]->m));
}

TEST_CASE("seq follows the logical order: kernel, then begin time, then CTA", "[trace][decode]") {
  KernelCapture second = capture();
  second.kernel.name = "second_kernel";
  second.launch_begin_ns = 10000;
  second.launch_end_ns = 12000;
  fs::trace::Trace t;
  fs::trace::decode_kernels({capture(), second}, 0, t);
  REQUIRE(t.kernels.size() == 2);
  REQUIRE(t.events.size() == 14);
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    REQUIRE(t.events[i].seq == static_cast<std::int64_t>(i));
    if (i == 0) continue;
    const auto &a = t.events[i - 1], &b = t.events[i];
    const int ka = t.tracks[a.track].kernel, kb = t.tracks[b.track].kernel;
    REQUIRE(ka <= kb);
    if (ka == kb) REQUIRE((a.ts_ns < b.ts_ns || (a.ts_ns == b.ts_ns && a.track <= b.track)));
  }
  REQUIRE(t.tracks[t.events.back().track].kernel == 1);
}

TEST_CASE("records device.cuh cannot write are refused", "[trace][decode]") {
  fs::trace::Trace t;
  KernelCapture bad = capture();
  bad.records[1].kind = 200;
  REQUIRE_THROWS_WITH(fs::trace::decode_kernels({bad}, 0, t),
                      Catch::Contains("kernel 0 (flash_kernel) CTA 0 record 1: kind 200"));
  bad = capture();
  bad.records.pop_back();
  REQUIRE_THROWS_WITH(fs::trace::decode_kernels({bad}, 0, t), Catch::Contains("11 records for 3 CTAs of 4"));
  bad = capture();
  bad.headers.pop_back();
  REQUIRE_THROWS_AS(fs::trace::decode_kernels({bad}, 0, t), fs::trace::TraceError);
  bad = capture();  // a round past kMaxRounds (the flags' five bits could say 30)
  bad.records[1].flags = static_cast<std::uint8_t>((fs::trace::kMaxRounds + 1) << fs::trace::kRecordRoundShift);
  REQUIRE_THROWS_WITH(fs::trace::decode_kernels({bad}, 0, t), Catch::Contains("CTA 0 record 1: round 16, past the largest"));
}

TEST_CASE("a record's round comes back as the event's, none as -1", "[trace][decode][smyrf]") {
  KernelCapture kc = capture();
  kc.records[1].flags = static_cast<std::uint8_t>((3 + 1) << fs::trace::kRecordRoundShift) | fs::trace::kRecordCached;
  fs::trace::Trace t;
  fs::trace::decode_kernels({kc}, 0, t);
  int with_round = 0;
  for (const auto& e : t.events) {
    if (e.round == 3) {
      ++with_round;
      REQUIRE(e.cached);
      REQUIRE(e.tensor == Tensor::K);
    } else {
      REQUIRE(e.round == -1);
    }
  }
  REQUIRE(with_round == 1);
}

TEST_CASE("a slice that overflowed keeps its first cap records", "[trace][decode]") {
  KernelCapture kc = capture();
  kc.headers[1].count = 1000000;
  fs::trace::Trace t;
  fs::trace::decode_kernels({kc}, 0, t);
  REQUIRE(t.tracks[1].dropped == 1000000 - 4);
  REQUIRE(t.meta.events_dropped == 1000000 - 4);
  REQUIRE(t.events.size() == 7);
}

// Issue 14 (fuzz_decode): record buffers that no traced kernel writes but the decoder took, and
// then wrote into traces the reader refuses, or decoded with signed overflow.
TEST_CASE("the decoder refuses what it could only turn into an unreadable trace", "[trace][decode]") {
  fs::trace::Trace t;
  auto refused = [&](const KernelCapture& kc, std::int64_t t0, const std::string& what) {
    INFO(what);
    REQUIRE_THROWS_WITH(fs::trace::decode_kernels({kc}, t0, t), Catch::Contains(what));
  };
  KernelCapture bad = capture();
  bad.kernel.grid[0] = -1;  // with grid[1] = -3 the unsigned product was 3: the headers' count
  bad.kernel.grid[1] = -3;
  refused(bad, 0, "a grid of -1 × -3 × 1 CTAs");
  bad = capture();
  bad.records[1].rows = -4;
  refused(bad, 0, "record 1: a negative head, row or column");
  bad = capture();
  bad.headers[0].sm = 70000;
  refused(bad, 0, "CTA 0: SM 70000 is not an SM of any GPU");
  bad = capture();
  bad.records[2].t_end = 5'000'000'000 + (std::uint64_t(1) << 62);  // a torn timestamp
  refused(bad, 0, "record 2: a time more than 11.6 days");
  bad = capture();
  bad.launch_begin_ns = INT64_MAX;  // launch_begin - t0 overflowed int64
  refused(bad, INT64_MIN, "launched more than 11.6 days");
  bad = capture();
  bad.cap = 0;  // records for slices of no records
  refused(bad, 0, "12 records for 3 CTAs of 0");
  // And what it does decode, the writer writes and the reader reads back.
  t = {};
  t.meta.pass = "fwd";
  t.meta.B = t.meta.H = t.meta.d = 1;
  t.meta.N = 128;
  fs::trace::decode_kernels({capture()}, 0, t);
  REQUIRE_NOTHROW(fs::trace::parse_trace(fs::trace::trace_to_json(t)));
}

namespace {

// A kernel in lanes (record.hpp): 2 CTAs × 3 lanes, headers [cta][lane], each lane a slice of 4
// records. CTA 0: the producer loads and waits, consumer 0 computes, consumer 1 recorded nothing;
// CTA 1: all three lanes, its consumer 1 the kernel's earliest start.
KernelCapture laned_capture() {
  KernelCapture kc;
  kc.kernel.name = "hopper_forward_kernel";
  kc.kernel.grid[0] = 2;
  kc.kernel.block[0] = 384;
  kc.kernel.lanes = 3;
  kc.kernel.lane_names = {"producer", "consumer 0", "consumer 1"};
  kc.launch_begin_ns = 1000;
  kc.launch_end_ns = 9000;
  kc.cap = 4;
  kc.headers = {CtaHeader{3, 5, 5'000'000'100}, CtaHeader{2, 5, 5'000'000'150}, CtaHeader{0, 0, 0},
                CtaHeader{1, 6, 5'000'000'050}, CtaHeader{1, 6, 5'000'000'080}, CtaHeader{2, 6, 5'000'000'000}};
  kc.records.resize(24);
  kc.records[0] = record(5'000'000'200, Kind::Load, Tensor::K, 0, 64, 16384);
  kc.records[1] = record(5'000'000'500, Kind::Wait, Tensor::None, 0, 64, 0);
  kc.records[2] = record(5'000'000'600, Kind::Load, Tensor::V, 0, 64, 16384);
  kc.records[4] = record(5'000'000'250, Kind::ComputeS, Tensor::S, 0, 64, 0);
  kc.records[5] = record(5'000'000'300, Kind::Softmax, Tensor::P, 0, 64, 0);
  kc.records[12] = record(5'000'000'090, Kind::Load, Tensor::Q, 128, 64, 16384);
  kc.records[16] = record(5'000'000'400, Kind::Wait, Tensor::None, 128, 64, 0);
  kc.records[20] = record(5'000'000'032, Kind::Wait, Tensor::None, 0, 64, 0);
  kc.records[21] = record(5'000'000'064, Kind::ComputeS, Tensor::S, 192, 64, 0);
  return kc;
}

}  // namespace

TEST_CASE("a kernel in lanes decodes into one track per lane that recorded, each chained from its own start",
          "[trace][decode][lanes]") {
  fs::trace::Trace t;
  fs::trace::decode_kernels({laned_capture()}, 0, t);
  REQUIRE(t.kernels.size() == 1);
  REQUIRE(t.kernels[0].lanes == 3);
  REQUIRE(t.kernels[0].lane_names[2] == "consumer 1");
  // CTA 0's consumer 1 recorded nothing: five tracks, in (CTA, lane) order.
  REQUIRE(t.tracks.size() == 5);
  const std::pair<int, int> cta_lane[] = {{0, 0}, {0, 1}, {1, 0}, {1, 1}, {1, 2}};
  for (std::size_t i = 0; i < 5; ++i) {
    INFO("track " << i);
    REQUIRE((t.tracks[i].cta == cta_lane[i].first && t.tracks[i].lane == cta_lane[i].second));
    REQUIRE(t.tracks[i].sm == (cta_lane[i].first == 0 ? 5 : 6));
  }
  REQUIRE(t.events.size() == 9);
  std::vector<std::vector<const fs::trace::Event*>> by_track(5);
  for (const auto& e : t.events) by_track[std::size_t(e.track)].push_back(&e);
  // The kernel's earliest start over all lanes (CTA 1's consumer 1, 5e9) lands on the launch.
  REQUIRE(by_track[4].front()->ts_ns == 1000);
  REQUIRE(by_track[4].front()->kind == Kind::Wait);
  // Each lane's first event begins at its own header's start, the rest where the lane's last ended.
  REQUIRE(by_track[0].front()->ts_ns == 1100);
  REQUIRE(by_track[1].front()->ts_ns == 1150);
  REQUIRE(by_track[1].front()->dur_ns == 100);
  REQUIRE(by_track[2].front()->ts_ns == 1050);
  REQUIRE(by_track[3].front()->ts_ns == 1080);
  for (const auto& track : by_track)
    for (std::size_t i = 1; i < track.size(); ++i) REQUIRE(track[i]->ts_ns == track[i - 1]->ts_ns + track[i - 1]->dur_ns);
  REQUIRE((by_track[0][1]->kind == Kind::Wait && by_track[0][1]->dur_ns == 300 && by_track[0][1]->bytes == 0));
}

TEST_CASE("a kernel in lanes counts drops per lane and names the lane of a bad record", "[trace][decode][lanes]") {
  KernelCapture kc = laned_capture();
  kc.headers[4].count = 10;  // CTA 1's consumer 0 counted 10 events: 6 past its slice of 4
  kc.records[17] = record(5'000'000'500, Kind::ComputeS, Tensor::S, 128, 64, 0);
  kc.records[18] = record(5'000'000'600, Kind::Softmax, Tensor::P, 128, 64, 0);
  kc.records[19] = record(5'000'000'700, Kind::AccumulateO, Tensor::O, 128, 64, 0);
  fs::trace::Trace t;
  fs::trace::decode_kernels({kc}, 0, t);
  REQUIRE(t.tracks[3].dropped == 6);
  REQUIRE(t.tracks[2].dropped == 0);
  REQUIRE(t.meta.events_dropped == 6);

  kc = laned_capture();
  kc.records[21].kind = 200;
  REQUIRE_THROWS_WITH(fs::trace::decode_kernels({kc}, 0, t),
                      Catch::Contains("kernel 0 (hopper_forward_kernel) CTA 1 lane 2 record 1: kind 200"));
  kc = laned_capture();
  kc.headers.pop_back();
  REQUIRE_THROWS_WITH(fs::trace::decode_kernels({kc}, 0, t), Catch::Contains("5 headers for a grid of 2 × 1 × 1 CTAs × 3 lanes"));
  kc = laned_capture();
  kc.kernel.lane_names.pop_back();
  REQUIRE_THROWS_WITH(fs::trace::decode_kernels({kc}, 0, t), Catch::Contains("2 lane names for 3 lanes"));
  kc = laned_capture();
  kc.kernel.lanes = 0;
  REQUIRE_THROWS_WITH(fs::trace::decode_kernels({kc}, 0, t), Catch::Contains("0 lanes per CTA (1 to 32)"));
}
