// Step 10 on the CPU: the decoding kernels (the split kernel and the combine), their own source
// compiled by the host compiler and run by the emulator (tests/decode_emulated.hpp), mma.sync and
// ldmatrix computed lane by lane, against the step's fp64 reference (steps/10_decode/
// decode_reference.hpp) under the project's rule for 16-bit outputs (common/verify.hpp).
//
// What the emulation cannot see (emulator.hpp): timing, races, and the cp.async pipeline's waits
// (its copies land at once); the GPU tests (test_decode_gpu.cpp) run the same cases on a GPU.
#include "common/emulator/emulator.hpp"  // first: it defines threadIdx, __syncthreads, ... for the kernels

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "steps/10_decode/decode.hpp"
#include "steps/10_decode/decode_reference.hpp"
#include "steps/10_decode/split_rule.hpp"
#include "tests/decode_checks.hpp"
#include "tests/decode_emulated.hpp"

namespace {

using fs::DType;
using fs::decoding::DecodeShape;

constexpr int kSms = 132;  // the split rule's GPU: an H100 SXM's (or an H200's) SMs
constexpr int kRule = 0;   // splits: the rule's

// The kernels on a random problem against the reference; splits kRule: the split rule's at kSms SMs.
void check(const DecodeShape& s, const std::vector<std::int32_t>& lens, DType dtype, bool causal, int splits,
           bool per_sequence = true) {
  const int longest = *std::max_element(lens.begin(), lens.end());
  const int S = splits == kRule ? fs::decoding::num_splits(s.batch, s.heads_kv, longest, kSms, s.row_blocks()) : splits;
  DYNAMIC_SECTION(fs::testing::decode_case(s, lens, dtype, causal, S, per_sequence)) {
    const std::uint64_t seed = 977 + 31 * std::uint64_t(longest) + s.d + 7 * s.new_tokens + S;
    const fs::decoding::DecodeHost h = fs::decoding::random_decode_problem(s, lens, dtype, seed);
    const auto out = fs::testing::decode_run(h, causal, S, per_sequence);
    fs::testing::require_decode_within_rule(h, causal, out.o, out.lse, seed);
  }
}

}  // namespace

// One sequence of odd lengths (a key, a tile and a bit, many tiles with a tail of one key), one
// split, three (for the shorter caches some splits get no tile and write an empty partial), and
// the rule's (16 at 4097 keys: far more splits than warps' worth of keys).
TEST_CASE("step 10 on the CPU: odd cache lengths, 1, 3 and the rule's splits, against the fp64 reference",
          "[emulated][decode]") {
  for (int L : {1, 17, 1000, 4097})
    for (int splits : {1, 3, kRule})
      for (bool causal : {false, true}) check(DecodeShape{1, 8, 2, 1, L, 128}, {L}, DType::bf16, causal, splits);
}

// g query heads per K/V head (1: multi-head; 4; 8) times n new tokens are the CTA's rows: g·n = 4
// .. 128, so 1 to 8 CTAs of 16 rows per K/V head; causal, the tokens see their own diagonals.
TEST_CASE("step 10 on the CPU: 1, 4 and 16 new tokens, grouped-query ratios 1, 4 and 8", "[emulated][decode]") {
  for (int n : {1, 4, 16})
    for (int g : {1, 4, 8})
      for (bool causal : {false, true})
        for (int splits : {1, 3}) check(DecodeShape{2, 2 * g, 2, n, 300, 64}, {300, 257}, DType::fp16, causal, splits);
}

// Sequences of their own lengths in one batch: an empty cache (every row sees no key: O = 0, LSE =
// −inf), one key with four new tokens (causal: three rows see nothing), and longer ones; the cache's
// keys past a sequence's length are there (random) and must not count.
TEST_CASE("step 10 on the CPU: per-sequence lengths and empty caches", "[emulated][decode]") {
  const std::vector<std::int32_t> lens = {0, 1, 300, 1000};
  for (bool causal : {false, true})
    for (int splits : {1, 3, kRule}) {
      check(DecodeShape{4, 4, 1, 4, 1000, 64}, lens, DType::bf16, causal, splits);
      check(DecodeShape{4, 4, 4, 1, 1000, 256}, lens, DType::fp16, causal, splits);
    }
  // Every sequence empty, and the length given as one int (cache_seqlens null).
  check(DecodeShape{2, 4, 2, 2, 64, 128}, {0, 0}, DType::bf16, true, 3, false);
  check(DecodeShape{2, 4, 2, 2, 999, 128}, {999, 999}, DType::bf16, true, kRule, false);
}

