#include "visualizer/model/decode.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace fs::viz {

namespace {

// Which of step 10's kernels a launch is, by the name its launcher gives it (decode_launch.cuh).
DecodeRole kernel_role(const std::string& name) {
  if (name == "decode_split_kernel") return DecodeRole::Split;
  if (name == "decode_combine_kernel") return DecodeRole::Combine;
  if (name == "decode_append_kernel") return DecodeRole::Append;
  return DecodeRole::None;
}

std::string range_text(std::int64_t a, std::int64_t b) {  // [a, b] inclusive, "3" or "3–7"
  return a == b ? std::to_string(a) : std::to_string(a) + "–" + std::to_string(b);
}

}  // namespace

CacheGeometry::CacheGeometry(const tr::Meta& m) {
  const tr::KvCache& c = m.cache;
  if (!c.on() || m.B < 1 || c.slots < 1 || c.seqlen_cache < 1) return;
  on_ = true;
  paged_ = c.paged();
  B_ = m.B;
  H_ = std::max(1, m.H);
  Hkv_ = c.heads_kv;
  g_ = std::max(1, H_ / Hkv_);
  N_ = std::max(1, m.N);
  splits_ = std::max(1, c.splits);
  room_ = c.seqlen_cache;
  slots_ = c.slots;
  // The split kernel's rows a CTA, as the trace records its tiles (Br); 16 in step 10.
  rows_per_cta_ = m.Br > 0 ? m.Br : kDecodeRowsPerCta;
  page_rows_ = paged_ ? c.page_size : room_;
  pages_.assign(std::size_t((slots_ + page_rows_ - 1) / page_rows_), CachePage{});
  lengths_.assign(std::size_t(B_), 0);
  for (int b = 0; b < B_ && b < int(c.lengths.size()); ++b) lengths_[std::size_t(b)] = std::clamp(c.lengths[std::size_t(b)], 0, room_);
  rows_.assign(std::size_t(B_), {});
  const int per = paged_ ? c.blocks_per_seq(B_) : 1;
  for (int b = 0; b < B_; ++b) {
    auto& row = rows_[std::size_t(b)];
    if (paged_) {
      for (int j = 0; j < per; ++j) {
        const int p = c.block_table[std::size_t(b) * std::size_t(per) + std::size_t(j)];
        row.push_back(p >= 0 && p < pages() ? p : -1);
      }
    } else {
      const int cb = c.batch_idx.empty() ? b : (b < int(c.batch_idx.size()) ? c.batch_idx[std::size_t(b)] : -1);
      row.push_back(cb >= 0 && cb < pages() ? cb : -1);
    }
    for (int j = 0; j < int(row.size()); ++j) {
      const int p = row[std::size_t(j)];
      if (p < 0) continue;
      CachePage& pg = pages_[std::size_t(p)];
      if (pg.owners++ > 0) continue;  // the first sequence that names it owns it
      pg.owner = b;
      pg.entry = j;
      pg.keys = std::clamp(lengths_[std::size_t(b)] - j * page_rows_, 0, page_rows_);
    }
  }
}

int CacheGeometry::length(int b) const { return b >= 0 && b < B_ ? lengths_[std::size_t(b)] : 0; }

const std::vector<int>& CacheGeometry::table_row(int b) const {
  static const std::vector<int> none;
  return b >= 0 && b < B_ ? rows_[std::size_t(b)] : none;
}

int CacheGeometry::pages_holding(int b) const { return (length(b) + page_rows_ - 1) / page_rows_; }

std::int64_t CacheGeometry::slot_of(int b, int key) const {
  if (!on_ || b < 0 || b >= B_ || key < 0 || key >= room_) return -1;
  const auto& row = rows_[std::size_t(b)];
  const int j = key / page_rows_;
  if (j >= int(row.size()) || row[std::size_t(j)] < 0) return -1;
  return std::int64_t(row[std::size_t(j)]) * page_rows_ + key % page_rows_;
}

SlotKey CacheGeometry::key_at(std::int64_t slot) const {
  SlotKey k;
  if (!on_ || slot < 0 || slot >= slots_) return k;
  k.page = page_of_slot(slot);
  const CachePage& pg = pages_[std::size_t(k.page)];
  const int offset = int(slot % page_rows_);
  if (pg.owner < 0 || offset >= pg.keys) return k;
  k.seq = pg.owner;
  k.key = pg.entry * page_rows_ + offset;
  return k;
}

