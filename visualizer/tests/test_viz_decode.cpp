// Decoding traces (step 10) in the visualizer's model: the cache's slots and pages, the split
// kernel's CTAs by sequence, K/V head and split, the tensors' own shapes in the coverage, the
// cache lit slot by slot as the replay runs, gathered tiles on chip, the pass's FLOPs. On the
// hand-built fixture (tests/trace_fixtures.hpp) and on synthetic traces as step 10's kernels would
// record them, whose bytes are step 10's own IO model's where this build has step 10.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "common/trace/names.hpp"
#include "common/trace/trace_io.hpp"
#include "common/trace/validate.hpp"
#include "tests/trace_fixtures.hpp"
#include "visualizer/model/coverage.hpp"
#include "visualizer/model/decode.hpp"
#include "visualizer/model/document.hpp"
#include "visualizer/model/replay.hpp"
#include "visualizer/model/synthetic.hpp"

#ifdef FS_HAVE_STEP10
#include "steps/10_decode/decode_io.hpp"
#endif

using namespace fs::viz;
namespace tr = fs::trace;

namespace {

// The decoding specs the tests run: the app's (paged and contiguous), with an append, with one split
// (O and LSE straight from the split kernel), with sequences of different lengths and more splits
// than the short one has tiles, and with 32 query heads over one K/V head (two row blocks).
std::vector<std::pair<std::string, SyntheticSpec>> decode_specs() {
  std::vector<std::pair<std::string, SyntheticSpec>> out;
  out.push_back({"paged", decode_spec(true)});
  out.push_back({"contiguous", decode_spec(false)});
  SyntheticSpec s = decode_spec(true);
  s.append = true;
  s.new_tokens = 2;
  out.push_back({"append", s});
  s = decode_spec(true);
  s.splits = 1;
  out.push_back({"one split", s});
  s = decode_spec(true);
  s.B = 3;
  s.keys = {700, 130, 0};
  s.splits = 4;
  s.page_size = 32;
  out.push_back({"ragged", s});
  s = decode_spec(false);
  s.H = 32;
  s.heads_kv = 1;
  out.push_back({"two row blocks", s});
  return out;
}

}  // namespace

TEST_CASE("a synthetic decoding trace passes the validator and its bytes add up", "[viz][decode][synthetic]") {
  for (const auto& [name, spec] : decode_specs()) {
    INFO(name);
    const tr::Trace t = make_synthetic_trace(spec);
    const tr::ValidationReport v = tr::validate(t);
    INFO(v.summary());
    REQUIRE(v.ok());
    REQUIRE(t.meta.step == "10_decode");
    REQUIRE(t.meta.gpu.find("synthetic") != std::string::npos);
#ifdef FS_HAVE_STEP10
    // Step 10's IO model, counted from the problem alone, is what the synthetic events move.
    fs::decoding::DecodeIoCase c;
    c.shape = fs::decoding::DecodeShape{spec.B, spec.H, spec.heads_kv, spec.new_tokens, t.meta.cache.seqlen_cache, spec.d};
    for (int b = 0; b < spec.B; ++b)
      c.base.push_back(spec.keys[std::size_t(std::min<int>(b, int(spec.keys.size()) - 1))]);
    c.append = spec.append;
    c.splits = spec.splits;
    c.tile_keys = fs::decoding::decode_tile_keys(spec.d);
    const fs::IoCount io = fs::decoding::decode_io(c);
    REQUIRE(t.meta.io_read_bytes == io.read_bytes);
    REQUIRE(t.meta.io_write_bytes == io.write_bytes);
#endif
  }
}

