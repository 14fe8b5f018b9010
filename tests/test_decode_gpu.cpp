// Step 10's kernels on the GPU (decode_forward: the split kernel and the combine) against the step's
// fp64 reference under the project's 16-bit rule: odd cache lengths, per-sequence lengths and empty
// caches, 1, 4 and 16 new tokens, grouped-query ratios 1, 4 and 8, splits 1, 3 and the rule's at
// this GPU's SM count, every head dimension in bf16 and fp16; and repeated runs bit for bit (no
// atomics: the merge's order is fixed); a paged cache (pages of 16 and 256 in shuffled order)
// equal bit for bit to the contiguous cache on the same values, and to the reference. Skipped
// (exit 77) without a GPU (tests/catch_main.cpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/buffer.hpp"
#include "common/device.hpp"
#include "common/recorder/sink.hpp"
#include "common/trace/validate.hpp"
#include "common/traced_run.hpp"
#include "common/verify.hpp"
#include "steps/10_decode/decode.hpp"
#include "steps/10_decode/decode_io.hpp"
#include "steps/10_decode/decode_reference.hpp"
#include "steps/10_decode/split_rule.hpp"
#include "tests/decode_checks.hpp"

namespace {

using fs::DType;
using fs::decoding::DecodeShape;

constexpr int kRule = 0;

struct GpuOutputs {
  std::vector<float> o, lse;
  std::vector<float> k, v;  // the cache after the run (changed only by an append)
};

// decode_forward on the GPU, outputs and workspace poisoned (NaN) first; h's cache contiguous or
// paged (h.page_size > 0: its block table uploaded too). k_new, v_new (both or neither): appended
// by the kernels before attending, h's lengths those before the append.
// rotary (with an append): the new keys and q turned by these tables.
// sink: a traced run, recording into it.
GpuOutputs run_gpu(const fs::decoding::DecodeHost& h, bool causal, int splits,
                   const std::vector<float>* k_new = nullptr, const std::vector<float>* v_new = nullptr,
                   const fs::decoding::RotaryTables* rotary = nullptr, fs::trace::DeviceSink* sink = nullptr) {
  const DecodeShape& s = h.shape;
  fs::DeviceTensor q(h.q.size(), h.dtype), k(h.k.size(), h.dtype), v(h.v.size(), h.dtype), o(h.q.size(), h.dtype);
  fs::DeviceBuffer<float> lse(static_cast<std::size_t>(s.rows()));
  fs::DeviceBuffer<float> ws((fs::decoding::decode_workspace_bytes(s, splits, rotary != nullptr) + 3) / sizeof(float));
  const std::size_t table_size = rotary ? rotary->cos.size() : 1;
  fs::DeviceTensor rot_cos(table_size, h.dtype), rot_sin(table_size, h.dtype);
  fs::DeviceBuffer<std::int32_t> lens(h.seqlens.size());
  fs::DeviceBuffer<std::int32_t> batch_idx(std::max<std::size_t>(1, h.cache_batch_idx.size()));
  fs::DeviceBuffer<float> slopes(std::max<std::size_t>(1, h.mods.alibi_slopes.size()));
  fs::DeviceBuffer<std::int32_t> table(std::max<std::size_t>(1, h.block_table.size()));
  const std::size_t new_size = k_new ? k_new->size() : 1;
  fs::DeviceTensor kn(new_size, h.dtype), vn(new_size, h.dtype);
  if (k_new) {
    kn.upload(*k_new);
    vn.upload(*v_new);
  }
  if (!h.block_table.empty()) table.upload(h.block_table.data(), h.block_table.size());
  q.upload(h.q);
  k.upload(h.k);
  v.upload(h.v);
  lens.upload(h.seqlens.data(), h.seqlens.size());
  o.poison();
  lse.poison();
  ws.poison();
  fs::decoding::DecodeParams p;
  p.q = q.get();
  p.k_cache = k.get();
  p.v_cache = v.get();
  p.cache_seqlens = lens.get();
  p.mods.window_left = h.mods.window_left;
  p.mods.window_right = h.mods.window_right;
  p.mods.softcap = h.mods.softcap;
  if (!h.mods.alibi_slopes.empty()) {
    slopes.upload(h.mods.alibi_slopes.data(), h.mods.alibi_slopes.size());
    p.mods.alibi_slopes = slopes.get();
    p.mods.alibi_batch_stride = h.mods.alibi_batch_stride;
  }
  if (!h.cache_batch_idx.empty()) {
    batch_idx.upload(h.cache_batch_idx.data(), h.cache_batch_idx.size());
    p.cache_batch_idx = batch_idx.get();
  }
  if (h.page_size > 0) {
    p.block_table = table.get();
    p.page_size = h.page_size;
    p.max_blocks_per_seq = h.max_blocks_per_seq;
  }
  p.o = o.get();
  p.lse = lse.get();
  p.dtype = h.dtype;
  p.shape = s;
  p.scale = 1.f / std::sqrt(float(s.d));
  p.causal = causal;
  p.num_splits = splits;
  p.workspace = ws.get();
  if (k_new) {
    p.k_new = kn.get();
    p.v_new = vn.get();
  }
  if (rotary) {
    rot_cos.upload(rotary->cos);
    rot_sin.upload(rotary->sin);
    p.rotary_cos = rot_cos.get();
    p.rotary_sin = rot_sin.get();
    p.rotary_dim = rotary->dim;
    p.rotary_len = rotary->len;
    p.rotary_interleaved = rotary->interleaved;
  }
  p.trace = sink;
  fs::decoding::decode_forward(p);
  FS_CUDA_CHECK(cudaDeviceSynchronize());
  GpuOutputs out{o.download(), std::vector<float>(static_cast<std::size_t>(s.rows())), k.download(), v.download()};
  lse.download(out.lse.data(), out.lse.size());
  return out;
}

void check(const DecodeShape& s, const std::vector<std::int32_t>& lens, DType dtype, bool causal, int splits) {
  const int longest = *std::max_element(lens.begin(), lens.end());
  const int S = splits == kRule
                    ? fs::decoding::num_splits(s.batch, s.heads_kv, longest, fs::query_device().sm_count, s.row_blocks())
                    : splits;
  DYNAMIC_SECTION(fs::testing::decode_case(s, lens, dtype, causal, S)) {
    const std::uint64_t seed = 4099 + std::uint64_t(longest) + s.d + S;
    const fs::decoding::DecodeHost h = fs::decoding::random_decode_problem(s, lens, dtype, seed);
    const GpuOutputs out = run_gpu(h, causal, S);
    fs::testing::require_decode_within_rule(h, causal, out.o, out.lse, seed, std::int64_t(1) << 28);
  }
}

}  // namespace