TEST_CASE("step 10 on the CPU: every head dimension in bf16 and fp16", "[emulated][decode]") {
  for (DType dtype : {DType::bf16, DType::fp16})
    for (int d : {64, 128, 256}) {
      check(DecodeShape{1, 4, 1, 1, 700, d}, {700}, dtype, false, 1);
      check(DecodeShape{1, 4, 1, 3, 700, d}, {700}, dtype, true, 4);
    }
}

// The combine kernel alone, on partial results of its own making, against the merge computed
// directly in double: LSE = log Σ_s e^{LSE_s}, O = Σ_s e^{LSE_s − LSE} O_s. Splits that saw no key
// (LSE_s = −inf) weigh nothing, and a row that no split saw a key of gets O = 0, LSE = −inf.
TEST_CASE("step 10 on the CPU: the combine merges the splits by their LSE", "[emulated][decode]") {
  for (int d : {64, 128, 256})
    for (int splits : {2, 5, 40}) {
      DYNAMIC_SECTION("d=" << d << " splits=" << splits) {
        const DecodeShape s = DecodeShape{2, 3, 1, 2, 16, d};
        const std::int64_t rows = s.rows();
        std::vector<float> ws(fs::decoding::decode_workspace_bytes(s, splits) / sizeof(float));
        float* o_part = ws.data();
        float* lse_part = o_part + rows * splits * d;
        std::mt19937 rng(17 + d + splits);
        std::normal_distribution<float> normal;
        std::uniform_real_distribution<float> uniform(-6.f, 6.f);
        for (std::int64_t i = 0; i < rows * splits * d; ++i) o_part[i] = normal(rng);
        for (std::int64_t i = 0; i < rows * splits; ++i) lse_part[i] = uniform(rng);
        for (std::int64_t r = 0; r < rows; ++r) lse_part[r * splits + r % splits] = -INFINITY;  // a split without keys
        for (int i = 0; i < splits; ++i) lse_part[3 * splits + i] = -INFINITY;  // row 3: no split saw a key
        for (int i = 0; i < d * splits; ++i) o_part[3 * splits * d + i] = 0.f;  // as the split kernel leaves it

        std::vector<__nv_bfloat16> o(static_cast<std::size_t>(s.q_elems()), __nv_bfloat16(NAN));
        std::vector<float> lse(static_cast<std::size_t>(rows), NAN);
        fs::decoding::DecodeParams p;
        p.o = o.data();
        p.lse = lse.data();
        p.dtype = DType::bf16;
        p.shape = s;
        p.num_splits = splits;
        p.workspace = ws.data();
        fs::testing::with_decode_type(DType::bf16, d, [&](auto*, auto dim) {
          fs::testing::decode_combine_emulated<__nv_bfloat16, decltype(dim)::value>(p);
        });
        for (std::int64_t r = 0; r < rows; ++r) {
          const int t = static_cast<int>(r % s.new_tokens), h = static_cast<int>(r / s.new_tokens % s.heads),
                    b = static_cast<int>(r / s.new_tokens / s.heads);
          double top = -INFINITY, sum = 0;
          for (int i = 0; i < splits; ++i) top = std::max(top, double(lse_part[r * splits + i]));
          if (top != -INFINITY)
            for (int i = 0; i < splits; ++i) sum += std::exp(double(lse_part[r * splits + i]) - top);
          const double want_lse = top == -INFINITY ? -INFINITY : top + std::log(sum);
          INFO("row " << r);
          if (want_lse == -INFINITY) REQUIRE(lse[r] == -INFINITY);
          else REQUIRE(std::abs(lse[r] - want_lse) <= 4e-6 * std::max(1.0, std::abs(want_lse)));
          const __nv_bfloat16* got = o.data() + ((std::int64_t(b) * s.new_tokens + t) * s.heads + h) * d;
          for (int c = 0; c < d; ++c) {
            double want = 0;
            if (want_lse != -INFINITY)
              for (int i = 0; i < splits; ++i)
                want += std::exp(double(lse_part[r * splits + i]) - want_lse) * o_part[(r * splits + i) * d + c];
            const double err = std::abs(double(float(got[c])) - want);
            INFO("column " << c << ": got " << float(got[c]) << ", want " << want);
            REQUIRE(err <= fs::ulp(DType::bf16, std::abs(want)) + 1e-5);  // a rounding to bf16, and fp32 sums of ≤ 40 terms
          }
        }
      }
    }
}