TEST_CASE("the cache's slots: key j of sequence b where its block table puts it, pages owned", "[viz][decode][cache]") {
  SECTION("the fixture: five pages of 2, sequence 0 on pages 3 and 1, sequence 1 on 0 and 4, page 2 unused") {
    const Replay r(fs::test::decode_trace());
    const CacheGeometry& c = r.cache();
    REQUIRE(c.on());
    REQUIRE(c.paged());
    REQUIRE(c.pages() == 5);
    REQUIRE(c.page_rows() == 2);
    const std::int64_t seq0[] = {6, 7, 2}, seq1[] = {0, 1, 8, 9};
    for (int j = 0; j < 3; ++j) {
      REQUIRE(c.slot_of(0, j) == seq0[j]);
      REQUIRE(c.key_at(seq0[j]).seq == 0);
      REQUIRE(c.key_at(seq0[j]).key == j);
    }
    for (int j = 0; j < 4; ++j) {
      REQUIRE(c.slot_of(1, j) == seq1[j]);
      REQUIRE(c.key_at(seq1[j]).seq == 1);
      REQUIRE(c.key_at(seq1[j]).key == j);
    }
    // Slot 3 is on sequence 0's page 1 but past its three keys; slots 4 and 5 are the unused page.
    for (std::int64_t slot : {3, 4, 5}) REQUIRE(c.key_at(slot).seq == -1);
    REQUIRE(c.page(2).owner == -1);
    REQUIRE(c.page(3).owner == 0);
    REQUIRE(c.page(3).entry == 0);
    REQUIRE(c.page(3).keys == 2);
    REQUIRE(c.page(1).owner == 0);
    REQUIRE(c.page(1).entry == 1);
    REQUIRE(c.page(1).keys == 1);
    REQUIRE(c.page(4).owner == 1);
    REQUIRE(c.table_row(0) == std::vector<int>{3, 1});
    REQUIRE(c.table_row(1) == std::vector<int>{0, 4});
    REQUIRE(c.pages_holding(0) == 2);
    REQUIRE(c.slot_of(0, 4) == -1);  // past the room
    REQUIRE(c.slot_of(2, 0) == -1);  // past the batch
  }
  SECTION("synthetic caches: every key's slot holds that key, every other slot none") {
    for (const auto& [name, spec] : decode_specs()) {
      INFO(name);
      const Replay r(make_synthetic_trace(spec));
      const CacheGeometry& c = r.cache();
      REQUIRE(c.paged() == (spec.page_size > 0));
      REQUIRE(c.page_rows() == (spec.page_size > 0 ? spec.page_size : r.meta().cache.seqlen_cache));
      std::vector<int> holds(std::size_t(c.slots()), 0);
      for (int b = 0; b < c.sequences(); ++b)
        for (int j = 0; j < c.length(b); ++j) {
          const std::int64_t slot = c.slot_of(b, j);
          REQUIRE(slot >= 0);
          REQUIRE(c.key_at(slot).seq == b);
          REQUIRE(c.key_at(slot).key == j);
          ++holds[std::size_t(slot)];
        }
      int unused = 0;
      for (std::int64_t slot = 0; slot < c.slots(); ++slot) {
        REQUIRE(holds[std::size_t(slot)] <= 1);
        if (!holds[std::size_t(slot)]) REQUIRE(c.key_at(slot).seq == -1);
      }
      for (int p = 0; p < c.pages(); ++p) unused += c.page(p).owner < 0;
      // Paged: the spare page no table names; contiguous: none (a cache sequence a sequence).
      REQUIRE(unused == (spec.page_size > 0 ? 1 : 0));
    }
  }
}

