// The validator: a trace that adds up passes; each way of not adding up is named in one clear
// message; and no corrupted input — bytes of the file or fields of the model — crashes the
// reader, the validator or the writer.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <iterator>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>

#include "common/trace/trace_io.hpp"
#include "common/trace/validate.hpp"
#include "tests/trace_fixtures.hpp"

namespace {

using fs::trace::Event;
using fs::trace::Kind;
using fs::trace::Tensor;
using fs::trace::Trace;
using json = nlohmann::json;

std::string joined(const fs::trace::ValidationReport& r) {
  std::string s;
  for (const auto& e : r.errors) s += e + "\n";
  return s;
}

// The validator's errors for `t`; fails the test when it finds none.
std::string errors_of(const Trace& t) {
  const auto r = fs::trace::validate(t);
  INFO(joined(r));
  REQUIRE(!r.ok());
  return joined(r);
}

Event& find_event(Trace& t, Kind kind, Tensor tensor, int skip = 0) {
  for (auto& e : t.events)
    if (e.kind == kind && e.tensor == tensor && skip-- == 0) return e;
  FAIL("no such event in the fixture");
  return t.events.front();
}

std::string temp_path(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "flashsteps_test_trace_validate";
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

}  // namespace

TEST_CASE("a trace that adds up passes, and its summary says so", "[trace][validate]") {
  const auto r = fs::trace::validate(fs::test::good_trace());
  INFO(joined(r));
  REQUIRE(r.ok());
  REQUIRE(r.warnings.empty());
  REQUIRE(r.events == 16);
  REQUIRE(r.tracks == 4);
  REQUIRE(r.read_bytes == r.model_read_bytes);
  REQUIRE(r.write_bytes == r.model_write_bytes);
  REQUIRE(r.cached_bytes == 32);
  REQUIRE_THAT(r.summary(), Catch::Contains("16 events on 4 tracks (3 kernels)") &&
                                Catch::Contains("read 224 B = model") && Catch::Contains("written 176 B = model"));
}

TEST_CASE("a trace in lanes passes, and each way its lanes fail to add up is named", "[trace][validate][lanes]") {
  const auto r = fs::trace::validate(fs::test::laned_trace());
  INFO(joined(r));
  REQUIRE(r.ok());
  REQUIRE(r.warnings.empty());
  REQUIRE(r.tracks == 6);
  SECTION("a lane past the kernel's") {
    Trace t = fs::test::laned_trace();
    t.tracks[2].lane = 3;
    REQUIRE_THAT(errors_of(t), Catch::Contains("track 2 (hopper_forward_kernel CTA 0 · lane 3): lane 3 is not one of the kernel's 3"));
  }
  SECTION("two tracks of one lane") {
    Trace t = fs::test::laned_trace();
    t.tracks[2].lane = 1;
    REQUIRE_THAT(errors_of(t), Catch::Contains("(hopper_forward_kernel CTA 0 · consumer 0) repeats a (kernel, CTA, lane)"));
  }
  SECTION("lane names of another count, and lanes below 1") {
    Trace t = fs::test::laned_trace();
    t.kernels[0].lane_names.pop_back();
    REQUIRE_THAT(errors_of(t), Catch::Contains("names 2 lanes, but has 3 (lane_names is empty or one per lane)"));
    t.kernels[0].lanes = 0;
    REQUIRE_THAT(errors_of(t), Catch::Contains("has 0 lanes per CTA (1 to 32)"));
  }
  SECTION("a wait that moves bytes, or names a tensor") {
    Trace t = fs::test::laned_trace();
    find_event(t, Kind::Wait, Tensor::None).bytes = 64;
    REQUIRE_THAT(errors_of(t), Catch::Contains("event seq 2 (wait) is not a load or store but moves 64 bytes"));
    t = fs::test::laned_trace();
    find_event(t, Kind::Wait, Tensor::None).tensor = Tensor::K;
    REQUIRE_THAT(errors_of(t), Catch::Contains("event seq 2 (wait K) is a wait but names a tensor"));
  }
  SECTION("lanes keep every rule of a track: a lane's events never overlap") {
    Trace t = fs::test::laned_trace();
    find_event(t, Kind::ComputeS, Tensor::S).ts_ns -= 50;
    REQUIRE_THAT(errors_of(t), Catch::Contains("(hopper_forward_kernel CTA 0 · consumer 0): event seq 5 (compute_s S) begins at"));
  }
}

TEST_CASE("the validator names each way a trace fails to add up", "[trace][validate]") {
  SECTION("events overlapping on one track") {
    Trace t = fs::test::good_trace();
    t.events[1].ts_ns -= 10;
    REQUIRE_THAT(errors_of(t), Catch::Contains("track 0 (scores_kernel CTA 0): event seq 1 (load K) begins at"));
  }
  SECTION("a re-read not marked cached: bytes exceed the IO model") {
    Trace t = fs::test::good_trace();
    find_event(t, Kind::Load, Tensor::V, 1).cached = false;
    REQUIRE_THAT(errors_of(t), Catch::Contains("non-cached loads move 256 bytes, but the IO model reads 224") &&
                                   Catch::Contains("a re-read not marked cached?"));
  }
  SECTION("a store missing: bytes short of the IO model, and an output not covered") {
    Trace t = fs::test::good_trace();
    Event& st = find_event(t, Kind::Store, Tensor::O, 1);
    st.kind = Kind::AccumulateO;
    st.bytes = 0;
    const std::string err = errors_of(t);
    REQUIRE_THAT(err, Catch::Contains("stores move 160 bytes, but the IO model writes 176"));
    REQUIRE_THAT(err, Catch::Contains("O: 4 of 8 elements are stored by no event (the first: head 0, row 2, col 0)"));
  }
  SECTION("seq with a gap") {
    Trace t = fs::test::good_trace();
    for (std::size_t i = 5; i < t.events.size(); ++i) t.events[i].seq += 1;
    REQUIRE_THAT(errors_of(t), Catch::Contains("seq must run 0, 1, 2, ... without gaps, but event 5 has seq 6"));
  }
  SECTION("a tile outside its tensor") {
    Trace t = fs::test::good_trace();
    find_event(t, Kind::Load, Tensor::K).rows = 5;
    REQUIRE_THAT(errors_of(t), Catch::Contains("event seq 1 (load K): head 0, rows [0, 5), cols [0, 2) is outside K (1, 1, 4, 2)"));
    t = fs::test::good_trace();
    find_event(t, Kind::Store, Tensor::S).bh = 1;
    REQUIRE_THAT(errors_of(t), Catch::Contains("(store S): head 1"));
  }
  SECTION("a load of a tensor the trace does not list") {
    Trace t = fs::test::good_trace();
    t.meta.tensors.erase(t.meta.tensors.begin() + 1);  // K
    REQUIRE_THAT(errors_of(t), Catch::Contains("event seq 1 (load K) names K, which otherData.tensors does not list"));
  }
  SECTION("a load that names no tensor") {
    Trace t = fs::test::good_trace();
    find_event(t, Kind::Load, Tensor::K).tensor = Tensor::None;
    REQUIRE_THAT(errors_of(t), Catch::Contains("moves bytes but names no tensor"));
  }
  SECTION("dropped events: the trace is incomplete") {
    Trace t = fs::test::good_trace();
    t.tracks[2].dropped = 3;
    t.meta.events_dropped = 3;
    REQUIRE_THAT(errors_of(t), Catch::Contains("3 events were dropped because CTA slices of 64 records were full"));
    t.meta.events_dropped = 0;
    REQUIRE_THAT(errors_of(t), Catch::Contains("dropped counts add up to 3, but events_dropped is 0"));
  }
  SECTION("host ranges that overlap without nesting") {
    Trace t = fs::test::good_trace();
    t.ranges[4].dur_ns = 9000;  // softmax_kernel now ends after "forward"
    REQUIRE_THAT(errors_of(t), Catch::Contains("host range 'softmax_kernel' starts inside 'forward' but ends after it"));
  }
  SECTION("a compute event that moves bytes") {
    Trace t = fs::test::good_trace();
    find_event(t, Kind::ComputeS, Tensor::S).bytes = 8;
    REQUIRE_THAT(errors_of(t), Catch::Contains("is not a load or store but moves 8 bytes"));
  }
  SECTION("a load moving more than its tile holds") {
    Trace t = fs::test::good_trace();
    find_event(t, Kind::Load, Tensor::Q).bytes = 1000;
    REQUIRE_THAT(errors_of(t), Catch::Contains("moves 1000 bytes, more than its 4×2 tile of 4-byte elements holds"));
  }
  SECTION("a tensor of the wrong shape, and a CTA outside its grid") {
    Trace t = fs::test::good_trace();
    t.meta.tensors[0].shape = {1, 1, 4, 3};
    t.tracks[3].cta = 2;
    const std::string err = errors_of(t);
    REQUIRE_THAT(err, Catch::Contains("tensor Q has shape (1, 1, 4, 3), but the layout for this shape is (1, 1, 4, 2)"));
    REQUIRE_THAT(err, Catch::Contains("CTA 2 is outside the grid of 2"));
  }
  SECTION("an unknown schema version") {
    Trace t = fs::test::good_trace();
    t.meta.schema_version = 9;
    REQUIRE_THAT(errors_of(t), Catch::Contains("schema version 9 is not known"));
  }
}

TEST_CASE("a clustered trace is checked through its orders", "[trace][validate][smyrf]") {
  SECTION("as recorded, it adds up with the untraced sort, and says so") {
    const auto r = fs::trace::validate(fs::test::clustered_trace());
    INFO(joined(r));
    REQUIRE(r.ok());
    REQUIRE(r.untraced_read_bytes == 64);
    REQUIRE_THAT(r.summary(), Catch::Contains("+ 64 B untraced = model") && Catch::Contains("+ 32 B untraced = model"));
  }
  SECTION("without the untraced sort its bytes fall short of the model") {
    Trace t = fs::test::clustered_trace();
    t.meta.untraced.clear();
    REQUIRE_THAT(errors_of(t), Catch::Contains("but the IO model reads"));
  }
  SECTION("an order that is no permutation") {
    Trace t = fs::test::clustered_trace();
    t.meta.clusters.k_order[1] = 1;  // (1, 1, 0, 2)
    REQUIRE_THAT(errors_of(t), Catch::Contains("k_order of head 0, round 0 is not a permutation of the rows"));
  }
  SECTION("a round the clustering does not have, or no clustering at all") {
    Trace t = fs::test::clustered_trace();
    find_event(t, Kind::Load, Tensor::Q).round = 1;
    REQUIRE_THAT(errors_of(t), Catch::Contains("is in round 1, but the trace's clustering has 1 rounds"));
    t = fs::test::clustered_trace();
    t.meta.clusters = {};
    REQUIRE_THAT(errors_of(t), Catch::Contains("but the trace's clustering has 0 rounds"));
  }
  SECTION("the orders' own rows are slots already") {
    Trace t = fs::test::clustered_trace();
    find_event(t, Kind::Load, Tensor::Order).round = 0;
    REQUIRE_THAT(errors_of(t), Catch::Contains("the rows of order are slots already"));
  }
  SECTION("coverage follows the order: the second cluster's slots 2, 3 are rows 3 and 1") {
    Trace t = fs::test::clustered_trace();
    Event& store = find_event(t, Kind::Store, Tensor::O, 1);  // the second CTA's O
    store.rows = 1;                                           // slot 2 only: row 3 stored, row 1 not
    store.bytes = 8;
    t.meta.io_write_bytes -= 8;
    REQUIRE_THAT(errors_of(t), Catch::Contains("O: 2 of 8 elements are stored by no event (the first: head 0, row 1, col 0)"));
  }
  SECTION("read as rows, the same stores would leave rows out: they do not, through the orders") {
    Trace t = fs::test::clustered_trace();
    for (auto& e : t.events) e.round = -1;  // slots taken for rows: still a cover of 0..3
    REQUIRE(fs::trace::validate(t).ok());
    find_event(t, Kind::Store, Tensor::LSE, 1).round = 0;  // slots 2, 3 are rows 3, 1: row 2 and 3 ...
    find_event(t, Kind::Store, Tensor::LSE, 0).round = -1;  // ... then rows 0, 1 as rows: row 2 missing
    REQUIRE_THAT(errors_of(t), Catch::Contains("LSE: 1 of 4 elements are stored by no event (the first: head 0, row 2"));
  }
}

TEST_CASE("a decoding trace is checked against its KV cache", "[trace][validate][decode]") {
  SECTION("as recorded, it adds up: the cache's shapes, its slots, the model's bytes") {
    const auto r = fs::trace::validate(fs::test::decode_trace());
    INFO(joined(r));
    REQUIRE(r.ok());
    REQUIRE(r.read_bytes == 184);
    REQUIRE(r.write_bytes == 128);
  }
  SECTION("K and V are shaped by the cache's slots, S by the group's rows and the room") {
    const Trace t = fs::test::decode_trace();
    REQUIRE(fs::trace::tensor_shape(Tensor::K, t.meta) == std::vector<std::int64_t>{1, 1, 10, 2});
    REQUIRE(fs::trace::tensor_shape(Tensor::S, t.meta) == std::vector<std::int64_t>{2, 1, 2, 4});
    REQUIRE(fs::trace::tensor_shape(Tensor::OPart, t.meta) == std::vector<std::int64_t>{2, 2, 2, 2});
    REQUIRE(fs::trace::tensor_shape(Tensor::LSE, t.meta) == std::vector<std::int64_t>{2, 2, 1});
  }
  SECTION("a load of a page no sequence's keys are on (page 2: slots 4, 5)") {
    Trace t = fs::test::decode_trace();
    find_event(t, Kind::Load, Tensor::V, 1).row0 = 4;  // sequence 0's key 2 read from slot 4, not 2
    REQUIRE_THAT(errors_of(t), Catch::Contains("touches slot 4, which holds no sequence's key"));
  }
  SECTION("a load past a sequence's keys: slot 3 is page 1's second row, but sequence 0 has 3 keys") {
    Trace t = fs::test::decode_trace();
    Event& k = find_event(t, Kind::Load, Tensor::K, 1);
    k.rows = 2;
    k.bytes = 8;
    REQUIRE_THAT(errors_of(t), Catch::Contains("touches slot 3, which holds no sequence's key"));
  }
  SECTION("a cache row outside the cache") {
    Trace t = fs::test::decode_trace();
    find_event(t, Kind::Load, Tensor::K, 3).row0 = 9;  // rows 9, 10 of 10
    REQUIRE_THAT(errors_of(t), Catch::Contains("is outside K (1, 1, 10, 2)"));
  }
  SECTION("a block table entry outside the cache, lengths past the room, a table too short") {
    Trace t = fs::test::decode_trace();
    t.meta.cache.block_table[3] = 5;
    REQUIRE_THAT(errors_of(t), Catch::Contains("the block table names page 5, outside the cache"));
    t = fs::test::decode_trace();
    t.meta.cache.lengths[1] = 5;
    REQUIRE_THAT(errors_of(t), Catch::Contains("sequence 1 holds 5 keys, outside [0, seqlen_cache]"));
    t = fs::test::decode_trace();
    t.meta.cache.block_table = {3, 1};
    REQUIRE_THAT(errors_of(t), Catch::Contains("the block table's rows hold fewer than seqlen_cache keys"));
  }
  SECTION("a partial the combine does not read: the bytes fall short of the model") {
    Trace t = fs::test::decode_trace();
    find_event(t, Kind::Load, Tensor::OPart, 2).kind = Kind::AccumulateO;
    find_event(t, Kind::AccumulateO, Tensor::OPart).bytes = 0;
    REQUIRE_THAT(errors_of(t), Catch::Contains("non-cached loads move 168 bytes, but the IO model reads 184"));
  }
  SECTION("the cache's fields survive the file: written, read back, still valid") {
    const Trace t = fs::test::decode_trace();
    const Trace back = fs::trace::parse_trace(fs::trace::trace_to_json(t));
    REQUIRE(back.meta.cache.on());
    REQUIRE(back.meta.cache.block_table == t.meta.cache.block_table);
    REQUIRE(back.meta.cache.lengths == t.meta.cache.lengths);
    REQUIRE(back.meta.cache.splits == 2);
    REQUIRE(back.meta.cache.page_size == 2);
    REQUIRE(fs::trace::validate(back).ok());
  }
  SECTION("the reader refuses a block table that names a page past the slots") {
    Trace t = fs::test::decode_trace();
    t.meta.cache.block_table[0] = 7;
    REQUIRE_THROWS_WITH(fs::trace::parse_trace(fs::trace::trace_to_json(t)), Catch::Contains("block_table"));
  }
}

TEST_CASE("messages of one kind are capped and counted", "[trace][validate]") {
  Trace t = fs::test::good_trace();
  for (auto& e : t.events) e.bh = 7;
  const auto r = fs::trace::validate(t);
  const auto ranges = std::count_if(r.errors.begin(), r.errors.end(),
                                    [](const std::string& e) { return e.find("is outside") != std::string::npos; });
  REQUIRE(ranges == 5);
  REQUIRE_THAT(joined(r), Catch::Contains("... and 11 more range problems"));
}

TEST_CASE("events outside their kernel's launch range are a warning, not an error", "[trace][validate]") {
  Trace t = fs::test::good_trace();
  t.kernels[2].ts_ns = 0;  // pv_kernel's events begin 5.3 µs after it ended
  t.kernels[2].dur_ns = 10;
  const auto r = fs::trace::validate(t);
  REQUIRE(r.ok());
  REQUIRE_THAT(r.warnings.front(), Catch::Contains("lies outside its kernel's launch range"));
}

TEST_CASE("validate_file reports what the reader refuses as its one error", "[trace][validate]") {
  const std::string path = temp_path("bad.json");
  std::ofstream(path) << fs::trace::trace_to_json(fs::test::good_trace()).substr(0, 100);
  const auto r = fs::trace::validate_file(path);
  REQUIRE(r.errors.size() == 1);
  REQUIRE_THAT(r.errors[0], Catch::StartsWith(path + ": truncated JSON"));
  const std::string good = temp_path("good.json");
  fs::trace::write_trace(fs::test::good_trace(), good);
  REQUIRE(fs::trace::validate_file(good).ok());
}

// A mutated file must give a TraceError or a trace — any other exception, or a crash, fails.
TEST_CASE("mutated trace files never crash the reader or the validator", "[trace][validate][fuzz]") {
  const std::string text = fs::trace::trace_to_json(fs::test::good_trace());
  std::mt19937_64 rng(20260101);
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  const char noise[] = "{}[]\",:0123456789-.eE+ truefalsnul\\x\n";
  int refused = 0, accepted = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s = text;
    const int edits = 1 + static_cast<int>(pick(4));
    for (int k = 0; k < edits; ++k) {
      const std::size_t at = pick(s.size());
      switch (pick(4)) {
        case 0: s[at] = noise[pick(sizeof noise - 1)]; break;
        case 1: s.erase(at, 1 + pick(16)); break;
        case 2: s.insert(at, 1, noise[pick(sizeof noise - 1)]); break;
        default: s.resize(at); break;
      }
      if (s.empty()) s = "{";
    }
    try {
      const Trace t = fs::trace::parse_trace(s, "fuzz");
      fs::trace::validate(t);
      fs::trace::trace_to_json(t);
      ++accepted;
    } catch (const fs::trace::TraceError&) {
      ++refused;
    }
  }
  REQUIRE(refused > 0);
  REQUIRE(accepted + refused == 3000);
}

