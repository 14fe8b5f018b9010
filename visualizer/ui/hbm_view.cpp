#include "visualizer/ui/hbm_view.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <string>
#include <tuple>

#include "visualizer/model/labels.hpp"
#include "visualizer/ui/theme.hpp"

namespace fs::viz {

namespace tr = fs::trace;

namespace {

// Inputs, then outputs, then row statistics, then the N×N matrices, then what a clustering keeps.
int rank(tr::Tensor t) {
  switch (t) {
    case tr::Tensor::Q: return 0;
    case tr::Tensor::K: return 1;
    case tr::Tensor::V: return 2;
    case tr::Tensor::dO: return 3;
    case tr::Tensor::O: return 4;
    case tr::Tensor::dQ: return 5;
    case tr::Tensor::dQacc: return 16;
    case tr::Tensor::dK: return 6;
    case tr::Tensor::dV: return 7;
    case tr::Tensor::LSE: return 8;
    case tr::Tensor::D: return 9;
    case tr::Tensor::M: return 10;
    case tr::Tensor::L: return 11;
    case tr::Tensor::S: return 12;
    case tr::Tensor::P: return 13;
    case tr::Tensor::dP: return 14;
    case tr::Tensor::dS: return 15;
    case tr::Tensor::Order: return 17;
    case tr::Tensor::SortKey: return 18;
    default: return 19;
  }
}

}  // namespace

const HbmItem* HbmLayout::find(tr::Tensor t) const {
  for (const auto& i : items)
    if (i.grid->tensor == t) return &i;
  return nullptr;
}

namespace {

constexpr float kGap = 14, kMinW = 12, kMinVecW = 8;

float label_width(const TensorGrid* g) {
  const auto& f = theme::fonts();
  return f.title->CalcTextSizeA(f.title->FontSize, 1e9f, 0, theme::tensor_display(g->tensor)).x + 4;
}

// The narrowest a tensor may be drawn: thin ones get a minimum width, and room for their name
// (LSE over one column would otherwise push into its neighbour).
float min_width(const TensorGrid* g) { return std::max(g->cols == 1 ? kMinVecW : kMinW, label_width(g)); }

// The largest scale (pixels per element) at which one row of tensors, all N tall, fits in
// width × height; thin tensors take their minimum width and the rest share what is left.
double fit_row(const std::vector<const TensorGrid*>& row, float width, float height, int N) {
  if (row.empty()) return 1e9;
  double cols = 0;
  for (const auto* g : row) cols += g->cols;
  const double gaps = kGap * double(row.size() - 1);
  double s = std::min(double(height) / N, (width - gaps) / cols);
  for (int iter = 0; iter < 4; ++iter) {
    double fixed = 0, scaled = 0;
    for (const auto* g : row) {
      if (g->cols * s < min_width(g))
        fixed += min_width(g);
      else
        scaled += g->cols;
    }
    if (scaled > 0) s = std::min(double(height) / N, (width - gaps - fixed) / scaled);
  }
  return std::max(s, 1e-4);
}

void place_row(const std::vector<const TensorGrid*>& row, float x, float y, double s, int N, float label_h,
               HbmLayout& out) {
  for (const auto* g : row) {
    double w = g->cols * s;
    const double m = g->cols == 1 ? kMinVecW : kMinW;
    if (w < m) {
      w = m;
      out.widened = true;
    }
    HbmItem it;
    it.grid = g;
    it.rect = {ImVec2(x, y + label_h), ImVec2(x + float(w), y + label_h + float(N * s))};
    it.label = {ImVec2(x, y), ImVec2(x + float(w), y + label_h)};
    out.items.push_back(it);
    x += std::max(float(w), label_width(g)) + kGap;
  }
}

}  // namespace

HbmLayout layout_hbm(const Document& doc, Rect area, bool ghost) {
  HbmLayout out;
  std::vector<const TensorGrid*> grids;
  for (const auto& g : doc.coverage->grids())
    if (g.in_hbm || (ghost && g.tensor == tr::Tensor::S)) grids.push_back(&g);
  std::stable_sort(grids.begin(), grids.end(),
                   [](const TensorGrid* a, const TensorGrid* b) { return rank(a->tensor) < rank(b->tensor); });
  if (grids.empty()) return out;
  const float label_h = ImGui::GetTextLineHeight() + 4, size_h = 2 * ImGui::GetTextLineHeight() + 4;
  const int N = std::max(1, doc.replay->meta().N);
  // One row, or the N×d tensors above the N×N ones, whichever draws them larger (a backward
  // pass has eight N×d tensors and four N×N ones).
  std::vector<const TensorGrid*> thin, wide;
  for (const auto* g : grids) (score_like(g->tensor) ? wide : thin).push_back(g);
  const double one = fit_row(grids, area.w(), area.h() - label_h - size_h, N);
  const float row_h = (area.h() - 2 * (label_h + size_h)) * 0.5f;
  const double two = thin.empty() || wide.empty()
                         ? 0
                         : std::min(fit_row(thin, area.w(), row_h, N), fit_row(wide, area.w(), row_h, N));
  if (two > one * 1.15) {
    place_row(thin, area.min.x, area.min.y, two, N, label_h, out);
    place_row(wide, area.min.x, area.min.y + label_h + float(N * two) + size_h, two, N, label_h, out);
  } else {
    place_row(grids, area.min.x, area.min.y, one, N, label_h, out);
  }
  return out;
}

void draw_hbm(ImDrawList* dl, const Document& doc, const HbmLayout& layout, int bh, bool sizes) {
  const auto& r = *doc.replay;
  const auto& f = theme::fonts();
  for (const auto& it : layout.items) {
    const auto& g = *it.grid;
    if (!g.in_hbm) {
      // The matrix standard attention would keep here: drawn at its true size, never filled.
      dl->AddRectFilled(it.rect.min, it.rect.max, theme::tensor_color(g.tensor, 0.04f));
      const float dash = 8;
      for (float x = it.rect.min.x; x < it.rect.max.x; x += 2 * dash) {
        const float x2 = std::min(x + dash, it.rect.max.x);
        dl->AddLine(ImVec2(x, it.rect.min.y), ImVec2(x2, it.rect.min.y), theme::tensor_color(g.tensor, 0.6f));
        dl->AddLine(ImVec2(x, it.rect.max.y), ImVec2(x2, it.rect.max.y), theme::tensor_color(g.tensor, 0.6f));
      }
      for (float y = it.rect.min.y; y < it.rect.max.y; y += 2 * dash) {
        const float y2 = std::min(y + dash, it.rect.max.y);
        dl->AddLine(ImVec2(it.rect.min.x, y), ImVec2(it.rect.min.x, y2), theme::tensor_color(g.tensor, 0.6f));
        dl->AddLine(ImVec2(it.rect.max.x, y), ImVec2(it.rect.max.x, y2), theme::tensor_color(g.tensor, 0.6f));
      }
      char msg[128];
      std::snprintf(msg, sizeof msg, "S, P: N×N = %s each, a head", format_bytes(double(g.rows) * g.cols * 4).c_str());
      centered_text(dl, {it.rect.min, ImVec2(it.rect.max.x, it.rect.min.y + it.rect.h() * 0.5f)},
                    theme::tensor_color(g.tensor, 0.85f), msg, f.regular);
      centered_text(dl, {ImVec2(it.rect.min.x, it.rect.min.y + it.rect.h() * 0.5f), it.rect.max},
                    theme::tensor_color(g.tensor, 0.85f), "never written to HBM", f.title);
    } else {
      draw_grid(dl, g, bh, it.rect, GridMode::Hbm);
    }
    // Name above, size below.
    const char* name = theme::tensor_display(g.tensor);
    dl->AddText(f.title, f.title->FontSize, ImVec2(it.label.min.x, it.label.min.y), theme::tensor_color(g.tensor), name);
    if (sizes && g.in_hbm) {
      char buf[64];
      // One head's share (the picture is one head), at the element size the pass's loads and
      // stores move: step 09's fp8 forward reads Q, K and Vᵀ as e4m3, a byte an element, from its
      // quantizer's copies, not the bf16 tensors the trace lists.
      const double bytes = double(g.rows) * g.cols * r.moved_element_bytes(g.tensor);
      if (g.cols == 1)
        std::snprintf(buf, sizeof buf, "N");
      else if (score_like(g.tensor)) {
        std::snprintf(buf, sizeof buf, "N×N · %s a head", format_bytes(bytes).c_str());
        if (f.small->CalcTextSizeA(f.small->FontSize, 1e9f, 0, buf).x > it.rect.w())
          std::snprintf(buf, sizeof buf, "N×N · %s", format_bytes(bytes).c_str());
        if (f.small->CalcTextSizeA(f.small->FontSize, 1e9f, 0, buf).x > it.rect.w()) std::snprintf(buf, sizeof buf, "N×N");
      }
      else if (g.cols == r.meta().d)
        std::snprintf(buf, sizeof buf, "N×d");
      else  // a clustering's orders and sort keys: a column per round and side
        std::snprintf(buf, sizeof buf, "N×%d", g.cols);
      // A tensor the pass moves as a copy in another type (fp8's Q, K, V) says which, where that fits.
      std::string shape = buf;
      if (const std::string type = moved_element_type(r, g.tensor); !type.empty()) {
        const std::string typed = shape + " · " + type;
        if (f.small->CalcTextSizeA(f.small->FontSize, 1e9f, 0, typed.c_str()).x < it.rect.w() + kGap - 4) shape = typed;
      }
      dl->AddText(f.small, f.small->FontSize, ImVec2(it.rect.min.x, it.rect.max.y + 2), theme::kTextDim, shape.c_str());
      std::snprintf(buf, sizeof buf, "%s", format_bytes(bytes).c_str());
      if (!score_like(g.tensor) && g.cols > 1 && f.small->CalcTextSizeA(f.small->FontSize, 1e9f, 0, buf).x < it.rect.w() + kGap - 4) {
        dl->AddText(f.small, f.small->FontSize, ImVec2(it.rect.min.x, it.rect.max.y + 2 + f.small->FontSize),
                    theme::kTextDim, buf);
      }
    }
  }
  // Tiles in flight right now, for every CTA of this head.
  const Cursor c = doc.cursor();
  // Gathered rows (a clustered round's tiles), per tensor, loads then stores: drawn together
  // once every CTA's are known, so that hundreds of CTAs' stripes cost a rectangle per run of
  // pixel rows, not one per row per CTA.
  std::vector<std::array<std::vector<Rect>, 2>> gathered(layout.items.size());
  auto color = [](tr::Kind k, tr::Tensor t) {
    return k == tr::Kind::Load ? IM_COL32(255, 255, 255, 120)
                               : theme::with_alpha(theme::mix(theme::tensor_color(t), IM_COL32(255, 255, 255, 255), 0.55f), 0.8f);
  };
  for (int t = 0; t < r.track_count(); ++t) {
    if (r.track_events(t).empty()) continue;
    if (c.order == Order::Real ? (c.x < r.track_begin_ns(t) || c.x > r.track_end_ns(t))
                               : (c.x < r.track_events(t).front() || c.x > r.track_events(t).back() + 1))
      continue;
    const TrackCursor tc = r.track_cursor(t, c);
    if (tc.active < 0) continue;
    const auto& e = r.trace().events[std::size_t(r.track_events(t)[std::size_t(tc.active)])];
    if ((e.kind != tr::Kind::Load && e.kind != tr::Kind::Store) || e.bh != bh || !r.placeable(e.tensor, e.bh, e.round))
      continue;
    const HbmItem* it = layout.find(e.tensor);
    if (!it) continue;
    // Loads in white, stores in a light tone of their tensor: many move at once, and the
    // tensor underneath should still show through.
    const SlotOrders orders = r.slot_orders(e.tensor, e.bh, e.round);
    if (!orders.mapped()) {
      const Rect er = element_rect(*it->grid, it->rect, e.row0, e.rows, e.col0, e.cols);
      dl->AddRect(er.min, er.max, color(e.kind, e.tensor));
      continue;
    }
    auto& list = gathered[std::size_t(it - layout.items.data())][e.kind == tr::Kind::Load ? 0 : 1];
    const auto rows = element_rects(*it->grid, it->rect, orders, e.row0, e.rows, e.col0, e.cols);
    list.insert(list.end(), rows.begin(), rows.end());
  }
  for (std::size_t i = 0; i < gathered.size(); ++i)
    for (int k = 0; k < 2; ++k) {
      auto& list = gathered[i][std::size_t(k)];
      std::sort(list.begin(), list.end(), [](const Rect& a, const Rect& b) {
        return std::tie(a.min.x, a.max.x, a.min.y) < std::tie(b.min.x, b.max.x, b.min.y);
      });
      const ImU32 col = color(k == 0 ? tr::Kind::Load : tr::Kind::Store, layout.items[i].grid->tensor);
      for (std::size_t a = 0; a < list.size();) {
        Rect run = list[a];
        std::size_t b = a + 1;
        for (; b < list.size() && list[b].min.x == run.min.x && list[b].max.x == run.max.x && list[b].min.y <= run.max.y + 1; ++b)
          run.max.y = std::max(run.max.y, list[b].max.y);
        dl->AddRect(run.min, run.max, col);
        a = b;
      }
    }
}

}  // namespace fs::viz
