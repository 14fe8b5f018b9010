// Decoding traces (step 10: Flash-Decoding over a KV cache), as the panels need them: the cache's
// geometry and the roles of the kernels' CTAs, from the trace alone (Meta::cache, the kernels'
// names, the CTAs' indices and events). No ImGui here.
//
// The cache's rows are slots (common/trace/trace.hpp, KvCache): key j of sequence b lies at slot
// block_table[b][j / page_size]·page_size + j mod page_size in a paged cache, at
// batch_idx[b]·seqlen_cache + j in a contiguous one. The visualizer draws the cache as pages in slot
// order, a contiguous cache as one "page" of seqlen_cache slots per cache sequence, so that what a
// block table does shows: each page belongs to the sequence whose table row names it, and a
// sequence's keys are gathered from pages anywhere in the cache.
//
// The kernels (steps/10_decode: decode_cta.cuh, combine.cuh, append.cuh, decode_trace.cuh):
//   decode_append_kernel   copies the new tokens' rows of k_new and v_new to their slots
//   decode_split_kernel    grid (splits, K/V heads × row blocks, batch): CTA c is split c mod splits
//                          of K/V head hk, row block rb (16 query rows of the group's g·N) of
//                          sequence b; it walks its split's tiles of keys and stores a partial O and
//                          LSE per row (o_part, lse_part), or O and LSE with one split
//   decode_combine_kernel  a few rows (b, h, t) of LSE's order per CTA: each row's splits merged
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/trace/trace.hpp"

namespace fs::viz {

namespace tr = fs::trace;

// The rows of a split CTA's block (steps/10_decode/decode.hpp, kRowsPerCta): what the kernel's
// one m16 tile of the mma holds. A trace records it as its Br.
constexpr int kDecodeRowsPerCta = 16;

struct CachePage {
  int owner = -1;  // the sequence whose table row names it first; -1: none (an unused page)
  int entry = -1;  // its place in that row: it holds the owner's keys [entry·rows, (entry + 1)·rows)
  int keys = 0;    // of those, how many the owner holds when the pass attends (0: reserved, empty)
  int owners = 0;  // (sequence, entry) pairs naming it: more than one where sequences share it
};

// A slot's key: sequence `seq`'s key `key`, on page `page`; seq −1 where no sequence holds a key.
struct SlotKey {
  int seq = -1, key = -1, page = -1;
};

class CacheGeometry {
 public:
  CacheGeometry() = default;
  // From a trace's metadata; on() is false without a cache. A damaged cache (the validator's
  // findings) still gives a geometry: table entries outside the cache name no page, missing
  // lengths are 0.
  explicit CacheGeometry(const tr::Meta& meta);

  bool on() const { return on_; }
  bool paged() const { return paged_; }
  int sequences() const { return B_; }
  int heads() const { return H_; }
  int heads_kv() const { return Hkv_; }
  int group() const { return g_; }             // query heads per K/V head
  int new_tokens() const { return N_; }
  int splits() const { return splits_; }
  int seqlen_cache() const { return room_; }   // keys of room per sequence
  std::int64_t slots() const { return slots_; }
  int page_rows() const { return page_rows_; }  // slots a page: page_size, or seqlen_cache
  int pages() const { return int(pages_.size()); }
  const CachePage& page(int p) const { return pages_[std::size_t(p)]; }
  int page_of_slot(std::int64_t slot) const { return int(slot / page_rows_); }
  int length(int b) const;  // keys of sequence b (0 outside the batch)
  // Sequence b's pages in key order: its block table's row (paged; −1 for an entry outside the
  // cache), or its cache sequence (contiguous). Empty outside the batch.
  const std::vector<int>& table_row(int b) const;
  // Pages of sequence b that hold at least one of its keys: ⌈length / page_rows⌉.
  int pages_holding(int b) const;
  // The slot of key `key` of sequence b, or −1 (outside its room or its table).
  std::int64_t slot_of(int b, int key) const;
  // The key a slot holds, by the first sequence whose table names its page (seq −1: none).
  SlotKey key_at(std::int64_t slot) const;