TEST_CASE("step 10 on the GPU: odd cache lengths, 1, 3 and the rule's splits", "[gpu][decode]") {
  for (int L : {1, 17, 1000, 4097, 65537})
    for (int splits : {1, 3, kRule})
      for (bool causal : {false, true}) check(DecodeShape{2, 32, 8, 1, L, 128}, {L, L}, DType::bf16, causal, splits);
}

TEST_CASE("step 10 on the GPU: 1, 4 and 16 new tokens, grouped-query ratios 1, 4 and 8", "[gpu][decode]") {
  for (int n : {1, 4, 16})
    for (int g : {1, 4, 8})
      for (bool causal : {false, true})
        for (int splits : {1, 3, kRule})
          check(DecodeShape{3, 4 * g, 4, n, 2049, 128}, {2049, 1, 777}, DType::fp16, causal, splits);
}

TEST_CASE("step 10 on the GPU: per-sequence lengths, empty caches, every head dimension", "[gpu][decode]") {
  const std::vector<std::int32_t> lens = {0, 1, 300, 5000, 0, 4096};
  for (DType dtype : {DType::bf16, DType::fp16})
    for (int d : {64, 128, 256})
      for (bool causal : {false, true})
        for (int splits : {1, 3, kRule}) check(DecodeShape{6, 8, 2, 4, 5000, d}, lens, dtype, causal, splits);
}

