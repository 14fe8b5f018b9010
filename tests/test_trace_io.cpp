// Trace files: what the writer writes the reader gives back, and every malformed file gets one
// clear TraceError naming the file, the place in it and what is wrong — never a crash.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "common/trace/trace_io.hpp"
#include "tests/trace_fixtures.hpp"

namespace {

using fs::trace::Trace;
using fs::trace::TraceError;
using json = nlohmann::json;

std::string temp_path(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "flashsteps_test_trace_io";
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

bool same_float(float a, float b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

void require_same(const Trace& a, const Trace& b) {
  const auto &ma = a.meta, &mb = b.meta;
  REQUIRE(ma.schema_version == mb.schema_version);
  REQUIRE(ma.gpu == mb.gpu);
  REQUIRE(ma.driver == mb.driver);
  REQUIRE(ma.commit == mb.commit);
  REQUIRE(ma.date == mb.date);
  REQUIRE(ma.step == mb.step);
  REQUIRE(ma.variant == mb.variant);
  REQUIRE(ma.pass == mb.pass);
  REQUIRE((ma.B == mb.B && ma.H == mb.H && ma.N == mb.N && ma.d == mb.d));
  REQUIRE(ma.causal == mb.causal);
  REQUIRE(ma.scale == mb.scale);
  REQUIRE(ma.dropout == mb.dropout);
  REQUIRE(ma.block_mask == mb.block_mask);
  REQUIRE((ma.Br == mb.Br && ma.Bc == mb.Bc));
  REQUIRE(ma.sram_budget_bytes == mb.sram_budget_bytes);
  REQUIRE(ma.smem_per_cta_bytes == mb.smem_per_cta_bytes);
  REQUIRE(ma.io_read_bytes == mb.io_read_bytes);
  REQUIRE(ma.io_write_bytes == mb.io_write_bytes);
  REQUIRE(ma.event_cap == mb.event_cap);
  REQUIRE(ma.events_dropped == mb.events_dropped);
  REQUIRE(ma.tensors.size() == mb.tensors.size());
  for (std::size_t i = 0; i < ma.tensors.size(); ++i) {
    REQUIRE(ma.tensors[i].id == mb.tensors[i].id);
    REQUIRE(ma.tensors[i].shape == mb.tensors[i].shape);
    REQUIRE(ma.tensors[i].bytes == mb.tensors[i].bytes);
  }
  REQUIRE(a.kernels.size() == b.kernels.size());
  for (std::size_t i = 0; i < a.kernels.size(); ++i) {
    const auto &x = a.kernels[i], &y = b.kernels[i];
    REQUIRE(x.name == y.name);
    for (int k = 0; k < 3; ++k) REQUIRE((x.grid[k] == y.grid[k] && x.block[k] == y.block[k]));
    REQUIRE(x.smem_bytes == y.smem_bytes);
    REQUIRE((x.ts_ns == y.ts_ns && x.dur_ns == y.dur_ns));
    REQUIRE((x.lanes == y.lanes && x.lane_names == y.lane_names));
  }
  REQUIRE(a.tracks.size() == b.tracks.size());
  for (std::size_t i = 0; i < a.tracks.size(); ++i) {
    const auto &x = a.tracks[i], &y = b.tracks[i];
    REQUIRE((x.kernel == y.kernel && x.cta == y.cta && x.lane == y.lane && x.sm == y.sm && x.dropped == y.dropped));
  }
  REQUIRE(a.events.size() == b.events.size());
  for (std::size_t i = 0; i < a.events.size(); ++i) {
    const auto &x = a.events[i], &y = b.events[i];
    INFO("event " << i);
    REQUIRE((x.track == y.track && x.kind == y.kind && x.tensor == y.tensor && x.bh == y.bh));
    REQUIRE((x.row0 == y.row0 && x.rows == y.rows && x.col0 == y.col0 && x.cols == y.cols));
    REQUIRE((x.bytes == y.bytes && x.cached == y.cached && x.seq == y.seq));
    REQUIRE((x.ts_ns == y.ts_ns && x.dur_ns == y.dur_ns));
    REQUIRE((same_float(x.m, y.m) && same_float(x.l, y.l) && x.sample_row == y.sample_row));
    REQUIRE(x.round == y.round);
  }
  const auto &ca = ma.clusters, &cb = mb.clusters;
  REQUIRE((ca.hashes == cb.hashes && ca.q_cluster == cb.q_cluster && ca.k_cluster == cb.k_cluster));
  REQUIRE((ca.q_order == cb.q_order && ca.k_order == cb.k_order));
  REQUIRE(ma.untraced.size() == mb.untraced.size());
  for (std::size_t i = 0; i < ma.untraced.size(); ++i) {
    const auto &x = ma.untraced[i], &y = mb.untraced[i];
    REQUIRE((x.name == y.name && x.read_bytes == y.read_bytes && x.write_bytes == y.write_bytes && x.writes == y.writes));
  }
  REQUIRE(a.ranges.size() == b.ranges.size());
  for (std::size_t i = 0; i < a.ranges.size(); ++i) {
    const auto &x = a.ranges[i], &y = b.ranges[i];
    REQUIRE((x.name == y.name && x.ts_ns == y.ts_ns && x.dur_ns == y.dur_ns && x.depth == y.depth));
  }
  REQUIRE(a.marks.size() == b.marks.size());
  for (std::size_t i = 0; i < a.marks.size(); ++i)
    REQUIRE((a.marks[i].name == b.marks[i].name && a.marks[i].ts_ns == b.marks[i].ts_ns));
  REQUIRE(a.buffers.size() == b.buffers.size());
  for (std::size_t i = 0; i < a.buffers.size(); ++i) {
    const auto &x = a.buffers[i], &y = b.buffers[i];
    REQUIRE((x.name == y.name && x.address == y.address && x.bytes == y.bytes));
  }
}

// The error `text` gets from the reader; fails the test when it parses.
std::string error_of(const std::string& text) {
  try {
    fs::trace::parse_trace(text, "t.json");
  } catch (const TraceError& e) {
    return e.what();
  }
  FAIL("the reader accepted a bad trace");
  return {};
}

json good_json() { return json::parse(fs::trace::trace_to_json(fs::test::good_trace())); }

// The index in traceEvents of the first device event ("X" on pid 1).
std::size_t first_device_event(const json& j) {
  const auto& ev = j["traceEvents"];
  for (std::size_t i = 0; i < ev.size(); ++i)
    if (ev[i]["ph"] == "X" && ev[i]["pid"] == 1) return i;
  FAIL("no device event");
  return 0;
}

}  // namespace

TEST_CASE("a written trace reads back identical", "[trace][io]") {
  Trace t = fs::test::good_trace();
  t.events[2].m = -INFINITY;  // a running max before the first key: written as "-inf"
  t.events[2].l = 0.f;
  t.events[2].sample_row = 0;
  t.tracks[1].dropped = 0;
  t.meta.causal = true;
  t.meta.Br = 64;
  t.meta.Bc = 32;
  t.meta.scale = 1.0f / 3.0f;  // not exact in decimal: must come back as the same float
  t.meta.dropout = 0.1f;
  t.meta.block_mask = "8 × 8 blocks of 128 × 128, 24 nonzero (density 0.375)";
  t.kernels[0].ts_ns = 123456789;  // large times keep nanosecond resolution
  const std::string path = temp_path("round_trip.json");
  fs::trace::write_trace(t, path);
  const Trace back = fs::trace::read_trace(path);
  require_same(t, back);
  REQUIRE(std::isinf(back.events[2].m));
  REQUIRE(!std::filesystem::exists(path + ".partial"));
}

TEST_CASE("a clustered trace reads back with its rounds, orders and untraced traffic", "[trace][io][smyrf]") {
  const Trace t = fs::test::clustered_trace();
  const Trace back = fs::trace::parse_trace(fs::trace::trace_to_json(t));
  require_same(t, back);
  REQUIRE(back.meta.clusters.q_order == std::vector<std::int32_t>{2, 0, 3, 1});
  REQUIRE(back.events[1].round == 0);
  REQUIRE(back.events[0].round == -1);
  SECTION("an order entry outside the rows, or orders of the wrong length, are refused") {
    json j = json::parse(fs::trace::trace_to_json(t));
    j["otherData"]["clusters"]["q_order"][0] = 4;
    REQUIRE_THAT(error_of(j.dump()), Catch::Contains("otherData.clusters.q_order[0]: 4 is out of range (at most 3)"));
    j = json::parse(fs::trace::trace_to_json(t));
    j["otherData"]["clusters"]["k_order"].erase(0);
    REQUIRE_THAT(error_of(j.dump()), Catch::Contains("otherData.clusters.k_order: expected 4 entries, got 3"));
  }
  SECTION("a round past the largest is refused") {
    json j = json::parse(fs::trace::trace_to_json(t));
    j["traceEvents"][first_device_event(j) + 1]["args"]["round"] = 16;
    REQUIRE_THAT(error_of(j.dump()), Catch::Contains(".round: 16 is out of range (at most 15)"));
  }
}

TEST_CASE("a trace in lanes reads back with its lanes, their names and their waits", "[trace][io][lanes]") {
  const Trace t = fs::test::laned_trace();
  const Trace back = fs::trace::parse_trace(fs::trace::trace_to_json(t));
  require_same(t, back);
  REQUIRE(back.kernels[0].lanes == 3);
  REQUIRE(back.tracks[2].lane == 2);
  REQUIRE(back.events[2].kind == fs::trace::Kind::Wait);
  REQUIRE(back.events[2].tensor == fs::trace::Tensor::None);

  const json j = json::parse(fs::trace::trace_to_json(t));
  REQUIRE(j["otherData"]["kernels"][0]["lane_names"] == json({"producer", "consumer 0", "consumer 1"}));
  // Each lane its own thread (tid = track + 1), named after its CTA and lane, and ranked so that
  // a CTA's lanes sit together in lane order.
  std::map<std::int64_t, std::int64_t> rank;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "M" || e["pid"] != 1) continue;
    if (e["name"] == "thread_sort_index") rank[e["tid"].get<std::int64_t>()] = e["args"]["sort_index"].get<std::int64_t>();
    if (e["name"] == "thread_name" && e["tid"] == 6)
      REQUIRE((e["args"]["name"] == "SM 1 · hopper_forward_kernel · CTA 1 · consumer 1" && e["args"]["lane"] == 2));
  }
  REQUIRE(rank.size() == 6);
  for (std::int64_t tid = 1; tid <= 6; ++tid) REQUIRE(rank[tid] == tid - 1);
  const auto& wait = j["traceEvents"][first_device_event(j) + 2];
  REQUIRE((wait["cat"] == "wait" && wait["name"] == "wait" && !wait["args"].contains("tensor")));