TEST_CASE("mutated JSON fields never crash the reader or the validator", "[trace][validate][fuzz]") {
  const json good = json::parse(fs::trace::trace_to_json(fs::test::good_trace()));
  // Every leaf and container of the document, by JSON pointer.
  std::vector<json::json_pointer> paths;
  const json flat = good.flatten();
  for (const auto& [key, value] : flat.items()) {
    json::json_pointer p(key);
    while (!p.empty()) {
      if (std::find(paths.begin(), paths.end(), p) == paths.end()) paths.push_back(p);
      p = p.parent_pointer();
    }
  }
  const json replacements[] = {nullptr, -1, 0, 1, 2147483648LL, -9223372036854775807LL - 1,
                               18446744073709551615ULL, 1e300, -0.5, "", "x", "load", "-inf",
                               true, json::array(), json::object(), json::array({1, 2, 3})};
  std::mt19937_64 rng(7);
  int refused = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    json j = good;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < edits; ++k) {
      const auto& p = paths[rng() % paths.size()];
      if (!j.contains(p)) continue;
      if (rng() % 4 == 0 && !p.empty()) {
        json& parent = j[p.parent_pointer()];
        if (parent.is_object()) parent.erase(p.back());
        else if (parent.is_array() && !parent.empty()) parent.erase(parent.size() - 1);
      } else {
        j[p] = replacements[rng() % (sizeof replacements / sizeof replacements[0])];
      }
    }
    try {
      const Trace t = fs::trace::parse_trace(j.dump(), "fuzz");
      fs::trace::validate(t);
      fs::trace::trace_to_json(t);
    } catch (const fs::trace::TraceError&) {
      ++refused;
    }
  }
  REQUIRE(refused > 0);
}