TEST_CASE("the split kernel's CTAs grouped by sequence and K/V head, their splits side by side", "[viz][decode][schedule]") {
  SECTION("the fixture") {
    const tr::Trace t = fs::test::decode_trace();
    const Replay r(t);
    const DecodeSchedule& d = r.decode();
    REQUIRE(d.on());
    REQUIRE(d.groups().size() == 3);
    REQUIRE(d.groups()[0].label == "seq 0 · kv head 0");
    REQUIRE(d.groups()[0].tracks == std::vector<int>{0, 1});
    REQUIRE(d.groups()[1].tracks == std::vector<int>{2, 3});
    REQUIRE(d.groups()[2].role == DecodeRole::Combine);
    REQUIRE(d.groups()[2].tracks == std::vector<int>{4});
    REQUIRE(d.label(r.trace(), 1) == "seq 0 · kv head 0 · split 1");
    REQUIRE(d.label(r.trace(), 3) == "seq 1 · kv head 0 · split 1");
    REQUIRE(d.label(r.trace(), 4) == "combine · rows 0–3");
    // The keys each split's scores cover: sequence 0's split 0 keys 0–1, split 1 key 2.
    REQUIRE(d.cta(0).key0 == 0);
    REQUIRE(d.cta(0).key1 == 2);
    REQUIRE(d.cta(1).key0 == 2);
    REQUIRE(d.cta(1).key1 == 3);
    REQUIRE(d.combine_of(0) == std::vector<int>{4});
    REQUIRE(d.combine_of(1) == std::vector<int>{4});
  }
  SECTION("synthetic traces: the grid's place of each CTA is the one its events name") {
    for (const auto& [name, spec] : decode_specs()) {
      INFO(name);
      const Replay r(make_synthetic_trace(spec));
      const DecodeSchedule& d = r.decode();
      const CacheGeometry& c = r.cache();
      REQUIRE(d.on());
      int split_groups = 0;
      std::set<std::int64_t> combined;
      for (std::size_t gi = 0; gi < d.groups().size(); ++gi) {
        const DecodeGroup& g = d.groups()[gi];
        if (g.role == DecodeRole::Combine)
          for (int tk : g.tracks)
            for (std::int64_t row = d.cta(tk).row0; row < d.cta(tk).row1; ++row) REQUIRE(combined.insert(row).second);
        if (g.role != DecodeRole::Split) continue;
        ++split_groups;
        REQUIRE(int(g.tracks.size()) == spec.splits);
        int next_key = 0;
        for (int s = 0; s < spec.splits; ++s) {
          const int tk = g.tracks[std::size_t(s)];
          const DecodeCta& cta = d.cta(tk);
          REQUIRE(cta.split == s);
          REQUIRE(cta.b == g.b);
          REQUIRE(cta.hk == g.hk);
          // Its Q rows are its sequence's query heads of its K/V head; its scores its (b, hk)'s S.
          for (int e : r.track_events(tk)) {
            const tr::Event& ev = r.trace().events[std::size_t(e)];
            if (ev.kind == tr::Kind::Load && ev.tensor == tr::Tensor::Q) {
              REQUIRE(ev.bh / spec.H == g.b);
              REQUIRE(ev.bh % spec.H / c.group() == g.hk);
            }
            if (ev.kind == tr::Kind::ComputeS) REQUIRE(ev.bh == g.b * spec.heads_kv + g.hk);
          }
          // The splits' keys, in split order, are the sequence's keys cut in runs.
          if (cta.key1 > cta.key0) {
            REQUIRE(cta.key0 == next_key);
            next_key = cta.key1;
          }
        }
        REQUIRE(next_key == c.length(g.b));
      }
      REQUIRE(split_groups == spec.B * spec.heads_kv * c.row_blocks());
      // The combine writes every row of LSE's order once, where there are splits to merge.
      if (spec.splits > 1) REQUIRE(std::int64_t(combined.size()) == std::int64_t(spec.B) * spec.H * spec.new_tokens);
      if (spec.splits > 1)
        for (std::size_t gi = 0; gi < d.groups().size(); ++gi)
          if (d.groups()[gi].role == DecodeRole::Split) REQUIRE(!d.combine_of(int(gi)).empty());
      if (spec.append) REQUIRE(d.groups().front().role == DecodeRole::Append);
    }
  }
}

TEST_CASE("a decoding trace's tensors have the layout's shapes in the coverage", "[viz][decode][coverage]") {
  for (const auto& [name, spec] : decode_specs()) {
    INFO(name);
    const Replay r(make_synthetic_trace(spec));
    const Coverage cov(r);
    const CacheGeometry& c = r.cache();
    for (tr::Tensor t : {tr::Tensor::K, tr::Tensor::V}) {
      const TensorGrid* g = cov.grid(t);
      REQUIRE(g);
      REQUIRE(g->heads == spec.heads_kv);
      REQUIRE(g->rows == c.slots());
      REQUIRE(g->cols == spec.d);
      // Whole pages a cell, or a whole number of cells a page.
      REQUIRE((g->cell_rows % c.page_rows() == 0 || c.page_rows() % g->cell_rows == 0 || !c.paged()));
      REQUIRE(g->grid_rows <= Coverage::kMaxCells);
    }
    const TensorGrid* s = cov.grid(tr::Tensor::S);
    REQUIRE(s);
    REQUIRE(s->heads == spec.B * spec.heads_kv);
    REQUIRE(s->rows == c.group_rows());
    REQUIRE(s->cols == r.meta().cache.seqlen_cache);
    // Whole tiles a cell (a tile of keys is one ComputeS), so the splits' bounds fall between cells.
    REQUIRE((s->cell_cols % r.meta().Bc == 0 || s->cell_cols == s->cols));
    REQUIRE(s->grid_cols <= Coverage::kMaxCells);
    const TensorGrid* q = cov.grid(tr::Tensor::Q);
    REQUIRE(q->heads == spec.B * spec.H);
    REQUIRE(q->rows == spec.new_tokens);
    if (spec.splits > 1) {
      const TensorGrid* o_part = cov.grid(tr::Tensor::OPart);
      REQUIRE(o_part);
      REQUIRE(o_part->rows == spec.new_tokens * spec.splits);
      REQUIRE(o_part->cols == spec.d);
    }
  }
}