DecodeSchedule::DecodeSchedule(const tr::Trace& t, const CacheGeometry& cache,
                               const std::vector<std::vector<int>>& track_events) {
  if (!cache.on()) return;
  const std::size_t T = t.tracks.size();
  ctas_.assign(T, DecodeCta{});
  group_of_.assign(T, -1);
  combine_groups_.assign(T, {});
  const int splits = cache.splits(), blocks = cache.row_blocks(), Hkv = cache.heads_kv();
  const std::int64_t rows = std::int64_t(cache.sequences()) * cache.heads() * cache.new_tokens();  // LSE's
  bool any_split = false;
  for (std::size_t i = 0; i < T; ++i) {
    const tr::Track& tk = t.tracks[i];
    if (tk.kernel < 0 || tk.kernel >= int(t.kernels.size())) continue;
    DecodeCta& c = ctas_[i];
    c.role = kernel_role(t.kernels[std::size_t(tk.kernel)].name);
    static const std::vector<int> no_events;
    const std::vector<int>& list = i < track_events.size() ? track_events[i] : no_events;
    if (c.role == DecodeRole::Split) {
      // The grid (splits, K/V heads × row blocks, batch), linear index x + X·(y + Y·z).
      c.split = tk.cta % splits;
      const int rest = tk.cta / splits;
      c.rb = rest % (Hkv * blocks) % blocks;
      c.hk = rest % (Hkv * blocks) / blocks;
      c.b = rest / (Hkv * blocks);
      if (c.b >= cache.sequences()) c.role = DecodeRole::None;  // past the grid: not a CTA the kernel has
      bool any = false;
      for (int e : list) {
        const tr::Event& ev = t.events[std::size_t(e)];
        if (ev.kind != tr::Kind::ComputeS || ev.cols <= 0) continue;
        c.key0 = any ? std::min(c.key0, ev.col0) : ev.col0;
        c.key1 = any ? std::max(c.key1, ev.col0 + ev.cols) : ev.col0 + ev.cols;
        any = true;
      }
      any_split = any_split || c.role == DecodeRole::Split;
    } else if (c.role == DecodeRole::Combine) {
      // Its rows, from what it writes: O's row t of head bh is row bh·N + t of LSE's order.
      bool any = false;
      for (int e : list) {
        const tr::Event& ev = t.events[std::size_t(e)];
        if (ev.kind != tr::Kind::Store || ev.tensor != tr::Tensor::O || ev.rows <= 0) continue;
        const std::int64_t r0 = std::int64_t(ev.bh) * cache.new_tokens() + ev.row0, r1 = r0 + ev.rows;
        if (r0 < 0 || r1 > rows) continue;
        c.row0 = any ? std::min(c.row0, r0) : r0;
        c.row1 = any ? std::max(c.row1, r1) : r1;
        any = true;
      }
      if (any) {
        c.b = int(c.row0 / cache.new_tokens() / cache.heads());
        c.hk = int(c.row0 / cache.new_tokens() % cache.heads() / cache.group());
      }
    } else if (c.role == DecodeRole::Append) {
      for (int e : list) {  // k_new's and v_new's rows are (b, hk)
        const tr::Event& ev = t.events[std::size_t(e)];
        if (ev.kind != tr::Kind::Load || (ev.tensor != tr::Tensor::KNew && ev.tensor != tr::Tensor::VNew) || ev.bh < 0) continue;
        c.b = ev.bh / Hkv;
        c.hk = ev.bh % Hkv;
        break;
      }
    }
  }
  if (!any_split) {
    ctas_.clear();
    group_of_.clear();
    combine_groups_.clear();
    return;
  }

  // Groups: the append, each (b, hk, rb) of the split kernel, the combine.
  std::vector<int> order(T);
  for (std::size_t i = 0; i < T; ++i) order[i] = int(i);
  auto key = [&](int i) {
    const DecodeCta& c = ctas_[std::size_t(i)];
    const tr::Track& tk = t.tracks[std::size_t(i)];
    const int role = c.role == DecodeRole::Append ? 0 : c.role == DecodeRole::Split ? 1 : c.role == DecodeRole::Combine ? 2 : 3;
    return std::make_tuple(role, c.b, c.hk, c.rb, c.split, tk.kernel, tk.cta, tk.lane);
  };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return key(a) < key(b); });
  for (int i : order) {
    const DecodeCta& c = ctas_[std::size_t(i)];
    const bool same = !groups_.empty() && groups_.back().role == c.role &&
                      (c.role != DecodeRole::Split ||
                       (groups_.back().b == c.b && groups_.back().hk == c.hk && groups_.back().rb == c.rb));
    if (!same) {
      DecodeGroup g;
      g.role = c.role;
      if (c.role == DecodeRole::Split) {
        g.b = c.b;
        g.hk = c.hk;
        g.rb = c.rb;
        g.label = "seq " + std::to_string(c.b) + " · kv head " + std::to_string(c.hk);
        if (blocks > 1) {
          const int r0 = c.rb * cache.rows_per_cta(), r1 = std::min(cache.group_rows(), r0 + cache.rows_per_cta()) - 1;
          g.label += " · rows " + range_text(r0, r1);
        }
      } else {
        g.label = c.role == DecodeRole::Append ? "append" : c.role == DecodeRole::Combine ? "combine" : "other kernels";
      }
      groups_.push_back(std::move(g));
    }
    groups_.back().tracks.push_back(i);
    group_of_[std::size_t(i)] = int(groups_.size()) - 1;
  }

  // Which split groups each combine CTA writes rows of: row (b, h, t) of LSE's order is row t·g + h mod g
  // of K/V head h / g's group.
  std::map<std::tuple<int, int, int>, int> split_group;
  for (std::size_t gi = 0; gi < groups_.size(); ++gi)
    if (groups_[gi].role == DecodeRole::Split) split_group[{groups_[gi].b, groups_[gi].hk, groups_[gi].rb}] = int(gi);
  const int N = cache.new_tokens(), H = cache.heads(), g = cache.group();
  for (std::size_t i = 0; i < T; ++i) {
    const DecodeCta& c = ctas_[i];
    if (c.role != DecodeRole::Combine) continue;
    for (std::int64_t row = c.row0; row < c.row1; ++row) {
      const int tok = int(row % N), h = int(row / N % H), b = int(row / N / H);
      const auto it = split_group.find({b, h / g, (tok * g + h % g) / cache.rows_per_cta()});
      auto& list = combine_groups_[i];
      if (it != split_group.end() && std::find(list.begin(), list.end(), it->second) == list.end()) list.push_back(it->second);
    }
  }
}

