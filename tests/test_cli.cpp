// The step programs' command line: what it accepts, and one clear error for what it does not.
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "common/errors.hpp"
#include "common/harness.hpp"
#include "common/npy.hpp"
#include "common/varlen.hpp"
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

TEST_CASE("the --varlen option packs sequences of their own lengths into one batch, N and Nk their totals, and bad lengths, files and "
          "shapes refused naming the option",
          "[cli][varlen]") {
  using Catch::Contains;
  using Cu = std::vector<std::int32_t>;
  const auto o = parse({"--heads", "4", "--varlen", "128,0,77:300,5"}, "05");
  REQUIRE(o->packed.cu_q == Cu{0, 128, 128, 205, 210});
  REQUIRE(o->packed.cu_k == Cu{0, 128, 128, 428, 433});
  REQUIRE((o->shape.B == 1 && o->shape.H == 4 && o->shape.N == 210 && o->shape.keys() == 433));
  // Keys like the queries: a square problem; --batch 1, --seq and --seq-k that agree are taken.
  const auto same = parse({"--batch", "1", "--seq", "8", "--seq-k", "8", "--varlen", "3,5"}, "05");
  REQUIRE((same->packed.cu_q == Cu{0, 3, 8} && same->packed.cu_k == same->packed.cu_q && same->shape.square()));
  REQUIRE(!parse({}, "05")->packed.on());

  REQUIRE_THROWS_WITH(parse({"--varlen", "3,-1"}), Contains("--varlen: '-1': a length is a number of tokens"));
  REQUIRE_THROWS_WITH(parse({"--varlen", "3,x"}), Contains("--varlen: 'x' is not a length"));
  REQUIRE_THROWS_WITH(parse({"--varlen", "3,,4"}), Contains("--varlen: '' is not a length"));
  REQUIRE_THROWS_WITH(parse({"--varlen", "3:"}), Contains("--varlen: '3:' is not a length"));
  REQUIRE_THROWS_WITH(parse({"--varlen", "3:4:5"}), Contains("--varlen: '3:4:5' is not a length"));
  REQUIRE_THROWS_WITH(parse({"--varlen", "0x10"}), Contains("is not a length"));
  REQUIRE_THROWS_WITH(parse({"--varlen", "0,0"}), Contains("--varlen: the sequences hold no query token"));
  REQUIRE_THROWS_WITH(parse({"--varlen", "4:0"}), Contains("--varlen: the sequences hold no key token"));
  REQUIRE_THROWS_WITH(parse({"--varlen", "2147483647,1"}), Contains("add up to more than 2147483647 tokens"));
  std::string many = "1";
  for (int b = 1; b < fs::kMaxSequences; ++b) many += ",1";
  REQUIRE(parse({"--varlen", many.c_str()})->packed.count() == fs::kMaxSequences);
  many += ",1";
  REQUIRE_THROWS_WITH(parse({"--varlen", many.c_str()}), Contains("65536 sequences; at most 65535"));
  REQUIRE_THROWS_WITH(parse({"--batch", "2", "--varlen", "3"}), Contains("--batch must be 1 (got 2)"));
  REQUIRE_THROWS_WITH(parse({"--seq", "9", "--varlen", "3,5"}), Contains("--seq 9 disagrees with --varlen's 8 query tokens"));
  REQUIRE_THROWS_WITH(parse({"--seq-k", "9", "--varlen", "3:4"}, "05"),
                      Contains("--seq-k 9 disagrees with --varlen's 4 key tokens"));
  REQUIRE_THROWS_WITH(parse({"--load", "x", "--varlen", "3"}), Contains("--varlen conflicts with --load"));
  REQUIRE_THROWS_WITH(parse({"--varlen", "cu.npy,3"}), Contains("--varlen takes lengths"));
  REQUIRE_THROWS_WITH(parse({"--varlen", "a.npy,b.npy,c.npy"}), Contains("--varlen takes lengths"));

  // cu_seqlens files: one for the queries and the keys alike, or one each.
  const auto dir = std::filesystem::temp_directory_path() / "flashsteps_test_cli_varlen";
  std::filesystem::create_directories(dir);
  auto file = [&](const char* name, const Cu& cu, std::vector<std::int64_t> shape = {}) {
    const std::string path = (dir / name).string();
    fs::write_npy_i32(path, cu.data(), shape.empty() ? std::vector<std::int64_t>{std::int64_t(cu.size())} : shape);
    return path;
  };
  const std::string q = file("q.npy", {0, 5, 5, 12}), k = file("k.npy", {0, 3, 9, 9});
  const auto one = parse({"--varlen", q.c_str()}, "05");
  REQUIRE((one->packed.cu_q == Cu{0, 5, 5, 12} && one->packed.cu_k == one->packed.cu_q && one->shape.N == 12));
  const std::string both = q + "," + k;
  const auto two = parse({"--varlen", both.c_str()}, "05");
  REQUIRE((two->packed.cu_k == Cu{0, 3, 9, 9} && two->shape.N == 12 && two->shape.keys() == 9));
  REQUIRE_THROWS_WITH(parse({"--varlen", file("from1.npy", {1, 5}).c_str()}), Contains("from1.npy: starts at 1, not 0"));
  REQUIRE_THROWS_WITH(parse({"--varlen", file("down.npy", {0, 5, 4}).c_str()}),
                      Contains("down.npy: decreases at index 2 (4 after 5)"));
  REQUIRE_THROWS_WITH(parse({"--varlen", file("alone.npy", {0}).c_str()}), Contains("alone.npy: holds no sequence"));
  REQUIRE_THROWS_WITH(parse({"--varlen", file("square.npy", {0, 1, 2, 3}, {2, 2}).c_str()}),
                      Contains("square.npy: shape (2, 2) is not 1-D"));
  const std::vector<float> floats{0.f, 3.f};
  fs::write_npy((dir / "float.npy").string(), floats.data(), {2});
  REQUIRE_THROWS_WITH(parse({"--varlen", (dir / "float.npy").string().c_str()}), Contains("is not int32 or int64"));
  const std::string uneven = q + "," + file("short.npy", {0, 4});
  REQUIRE_THROWS_WITH(parse({"--varlen", uneven.c_str()}), Contains("holds 3 sequences and"));
  REQUIRE_THROWS_WITH(parse({"--varlen", (dir / "missing.npy").string().c_str()}), Contains("missing.npy: cannot open"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("a folder's packed sequences: --save writes cu_seqlens_q.npy and cu_seqlens_k.npy, --load reads them back, "
          "and one without the other is refused",
          "[cli][varlen]") {
  using Catch::Contains;
  const auto dir = std::filesystem::temp_directory_path() / "flashsteps_test_cli_cu_dir";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  REQUIRE_FALSE(fs::has_cu_seqlens(dir.string()));
  const fs::PackedSeqs p = fs::parse_varlen("7,0,3:12");
  fs::write_cu_seqlens_dir(dir.string(), p);
  REQUIRE(fs::has_cu_seqlens(dir.string()));
  const fs::PackedSeqs back = fs::read_cu_seqlens_dir(dir.string());
  REQUIRE((back.cu_q == p.cu_q && back.cu_k == p.cu_k));
  std::filesystem::remove(dir / "cu_seqlens_k.npy");
  REQUIRE(fs::has_cu_seqlens(dir.string()));
  REQUIRE_THROWS_WITH(fs::read_cu_seqlens_dir(dir.string()), Contains("cu_seqlens_q.npy without cu_seqlens_k.npy"));
  const std::vector<std::int32_t> fewer{0, 7};
  fs::write_npy_i32((dir / "cu_seqlens_k.npy").string(), fewer.data(), {2});
  REQUIRE_THROWS_WITH(fs::read_cu_seqlens_dir(dir.string()), Contains("cu_seqlens_q holds 3 sequences and cu_seqlens_k 1"));
  std::filesystem::remove_all(dir);
}