  SECTION("a lane past the kernel's, or names of another count, are refused") {
    json bad = j;
    for (auto& e : bad["traceEvents"])
      if (e["ph"] == "M" && e["name"] == "thread_name" && e["tid"] == 3) e["args"]["lane"] = 3;
    REQUIRE_THAT(error_of(bad.dump()), Catch::Contains(".args.lane: 3 is not a lane of kernel 0 (it has 3)"));
    bad = j;
    bad["otherData"]["kernels"][0]["lane_names"].erase(2);
    REQUIRE_THAT(error_of(bad.dump()), Catch::Contains("otherData.kernels[0].lane_names: 2 names for 3 lanes"));
    bad = j;
    bad["otherData"]["kernels"][0]["lanes"] = 0;
    REQUIRE_THAT(error_of(bad.dump()), Catch::Contains("otherData.kernels[0].lanes: 0 is out of range"));
  }
}

TEST_CASE("a trace of one lane per CTA is written as before lanes existed", "[trace][io][lanes]") {
  const json j = good_json();
  for (const auto& k : j["otherData"]["kernels"]) REQUIRE((!k.contains("lanes") && !k.contains("lane_names")));
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == 1) REQUIRE(!e["args"].contains("lane"));
  // And such a file reads back in one lane.
  const Trace back = fs::trace::parse_trace(j.dump());
  for (const auto& k : back.kernels) REQUIRE((k.lanes == 1 && k.lane_names.empty()));
  for (const auto& tr : back.tracks) REQUIRE(tr.lane == 0);
}