  // The split kernel's query rows: g·N per (sequence, K/V head), kDecodeRowsPerCta a CTA.
  int group_rows() const { return g_ * N_; }
  int row_blocks() const { return (group_rows() + rows_per_cta_ - 1) / rows_per_cta_; }
  int rows_per_cta() const { return rows_per_cta_; }

 private:
  bool on_ = false, paged_ = false;
  int B_ = 0, H_ = 0, Hkv_ = 1, g_ = 1, N_ = 1, splits_ = 1, room_ = 1, page_rows_ = 1;
  int rows_per_cta_ = kDecodeRowsPerCta;
  std::int64_t slots_ = 0;
  std::vector<int> lengths_;
  std::vector<std::vector<int>> rows_;  // per sequence: its pages in key order
  std::vector<CachePage> pages_;
};

// What a CTA of a decoding trace does.
enum class DecodeRole : std::uint8_t { None, Append, Split, Combine };

struct DecodeCta {
  DecodeRole role = DecodeRole::None;
  // A split CTA's place in the grid; a combine CTA's first row's sequence and K/V head, an append
  // CTA's first new row's (split −1 for both): where the panels look when following it.
  int b = -1, hk = -1, rb = 0, split = -1;
  int key0 = 0, key1 = 0;                   // the keys its scores cover (its ComputeS events); empty: none
  std::int64_t row0 = 0, row1 = 0;          // a combine CTA: the rows [row0, row1) of LSE's order it writes
};

// CTAs drawn together: the append's, one (sequence, K/V head, row block)'s splits in split order,
// or the combine's.
struct DecodeGroup {
  DecodeRole role = DecodeRole::None;
  int b = -1, hk = -1, rb = 0;
  std::vector<int> tracks;  // by split (or by CTA); a CTA's lanes are one track each, in lane order
  std::string label;        // "seq 0 · kv head 1" (and " · rows 16–31" with more than one row block), "combine", "append"
};

class DecodeSchedule {
 public:
  DecodeSchedule() = default;
  // `track_events`: each track's events (Replay::track_events), in the track's order.
  DecodeSchedule(const tr::Trace& t, const CacheGeometry& cache, const std::vector<std::vector<int>>& track_events);

  bool on() const { return !groups_.empty(); }
  const DecodeCta& cta(int track) const;
  // The append's group first (when there is one), then each (sequence, K/V head, row block)'s splits
  // in (b, hk, rb) order, then the combine's, then any other kernel's CTAs (role None): every track
  // is in one group.
  const std::vector<DecodeGroup>& groups() const { return groups_; }
  int group_of(int track) const;  // −1 for a trace that is not decoding
  // The combine's CTAs (tracks) that write rows of split group `group`: where its splits are merged.
  std::vector<int> combine_of(int group) const;
  // The split group a track's CTA works for: its own group for a split CTA, the first group whose
  // rows a combine CTA writes, the group of an append CTA's first new row (row block 0); −1: none.
  int split_group_of(int track) const;
  // "seq 0 · kv head 1 · split 2", "combine · seq 1 · heads 0–7", "append · CTA 3"; "" for none.
  std::string label(const tr::Trace& t, int track) const;

 private:
  std::vector<DecodeCta> ctas_;  // per track
  std::vector<int> group_of_;    // per track
  std::vector<DecodeGroup> groups_;
  std::vector<std::vector<int>> combine_groups_;  // per track: the split groups a combine CTA writes rows of
};

// The rows of tensor `tensor` (slots, for K and V) that a CTA holds after the first `done` events of
// its track, as [row0, row0 + rows) per load: its latest run of consecutive loads of `tensor` (a
// decoding tile is one load per run of slots, K's then V's). Empty before its first such load and
// once the CTA has retired (`done` past its last event), as Replay::resident_tiles.
std::vector<std::pair<int, int>> gathered_rows(const tr::Trace& t, const std::vector<int>& track_events, int done,
                                               tr::Tensor tensor);

}  // namespace fs::viz
