// Step 10's host side, on the CPU: the split rule (split_rule.hpp) and how splits deal out the
// tiles; what the launcher refuses and the workspace it needs (decode.hpp); and the step's fp64
// reference against the project's own (common/reference.hpp), the decode problem written as packed
// sequences (flash_attn_varlen_func's form: sequence b's n queries against its L_b keys, causal at
// its bottom-right corner).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/reference.hpp"
#include "steps/10_decode/decode.hpp"
#include "steps/10_decode/decode_io.hpp"
#include "steps/10_decode/decode_reference.hpp"
#include "steps/10_decode/rotary.hpp"
#include "steps/10_decode/split_rule.hpp"

using fs::decoding::num_splits;
using fs::decoding::split_tiles;

TEST_CASE("the split rule fills one wave of one CTA per SM, within its bounds", "[decode][split_rule]") {
  // batch 1, 8 K/V heads, 132 SMs: 8 CTAs without splits; 16 splits make 128, one per SM.
  REQUIRE(num_splits(1, 8, 131072, 132) == 16);
  REQUIRE(num_splits(1, 8, 32768, 132) == 16);
  // A 4K cache holds 8 splits of 512 keys: the keys bound wins.
  REQUIRE(num_splits(1, 8, 4096, 132) == 8);
  // batch 8: 64 CTAs; ⌊132 / 64⌋ = 2 splits (5, a wave and a bit, measured 8-12% slower).
  REQUIRE(num_splits(8, 8, 32768, 132) == 2);
  // batch 64 (512 CTAs) fills the GPU already: no splits, no merge.
  REQUIRE(num_splits(64, 8, 131072, 132) == 1);
  REQUIRE(num_splits(17, 8, 131072, 132) == 1);  // 136 CTAs: more than a wave
  // Short caches: no split below 2 × 512 keys.
  REQUIRE(num_splits(1, 8, 1023, 132) == 1);
  REQUIRE(num_splits(1, 8, 0, 132) == 1);
  // The cap: one K/V head on a large GPU would want 132 splits.
  REQUIRE(num_splits(1, 1, 1 << 20, 132) == fs::decoding::kMaxSplits);
  // Row blocks are CTAs too: g·n = 128 rows are 8 CTAs per K/V head.
  REQUIRE(num_splits(1, 8, 131072, 132, 8) == 2);
  // Every input within bounds; never more CTAs than SMs when split; the most splits that allows.
  for (int batch : {1, 2, 3, 8, 50})
    for (int hkv : {1, 2, 8, 32})
      for (int L : {1, 300, 4097, 100000})
        for (int sms : {1, 80, 132}) {
          const int s = num_splits(batch, hkv, L, sms);
          INFO("batch " << batch << " heads_kv " << hkv << " cache " << L << " SMs " << sms << ": " << s << " splits");
          REQUIRE(s >= 1);
          REQUIRE(s <= fs::decoding::kMaxSplits);
          REQUIRE((s == 1 || s <= L / fs::decoding::kMinKeysPerSplit));
          const std::int64_t ctas = std::int64_t(batch) * hkv;
          if (s > 1) REQUIRE(ctas * s <= sms);
          const bool bounded = s == fs::decoding::kMaxSplits || s == std::max(1, L / fs::decoding::kMinKeysPerSplit);
          if (!bounded && ctas < sms) REQUIRE(ctas * (s + 1) > sms);
        }
}

TEST_CASE("the splits deal out every key tile once, in order", "[decode][split_rule]") {
  for (int keys : {0, 1, 63, 64, 65, 1000, 4097})
    for (int splits : {1, 2, 3, 7, 64}) {
      INFO(keys << " keys, " << splits << " splits");
      int next = 0;
      for (int s = 0; s < splits; ++s) {
        const auto t = split_tiles(keys, 64, s, splits);
        if (t.count == 0) continue;
        REQUIRE(t.first == next);
        next += t.count;
      }
      REQUIRE(next == (keys + 63) / 64);
    }
}