TEST_CASE("corrupted in-memory traces never crash the validator or the writer", "[trace][validate][fuzz]") {
  std::mt19937_64 rng(99);
  const std::int64_t values[] = {-2147483648LL, -1, 0, 1, 3, 4, 5, 255, 2147483647LL};
  for (int iter = 0; iter < 3000; ++iter) {
    Trace t = fs::test::good_trace();
    auto any = [&] { return values[rng() % (sizeof values / sizeof values[0])]; };
    Event& e = t.events[rng() % t.events.size()];
    switch (rng() % 13) {
      case 0: e.track = static_cast<int>(any()); break;
      case 1: e.kind = static_cast<Kind>(static_cast<std::uint8_t>(any())); break;
      case 2: e.tensor = static_cast<Tensor>(static_cast<std::uint8_t>(any())); break;
      case 3: e.bh = static_cast<std::int32_t>(any()); break;
      case 4: e.row0 = static_cast<std::int32_t>(any()); e.rows = static_cast<std::int32_t>(any()); break;
      case 5: e.col0 = static_cast<std::int32_t>(any()); e.cols = static_cast<std::int32_t>(any()); break;
      case 6: e.dur_ns = -1; e.ts_ns = NAN; break;
      case 7: t.tracks[rng() % t.tracks.size()].kernel = static_cast<int>(any()); break;
      case 8: t.meta.N = static_cast<int>(any()); break;
      case 9: t.meta.tensors[rng() % t.meta.tensors.size()].id = static_cast<Tensor>(static_cast<std::uint8_t>(any())); break;
      case 10: t.kernels[rng() % t.kernels.size()].grid[0] = static_cast<int>(any()); break;
      case 11:
        t.tracks[rng() % t.tracks.size()].lane = static_cast<int>(any());
        t.kernels[rng() % t.kernels.size()].lanes = static_cast<int>(any());
        break;
      default: t.meta.B = static_cast<int>(any()); t.meta.d = static_cast<int>(any()); break;
    }
    fs::trace::validate(t);
    fs::trace::trace_to_json(t);
  }
  SUCCEED("no crash");
}

