// Step 10's append on the CPU (flash_attn_with_kvcache's k, v): the append kernel (append.cuh)
// writes the new tokens' keys and values into the cache, contiguous or in shuffled pages of 16
// (through the block table), then the split kernel attends over cache_seqlens + n keys, causal at
// the bottom-right. Per case, run by the emulator (tests/decode_emulated.hpp):
//   - the cache after the run equals the reference's append (DecodeHost::appended) exactly, every
//     row (the rows the append does not own as they were: NaN ones stay NaN, in the paged layout);
//   - O and LSE pass the project's rule against the fp64 reference on the appended problem;
//   - O and LSE equal, bit for bit, a run without append on that problem (the cache filled by hand).
// Lengths per sequence 0, 1, 17 and room − n (exactly full after the append), and as one length;
// 1 and 4 new tokens; splits 1 and 3; and with a rotary embedding, which the reference applies as
// the kernel does (rotary.hpp), so that those runs too equal the plain run bit for bit.
#include "common/emulator/emulator.hpp"  // first: it defines threadIdx, __syncthreads, ... for the kernels

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "steps/10_decode/decode.hpp"
#include "steps/10_decode/decode_reference.hpp"
#include "tests/decode_checks.hpp"
#include "tests/decode_emulated.hpp"

namespace {

using fs::DType;
using fs::decoding::DecodeShape;

// Equal element for element, a NaN equal to a NaN (the paged layout's unused rows, whose payload
// the round trip through the 16-bit type changes): every other value bit for bit.
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) {
      if (!(std::isnan(a[i]) && std::isnan(b[i]))) return false;
    } else if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) {
      return false;
    }
  }
  return true;
}

// rotary_dim > 0: the new keys and q turned by tables of that many columns (interleaved or not).
void check_append(const DecodeShape& s, const std::vector<std::int32_t>& lens, DType dtype, int page_size, bool causal,
                  int splits, bool per_sequence = true, int rotary_dim = 0, bool interleaved = false) {
  DYNAMIC_SECTION(fs::testing::decode_case(s, lens, dtype, causal, splits, per_sequence, page_size)
                  << (rotary_dim ? " rotary " + std::to_string(rotary_dim) + (interleaved ? " interleaved" : "") : "")) {
    const std::uint64_t seed = 4099 + 13 * std::uint64_t(lens.back()) + s.d + 5 * s.new_tokens + splits + page_size;
    const fs::decoding::DecodeHost base = fs::decoding::random_decode_problem(s, lens, dtype, seed);
    const fs::decoding::DecodeHost h = page_size ? fs::decoding::paged_layout(base, page_size, seed + 1) : base;
    const auto k_new = fs::decoding::random_new_rows(s, dtype, seed + 2);
    const auto v_new = fs::decoding::random_new_rows(s, dtype, seed + 3);
    const fs::decoding::RotaryTables rot =
        rotary_dim ? fs::decoding::rotary_tables(s.seqlen_cache, rotary_dim, interleaved, dtype) : fs::decoding::RotaryTables{};
    const fs::decoding::RotaryTables* rp = rotary_dim ? &rot : nullptr;
    const fs::decoding::DecodeHost want = h.appended(k_new, v_new, rp, causal);  // the cache (and q) by hand
    const auto got = fs::testing::decode_run(h, causal, splits, per_sequence, &k_new, &v_new, rp);
    REQUIRE(same_bits(got.k, want.k));
    REQUIRE(same_bits(got.v, want.v));
    const auto plain = fs::testing::decode_run(want, causal, splits, per_sequence);
    REQUIRE(got.o == plain.o);  // no NaN: every row is written
    REQUIRE(got.lse == plain.lse);
    fs::testing::require_decode_within_rule(want, causal, got.o, got.lse, seed);
  }
}

}  // namespace

// Four sequences of their own lengths (empty, one key, a page and a key, full after the append),
// grouped-query ratio 4, contiguous and in pages of 16, causal and not.
TEST_CASE("step 10 on the CPU, append: per-sequence lengths, contiguous and paged", "[emulated][decode][append]") {
  for (int page : {0, 16})
    for (int n : {1, 4})
      for (int splits : {1, 3})
        for (bool causal : {true, false})
          check_append(DecodeShape{4, 8, 2, n, 304, 128}, {0, 1, 17, 304 - n}, DType::bf16, page, causal, splits);
}

