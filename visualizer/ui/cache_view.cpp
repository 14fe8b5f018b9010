#include "visualizer/ui/cache_view.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/trace/names.hpp"
#include "visualizer/model/decode.hpp"
#include "visualizer/model/labels.hpp"
#include "visualizer/ui/theme.hpp"

namespace fs::viz {

namespace tr = fs::trace;

namespace {

constexpr float kColGap = 6, kSectionGap = 10;

using PageMap = CacheRects::Fold;

// The fold that draws pages largest, as wide as about 3.5 times their height (a page of 16 keys
// of d = 64 is a wide tile), in `area`.
PageMap fit_pages(int pages, Rect area) {
  PageMap m;
  m.area = area;
  m.pages = std::max(1, pages);
  double best = -1;
  for (int c = 1; c <= m.pages; ++c) {
    const int per = (m.pages + c - 1) / c;
    const float w = (area.w() - kColGap * float(c - 1)) / float(c), h = area.h() / float(per);
    if (w < 8 && c > 1) break;
    const double score = std::min(double(w) / 3.5, double(h));
    if (score > best) {
      best = score;
      m.cols = c;
      m.per_col = per;
      m.page_w = std::max(1.0f, w);
      m.page_h = h;
    }
  }
  return m;
}

// What slots [s0, s1) of one K/V head of K or V hold and went through: the share of them holding a
// key, read from HBM, written (by an append).
struct SlotState {
  double held = 0, read = 0, written = 0;
  int reads = 0;  // the most times one of them was read
};

class SlotReader {
 public:
  SlotReader(const Replay& r, const Coverage& cov, tr::Tensor t, int hk)
      : cache_(r.cache()), grid_(cov.grid(t)), hk_(hk) {
    // Slot by slot where the coverage counts them and a frame can afford to look at each.
    counts_ = r.cache().slots() <= kFineSlots ? cov.slot_counts(t, hk) : nullptr;
  }
  SlotState at(std::int64_t s0, std::int64_t s1) const {
    SlotState st;
    s1 = std::min(s1, cache_.slots());
    if (s1 <= s0) return st;
    const double n = double(s1 - s0);
    // Keys held: per page, the first `keys` of its slots.
    const int rows = cache_.page_rows();
    for (std::int64_t p = s0 / rows; p * rows < s1; ++p) {
      const std::int64_t a = std::max(s0, p * rows), b = std::min(s1, (p + 1) * rows);
      const std::int64_t keys_end = p * rows + cache_.page(int(p)).keys;
      st.held += double(std::max<std::int64_t>(0, std::min(b, keys_end) - a));
    }
    st.held /= n;
    if (counts_) {
      for (std::int64_t s = s0; s < s1; ++s) {
        st.read += counts_[s].read > 0;
        st.written += counts_[s].written > 0;
        st.reads = std::max(st.reads, int(counts_[s].read));
      }
      st.read /= n;
      st.written /= n;
    } else if (grid_ && grid_->cell_rows > 0) {
      // Too many slots to look at one by one: the grid's cells (whole pages, or a few a cell).
      double read = 0, written = 0, area = 0;
      for (std::int64_t r = s0 / grid_->cell_rows; r * grid_->cell_rows < s1 && r < grid_->grid_rows; ++r)
        for (int c = 0; c < grid_->grid_cols; ++c) {
          const CellCounts& cell = grid_->at(hk_, int(r), c);
          read += double(cell.read);
          written += double(cell.written);
          area += double(grid_->cell_area(int(r), c));
        }
      if (area > 0) {
        st.read = std::min(1.0, read / area);
        st.written = std::min(1.0, written / area);
        st.reads = st.read > 0 ? 1 : 0;
      }
    }
    return st;
  }