TEST_CASE("step 10 refuses what its kernels do not take, in one line each", "[decode]") {
  fs::decoding::DecodeShape s;  // 32 heads over 8, d = 128, one token
  REQUIRE(fs::decoding::decode_unsupported(s, fs::DType::bf16, 1).empty());
  REQUIRE(fs::decoding::decode_unsupported(s, fs::DType::fp32, 1).find("bf16 or fp16") != std::string::npos);
  s.d = 96;
  REQUIRE(fs::decoding::decode_unsupported(s, fs::DType::fp16, 1).find("64, 128 or 256") != std::string::npos);
  s.d = 128;
  s.heads_kv = 5;
  REQUIRE(fs::decoding::decode_unsupported(s, fs::DType::bf16, 1).find("multiple") != std::string::npos);
  s.heads_kv = 8;
  s.new_tokens = 17;
  REQUIRE(fs::decoding::decode_unsupported(s, fs::DType::bf16, 1).find("new tokens") != std::string::npos);
  s.new_tokens = 16;
  REQUIRE(fs::decoding::decode_unsupported(s, fs::DType::bf16, 0).find("splits") != std::string::npos);
  REQUIRE(fs::decoding::decode_unsupported(s, fs::DType::bf16, fs::decoding::kMaxSplits + 1).find("splits") !=
          std::string::npos);
  // The workspace: (rows, splits, d) partial O and (rows, splits) LSE, floats; none for one split.
  REQUIRE(fs::decoding::decode_workspace_bytes(s, 1) == 0);
  REQUIRE(fs::decoding::decode_workspace_bytes(s, 3) == sizeof(float) * std::size_t(s.rows()) * 3 * (128 + 1));
}

// Sequence b's queries are rows [b·n, b·n + n) and its keys [cu_k[b], cu_k[b+1]) of a packed problem
// of one batch; q, k, v moved from decode's layouts into the packed (1, heads, tokens, d) ones.
TEST_CASE("step 10's reference equals the project's reference on the same problem as packed sequences",
          "[decode][reference]") {
  for (bool causal : {false, true}) {
    const fs::decoding::DecodeShape s{4, 6, 2, 3, 40, 64};  // batch, heads, heads_kv, n, room, d
    const std::vector<std::int32_t> lens = {0, 2, 40, 17};  // empty; fewer keys than tokens; full; odd
    const fs::decoding::DecodeHost h = fs::decoding::random_decode_problem(s, lens, fs::DType::bf16, 5);
    const int n = s.new_tokens, d = s.d, tokens = s.batch * n;
    std::vector<std::int32_t> cu_q{0}, cu_k{0};
    for (int b = 0; b < s.batch; ++b) {
      cu_q.push_back(cu_q.back() + n);
      cu_k.push_back(cu_k.back() + lens[b]);
    }
    const int keys = cu_k.back();
    std::vector<float> q(std::size_t(s.heads) * tokens * d), k(std::size_t(s.heads_kv) * keys * d), v(k.size());
    for (int b = 0; b < s.batch; ++b)
      for (int c = 0; c < d; ++c) {
        for (int t = 0; t < n; ++t)
          for (int head = 0; head < s.heads; ++head)
            q[(std::size_t(head) * tokens + b * n + t) * d + c] = h.q[((std::size_t(b) * n + t) * s.heads + head) * d + c];
        for (int j = 0; j < lens[b]; ++j)
          for (int hk = 0; hk < s.heads_kv; ++hk) {
            const std::size_t from = ((std::size_t(b) * s.seqlen_cache + j) * s.heads_kv + hk) * d + c;
            const std::size_t to = (std::size_t(hk) * keys + cu_k[b] + j) * d + c;
            k[to] = h.k[from];
            v[to] = h.v[from];
          }
      }
    fs::Shape packed{1, s.heads, tokens, d};
    packed.Nk = keys;
    packed.Hkv = s.heads_kv;
    const float scale = 1.f / std::sqrt(float(d));
    fs::AttnOptions opt(scale, causal);
    opt.cu_seqlens_q = &cu_q;
    opt.cu_seqlens_k = &cu_k;
    std::vector<double> o_ref, lse_ref;
    fs::reference_forward<double>(packed, q.data(), k.data(), v.data(), opt, fs::all_indices(packed.rows()), o_ref,
                                  lse_ref);
    for (int head = 0; head < s.heads; ++head)
      for (int b = 0; b < s.batch; ++b)
        for (int t = 0; t < n; ++t) {
          const std::int64_t row = (std::int64_t(b) * s.heads + head) * n + t;
          const std::int64_t packed_row = std::int64_t(head) * tokens + b * n + t;
          std::vector<double> o(d);
          double lse = 0;
          fs::decoding::decode_reference_row<double>(h, scale, causal, row, o.data(), &lse);
          INFO((causal ? "causal " : "") << "sequence " << b << " (" << lens[b] << " keys), head " << head
                                         << ", token " << t);
          if (std::isinf(lse_ref[packed_row])) {
            REQUIRE(lse == lse_ref[packed_row]);
          } else {
            REQUIRE(std::abs(lse - lse_ref[packed_row]) <= 1e-12);
          }
          for (int c = 0; c < d; ++c) REQUIRE(std::abs(o[c] - o_ref[packed_row * d + c]) <= 1e-12);
        }
  }
}