// One length for every sequence (cache_len: the kernels add n to it themselves), d = 64 and 256.
TEST_CASE("step 10 on the CPU, append: one length, d = 64 and 256", "[emulated][decode][append]") {
  for (int d : {64, 256})
    for (int page : {0, 16})
      for (int L : {0, 17}) check_append(DecodeShape{2, 4, 2, 4, 40, d}, {L, L}, DType::fp16, page, true, 3, false);
}

// A rotary embedding (flash_attn_with_kvcache's rotary_cos, rotary_sin): the new keys turned as
// they are appended, q at the same positions (causal) or at the sequence's length (not), both
// layouts of the pairs, over all of d and over part of it (columns past rotary_dim untouched).
TEST_CASE("step 10 on the CPU, append with a rotary embedding", "[emulated][decode][append][rotary]") {
  for (bool interleaved : {false, true})
    for (int rotary_dim : {128, 64, 20})
      for (bool causal : {true, false})
        check_append(DecodeShape{2, 8, 2, 4, 300, 128}, {0, 141}, DType::bf16, 0, causal, 3, true, rotary_dim, interleaved);
  for (int page : {0, 16})  // paged, one length, fp16, d = 64
    check_append(DecodeShape{2, 4, 2, 3, 60, 64}, {33, 33}, DType::fp16, page, true, 1, false, 64, false);
}

// An append through cache_batch_idx writes the cache's picked sequences, and no other: a cache of
// 4 sequences, a batch of 2 reading sequences 3 and 1.
TEST_CASE("step 10 on the CPU, append through cache_batch_idx", "[emulated][decode][append][batch_idx]") {
  const DecodeShape cache_shape{4, 8, 2, 3, 64, 64};
  const auto cache = fs::decoding::random_decode_problem(cache_shape, {10, 20, 30, 40}, DType::bf16, 71);
  const auto h = fs::decoding::batch_from_cache(cache, {3, 1}, 72);
  const auto k_new = fs::decoding::random_new_rows(h.shape, DType::bf16, 73);
  const auto v_new = fs::decoding::random_new_rows(h.shape, DType::bf16, 74);
  const auto want = h.appended(k_new, v_new);
  const auto got = fs::testing::decode_run(h, true, 2, true, &k_new, &v_new);
  REQUIRE(same_bits(got.k, want.k));
  REQUIRE(same_bits(got.v, want.v));
  // sequences 0 and 2 as they were; 1 and 3 grew by the new rows at keys 20.. and 40..
  const std::size_t seq = std::size_t(cache_shape.seqlen_cache) * cache_shape.heads_kv * cache_shape.d;
  REQUIRE(std::equal(got.k.begin(), got.k.begin() + seq, cache.k.begin()));
  REQUIRE(std::equal(got.k.begin() + 2 * seq, got.k.begin() + 3 * seq, cache.k.begin() + 2 * seq));
  REQUIRE_FALSE(std::equal(got.k.begin() + 3 * seq, got.k.end(), cache.k.begin() + 3 * seq));
  fs::testing::require_decode_within_rule(want, true, got.o, got.lse, 75);
}

// With a window and no causal mask, flash_attn_with_kvcache still turns each new token's query at
// its own position (local attention is positional): the reference turns them so, and the run must
// equal it bit for bit, as the rotary cases above.
TEST_CASE("step 10 on the CPU, append with rotary under a window", "[emulated][decode][append][rotary]") {
  const DecodeShape s{2, 8, 2, 4, 200, 64};
  for (bool interleaved : {false, true}) {
    DYNAMIC_SECTION((interleaved ? "interleaved" : "halves")) {
      fs::decoding::DecodeHost h = fs::decoding::random_decode_problem(s, {50, 120}, DType::bf16, 301);
      h.mods.window_left = 30;
      h.mods.window_right = 2;
      const auto k_new = fs::decoding::random_new_rows(s, DType::bf16, 302);
      const auto v_new = fs::decoding::random_new_rows(s, DType::bf16, 303);
      const auto rot = fs::decoding::rotary_tables(s.seqlen_cache, 64, interleaved, DType::bf16);
      const fs::decoding::DecodeHost want = h.appended(k_new, v_new, &rot, true);  // windowed: per token
      const auto got = fs::testing::decode_run(h, false, 3, true, &k_new, &v_new, &rot);
      const auto plain = fs::testing::decode_run(want, false, 3, true);
      REQUIRE(same_bits(got.k, want.k));
      REQUIRE(got.o == plain.o);
      REQUIRE(got.lse == plain.lse);
      fs::testing::require_decode_within_rule(want, false, got.o, got.lse, 304);
    }
  }
}
