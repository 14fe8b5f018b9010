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

TEST_CASE("the window, softcap and ALiBi options are read as FlashAttention takes them, bad values refused naming the option",
          "[cli][features]") {
  using Catch::Contains;
  const auto o = parse({"--window", "256,-1", "--softcap", "30", "--alibi"}, "05");
  REQUIRE(o);
  REQUIRE((o->window_left == 256 && o->window_right == -1));
  REQUIRE(o->softcap == 30.f);
  REQUIRE((o->alibi && o->alibi_path.empty()));  // the standard slopes
  const auto f = parse({"--alibi", "slopes.npy", "--window", "-1,0"}, "05");
  REQUIRE((f->alibi && f->alibi_path == "slopes.npy"));
  REQUIRE((f->window_left == -1 && f->window_right == 0));
  const auto none = parse({}, "05");
  REQUIRE((none->window_left == -1 && none->window_right == -1 && none->softcap == 0.f && !none->alibi));
  REQUIRE_THROWS_WITH(parse({"--window", "64"}, "05"), Contains("--window takes L,R"));
  REQUIRE_THROWS_WITH(parse({"--window", "-2,0"}, "05"), Contains("L must be -1"));
  REQUIRE_THROWS_WITH(parse({"--window", "3,x"}, "05"), Contains("R must be -1"));
  REQUIRE_THROWS_WITH(parse({"--window", "3,4,5"}, "05"), Contains("R must be -1"));
  REQUIRE_THROWS_WITH(parse({"--window", "0x10,0"}, "05"), Contains("L must be -1"));
  REQUIRE_THROWS_WITH(parse({"--softcap", "-1"}, "05"), Contains("--softcap"));
  REQUIRE_THROWS_WITH(parse({"--softcap", "inf"}, "05"), Contains("--softcap"));
}

TEST_CASE("the K/V shape options give K and V their own length and heads, the query heads a multiple of the K/V heads",
          "[cli][features]") {
  using Catch::Contains;
  const auto o = parse({"--heads", "8", "--seq", "100", "--seq-k", "300", "--heads-kv", "2"}, "05");
  REQUIRE((o->shape.keys() == 300 && o->shape.kv_heads() == 2 && !o->shape.square()));
  REQUIRE(o->shape.kv_elems() == std::int64_t(2) * 2 * 300 * 64);
  REQUIRE(parse({}, "05")->shape.square());
  REQUIRE_THROWS_WITH(parse({"--heads", "8", "--heads-kv", "3"}, "05"), Contains("--heads 8 must be a multiple of --heads-kv 3"));
  REQUIRE_THROWS_WITH(parse({"--seq-k", "0"}, "05"), Contains("--seq-k must be at least 1"));
  REQUIRE_THROWS_WITH(parse({"--load", "x", "--seq-k", "8"}, "05"), Contains("--seq-k conflicts with --load"));
}