TEST_CASE("the file is Chrome Trace Event JSON as docs/trace-format.md says", "[trace][io]") {
  const json j = good_json();
  REQUIRE(j["displayTimeUnit"] == "ns");
  REQUIRE(j["otherData"]["schema"] == "flashsteps-trace");
  REQUIRE(j["otherData"]["schema_version"] == 1);
  REQUIRE(j["otherData"]["io_model"]["read_bytes"].is_number_integer());
  REQUIRE(j["otherData"]["buffers"][0]["address"] == "0x7f0000000000");
  const auto& dev = j["traceEvents"][first_device_event(j)];
  REQUIRE(dev["cat"] == "load");
  REQUIRE(dev["name"] == "load Q[0:4)");   // whole rows: no column range in the name
  REQUIRE(dev["ts"] == 1.1);               // microseconds
  REQUIRE(dev["args"]["seq"] == 0);
  int counters = 0, threads = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "C") {
      ++counters;
      REQUIRE(e["name"] == "HBM bytes");
    }
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == 1) ++threads;
  }
  REQUIRE(threads == 4);
  REQUIRE(counters == 11);  // one per non-cached load or store
  // The last counter sample is the whole pass's traffic.
  json last;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "C" && (last.is_null() || e["ts"].get<double>() >= last["ts"].get<double>())) last = e;
  REQUIRE(last["args"]["read"] == j["otherData"]["io_model"]["read_bytes"]);
  REQUIRE(last["args"]["written"] == j["otherData"]["io_model"]["write_bytes"]);
}