TEST_CASE("replaying a decoding trace lights the cache slot by slot", "[viz][decode][coverage]") {
  for (const auto& [name, spec] : decode_specs()) {
    INFO(name);
    const Replay r(make_synthetic_trace(spec));
    Coverage cov(r);
    const CacheGeometry& c = r.cache();
    for (Order o : {Order::Logical, Order::Real})
      for (double f : {0.0, 0.3, 0.61, 1.0, 0.2}) {
        const Cursor at{o, f * r.extent(o)};
        cov.seek(r, at);
        // The counts by brute force: every K and V load and store done by then, row by row.
        const std::int64_t done = r.done_count(at);
        std::map<std::tuple<int, int, std::int64_t>, SlotCounts> brute;
        for (std::int64_t k = 0; k < done; ++k) {
          const tr::Event& e = r.trace().events[std::size_t(r.event_in_order(o, k))];
          if ((e.tensor != tr::Tensor::K && e.tensor != tr::Tensor::V) || (e.kind != tr::Kind::Load && e.kind != tr::Kind::Store))
            continue;
          for (int row = e.row0; row < e.row0 + e.rows; ++row) {
            auto& sc = brute[{e.tensor == tr::Tensor::K ? 0 : 1, e.bh, row}];
            (e.kind == tr::Kind::Store ? sc.written : sc.read) += 1;
          }
        }
        for (int kv = 0; kv < 2; ++kv)
          for (int hk = 0; hk < spec.heads_kv; ++hk) {
            const SlotCounts* counts = cov.slot_counts(kv == 0 ? tr::Tensor::K : tr::Tensor::V, hk);
            REQUIRE(counts);
            for (std::int64_t slot = 0; slot < c.slots(); ++slot) {
              const auto it = brute.find({kv, hk, slot});
              REQUIRE(counts[slot].read == (it == brute.end() ? 0 : it->second.read));
              REQUIRE(counts[slot].written == (it == brute.end() ? 0 : it->second.written));
            }
          }
      }
    // At the end each key of each sequence has been read once per K/V head and row block (by the
    // one split that holds it), and no other slot ever.
    cov.seek(r, {Order::Logical, double(r.event_count())});
    for (int hk = 0; hk < spec.heads_kv; ++hk) {
      const SlotCounts* k = cov.slot_counts(tr::Tensor::K, hk);
      for (std::int64_t slot = 0; slot < c.slots(); ++slot)
        REQUIRE(k[slot].read == (c.key_at(slot).seq >= 0 ? c.row_blocks() : 0));
    }
  }
  SECTION("the fixture: sequence 0's slots 6, 7 and 2, sequence 1's 0, 1, 8, 9, read once each") {
    const Replay r(fs::test::decode_trace());
    Coverage cov(r);
    cov.seek(r, {Order::Logical, double(r.event_count())});
    const SlotCounts* k = cov.slot_counts(tr::Tensor::K, 0);
    REQUIRE(k);
    for (int slot = 0; slot < 10; ++slot) {
      const bool key = slot == 0 || slot == 1 || slot == 2 || slot == 6 || slot == 7 || slot == 8 || slot == 9;
      REQUIRE(k[slot].read == (key ? 1 : 0));
    }
    REQUIRE(!cov.slot_counts(tr::Tensor::Q, 0));
    REQUIRE(!cov.slot_counts(tr::Tensor::K, 1));  // one K/V head
  }
}