TEST_CASE("step 10 on the GPU: repeated runs are bit-identical", "[gpu][decode]") {
  const DecodeShape s = DecodeShape{2, 32, 8, 1, 20000, 128};
  const fs::decoding::DecodeHost h = fs::decoding::random_decode_problem(s, {20000, 12345}, DType::bf16, 3);
  for (int splits : {1, 7}) {
    const GpuOutputs a = run_gpu(h, true, splits), b = run_gpu(h, true, splits);
    REQUIRE(a.o == b.o);
    REQUIRE(a.lse == b.lse);
  }
}

// The paged cache: the same problem in shuffled pages (paged_layout: NaN wherever no sequence's key
// is), its run equal to the contiguous one bit for bit and within the rule of the reference; odd
// and per-sequence lengths, grouped-query ratio 4, 1 and 4 new tokens, splits 1, 3 and the rule's.
TEST_CASE("step 10 on the GPU: a paged cache, pages of 16 and 256 in shuffled order", "[gpu][decode][paged]") {
  for (int d : {64, 128, 256})
    for (int page : {16, 256})
      for (int n : {1, 4})
        for (bool causal : {false, true})
          for (int splits : {1, 3, kRule}) {
            const DecodeShape s = DecodeShape{4, 16, 4, n, 5000, d};
            const std::vector<std::int32_t> lens = {1, 17, 1000, 5000};
            const int S = splits == kRule ? fs::decoding::num_splits(s.batch, s.heads_kv, 5000,
                                                                     fs::query_device().sm_count, s.row_blocks())
                                          : splits;
            DYNAMIC_SECTION("d=" << d << " page=" << page << " n=" << n << (causal ? " causal" : "") << " splits=" << S) {
              const std::uint64_t seed = 8191 + d + page + n + S;
              const fs::decoding::DecodeHost h = fs::decoding::random_decode_problem(s, lens, DType::bf16, seed);
              const fs::decoding::DecodeHost paged = fs::decoding::paged_layout(h, page, seed + 1);
              const GpuOutputs want = run_gpu(h, causal, S), got = run_gpu(paged, causal, S);
              REQUIRE(got.o == want.o);
              REQUIRE(got.lse == want.lse);
              fs::testing::require_decode_within_rule(paged, causal, got.o, got.lse, seed);
            }
          }
}

// What decode_forward refuses of the paging fields, before any kernel runs.
TEST_CASE("step 10 on the GPU: decode_forward refuses inconsistent paging", "[gpu][decode][paged]") {
  fs::decoding::DecodeParams p;
  p.shape = DecodeShape{1, 8, 2, 1, 100, 128};
  p.cache_len = 100;
  p.scale = 0.1f;
  const std::int32_t table[8] = {};
  p.page_size = 16;  // no table
  REQUIRE_THROWS_WITH(fs::decoding::decode_forward(p), Catch::Contains("without a block table"));
  p.block_table = table;
  p.max_blocks_per_seq = 7;
  p.page_size = 24;
  REQUIRE_THROWS_WITH(fs::decoding::decode_forward(p), Catch::Contains("power of two"));
  p.page_size = 16;
  p.max_blocks_per_seq = 6;  // 96 < 100 keys
  REQUIRE_THROWS_WITH(fs::decoding::decode_forward(p), Catch::Contains("fewer than seqlen_cache"));
}

// NaN equal to NaN (a paged layout's unused rows), every other value bit for bit.
static bool same_values(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!(std::isnan(a[i]) && std::isnan(b[i])) && std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return false;
  return true;
}

