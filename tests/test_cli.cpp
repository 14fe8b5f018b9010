// The step programs' command line: what it accepts, and one clear error for what it does not.
#include <catch2/catch.hpp>

#include <initializer_list>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "common/errors.hpp"
#include "common/harness.hpp"
#include "steps/registry.hpp"
#include "tests/cli_helpers.hpp"

using fs::testing::parse;

TEST_CASE("options set the shape and the passes", "[cli]") {
  const auto o = parse({"--batch", "3", "--heads", "5", "--seq", "97", "--dim", "16", "--causal",
                        "--backward", "--check", "--bench", "--reps", "7", "--seed", "9"});
  REQUIRE(o);
  REQUIRE(o->shape.B == 3);
  REQUIRE(o->shape.H == 5);
  REQUIRE(o->shape.N == 97);
  REQUIRE(o->shape.d == 16);
  REQUIRE(o->causal);
  REQUIRE(o->backward);
  REQUIRE(o->check);
  REQUIRE(o->bench);
  REQUIRE(o->reps == 7);
  REQUIRE(o->seed == 9);
  REQUIRE(o->effective_scale() == Approx(0.25));
}

TEST_CASE("the scale option overrides 1/sqrt(d)", "[cli]") {
  REQUIRE(parse({"--dim", "64", "--scale", "0.5"})->effective_scale() == 0.5f);
}

TEST_CASE("bad input is rejected with one line naming the option", "[cli]") {
  using Catch::Contains;
  REQUIRE_THROWS_AS(parse({"--seq", "0"}), fs::InputError);
  REQUIRE_THROWS_WITH(parse({"--seq", "0"}), Contains("--seq must be at least 1"));
  REQUIRE_THROWS_WITH(parse({"--dim", "-4"}), Contains("--dim must be at least 1"));
  REQUIRE_THROWS_WITH(parse({"--heads", "0"}), Contains("--heads"));
  REQUIRE_THROWS_WITH(parse({"--batch", "99999999999"}), Contains("--batch must be at most"));
  REQUIRE_THROWS_WITH(parse({"--reps", "0"}), Contains("--reps"));
  REQUIRE_THROWS_WITH(parse({"--scale", "0"}), Contains("--scale"));
  REQUIRE_THROWS_WITH(parse({"--scale", "nan"}), Contains("--scale"));
  REQUIRE_THROWS_AS(parse({"--seq", "abc"}), fs::InputError);
  REQUIRE_THROWS_AS(parse({"--no-such-option"}), fs::InputError);
  REQUIRE_THROWS_WITH(parse({"--load", "x", "--dim", "8"}), Contains("--dim conflicts with --load"));
  REQUIRE_THROWS_WITH(parse({"--csv", "out.csv"}), Contains("add --bench"));
}

TEST_CASE("shapes too large for any GPU are refused before allocating", "[cli]") {
  fs::Shape s{65536, 65536, 65536, 128};
  REQUIRE_THROWS_WITH(fs::validate_shape(s), Catch::Contains("beyond any GPU"));
}