TEST_CASE("writing is all or nothing", "[trace][io]") {
  const std::string dir = temp_path("a_directory");
  std::filesystem::create_directories(dir);
  REQUIRE_THROWS_AS(fs::trace::write_trace(fs::test::good_trace(), dir), TraceError);
  REQUIRE(!std::filesystem::exists(dir + ".partial"));
  REQUIRE_THROWS_AS(fs::trace::write_trace(fs::test::good_trace(), temp_path("no/such/dir/t.json")), TraceError);
}

TEST_CASE("host range depths are recomputed when the file has none", "[trace][io]") {
  json j = good_json();
  for (auto& e : j["traceEvents"])
    if (e["ph"] == "X" && e["pid"] == 0) e.erase("args");
  const Trace t = fs::trace::parse_trace(j.dump());
  const Trace want = fs::test::good_trace();
  for (std::size_t i = 0; i < t.ranges.size(); ++i) REQUIRE(t.ranges[i].depth == want.ranges[i].depth);
}

TEST_CASE("a missing or truncated file gets one clear error", "[trace][io][errors]") {
  REQUIRE_THROWS_WITH(fs::trace::read_trace(temp_path("does_not_exist.json")),
                      Catch::Contains("does_not_exist.json: cannot open"));
  const std::string text = fs::trace::trace_to_json(fs::test::good_trace());
  for (std::size_t cut : {std::size_t(1), std::size_t(20), text.size() / 3, text.size() / 2, text.size() - 3}) {
    INFO("cut at " << cut);
    REQUIRE_THAT(error_of(text.substr(0, cut)), Catch::StartsWith("t.json: truncated JSON"));
  }
  REQUIRE_THAT(error_of(""), Catch::Contains("empty file"));
  REQUIRE_THAT(error_of("{\"a\": tru}"), Catch::StartsWith("t.json: invalid JSON"));
  REQUIRE_THAT(error_of(std::string(100000, '[')), Catch::Contains("nested more than"));
  REQUIRE_THAT(error_of("[1, 2]"), Catch::Contains("expected a JSON object at the top"));
}

TEST_CASE("a trace of another schema or version is refused by name", "[trace][io][errors]") {
  json j = good_json();
  j["otherData"]["schema_version"] = 2;
  REQUIRE_THAT(error_of(j.dump()), Catch::Contains("version 2 is not known to this reader (it reads version 1)"));
  j["otherData"]["schema"] = "something-else";
  REQUIRE_THAT(error_of(j.dump()), Catch::Contains("'something-else' is not a flashsteps trace"));
  j["otherData"].erase("schema");
  REQUIRE_THAT(error_of(j.dump()), Catch::Contains("otherData: missing field 'schema'"));
}

