// Step 10's paged KV cache on the CPU: the split kernel's paged instantiation (PagedCache,
// kv_cache.cuh) run by the emulator (tests/decode_emulated.hpp) on a problem whose cache lies in
// shuffled pages (paged_layout: pages of 16 or 256 keys in a random order, NaN in every row that is
// not one of a sequence's keys, a spare page no sequence uses), against
//   - the contiguous cache's run on the same values: bit for bit, since the kernel's arithmetic is
//     the same (only the rows' addresses differ), and
//   - the fp64 reference, gathering through the same block table, under the project's rule.
// Odd cache lengths (1, 17, 1000) as per-sequence lengths and as one length, grouped-query ratio 4,
// 1 and 4 new tokens, splits 1 and 3, causal and not; tiles of 64 keys (d = 128, 256) or 128 keys
// (d = 64) span 4 or 8 pages of 16, and lie inside a page of 256.
#include "common/emulator/emulator.hpp"  // first: it defines threadIdx, __syncthreads, ... for the kernels

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "steps/10_decode/decode.hpp"
#include "steps/10_decode/decode_reference.hpp"
#include "tests/decode_checks.hpp"
#include "tests/decode_emulated.hpp"

namespace {

using fs::DType;
using fs::decoding::DecodeShape;

// The same problem, contiguous and in shuffled pages of page_size keys: the paged run equal to the
// contiguous one bit for bit, and within the rule of the fp64 reference.
void check_paged(const DecodeShape& s, const std::vector<std::int32_t>& lens, DType dtype, int page_size, bool causal,
                 int splits, bool per_sequence = true) {
  DYNAMIC_SECTION(fs::testing::decode_case(s, lens, dtype, causal, splits, per_sequence, page_size)) {
    const std::uint64_t seed = 1237 + 17 * std::uint64_t(lens.back()) + s.d + 5 * s.new_tokens + splits + page_size;
    const fs::decoding::DecodeHost h = fs::decoding::random_decode_problem(s, lens, dtype, seed);
    const fs::decoding::DecodeHost paged = fs::decoding::paged_layout(h, page_size, seed + 1);
    const auto want = fs::testing::decode_run(h, causal, splits, per_sequence);
    const auto got = fs::testing::decode_run(paged, causal, splits, per_sequence);
    // Equal element for element (no NaN: every row is written, and a row that sees no key is 0, −inf).
    REQUIRE(got.o == want.o);
    REQUIRE(got.lse == want.lse);
    fs::testing::require_decode_within_rule(paged, causal, got.o, got.lse, seed);
  }
}

}  // namespace

// Three sequences of their own lengths (one key, a tile and a bit, many tiles with a tail),
// grouped-query ratio 4 (8 query heads over 2 K/V heads), 1 and 4 new tokens.
TEST_CASE("step 10 on the CPU, paged: pages of 16 and 256 in shuffled order, per-sequence lengths",
          "[emulated][decode][paged]") {
  for (int page : {16, 256})
    for (int n : {1, 4})
      for (int splits : {1, 3})
        for (bool causal : {false, true})
          check_paged(DecodeShape{3, 8, 2, n, 1000, 128}, {1, 17, 1000}, DType::bf16, page, causal, splits);
}

// One length for every sequence (cache_seqlens null), each of the odd lengths on its own: the cache's
// room is the length, so a sequence's last page is partly NaN (17 keys: a page of 16 and one key).
TEST_CASE("step 10 on the CPU, paged: odd cache lengths as one length", "[emulated][decode][paged]") {
  for (int L : {1, 17, 1000})
    for (int page : {16, 256})
      for (int splits : {1, 3})
        check_paged(DecodeShape{2, 8, 2, 4, L, 128}, {L, L}, DType::fp16, page, true, splits, false);
}

// The other head dimensions: d = 64's tiles of 128 keys span 8 pages of 16; d = 256's two stages.
TEST_CASE("step 10 on the CPU, paged: d = 64 and 256, an empty cache among the sequences",
          "[emulated][decode][paged]") {
  for (int d : {64, 256})
    for (int page : {16, 256})
      for (int splits : {1, 3})
        check_paged(DecodeShape{3, 8, 2, 4, 1000, d}, {0, 1000, 17}, DType::fp16, page, true, splits);
}