// Issue 14: rows·cols·4 overflowed int64 for a 2^31 × 2^31 tile, and the validator then
// reported a tile of "2147483647×2147483647 float32" as too small for its bytes.
TEST_CASE("a tile's size is compared with its bytes without overflow", "[trace][validate]") {
  Trace t = fs::test::good_trace();
  Event& e = find_event(t, Kind::Store, Tensor::O);
  e.rows = e.cols = 2147483647;
  const std::string err = errors_of(t);  // the tile lies outside O: that is the error
  REQUIRE_THAT(err, Catch::Contains("is outside O"));
  REQUIRE_THAT(err, !Catch::Contains("-byte elements holds"));
}

// Output coverage by a sweep over the stores: the same count and first gap as marking every
// element, for random stores on small tensors (the element-by-element count is the reference).
TEST_CASE("the coverage check finds exactly the elements no store covers", "[trace][validate]") {
  std::mt19937_64 rng(14);
  for (int iter = 0; iter < 400; ++iter) {
    Trace t;
    t.meta.pass = "fwd";
    t.meta.B = 1 + int(rng() % 2);
    t.meta.H = 1 + int(rng() % 2);
    t.meta.N = 1 + int(rng() % 12);
    t.meta.d = 1 + int(rng() % 6);
    const int heads = t.meta.B * t.meta.H, N = t.meta.N, d = t.meta.d;
    for (Tensor id : {Tensor::O, Tensor::LSE}) {
      fs::trace::TensorInfo ti;
      ti.id = id;
      ti.shape = fs::trace::tensor_shape(id, t.meta.B, t.meta.H, N, d);
      ti.bytes = fs::trace::shape_elems(ti.shape) * 4;
      t.meta.tensors.push_back(ti);
    }
    fs::test::TraceBuilder b(t);
    const int track = b.track(b.kernel("k", 1, 0, 1e6), 0, 0);
    std::vector<char> covered(std::size_t(heads) * N * d, 0);
    const int stores = int(rng() % 7);
    for (int k = 0; k < stores; ++k) {
      const int r0 = int(rng() % N), c0 = int(rng() % d);
      const int rows = 1 + int(rng() % (N - r0)), cols = 1 + int(rng() % (d - c0));
      const int bh = int(rng() % heads);
      b.event(track, Kind::Store, Tensor::O, r0, rows, c0, cols, 1).bh = bh;
      for (int r = r0; r < r0 + rows; ++r)
        for (int c = c0; c < c0 + cols; ++c) covered[(std::size_t(bh) * N + r) * d + c] = 1;
    }
    for (int bh = 0; bh < heads; ++bh) b.event(track, Kind::Store, Tensor::LSE, 0, N, 0, 1, 1).bh = bh;
    const auto first = std::find(covered.begin(), covered.end(), 0);
    const auto missing = std::count(covered.begin(), covered.end(), 0);
    const std::string err = joined(fs::trace::validate(t));
    INFO(err);
    if (missing == 0) {
      REQUIRE_THAT(err, !Catch::Contains("stored by no event"));
    } else {
      const std::int64_t at = first - covered.begin();
      REQUIRE_THAT(err, Catch::Contains("O: " + std::to_string(missing) + " of " + std::to_string(covered.size()) +
                                        " elements are stored by no event (the first: head " +
                                        std::to_string(at / (N * d)) + ", row " + std::to_string(at / d % N) +
                                        ", col " + std::to_string(at % d) + ")"));
    }
  }
}