// The append (tests/test_decode_append_emulated.cpp's cases, longer): the cache after the run is the
// reference's append, O and LSE within the rule and equal bit for bit to a run without append on
// the cache filled by hand; contiguous and in pages of 16, lengths 0, 1, 17 and room − n.
TEST_CASE("step 10 on the GPU: the new tokens appended into the cache before attending", "[gpu][decode][append]") {
  for (int page : {0, 16})
    for (int n : {1, 4})
      for (bool causal : {true, false})
        for (int splits : {1, 3, kRule}) {
          const DecodeShape s = DecodeShape{4, 16, 4, n, 3000, 128};
          const std::vector<std::int32_t> lens = {0, 1, 17, 3000 - n};
          const int S = splits == kRule ? fs::decoding::num_splits(s.batch, s.heads_kv, 3000,
                                                                   fs::query_device().sm_count, s.row_blocks())
                                        : splits;
          DYNAMIC_SECTION("page=" << page << " n=" << n << (causal ? " causal" : "") << " splits=" << S) {
            const std::uint64_t seed = 12289 + page + n + S;
            const fs::decoding::DecodeHost base = fs::decoding::random_decode_problem(s, lens, DType::bf16, seed);
            const fs::decoding::DecodeHost h = page ? fs::decoding::paged_layout(base, page, seed + 1) : base;
            const auto k_new = fs::decoding::random_new_rows(s, DType::bf16, seed + 2);
            const auto v_new = fs::decoding::random_new_rows(s, DType::bf16, seed + 3);
            const fs::decoding::DecodeHost want = h.appended(k_new, v_new);
            const GpuOutputs got = run_gpu(h, causal, S, &k_new, &v_new), plain = run_gpu(want, causal, S);
            REQUIRE(same_values(got.k, want.k));
            REQUIRE(same_values(got.v, want.v));
            REQUIRE(got.o == plain.o);
            REQUIRE(got.lse == plain.lse);
            fs::testing::require_decode_within_rule(want, causal, got.o, got.lse, seed);
          }
        }
}

// With a rotary embedding (the emulated test's cases, longer): the cache after the run holds the
// turned keys, O and LSE equal a plain run on the turned problem and are within the rule.
TEST_CASE("step 10 on the GPU: append with a rotary embedding", "[gpu][decode][append][rotary]") {
  for (int page : {0, 16})
    for (bool interleaved : {false, true})
      for (int rotary_dim : {128, 40})
        for (bool causal : {true, false}) {
          const DecodeShape s = DecodeShape{3, 32, 8, 4, 2500, 128};
          const std::vector<std::int32_t> lens = {0, 999, 2496};
          const int S = fs::decoding::num_splits(s.batch, s.heads_kv, 2500, fs::query_device().sm_count, s.row_blocks());
          DYNAMIC_SECTION("page=" << page << " rotary " << rotary_dim << (interleaved ? " interleaved" : "")
                                  << (causal ? " causal" : "") << " splits=" << S) {
            const std::uint64_t seed = 7001 + page + rotary_dim + interleaved;
            const fs::decoding::DecodeHost base = fs::decoding::random_decode_problem(s, lens, DType::bf16, seed);
            const fs::decoding::DecodeHost h = page ? fs::decoding::paged_layout(base, page, seed + 1) : base;
            const auto k_new = fs::decoding::random_new_rows(s, DType::bf16, seed + 2);
            const auto v_new = fs::decoding::random_new_rows(s, DType::bf16, seed + 3);
            const auto rot = fs::decoding::rotary_tables(s.seqlen_cache, rotary_dim, interleaved, DType::bf16);
            const fs::decoding::DecodeHost want = h.appended(k_new, v_new, &rot, causal);
            const GpuOutputs got = run_gpu(h, causal, S, &k_new, &v_new, &rot), plain = run_gpu(want, causal, S);
            REQUIRE(same_values(got.k, want.k));
            REQUIRE(got.o == plain.o);
            REQUIRE(got.lse == plain.lse);
            fs::testing::require_decode_within_rule(want, causal, got.o, got.lse, seed);
          }
        }
}