 private:
  static constexpr std::int64_t kFineSlots = 65536;
  const CacheGeometry& cache_;
  const TensorGrid* grid_;
  int hk_;
  const SlotCounts* counts_ = nullptr;
};

ImU32 slot_color(tr::Tensor t, const SlotState& st) {
  if (st.written > 0) return theme::tensor_color(t, 0.95f);
  if (st.read > 0) {
    // Read once: strong; more often (a key every row block reads): stronger still.
    const float extra = std::min(1.0f, std::log2(float(std::max(1, st.reads))) / 3.0f);
    return theme::tensor_color(t, 0.5f + 0.3f * float(std::min(1.0, st.read)) + 0.15f * extra);
  }
  if (st.held > 0) return theme::tensor_color(t, 0.1f + 0.08f * float(st.held));
  return 0;
}

// Fills a rectangle's rows [0, n) from `state(i)`, merging rows of one colour, as many bands as the
// rectangle has pixel rows at most.
template <class State>
void fill_bands(ImDrawList* dl, Rect r, std::int64_t n, tr::Tensor t, State&& state) {
  if (n <= 0 || r.h() <= 0) return;
  const std::int64_t bands = std::min<std::int64_t>(n, std::max<std::int64_t>(1, std::int64_t(std::ceil(r.h()))));
  float run_y = r.min.y;
  ImU32 run = 0;
  for (std::int64_t i = 0; i <= bands; ++i) {
    const float y = r.min.y + float(double(i) / double(bands) * r.h());
    const ImU32 c = i < bands ? slot_color(t, state(i * n / bands, (i + 1) * n / bands)) : ImU32(1);
    if (i == 0 || c != run) {
      if (i > 0 && ((run >> IM_COL32_A_SHIFT) & 0xFF) > 0) dl->AddRectFilled(ImVec2(r.min.x, run_y), ImVec2(r.max.x, y), run);
      run = c;
      run_y = y;
    }
  }
}

// The screen rectangles of slots [s0, s1) in a page map (one per page they lie on).
std::vector<Rect> slot_rects(const PageMap& m, const CacheGeometry& c, std::int64_t s0, std::int64_t s1) {
  std::vector<Rect> out;
  const int rows = c.page_rows();
  for (std::int64_t p = s0 / rows; p * rows < s1 && p < m.pages; ++p) {
    const std::int64_t a = std::max(s0, p * rows) - p * rows, b = std::min(s1, (p + 1) * rows) - p * rows;
    const Rect pr = m.page(int(p));
    const float y0 = pr.min.y + float(double(a) / rows * pr.h()), y1 = pr.min.y + float(double(b) / rows * pr.h());
    out.push_back({ImVec2(pr.min.x, y0), ImVec2(pr.max.x, std::max(y0 + 2, y1))});
  }
  return out;
}

void outline(ImDrawList* dl, const std::vector<Rect>& rects, ImU32 col, float thick) {
  for (const Rect& r : rects) dl->AddRect(ImVec2(r.min.x - 1, r.min.y - 1), ImVec2(r.max.x + 1, r.max.y + 1), col, 0, 0, thick);
}

float text_w(ImFont* f, const char* s) { return f->CalcTextSizeA(f->FontSize, 1e9f, 0, s).x; }

// The loads and stores in flight at the cursor, any CTA's.
std::vector<const tr::Event*> moving_now(const Replay& r, Cursor c) {
  std::vector<const tr::Event*> out;
  for (int t = 0; t < r.track_count(); ++t) {
    const auto& list = r.track_events(t);
    if (list.empty()) continue;
    if (c.order == Order::Real ? (c.x < r.track_begin_ns(t) || c.x > r.track_end_ns(t))
                               : (c.x < list.front() || c.x > list.back() + 1))
      continue;
    const TrackCursor tc = r.track_cursor(t, c);
    if (tc.active < 0) continue;
    const tr::Event& e = r.trace().events[std::size_t(list[std::size_t(tc.active)])];
    if (e.kind == tr::Kind::Load || e.kind == tr::Kind::Store) out.push_back(&e);
  }
  return out;
}

}  // namespace

Rect CacheRects::Fold::page(int p) const {
  const int c = p / per_col;
  const float x = area.min.x + float(c) * (page_w + kColGap), y = area.min.y + float(p % per_col) * page_h;
  return {ImVec2(x, y), ImVec2(x + page_w, y + page_h)};
}

std::vector<Rect> CacheRects::rows_of(const Replay& r, const tr::Event& e) const {
  std::vector<Rect> out;
  if (e.tensor == tr::Tensor::K || e.tensor == tr::Tensor::V) {
    if (e.bh != hk) return out;
    return slot_rects(e.tensor == tr::Tensor::K ? k : v, r.cache(), e.row0, std::int64_t(e.row0) + e.rows);
  }
  for (const Small& sm : small) {
    if (sm.grid->tensor != e.tensor || e.bh < sm.first || e.bh >= sm.first + sm.heads) continue;
    const float hh = sm.box.h() / float(sm.heads);
    const Rect hr{ImVec2(sm.box.min.x, sm.box.min.y + hh * float(e.bh - sm.first)),
                  ImVec2(sm.box.max.x, sm.box.min.y + hh * float(e.bh - sm.first + 1))};
    out.push_back(element_rect(*sm.grid, hr, e.row0, e.rows, e.col0, e.cols));
  }
  return out;
}

CacheFocus cache_focus(const Replay& r, int track) {
  const DecodeCta& c = r.decode().cta(track);
  CacheFocus f;
  if (c.b >= 0 && c.b < r.cache().sequences()) f.b = c.b;
  if (c.hk >= 0 && c.hk < r.cache().heads_kv()) f.hk = c.hk;
  return f;
}

CacheRects draw_cache_hbm(ImDrawList* dl, Document& doc, Rect area, bool interactive) {
  CacheRects drawn;
  const Replay& r = *doc.replay;
  const CacheGeometry& cache = r.cache();
  const DecodeSchedule& sched = r.decode();
  const Coverage& cov = *doc.coverage;
  const auto& f = theme::fonts();
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  const bool hover_ok = interactive && ImGui::IsWindowHovered();
  const int track = std::clamp(doc.selected_track, 0, std::max(0, r.track_count() - 1));
  const CacheFocus focus = r.track_count() > 0 ? cache_focus(r, track) : CacheFocus{};
  const int shown = doc.hovered_sequence >= 0 && doc.hovered_sequence < cache.sequences() ? doc.hovered_sequence : focus.b;
  const DecodeCta& cta = sched.cta(track);
  const bool split_followed = cta.role == DecodeRole::Split;
  int hovered_seq = -1, hovered_page = -1;
  tr::Tensor hovered_tensor = tr::Tensor::None;
  const Cursor cur = doc.cursor();
  const std::vector<const tr::Event*> moving = moving_now(r, cur);
  char buf[256];

  // --- Layout: the two page maps, the block table under them, the sequence's small tensors. ---
  const float lh = f.small->FontSize + 3;
  const int B = cache.sequences();
  const float label_w = text_w(f.small, "seq 000 · 000000 keys") + 8;
  const float chip_w = text_w(f.small, std::to_string(std::max(1, cache.pages() - 1)).c_str()) + 6;
  const float chips_w = std::max(40.0f, area.w() - label_w);
  const int per_line = std::max(1, int(chips_w / (chip_w + 2)));
  auto lines_of = [&](int b) { return std::max(1, (int(cache.table_row(b).size()) + per_line - 1) / per_line); };
  // The table's height: every sequence's row in full where that fits in a quarter of the area, else
  // the sequence shown in full and one line for each other, as far as they go.
  int table_lines = 0;
  for (int b = 0; b < B; ++b) table_lines += lines_of(b);
  const float table_room = std::max(3 * lh, area.h() * 0.26f);
  const bool full_table = float(table_lines) * lh <= table_room;
  // Else: a line for each other sequence as far as they go (one line, at least, for the shown one's
  // rest), and the shown one's row in what is left.
  int others = B - 1, shown_lines = lines_of(shown);
  if (!full_table) {
    table_lines = std::max(1, int(table_room / lh));
    others = std::min(B - 1, std::max(0, table_lines - 2));
    shown_lines = std::max(1, std::min(lines_of(shown), table_lines - others));
    table_lines = others + shown_lines;
  }
  const float table_h = lh * float(table_lines + 1);
  const float small_h = std::max(54.0f, std::min(120.0f, area.h() * 0.24f));
  const float maps_h = std::max(40.0f, area.h() - table_h - small_h - 2 * kSectionGap - lh);
  const float map_w = (area.w() - 16) * 0.5f;
  const Rect k_area{ImVec2(area.min.x, area.min.y + lh), ImVec2(area.min.x + map_w, area.min.y + lh + maps_h)};
  const Rect v_area{ImVec2(k_area.max.x + 16, k_area.min.y), ImVec2(area.max.x, k_area.max.y)};

  // --- The page maps of K and V. ---
  const int pages = cache.pages();
  const PageMap k_map = fit_pages(pages, k_area), v_map = fit_pages(pages, v_area);
  drawn.k = k_map;
  drawn.v = v_map;
  drawn.hk = focus.hk;
  // The keys of the followed split: its pages get an accent frame.
  const std::int64_t split_k0 = split_followed ? cta.key0 : 0, split_k1 = split_followed ? cta.key1 : 0;
  auto split_page = [&](int p) {
    const CachePage& pg = cache.page(p);
    if (!split_followed || pg.owner != cta.b) return false;
    const std::int64_t a = std::int64_t(pg.entry) * cache.page_rows(), b = a + cache.page_rows();
    return a < split_k1 && b > split_k0;
  };
  for (const tr::Tensor t : {tr::Tensor::K, tr::Tensor::V}) {
    const PageMap& m = t == tr::Tensor::K ? k_map : v_map;
    const SlotReader reader(r, cov, t, focus.hk);
    const std::int64_t bytes = cache.slots() * r.meta().d * r.moved_element_bytes(t);
    std::snprintf(buf, sizeof buf, "%s · kv head %d of %d", theme::tensor_display(t), focus.hk, cache.heads_kv());
    dl->AddText(f.title, f.title->FontSize, ImVec2(m.area.min.x, area.min.y - 2), theme::tensor_color(t), buf);
    const float title_w = text_w(f.title, buf) + 8;
    if (cache.paged())
      std::snprintf(buf, sizeof buf, "%d pages of %d slots · %s", pages, cache.page_rows(), format_bytes(double(bytes)).c_str());
    else
      std::snprintf(buf, sizeof buf, "%d sequences of %d slots · %s", pages, cache.page_rows(), format_bytes(double(bytes)).c_str());
    if (title_w + text_w(f.small, buf) < m.area.w() + 8)
      dl->AddText(f.small, f.small->FontSize, ImVec2(m.area.min.x + title_w, area.min.y), theme::kTextDim, buf);
    const bool framed = m.page_h >= 3;
    for (int p = 0; p < pages; ++p) {
      const Rect pr = m.page(p);
      const CachePage& pg = cache.page(p);
      const Rect in{ImVec2(pr.min.x, pr.min.y + (framed ? 0.5f : 0)), ImVec2(pr.max.x, pr.max.y - (framed ? 0.5f : 0))};
      if (pg.owner >= 0) dl->AddRectFilled(in.min, in.max, theme::sequence_color(pg.owner, pg.owner == shown ? 0.16f : 0.07f));
      const std::int64_t s0 = std::int64_t(p) * cache.page_rows();
      fill_bands(dl, {ImVec2(in.min.x + (framed ? 4 : 0), in.min.y), in.max}, cache.page_rows(), t,
                 [&](std::int64_t a, std::int64_t b) { return reader.at(s0 + a, s0 + b); });
      if (!framed && pg.owner >= 0 && m.page_w >= 8)  // too thin for frames: the owner's strip alone
        dl->AddRectFilled(pr.min, ImVec2(pr.min.x + 3, pr.max.y), theme::sequence_color(pg.owner, pg.owner == shown ? 0.95f : 0.4f));
      if (framed) {
        // The owner's strip on the left, and a frame: strong for the sequence shown.
        if (pg.owner >= 0) dl->AddRectFilled(in.min, ImVec2(in.min.x + 4, in.max.y), theme::sequence_color(pg.owner, 0.95f));
        const ImU32 frame = pg.owner < 0 ? theme::with_alpha(theme::kBorder, 0.5f)
                            : pg.owner == shown ? theme::sequence_color(pg.owner, 0.95f)
                                                : theme::sequence_color(pg.owner, 0.45f);
        dl->AddRect(in.min, in.max, frame, 0, 0, pg.owner == shown && pg.owner >= 0 ? 1.5f : 1.0f);
        // The page's place in the table row of the sequence shown: the order the gather reads it in.
        if (pg.owner == shown && pg.owner >= 0 && m.page_h >= f.small->FontSize - 1) {
          std::snprintf(buf, sizeof buf, "%d", pg.entry);
          if (text_w(f.small, buf) + 8 < in.w())
            dl->AddText(f.small, f.small->FontSize, ImVec2(in.max.x - text_w(f.small, buf) - 6, in.min.y + (in.h() - f.small->FontSize) * 0.5f),
                        theme::kText, buf);
        }
      }
      // The followed split's pages: a mark on the right edge (the tile it holds is outlined below).
      if (split_page(p) && framed)
        dl->AddRectFilled(ImVec2(in.max.x - 3, in.min.y + 1), ImVec2(in.max.x, in.max.y - 1), theme::with_alpha(theme::kAccent, 0.8f));
      if (hover_ok && pr.contains(mouse)) {
        hovered_page = p;
        hovered_tensor = t;
        hovered_seq = pg.owner;
      }
    }
    // The tile the followed CTA holds (each of its runs of slots), and what moves now.
    if (split_followed && cta.hk == focus.hk) {
      const TrackCursor tc = r.track_cursor(track, cur);
      for (const auto& [a, b] : gathered_rows(r.trace(), r.track_events(track), tc.done, t))
        outline(dl, slot_rects(m, cache, a, b), theme::kAccent, 2.0f);
    }
    for (const tr::Event* e : moving)
      if (e->tensor == t && e->bh == focus.hk)
        outline(dl, slot_rects(m, cache, e->row0, std::int64_t(e->row0) + e->rows),
                e->kind == tr::Kind::Load ? IM_COL32(255, 255, 255, 210)
                                          : theme::mix(theme::tensor_color(t), IM_COL32(255, 255, 255, 255), 0.55f),
                1.0f);
  }

  // --- The block table: a row per sequence, its pages in key order. ---
  float y = k_area.max.y + kSectionGap;
  dl->AddText(f.small, f.small->FontSize, ImVec2(area.min.x, y), theme::kTextDim,
              cache.paged() ? "block table: each sequence's keys gathered from these pages, in this order"
                            : "each sequence's keys: one contiguous run of the cache (its cache sequence)");
  y += lh;
  int others_left = others;
  for (int b = 0; b < B; ++b) {
    const auto& row = cache.table_row(b);
    if (b != shown && others_left-- <= 0) continue;
    const int lines = full_table ? lines_of(b) : b == shown ? shown_lines : 1;
    const bool emph = b == shown;
    std::snprintf(buf, sizeof buf, "seq %d · %d keys", b, cache.length(b));
    const Rect label{ImVec2(area.min.x, y), ImVec2(area.min.x + label_w, y + lh)};
    dl->AddText(f.small, f.small->FontSize, ImVec2(label.min.x, y), emph ? theme::sequence_color(b) : theme::kTextDim, buf);
    if (hover_ok && label.contains(mouse)) hovered_seq = b;
    const int holding = cache.pages_holding(b);
    for (int j = 0; j < int(row.size()); ++j) {
      const int line = j / per_line;
      if (line >= lines) {
        dl->AddText(f.small, f.small->FontSize, ImVec2(area.max.x - text_w(f.small, "…") - 2, y + float(lines - 1) * lh), theme::kTextDim, "…");
        break;
      }
      const float x = area.min.x + label_w + float(j % per_line) * (chip_w + 2), cy = y + float(line) * lh;
      const Rect chip{ImVec2(x, cy + 1), ImVec2(x + chip_w, cy + lh - 1)};
      const int p = row[std::size_t(j)];
      // A page holding keys solid, one the table reserves for keys to come faint.
      dl->AddRectFilled(chip.min, chip.max, theme::sequence_color(b, j < holding ? (emph ? 0.85f : 0.45f) : 0.15f), 2);
      std::snprintf(buf, sizeof buf, "%d", p);
      centered_text(dl, chip, j < holding ? IM_COL32(16, 18, 22, 255) : theme::kTextDim, buf, f.small);
      const bool in_split = split_followed && b == cta.b && std::int64_t(j + 1) * cache.page_rows() > split_k0 &&
                            std::int64_t(j) * cache.page_rows() < split_k1;
      if (in_split) dl->AddRect(ImVec2(chip.min.x - 1, chip.min.y - 1), ImVec2(chip.max.x + 1, chip.max.y + 1), theme::kAccent, 2, 0, 1.5f);
      if (hover_ok && chip.contains(mouse)) {
        hovered_seq = b;
        hovered_page = p;
        hovered_tensor = tr::Tensor::None;
      }
    }
    y += float(lines) * lh;
  }

  // --- The shown sequence's small tensors: a row per head (per K/V head for k_new, v_new). ---
  y = std::max(y, area.max.y - small_h) + 2;
  const float tensors_h = area.max.y - y - lh - 2;
  std::vector<const TensorGrid*> small;
  for (tr::Tensor t : {tr::Tensor::Q, tr::Tensor::KNew, tr::Tensor::VNew, tr::Tensor::OPart, tr::Tensor::LSEPart,
                       tr::Tensor::O, tr::Tensor::LSE})
    if (const TensorGrid* g = cov.grid(t); g && g->in_hbm) small.push_back(g);
  // Each as wide as its columns at one scale (d, or 1 for the LSEs), at least its name; what is left
  // after the names is shared by the wide ones.
  double cols = 0, fixed = 0;
  auto name_w = [&](const TensorGrid* g) { return text_w(f.small, theme::tensor_display(g->tensor)) + 4; };
  for (const auto* g : small) {
    if (g->cols > 8)
      cols += g->cols;
    else
      fixed += name_w(g);
  }
  const float sx = float(std::max(1.0, area.w() - 14 * float(small.size()) - fixed - 120) / std::max(1.0, cols));
  float x = area.min.x;
  for (const TensorGrid* g : small) {
    const bool kv_side = g->tensor == tr::Tensor::KNew || g->tensor == tr::Tensor::VNew;
    const int heads = kv_side ? cache.heads_kv() : cache.heads();
    const int first = shown * heads;  // the sequence's first head (b·H, or b·H_kv)
    const float w = g->cols > 8 ? std::max(name_w(g), float(g->cols) * sx) : name_w(g);
    const Rect box{ImVec2(x, y + lh), ImVec2(x + w, y + lh + std::max(8.0f, tensors_h))};
    drawn.small.push_back({g, box, first, heads});
    dl->AddText(f.small, f.small->FontSize, ImVec2(x, y), theme::tensor_color(g->tensor), theme::tensor_display(g->tensor));
    const float hh = box.h() / float(heads);
    for (int h = 0; h < heads; ++h) {
      const Rect hr{ImVec2(box.min.x, box.min.y + hh * float(h)), ImVec2(box.max.x, box.min.y + hh * float(h + 1))};
      draw_grid(dl, *g, first + h, hr, GridMode::Hbm);
    }
    // The followed K/V head's rows: its g query heads, or itself.
    const int h0 = kv_side ? focus.hk : focus.hk * cache.group(), h1 = kv_side ? focus.hk + 1 : h0 + cache.group();
    if (shown == focus.b)
      dl->AddRect(ImVec2(box.min.x - 2, box.min.y + hh * float(h0) - 1), ImVec2(box.max.x + 2, box.min.y + hh * float(h1) + 1),
                  theme::kAccent, 0, 0, 1.5f);
    for (const tr::Event* e : moving) {
      if (e->tensor != g->tensor || e->bh < first || e->bh >= first + heads) continue;
      const Rect hr{ImVec2(box.min.x, box.min.y + hh * float(e->bh - first)), ImVec2(box.max.x, box.min.y + hh * float(e->bh - first + 1))};
      const Rect er = element_rect(*g, hr, e->row0, e->rows, e->col0, e->cols);
      dl->AddRect(er.min, er.max, e->kind == tr::Kind::Load ? IM_COL32(255, 255, 255, 210)
                                                            : theme::mix(theme::tensor_color(g->tensor), IM_COL32(255, 255, 255, 255), 0.55f));
    }
    if (hover_ok && box.contains(mouse)) {
      const int h = std::clamp(int((mouse.y - box.min.y) / hh), 0, heads - 1);
      ImGui::BeginTooltip();
      ImGui::Text("%s of sequence %d, %s %d", theme::tensor_display(g->tensor), shown, kv_side ? "K/V head" : "head", h);
      if (g->tensor == tr::Tensor::OPart || g->tensor == tr::Tensor::LSEPart)
        ImGui::TextDisabled("row t·%d + s: split s's partial result for new token t (float32)", cache.splits());
      ImGui::EndTooltip();
    }
    x += w + 14;
  }
  std::snprintf(buf, sizeof buf, "sequence %d: a row per head", shown);
  if (x + text_w(f.small, buf) < area.max.x) dl->AddText(f.small, f.small->FontSize, ImVec2(x, y + lh), theme::kTextDim, buf);

  // --- Hover: what the page holds and who read it; a click follows the sequence. ---
  if (hovered_page >= 0) {
    const CachePage& pg = cache.page(hovered_page);
    const std::int64_t s0 = std::int64_t(hovered_page) * cache.page_rows();
    ImGui::BeginTooltip();
    if (cache.paged())
      ImGui::Text("page %d · slots %lld–%lld", hovered_page, (long long)s0, (long long)(s0 + cache.page_rows() - 1));
    else
      ImGui::Text("cache sequence %d · slots %lld–%lld", hovered_page, (long long)s0, (long long)(s0 + cache.page_rows() - 1));
    if (pg.owner < 0) {
      ImGui::TextDisabled("no sequence's block table names it: unused");
    } else {
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(theme::sequence_color(pg.owner)), "sequence %d, entry %d of its table", pg.owner, pg.entry);
      if (pg.keys > 0)
        ImGui::Text("its keys %d–%d (%d of %d slots)", pg.entry * cache.page_rows(), pg.entry * cache.page_rows() + pg.keys - 1, pg.keys,
                    cache.page_rows());
      else
        ImGui::TextDisabled("reserved for its keys to come: none yet");
      if (pg.owners > 1) ImGui::TextDisabled("(named %d times in the block table: shared)", pg.owners);
      // Which splits read it: the split CTAs of its sequence whose keys reach it.
      std::string who;
      for (const auto& g : sched.groups()) {
        if (g.role != DecodeRole::Split || g.b != pg.owner || g.hk != focus.hk || g.rb != 0) continue;
        for (int tk : g.tracks) {
          const DecodeCta& c = sched.cta(tk);
          const std::int64_t a = std::int64_t(pg.entry) * cache.page_rows();
          if (c.key1 > a && c.key0 < a + pg.keys) who += (who.empty() ? "" : ", ") + std::string("split ") + std::to_string(c.split);
        }
      }
      if (!who.empty())
        ImGui::Text("read by %s (kv head %d%s)", who.c_str(), focus.hk,
                    cache.row_blocks() > 1 ? (", each of its " + std::to_string(cache.row_blocks()) + " row blocks'").c_str() : "");
    }
    if (hovered_tensor != tr::Tensor::None) {
      const SlotReader reader(r, cov, hovered_tensor, focus.hk);
      const SlotState st = reader.at(s0, s0 + cache.page_rows());
      ImGui::Text("%s so far: %.0f%% of its slots read, %.0f%% written", theme::tensor_display(hovered_tensor), 100 * st.read,
                  100 * st.written);
    }
    if (pg.owner >= 0) ImGui::TextDisabled("click: follow sequence %d's first split", pg.owner);
    ImGui::EndTooltip();
  } else if (hovered_seq >= 0) {
    ImGui::BeginTooltip();
    ImGui::Text("sequence %d · %d keys on %d pages", hovered_seq, cache.length(hovered_seq), cache.pages_holding(hovered_seq));
    std::string row;
    for (int p : cache.table_row(hovered_seq)) row += (row.empty() ? "" : ", ") + std::to_string(p);
    if (row.size() > 120) row = row.substr(0, 117) + "…";
    ImGui::Text("%s [%s]", cache.paged() ? "pages" : "cache sequence", row.c_str());
    ImGui::TextDisabled("click: follow its first split");
    ImGui::EndTooltip();
  }
  if (interactive) {
    doc.hovered_sequence = hovered_seq;
    if (hovered_seq >= 0 && ImGui::IsMouseClicked(0))
      for (const auto& g : sched.groups())
        if (g.role == DecodeRole::Split && g.b == hovered_seq && g.hk == focus.hk && g.rb == 0 && !g.tracks.empty()) {
          doc.select(g.tracks.front());
          break;
        }
  }
  return drawn;
}

}  // namespace fs::viz