TEST_CASE("a decoding tile on chip is gathered from its loads, one per run of slots", "[viz][decode][replay]") {
  const Replay r(make_synthetic_trace(decode_spec(true)));
  const CacheGeometry& c = r.cache();
  // Split 0 of sequence 0, K/V head 0: its first tile, keys 0–127 on 8 pages of 16.
  const int track = r.decode().groups()[0].tracks[0];
  const auto& list = r.track_events(track);
  int after_v = -1;  // the position just past the first tile's last V load
  for (int k = 0; k < int(list.size()); ++k)
    if (r.trace().events[std::size_t(list[std::size_t(k)])].kind == tr::Kind::ComputeS) {
      after_v = k;
      break;
    }
  REQUIRE(after_v > 0);
  const auto tiles = r.resident_tiles(track, after_v);
  auto find = [&](tr::Tensor t) {
    return std::find_if(tiles.begin(), tiles.end(), [&](const ResidentTile& x) { return x.tensor == t && x.where == Residence::Smem; });
  };
  const auto k = find(tr::Tensor::K), v = find(tr::Tensor::V), q = find(tr::Tensor::Q);
  REQUIRE(k != tiles.end());
  REQUIRE(v != tiles.end());
  REQUIRE(q != tiles.end());
  REQUIRE(k->rows == 128);
  REQUIRE(v->rows == 128);
  REQUIRE(k->bytes == 128 * 64 * 2);
  REQUIRE(q->rows == c.group());  // one row of each of the group's query heads
  const auto runs = gathered_rows(r.trace(), list, after_v, tr::Tensor::K);
  REQUIRE(int(runs.size()) == k->loads);
  int rows = 0;
  for (const auto& [a, b] : runs) {
    rows += b - a;
    // Each run lies on one page of sequence 0 and holds its keys in order.
    REQUIRE(c.page_of_slot(a) == c.page_of_slot(b - 1));
    REQUIRE(c.key_at(a).seq == 0);
    REQUIRE(c.key_at(a).key + (b - a - 1) == c.key_at(b - 1).key);
  }
  REQUIRE(rows == 128);
  REQUIRE(k->loads >= 8);  // 8 pages, fewer runs only where shuffled pages happen to neighbour
  // The next tile replaces it: after the second ComputeS the K tile is keys 128–255's.
  int second = -1, seen = 0;
  for (int i = 0; i < int(list.size()); ++i)
    if (r.trace().events[std::size_t(list[std::size_t(i)])].kind == tr::Kind::ComputeS && ++seen == 2) second = i;
  REQUIRE(second > 0);
  const auto later = gathered_rows(r.trace(), list, second, tr::Tensor::K);
  REQUIRE(c.key_at(later.front().first).key == 128);
  // Once retired, nothing.
  REQUIRE(gathered_rows(r.trace(), list, int(list.size()), tr::Tensor::K).empty());
}

TEST_CASE("a decoding pass's FLOPs are the new tokens' rows against each sequence's keys", "[viz][decode][replay]") {
  for (const auto& [name, spec] : decode_specs()) {
    INFO(name);
    const Replay r(make_synthetic_trace(spec));
    double keys = 0;
    for (int b = 0; b < spec.B; ++b) keys += r.cache().length(b);
    // S = QKᵀ and P̃V: 2·d multiply-adds each per (row, key), H·N rows a sequence.
    const double expected = 4.0 * spec.d * spec.H * spec.new_tokens * keys;
    REQUIRE(r.pass_flops() == Approx(expected));
    REQUIRE(r.grand_totals().flops == Approx(expected));
  }
  const Replay fixture(fs::test::decode_trace());
  // The fixture records no P̃V: its scores alone, 2·d per (row, key), two rows against 3 and 4 keys.
  REQUIRE(fixture.pass_flops() == Approx(2.0 * 2 * 2 * (3 + 4)));
}

TEST_CASE("a decoding trace survives the file format and opens as a document", "[viz][decode][trace_io]") {
  namespace stdfs = std::filesystem;
  const auto dir = stdfs::temp_directory_path() / "fs_viz_decode_test";
  stdfs::create_directories(dir);
  const auto path = (dir / "10_decode.fwd.json").string();
  for (const tr::Trace& t : {fs::test::decode_trace(), make_synthetic_trace(decode_spec(true))}) {
    tr::write_trace(t, path);
    std::string error;
    auto doc = load_document(path, error);
    REQUIRE(doc);
    INFO((doc->warnings.empty() ? std::string() : doc->warnings.front()));
    REQUIRE(doc->warnings.empty());
    REQUIRE(doc->replay->cache().on());
    REQUIRE(doc->replay->decode().on());
    REQUIRE(doc->replay->cache().table_row(0) == CacheGeometry(t.meta).table_row(0));
    // It opens on the first kernel's first CTA: split 0 of sequence 0.
    REQUIRE(doc->replay->decode().cta(doc->selected_track).split == 0);
    REQUIRE(doc->replay->decode().cta(doc->selected_track).b == 0);
  }
  stdfs::remove_all(dir);
}