// Issue 14: a 178 KB trace of stores each claiming all of a 2^28-element output took 10 s to
// validate (the cost of an event was the area it claimed). Now it is the number of events.
TEST_CASE("the coverage check costs the events, not the area they claim", "[trace][validate]") {
  Trace t;
  t.meta.pass = "fwd";
  t.meta.B = t.meta.H = 1;
  t.meta.N = t.meta.d = 16384;  // O: 2^28 elements
  for (Tensor id : {Tensor::O, Tensor::LSE}) {
    fs::trace::TensorInfo ti;
    ti.id = id;
    ti.shape = fs::trace::tensor_shape(id, 1, 1, 16384, 16384);
    ti.bytes = fs::trace::shape_elems(ti.shape) * 4;
    t.meta.tensors.push_back(ti);
  }
  fs::test::TraceBuilder b(t);
  const int track = b.track(b.kernel("k", 1, 0, 1e9), 0, 0);
  for (int k = 0; k < 4000; ++k) b.event(track, Kind::Store, Tensor::O, 0, 16384 - k % 2, 0, 16384, 1);
  const auto start = std::chrono::steady_clock::now();
  const std::string err = joined(fs::trace::validate(t));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE_THAT(err, !Catch::Contains("O: "));  // every element of O stored
  REQUIRE_THAT(err, Catch::Contains("LSE: 16384 of 16384 elements are stored by no event"));
  REQUIRE(seconds < 2.0);  // it was minutes: 4000 × 2^28 elements marked one by one
}