TEST_CASE("missing fields and wrong types are named with their place", "[trace][io][errors]") {
  const json good = good_json();
  const std::size_t dev = first_device_event(good);
  const std::string at = "traceEvents[" + std::to_string(dev) + "]";
  struct Case {
    std::string pointer;  // JSON pointer of the field to change
    json value;           // nullptr: remove the field
    std::string message;
  };
  const Case cases[] = {
      {"/otherData/shape/N", nullptr, "otherData.shape: missing field 'N'"},
      {"/otherData/shape/N", "256", "otherData.shape.N: expected an integer, got a string"},
      {"/otherData/shape/N", 2.5, "otherData.shape.N: expected an integer, got a number with a fraction"},
      {"/otherData/causal", 1, "otherData.causal: expected true or false, got an integer"},
      {"/otherData/kernels", json::object(), "otherData.kernels: expected an array, got an object"},
      {"/otherData/kernels/0/grid", json::array({1, 2}), "otherData.kernels[0].grid: expected 3 entries, got 2"},
      {"/otherData/tensors/0/name", "X", "'X' is not a tensor name"},
      {"/otherData/buffers/0/address", "7f00", "is not a hexadecimal address"},
      {"/traceEvents/" + std::to_string(dev) + "/args/seq", nullptr, at + ".args: missing field 'seq'"},
      {"/traceEvents/" + std::to_string(dev) + "/args/bytes", "lots", at + ".args.bytes: expected an integer"},
      {"/traceEvents/" + std::to_string(dev) + "/args/cached", "no", at + ".args.cached: expected true or false"},
      {"/traceEvents/" + std::to_string(dev) + "/ts", nullptr, at + ": missing field 'ts'"},
      {"/traceEvents/" + std::to_string(dev) + "/cat", "teleport", "'teleport' is not an event kind"},
      {"/traceEvents/" + std::to_string(dev) + "/ph", "B", "unknown phase 'B'"},
      {"/traceEvents/" + std::to_string(dev) + "/args/m", json::array(), at + ".args.m: expected a number"},
      {"/traceEvents/" + std::to_string(dev) + "/tid", 99, "tid 99, which names no track"},
      {"/traceEvents/" + std::to_string(dev), 7, at + ": expected an object, got an integer"},
      {"/traceEvents", "none", "traceEvents: expected an array, got a string"},
  };
  for (const Case& c : cases) {
    INFO(c.pointer << " := " << c.value.dump());
    json j = good;
    const json::json_pointer p(c.pointer);
    if (c.value.is_null())
      j.at(p.parent_pointer()).erase(p.back());
    else
      j[p] = c.value;
    const std::string err = error_of(j.dump());
    INFO(err);
    REQUIRE(err.rfind("t.json: ", 0) == 0);
    REQUIRE(err.find(c.message) != std::string::npos);
    REQUIRE(err.find('\n') == std::string::npos);  // one line
  }
}

TEST_CASE("absurd sizes are refused before anything is allocated for them", "[trace][io][errors]") {
  const json good = good_json();
  const std::size_t dev = first_device_event(good);
  const std::string ev = "/traceEvents/" + std::to_string(dev);
  const std::pair<std::string, json> cases[] = {
      {"/otherData/shape/N", -5},
      {"/otherData/shape/N", 0},
      {"/otherData/shape/B", 99999999999LL},
      {"/otherData/shape/N", 18446744073709551615ULL},
      {"/otherData/kernels/0/grid", json::array({2000000000, 2000000000, 2000000000})},
      {"/otherData/kernels/0/block", json::array({4096, 1, 1})},
      {"/otherData/tensors/0/shape", json::array({1, 1, 2147483647, 2147483647})},
      {"/otherData/events_dropped", -1},
      {ev + "/args/rows", -4},
      {ev + "/args/row0", 4294967296LL},
      {ev + "/args/bytes", 1e300},
      {ev + "/dur", -1.0},
      {ev + "/ts", 1e300},
      {ev + "/args/m", 1e300},
  };
  for (const auto& [pointer, value] : cases) {
    INFO(pointer << " := " << value.dump());
    json j = good;
    j[json::json_pointer(pointer)] = value;
    const std::string err = error_of(j.dump());
    INFO(err);
    REQUIRE(err.rfind("t.json: ", 0) == 0);
  }
  // A thread_name for tid 2^31-1 must not make the reader size a vector by it.
  json j = good;
  j["traceEvents"].push_back({{"ph", "M"}, {"pid", 1}, {"tid", 2147483647}, {"name", "thread_name"},
                              {"args", {{"kernel", 0}, {"cta", 0}, {"sm", 0}, {"dropped", 0}}}});
  REQUIRE_THAT(error_of(j.dump()), Catch::Contains("has no thread_name event"));
}
