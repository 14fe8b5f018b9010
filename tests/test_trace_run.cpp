// The programs' tracing options: --trace picks a shape a person can follow unless sizes are
// given, --trace-cap needs --trace, and the backward's file sits next to the forward's.
#include <catch2/catch.hpp>

#include <initializer_list>
#include <vector>

#include "common/cli.hpp"
#include "common/errors.hpp"
#include "common/traced_run.hpp"
#include "steps/registry.hpp"
#include "tests/cli_helpers.hpp"

using fs::testing::parse;

TEST_CASE("a traced run without sizes has a shape small enough to follow by eye", "[trace][cli]") {
  const auto o = parse({"--trace", "t.json"});
  REQUIRE(o);
  REQUIRE(o->trace_path == "t.json");
  REQUIRE((o->shape.B == 1 && o->shape.H == 1 && o->shape.N == 256 && o->shape.d == 64));
  REQUIRE(o->trace_cap == 256);
}

TEST_CASE("sizes given with --trace override its shape one by one", "[trace][cli]") {
  const auto o = parse({"--trace", "t.json", "--seq", "97", "--heads", "3", "--trace-cap", "1000"});
  REQUIRE((o->shape.B == 1 && o->shape.H == 3 && o->shape.N == 97 && o->shape.d == 64));
  REQUIRE(o->trace_cap == 1000);
  // Without --trace the programs' usual default shape stands.
  REQUIRE(parse({})->shape.N == fs::Options{}.shape.N);
}

TEST_CASE("a trace cap without a trace file, or below 1, is one clear error", "[trace][cli]") {
  REQUIRE_THROWS_WITH(parse({"--trace-cap", "5"}), Catch::Contains("--trace-cap is for traced runs"));
  REQUIRE_THROWS_WITH(parse({"--trace", "t.json", "--trace-cap", "0"}), Catch::Contains("--trace-cap must be at least 1"));
}

TEST_CASE("the backward's trace file sits next to the forward's", "[trace][cli]") {
  REQUIRE(fs::backward_trace_path("t.json") == "t.bwd.json");
  REQUIRE(fs::backward_trace_path("dir/t.fwd.json") == "dir/t.bwd.json");
  REQUIRE(fs::backward_trace_path("trace") == "trace.bwd.json");
}