// cache_batch_idx (flash_attn_with_kvcache's): a cache of 5 sequences of their own lengths, a batch
// of 4 that reads sequences 3, 0, 3 and 4 of it (one twice); the result equals, bit for bit, a run
// on the cache's rows gathered by hand into a batch of its own, and is within the rule. With ALiBi
// slopes of shape (batch, heads) too: sequence b of the batch takes row b, wherever its keys are
// in the cache (batch 0 and 2 read one cache sequence with other slopes; batch 3 reads sequence 4,
// past the table's rows).
TEST_CASE("step 10 on the CPU: cache_batch_idx picks the cache's sequences", "[emulated][decode][batch_idx]") {
  const DecodeShape cache_shape{5, 16, 4, 2, 900, 128};
  const auto cache = fs::decoding::random_decode_problem(cache_shape, {0, 100, 777, 900, 5}, DType::bf16, 61);
  auto h = fs::decoding::batch_from_cache(cache, {3, 0, 3, 4}, 62);
  const bool alibi = GENERATE(false, true);
  if (alibi) fs::testing::ModsCase{-1, -1, 0.f, true, true}.apply(h);
  const auto gathered = fs::testing::gathered_by_hand(h, cache);
  for (int splits : {1, 3})
    for (bool causal : {false, true}) {
      DYNAMIC_SECTION("splits=" << splits << (causal ? " causal" : "") << (alibi ? " alibi (batch, heads)" : "")) {
        const auto got = fs::testing::decode_run(h, causal, splits);
        const auto want = fs::testing::decode_run(gathered, causal, splits);
        REQUIRE(got.o == want.o);
        REQUIRE(got.lse == want.lse);
        fs::testing::require_decode_within_rule(h, causal, got.o, got.lse, 63);
      }
    }
}

// flash_attn_with_kvcache's window_size, softcap and alibi_slopes (DecodeParams::mods), each alone
// and together, causal and not, several new tokens (each its own diagonal), per-sequence lengths
// (the window's first key differs per sequence and row), splits 1 and 3 (a window leaves some
// splits no tile): against the fp64 reference, which applies them as step 08's features do.
TEST_CASE("step 10 on the CPU: sliding window, softcap and ALiBi", "[emulated][decode][mods]") {
  const fs::testing::ModsCase cases[] = {{100, -1, 0.f, false},      {37, 5, 0.f, false},  {-1, -1, 5.f, false},
                                         {-1, -1, 0.f, true},        {250, 0, 30.f, true}, {0, 0, 0.f, false},
                                         {-1, -1, 0.f, true, true},  // a row of slopes per sequence
                                         {250, 0, 30.f, true, true}};
  const DecodeShape s{3, 8, 2, 4, 1000, 128};
  for (const fs::testing::ModsCase& c : cases)
    for (bool causal : {false, true})
      for (int splits : {1, 3}) {
        DYNAMIC_SECTION(c.name(causal, splits)) {
          auto h = fs::decoding::random_decode_problem(s, {1000, 333, 2}, DType::bf16, 91 + splits);
          c.apply(h);
          const auto got = fs::testing::decode_run(h, causal, splits);
          fs::testing::require_decode_within_rule(h, causal, got.o, got.lse, 92);
        }
      }
}