const DecodeCta& DecodeSchedule::cta(int track) const {
  static const DecodeCta none;
  return track >= 0 && track < int(ctas_.size()) ? ctas_[std::size_t(track)] : none;
}

int DecodeSchedule::group_of(int track) const {
  return track >= 0 && track < int(group_of_.size()) ? group_of_[std::size_t(track)] : -1;
}

std::vector<int> DecodeSchedule::combine_of(int group) const {
  std::vector<int> out;
  for (std::size_t i = 0; i < combine_groups_.size(); ++i) {
    const auto& list = combine_groups_[i];
    if (std::find(list.begin(), list.end(), group) != list.end()) out.push_back(int(i));
  }
  return out;
}

int DecodeSchedule::split_group_of(int track) const {
  const DecodeCta& c = cta(track);
  switch (c.role) {
    case DecodeRole::Split: return group_of(track);
    case DecodeRole::Combine: {
      const auto& list = combine_groups_[std::size_t(track)];
      return list.empty() ? -1 : list.front();
    }
    case DecodeRole::Append:
      for (std::size_t g = 0; g < groups_.size(); ++g)
        if (groups_[g].role == DecodeRole::Split && groups_[g].b == c.b && groups_[g].hk == c.hk && groups_[g].rb == 0) return int(g);
      return -1;
    case DecodeRole::None: break;
  }
  return -1;
}

std::string DecodeSchedule::label(const tr::Trace& t, int track) const {
  const DecodeCta& c = cta(track);
  const int cta_index = track >= 0 && track < int(t.tracks.size()) ? t.tracks[std::size_t(track)].cta : -1;
  switch (c.role) {
    case DecodeRole::None: return "";
    case DecodeRole::Append: return "append · CTA " + std::to_string(cta_index);
    case DecodeRole::Split: {
      const int g = group_of(track);
      return (g >= 0 ? groups_[std::size_t(g)].label : std::string("?")) + " · split " + std::to_string(c.split);
    }
    case DecodeRole::Combine: {
      if (c.row1 <= c.row0) return "combine · CTA " + std::to_string(cta_index);
      // Rows of one sequence and one new token are heads: name them so.
      const int N = std::max(1, t.meta.N), H = std::max(1, t.meta.H);
      const std::int64_t b0 = c.row0 / N / H, b1 = (c.row1 - 1) / N / H;
      if (N == 1 && b0 == b1)
        return "combine · seq " + std::to_string(b0) + " · heads " + range_text(c.row0 % H, (c.row1 - 1) % H);
      return "combine · rows " + range_text(c.row0, c.row1 - 1);
    }
  }
  return "";
}

std::vector<std::pair<int, int>> gathered_rows(const tr::Trace& t, const std::vector<int>& list, int done,
                                               tr::Tensor tensor) {
  std::vector<std::pair<int, int>> out;
  if (done <= 0 || done >= int(list.size())) return out;
  int k = done - 1;
  auto is_load = [&](int i) {
    const tr::Event& e = t.events[std::size_t(list[std::size_t(i)])];
    return e.kind == tr::Kind::Load && e.tensor == tensor;
  };
  // Back to the latest load of the tensor, then over the run of them that ends there.
  while (k >= 0 && !is_load(k)) --k;
  int first = k;
  while (first > 0 && is_load(first - 1)) --first;
  for (int i = first; i >= 0 && i <= k; ++i) {
    const tr::Event& e = t.events[std::size_t(list[std::size_t(i)])];
    out.push_back({e.row0, e.row0 + e.rows});
  }
  return out;
}

}  // namespace fs::viz