#ifdef FS_TRACE_VALIDATE_EXE
namespace {
// Runs the command; returns its exit code and puts its output in `out`.
int run_command(const std::string& args, std::string& out) {
  const std::string log = temp_path("command.log");
  const int status = std::system((std::string(FS_TRACE_VALIDATE_EXE) + " " + args + " > " + log + " 2>&1").c_str());
  std::ifstream in(log);
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return WEXITSTATUS(status);
}
}  // namespace

TEST_CASE("trace_validate prints one line per file and exits 0 only when all are valid", "[trace][validate][command]") {
  const std::string good = temp_path("cmd_good.json"), cut = temp_path("cmd_cut.json"),
                    wrong = temp_path("cmd_wrong.json");
  fs::trace::write_trace(fs::test::good_trace(), good);
  std::ofstream(cut) << fs::trace::trace_to_json(fs::test::good_trace()).substr(0, 300);
  Trace t = fs::test::good_trace();
  t.events[3].bytes = 8;
  fs::trace::write_trace(t, wrong);

  std::string out;
  REQUIRE(run_command(good, out) == 0);
  REQUIRE(out == good + ": OK: " + fs::trace::validate(fs::test::good_trace()).summary() + "\n");
  REQUIRE(run_command(good + " " + cut + " " + wrong, out) == 1);
  INFO(out);
  REQUIRE(std::count(out.begin(), out.end(), '\n') == 3);
  REQUIRE_THAT(out, Catch::Contains(cut + ": INVALID: truncated JSON"));
  REQUIRE_THAT(out, Catch::Contains(wrong + ": INVALID: stores move 120 bytes, but the IO model writes 176"));
  REQUIRE(run_command("", out) == 2);
}