// cache_batch_idx (the emulated test's case, longer caches): a batch reading the cache's sequences
// 3, 0, 3, 4 equals a run on those sequences gathered by hand, bit for bit, and is within the rule;
// with ALiBi slopes of shape (batch, heads) too, row b for sequence b of the batch (not of the cache).
TEST_CASE("step 10 on the GPU: cache_batch_idx picks the cache's sequences", "[gpu][decode][batch_idx]") {
  const DecodeShape cache_shape{5, 32, 8, 1, 9000, 128};
  const auto cache = fs::decoding::random_decode_problem(cache_shape, {0, 100, 7777, 9000, 5}, DType::bf16, 81);
  auto h = fs::decoding::batch_from_cache(cache, {3, 0, 3, 4}, 82);
  const bool alibi = GENERATE(false, true);
  INFO((alibi ? "ALiBi of shape (batch, heads)" : "no ALiBi"));
  if (alibi) fs::testing::ModsCase{-1, -1, 0.f, true, true}.apply(h);
  const auto gathered = fs::testing::gathered_by_hand(h, cache);
  const int S = fs::decoding::num_splits(4, 8, 9000, fs::query_device().sm_count);
  const GpuOutputs got = run_gpu(h, false, S), want = run_gpu(gathered, false, S);
  REQUIRE(got.o == want.o);
  REQUIRE(got.lse == want.lse);
  fs::testing::require_decode_within_rule(h, false, got.o, got.lse, 83);
}

// The score modifiers (the emulated test's cases, a longer cache and the rule's splits).
TEST_CASE("step 10 on the GPU: sliding window, softcap and ALiBi", "[gpu][decode][mods]") {
  const fs::testing::ModsCase cases[] = {{1000, -1, 0.f, false}, {37, 5, 0.f, false}, {-1, -1, 5.f, true},
                                         {2500, 0, 30.f, true},
                                         {-1, -1, 5.f, true, true},  // ALiBi of shape (batch, heads)
                                         {2500, 0, 30.f, true, true}};
  const DecodeShape s{3, 32, 8, 4, 9000, 128};
  const int S = fs::decoding::num_splits(s.batch, s.heads_kv, 9000, fs::query_device().sm_count, s.row_blocks());
  for (const fs::testing::ModsCase& c : cases)
    for (bool causal : {false, true}) {
      DYNAMIC_SECTION(c.name(causal, S)) {
        auto h = fs::decoding::random_decode_problem(s, {9000, 4321, 2}, DType::bf16, 93);
        c.apply(h);
        const GpuOutputs got = run_gpu(h, causal, S);
        fs::testing::require_decode_within_rule(h, causal, got.o, got.lse, 94);
      }
    }
}

// What decode_forward refuses of an append, before any kernel runs: one length that overflows the
// room, and k_new without v_new.
TEST_CASE("step 10 on the GPU: decode_forward refuses an overflowing append", "[gpu][decode][append]") {
  fs::decoding::DecodeParams p;
  p.shape = DecodeShape{1, 8, 2, 4, 100, 128};
  p.cache_len = 97;  // 97 + 4 > 100
  p.scale = 0.1f;
  const std::int32_t row[8] = {};
  p.k_new = row;
  p.v_new = row;
  REQUIRE_THROWS_WITH(fs::decoding::decode_forward(p), Catch::Contains("overflows the cache's room"));
  p.v_new = nullptr;
  p.cache_len = 10;
  REQUIRE_THROWS_WITH(fs::decoding::decode_forward(p), Catch::Contains("k_new and v_new come together"));
}