TEST_CASE("step 10 refuses an inconsistent paged cache, in one line each", "[decode][paged]") {
  using fs::decoding::paging_unsupported;
  fs::decoding::DecodeShape s;
  s.seqlen_cache = 1000;
  const auto says = [](const std::string& why, const char* what) {
    INFO(why);
    return why.find(what) != std::string::npos && why.find('\n') == std::string::npos;
  };
  REQUIRE(paging_unsupported(s, false, 0, 0).empty());  // contiguous
  for (int page : {16, 32, 256, 1024}) REQUIRE(paging_unsupported(s, true, page, (1000 + page - 1) / page).empty());
  for (int page : {0, 8, 15, 24, 100, 255, -16, 1 << 21})
    REQUIRE(says(paging_unsupported(s, true, page, 1000), "power of two"));
  REQUIRE(says(paging_unsupported(s, false, 16, 63), "without a block table"));
  REQUIRE(says(paging_unsupported(s, false, 0, 4), "without a block table"));
  REQUIRE(says(paging_unsupported(s, true, 16, 0), "at least one block"));
  REQUIRE(says(paging_unsupported(s, true, 16, 62), "fewer than seqlen_cache"));  // 992 < 1000 keys
  REQUIRE(paging_unsupported(s, true, 16, 63).empty());                           // 1008
}