// Issue 14: a missing file exited 1, the code of an invalid trace; it is bad input (2), and so
// is a FIFO (which read_trace used to open and block on) or a folder.
TEST_CASE("trace_validate exits 2 on a file it cannot read, 1 on one that is not a valid trace", "[trace][validate][command]") {
  const std::string good = temp_path("cmd2_good.json"), cut = temp_path("cmd2_cut.json");
  fs::trace::write_trace(fs::test::good_trace(), good);
  std::ofstream(cut) << fs::trace::trace_to_json(fs::test::good_trace()).substr(0, 300);
  const std::string missing = temp_path("no-such-trace.json"), fifo = temp_path("fifo.json");
  std::filesystem::remove(fifo);
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  std::string out;
  REQUIRE(run_command(missing, out) == 2);
  REQUIRE_THAT(out, Catch::Contains(missing + ": INVALID: cannot open (No such file or directory)"));
  REQUIRE(run_command(fifo, out) == 2);
  REQUIRE_THAT(out, Catch::Contains("is a pipe or FIFO, not a regular file"));
  REQUIRE(run_command(temp_path(""), out) == 2);
  REQUIRE(run_command(good + " " + cut, out) == 1);
  REQUIRE(run_command(good + " " + cut + " " + missing, out) == 2);
  std::filesystem::remove(fifo);
}