// Traced runs (d = 64, the traced twins' head dimension): the trace of each validates — its loads
// and stores add up to decode_io's count, every K/V row it names is a slot of some sequence's keys
// (through the block table or cache_batch_idx), O and LSE stored whole — and the traced kernels'
// outputs equal the plain ones bit for bit. One split and three, the combine's rows that see no
// key (an empty cache), two row blocks (8 heads a group × 4 causal tokens), pages of 16 in shuffled
// order, an append, a window, cache_batch_idx.
TEST_CASE("step 10 on the GPU: a traced run's trace adds up to the IO model", "[gpu][decode][trace]") {
  struct TraceCase {
    const char* name;
    DecodeShape s;
    std::vector<std::int32_t> lens;
    int splits, page;
    bool causal, append;
    int left;
    bool batch_idx;
  };
  const TraceCase cases[] = {
      {"contiguous, one split", DecodeShape{2, 16, 4, 1, 1000, 64}, {1000, 333}, 1, 0, false, false, -1, false},
      {"contiguous, three splits, an empty cache", DecodeShape{2, 16, 4, 1, 1000, 64}, {1000, 0}, 3, 0, false, false, -1, false},
      {"two row blocks, causal", DecodeShape{1, 8, 1, 4, 700, 64}, {700}, 2, 0, true, false, -1, false},
      {"pages of 16, shuffled", DecodeShape{2, 16, 4, 1, 900, 64}, {900, 517}, 3, 16, false, false, -1, false},
      {"pages of 16, append, causal", DecodeShape{2, 16, 4, 4, 900, 64}, {600, 17}, 2, 16, true, true, -1, false},
      {"a window of 100 keys", DecodeShape{1, 16, 4, 1, 2000, 64}, {2000}, 4, 0, false, false, 100, false},
      {"cache_batch_idx", DecodeShape{3, 16, 4, 1, 800, 64}, {800, 5, 401}, 2, 0, false, false, -1, true}};
  for (const TraceCase& c : cases)
    DYNAMIC_SECTION(c.name) {
      const std::uint64_t seed = 20011 + c.splits + c.page;
      fs::decoding::DecodeHost h = fs::decoding::random_decode_problem(c.s, c.lens, DType::bf16, seed);
      if (c.batch_idx) {  // a cache of 4 sequences, read in the order 2, 0, 2
        const DecodeShape cache_shape{4, c.s.heads, c.s.heads_kv, c.s.new_tokens, c.s.seqlen_cache, c.s.d};
        const auto cache = fs::decoding::random_decode_problem(cache_shape, {800, 800, 800, 800}, DType::bf16, seed);
        h = fs::decoding::batch_from_cache(cache, {2, 0, 2}, seed + 1);
        h.seqlens = c.lens;
      }
      if (c.page) h = fs::decoding::paged_layout(h, c.page, seed + 1);
      h.mods.window_left = c.left;
      const auto k_new = fs::decoding::random_new_rows(c.s, DType::bf16, seed + 2);
      const auto v_new = fs::decoding::random_new_rows(c.s, DType::bf16, seed + 3);
      const std::vector<float>* kn = c.append ? &k_new : nullptr;
      const std::vector<float>* vn = c.append ? &v_new : nullptr;

      fs::decoding::DecodeTraceCase tc;
      tc.io.shape = c.s;
      tc.io.base = h.seqlens;
      tc.io.append = c.append;
      tc.io.causal = c.causal;
      tc.io.window_left = c.left;
      tc.io.splits = c.splits;
      tc.io.tile_keys = fs::decoding::decode_tile_keys(c.s.d);
      tc.scale = 1.f / std::sqrt(float(c.s.d));
      tc.page_size = h.page_size;
      tc.slots = static_cast<int>(h.k.size() / (std::size_t(c.s.heads_kv) * c.s.d));
      tc.block_table = h.block_table;
      tc.batch_idx = h.cache_batch_idx;
      fs::trace::DeviceSink sink(fs::decoding::decode_event_cap(tc));
      const GpuOutputs traced = run_gpu(h, c.causal, c.splits, kn, vn, nullptr, &sink);
      const GpuOutputs plain = run_gpu(h, c.causal, c.splits, kn, vn);
      REQUIRE(traced.o == plain.o);
      REQUIRE(traced.lse == plain.lse);

      fs::trace::Trace t = fs::trace_of_run(fs::query_device(), sink, fs::nvtx_tool::Capture{});
      fs::decoding::describe_decode(t.meta, tc);
      fs::list_tensors(t, {fs::trace::Tensor::Q, fs::trace::Tensor::K, fs::trace::Tensor::V, fs::trace::Tensor::O,
                           fs::trace::Tensor::LSE});
      const fs::trace::ValidationReport r = fs::trace::validate(t);
      std::string errors;
      for (const auto& e : r.errors) errors += e + "\n";
      INFO(r.summary() << "\n" << errors);
      REQUIRE(r.ok());
      REQUIRE(r.read_bytes == t.meta.io_read_bytes);
      REQUIRE(r.read_bytes > 0);
      REQUIRE(t.kernels.size() == std::size_t(1 + (c.splits > 1) + c.append));
    }
}