// The reference's gather through the block table: the same problem with its cache in shuffled
// pages gives the same rows, bit for bit, in both precisions (the same values in the same order).
TEST_CASE("step 10's reference on a paged cache equals it on the contiguous one", "[decode][reference][paged]") {
  const fs::decoding::DecodeShape s{4, 8, 2, 4, 1000, 64};  // batch, heads, heads_kv, n, room, d
  const std::vector<std::int32_t> lens = {0, 1, 17, 1000};
  const fs::decoding::DecodeHost h = fs::decoding::random_decode_problem(s, lens, fs::DType::bf16, 11);
  for (int page : {16, 256}) {
    const fs::decoding::DecodeHost paged = fs::decoding::paged_layout(h, page, 3 + page);
    REQUIRE(paged.max_blocks_per_seq == (1000 + page - 1) / page);
    REQUIRE(paged.num_blocks() == s.batch * paged.max_blocks_per_seq + 1);
    // The pages are shuffled: the table is a permutation's prefix, not 0, 1, 2, ...
    std::vector<std::int32_t> sorted = paged.block_table;
    std::sort(sorted.begin(), sorted.end());
    REQUIRE(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
    REQUIRE(paged.block_table != sorted);
    for (bool causal : {false, true})
      for (std::int64_t row = 0; row < s.rows(); ++row) {
        INFO("page " << page << (causal ? " causal" : "") << " row " << row);
        std::vector<double> o(s.d), o_paged(s.d);
        std::vector<float> o32(s.d), o32_paged(s.d);
        double lse = 0, lse_paged = 0;
        float lse32 = 0, lse32_paged = 0;
        fs::decoding::decode_reference_row<double>(h, 0.125f, causal, row, o.data(), &lse);
        fs::decoding::decode_reference_row<double>(paged, 0.125f, causal, row, o_paged.data(), &lse_paged);
        fs::decoding::decode_reference_row<float>(h, 0.125f, causal, row, o32.data(), &lse32);
        fs::decoding::decode_reference_row<float>(paged, 0.125f, causal, row, o32_paged.data(), &lse32_paged);
        REQUIRE(o == o_paged);
        REQUIRE(lse == lse_paged);
        REQUIRE(o32 == o32_paged);
        REQUIRE(lse32 == lse32_paged);
      }
  }
  REQUIRE_THROWS(fs::decoding::paged_layout(h, 24, 1));  // not a power of two
}

// Appending refuses what overflows the cache's room: any sequence's length + n past seqlen_cache,
// as the one length (cache_len) or per sequence; in one line, in append_unsupported and in the
// reference's appended().
TEST_CASE("step 10 refuses an append that overflows the cache, in one line", "[decode][append]") {
  using fs::decoding::append_unsupported;
  const fs::decoding::DecodeShape s{3, 8, 2, 4, 100, 64};
  const auto says = [](const std::string& why) {
    INFO(why);
    return why.find("overflows the cache's room of 100") != std::string::npos && why.find('\n') == std::string::npos;
  };
  REQUIRE(append_unsupported(s, nullptr, 96).empty());  // 96 + 4 = 100: exactly full
  REQUIRE(says(append_unsupported(s, nullptr, 97)));
  REQUIRE(says(append_unsupported(s, nullptr, -1)));
  const std::vector<std::int32_t> fits = {0, 96, 50}, over = {0, 97, 50};
  REQUIRE(append_unsupported(s, fits.data(), 0).empty());
  REQUIRE(says(append_unsupported(s, over.data(), 0)));
  const auto h = fs::decoding::random_decode_problem(s, over, fs::DType::bf16, 5);
  const auto kn = fs::decoding::random_new_rows(s, fs::DType::bf16, 6);
  REQUIRE_THROWS_WITH(h.appended(kn, kn), Catch::Contains("overflows the cache's room"));
  const auto paged = fs::decoding::paged_layout(fs::decoding::random_decode_problem(s, fits, fs::DType::bf16, 5), 16, 7);
  REQUIRE_NOTHROW(paged.appended(kn, kn));
}

// The reference's append, against a plain computation: token t of sequence b attends over the
// cache's first L_b keys followed by new keys 0..t (causal) or 0..n−1, written out here from the
// problem before the append and k_new, v_new; contiguous and in shuffled pages of 16, lengths 0,
// 1, 17 and room − n.
TEST_CASE("step 10's reference appends, then attends", "[decode][reference][append]") {
  const fs::decoding::DecodeShape s{4, 4, 2, 4, 40, 64};
  const std::vector<std::int32_t> lens = {0, 1, 17, 36};
  const auto base = fs::decoding::random_decode_problem(s, lens, fs::DType::fp16, 21);
  const auto kn = fs::decoding::random_new_rows(s, fs::DType::fp16, 22);
  const auto vn = fs::decoding::random_new_rows(s, fs::DType::fp16, 23);
  const float scale = 0.125f;
  for (int page : {0, 16}) {
    const auto h = page ? fs::decoding::paged_layout(base, page, 9) : base;
    const auto a = h.appended(kn, vn);
    for (int b = 0; b < s.batch; ++b) REQUIRE(a.seqlens[b] == lens[b] + s.new_tokens);
    for (bool causal : {false, true})
      for (std::int64_t row = 0; row < s.rows(); ++row) {
        const int t = int(row % s.new_tokens), head = int(row / s.new_tokens % s.heads);
        const int b = int(row / s.new_tokens / s.heads), hk = head / s.group();
        // The keys this row sees, as (k, v) rows, from the problem before the append and k_new.
        std::vector<const float*> ks, vs;
        for (int j = 0; j < lens[b]; ++j) {
          ks.push_back(h.k.data() + h.key_row(b, hk, j));
          vs.push_back(h.v.data() + h.key_row(b, hk, j));
        }
        for (int u = 0; u < (causal ? t + 1 : s.new_tokens); ++u) {
          const std::size_t at = ((std::size_t(b) * s.new_tokens + u) * s.heads_kv + hk) * s.d;
          ks.push_back(kn.data() + at);
          vs.push_back(vn.data() + at);
        }
        const float* q = base.q.data() + ((std::size_t(b) * s.new_tokens + t) * s.heads + head) * s.d;
        std::vector<double> sc(ks.size()), o(s.d, 0.0);
        double mx = -INFINITY, sum = 0;
        for (std::size_t j = 0; j < ks.size(); ++j) {
          double x = 0;
          for (int c = 0; c < s.d; ++c) x += double(q[c]) * ks[j][c];
          sc[j] = x * scale;
          mx = std::max(mx, sc[j]);
        }
        for (std::size_t j = 0; j < ks.size(); ++j) {
          const double p = std::exp(sc[j] - mx);
          sum += p;
          for (int c = 0; c < s.d; ++c) o[c] += p * vs[j][c];
        }
        std::vector<double> got(s.d);
        double lse = 0;
        fs::decoding::decode_reference_row<double>(a, scale, causal, row, got.data(), &lse);
        INFO("page " << page << (causal ? " causal" : "") << " row " << row);
        REQUIRE(lse == Approx(mx + std::log(sum)).epsilon(1e-12));
        for (int c = 0; c < s.d; ++c) REQUIRE(got[c] == Approx(o[c] / sum).epsilon(1e-12).margin(1e-12));
      }
  }
}

// The rotary embedding against its definition written out (RoFormer; GPT-NeoX's layout rotates
// x · cos + rotate_half(x) · sin with rotate_half(x) = (−x₂, x₁) over the halves; GPT-J's the same
// over neighbouring pairs), independently of rotary_pair: columns 0..5 of 8 rotated, 6 and 7 kept.
TEST_CASE("step 10's rotary embedding turns the pairs flash_attn_with_kvcache turns", "[decode][rotary]") {
  const fs::decoding::RotaryTables r = fs::decoding::rotary_tables(5, 6, false, fs::DType::fp32);
  REQUIRE(r.cos[0] == 1.f);  // position 0: no turn
  REQUIRE(r.sin[0] == 0.f);
  const int pos = 4, half = 3;
  const float x[8] = {0.5f, -1.25f, 2.f, 0.75f, -0.5f, 1.5f, 3.f, -3.f};
  for (bool interleaved : {false, true}) {
    float want[8], got[8];
    for (int c = 0; c < 8; ++c) want[c] = got[c] = x[c];
    for (int i = 0; i < half; ++i) {
      const double cs = r.cos[pos * half + i], sn = r.sin[pos * half + i];
      const int a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
      want[a] = float(x[a] * cs - x[b] * sn);
      want[b] = float(x[b] * cs + x[a] * sn);
    }
    for (int c = 0; c < 6; ++c) {
      const fs::decoding::RotaryPair p = fs::decoding::rotary_pair(c, 6, interleaved);
      got[c] = fs::decoding::rotary_value(x[c], x[p.partner], r.cos[pos * half + p.angle], r.sin[pos * half + p.angle],
                                          p.first);
    }
    for (int c = 0; c < 8; ++c) {
      INFO((interleaved ? "interleaved" : "halves") << ", column " << c);
      REQUIRE(got[c] == Approx(want[c]).epsilon(1e-6));
    }
  }
}

TEST_CASE("step 10 refuses an inconsistent rotary embedding, in one line each", "[decode][rotary]") {
  fs::decoding::DecodeParams p;
  p.shape = fs::decoding::DecodeShape{1, 8, 2, 2, 100, 64};
  p.cache_len = 50;
  REQUIRE(fs::decoding::rotary_unsupported(p).empty());  // none
  const std::int16_t table[2] = {};
  p.rotary_cos = p.rotary_sin = table;
  p.rotary_dim = 64;
  p.rotary_len = 52;
  REQUIRE(fs::decoding::rotary_unsupported(p).find("needs the new tokens") != std::string::npos);
  p.k_new = p.v_new = table;
  REQUIRE(fs::decoding::rotary_unsupported(p).empty());  // positions 50, 51 within 52 rows
  p.rotary_len = 51;
  REQUIRE(fs::decoding::rotary_unsupported(p).find("end before the last new token") != std::string::npos);
  p.rotary_len = 52;
  for (int dim : {0, 3, 66}) {
    p.rotary_dim = dim;
    REQUIRE(fs::decoding::rotary_unsupported(p).find("rotary_dim must be even") != std::string::npos);
  }
  p.rotary_dim = 64;
  p.rotary_sin = nullptr;
  REQUIRE(fs::decoding::rotary_unsupported(p).find("come together") != std::string::npos);
  // With more than one split, the turned q sits after the partial results, 16-byte aligned.
  REQUIRE(fs::decoding::decode_workspace_bytes(p.shape, 1, true) == 2 * std::size_t(p.shape.q_elems()));
  REQUIRE(fs::decoding::rotary_q_offset(p.shape, 3) % 16 == 0);
  REQUIRE(fs::decoding::decode_workspace_bytes(p.shape, 3, true) ==
          fs::decoding::rotary_q_offset(p.shape, 3) + 2 * std::size_t(p.shape.q_elems()));
}

TEST_CASE("step 10 refuses cache_batch_idx with a paged cache, in one line", "[decode][batch_idx]") {
  fs::decoding::DecodeParams p;
  const std::int32_t idx[1] = {0};
  REQUIRE(fs::decoding::batch_idx_unsupported(p).empty());
  p.cache_batch_idx = idx;
  REQUIRE(fs::decoding::batch_idx_unsupported(p).empty());  // contiguous
  p.block_table = idx;
  REQUIRE(fs::decoding::batch_idx_unsupported(p).find("a paged cache's are its block table's rows") != std::string::npos);
}

namespace {

fs::decoding::DecodeIoCase io_case(int batch, int heads, int heads_kv, int n, int room, int d, std::vector<std::int32_t> base,
                                   int splits, int tile_keys) {
  fs::decoding::DecodeIoCase c;
  c.shape = fs::decoding::DecodeShape{batch, heads, heads_kv, n, room, d};
  c.base = std::move(base);
  c.splits = splits;
  c.tile_keys = tile_keys;
  return c;
}

}  // namespace

TEST_CASE("step 10's IO model counts what the kernels schedule", "[decode][io]") {
  using fs::decoding::decode_io;
  SECTION("four splits of 1000 keys, one K/V head, four query heads: every key once, Q once per split") {
    const auto io = decode_io(io_case(1, 4, 1, 1, 1000, 64, {1000}, 4, 128));
    const std::int64_t q = 4 * 4 * 64 * 2, kv = 2 * 1000 * 64 * 2, combine = 4 * (4 * 4 + 4 * 64 * 4);
    REQUIRE(io.read_bytes == q + kv + combine);
    REQUIRE(io.write_bytes == 4 * 4 * (64 * 4 + 4) + 4 * (64 * 2 + 4));
  }
  SECTION("causal, 4 new tokens of 8 heads: two row blocks, the first one's keys end at its last token's diagonal") {
    auto c = io_case(1, 8, 1, 4, 100, 64, {100}, 1, 64);
    c.causal = true;
    const auto io = decode_io(c);
    // Block 0 holds tokens 0 and 1 (keys up to 97), block 1 tokens 2 and 3 (all 100).
    REQUIRE(io.read_bytes == 32 * 64 * 2 + 2 * (98 + 100) * 64 * 2);
    REQUIRE(io.write_bytes == 32 * (64 * 2 + 4));
  }
  SECTION("a window of 10 keys to the left: from the tile of key 989 on") {
    auto c = io_case(1, 1, 1, 1, 1000, 64, {1000}, 1, 64);
    c.window_left = 10;
    REQUIRE(decode_io(c).read_bytes == 64 * 2 + 2 * (1000 - 960) * 64 * 2);
  }
  SECTION("an append reads and writes the new rows that fit the room, and the keys grow by them") {
    auto c = io_case(1, 2, 2, 2, 5, 64, {4}, 1, 64);
    c.append = true;
    REQUIRE(c.keys(0) == 5);  // 4 + 2, at most the room
    const auto io = decode_io(c);
    const std::int64_t appended = 2 * 2 * 64 * 2;  // token 0 alone fits: K and V of 2 heads
    REQUIRE(io.read_bytes == appended + 2 * 2 * 64 * 2 + 2 * 2 * 5 * 64 * 2);
    REQUIRE(io.write_bytes == appended + 2 * 2 * (64 * 2 + 4));
  }
  SECTION("an empty cache: no key, no partial O read by the combine, only its LSEs") {
    const auto io = decode_io(io_case(1, 2, 1, 1, 1, 64, {0}, 2, 64));
    REQUIRE(io.read_bytes == 2 * 2 * 64 * 2 + 2 * (2 * 4));
  }
  SECTION("without masks, the splits deal each key out once, whatever their count") {
    for (int splits : {1, 2, 3, 7, 16})
      for (int tile : {64, 128}) {
        const auto c = io_case(3, 8, 2, 1, 5000, 128, {5000, 17, 4096}, splits, tile);
        const std::int64_t kv = 2 * std::int64_t(5000 + 17 + 4096) * 2 * 128 * 2;
        const std::int64_t q = std::int64_t(splits) * 3 * 8 * 128 * 2;
        const std::int64_t combine = splits > 1 ? 3 * 8 * (splits * 4 + splits * 128 * 4) : 0;
        INFO("splits " << splits << ", tiles of " << tile);
        REQUIRE(decode_io(c).read_bytes == q + kv + combine);
      }
  }
}