// Issue 14: reading takes many times the file in memory, and running out of it aborted both tools
// in std::bad_alloc (exit 134). A file that needs more than is available is refused first, exit 2.
// Issue 52: what parsing needs is counted from the JSON's shape (whitespace costs nothing; a value
// in an array 48 bytes while it grows), not guessed from its size.
TEST_CASE("trace_validate refuses a trace larger than the memory available, with exit code 2", "[trace][validate][command]") {
  const std::string big = temp_path("cmd_big.json");
  {
    std::string text = fs::trace::trace_to_json(fs::test::good_trace());
    std::string zeros;
    for (int i = 0; i < 8 << 20; ++i) zeros += "0,";
    text.insert(text.rfind('}'), ",\"padding\": [" + zeros + "0]");  // a key the reader does not read: a valid file
    std::ofstream(big) << text << std::string(std::size_t(8) << 20, ' ');
  }
  std::string out;
  REQUIRE(run_command(big, out) == 0);
  // 8 Mi values × 48 bytes is more than the 300 MiB of address space `ulimit -v` leaves.
  const std::string log = temp_path("cmd_big.log");
  const int status = std::system(("sh -c 'ulimit -v 307200; exec " + std::string(FS_TRACE_VALIDATE_EXE) + " " + big +
                                  "' > " + log + " 2>&1")
                                     .c_str());
  std::ifstream in(log);
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  INFO(out);
  REQUIRE(WEXITSTATUS(status) == 2);
  REQUIRE_THAT(out, Catch::Contains("this trace needs") && Catch::Contains("GiB of memory, but"));
  std::filesystem::remove(big);
}
#endif
