#include "visualizer/ui/hbm_view.hpp"

#include <algorithm>
#include <cstdio>

#include "visualizer/model/labels.hpp"
#include "visualizer/ui/theme.hpp"

namespace fs::viz {

namespace tr = fs::trace;

namespace {

bool square(tr::Tensor t) {
  return t == tr::Tensor::S || t == tr::Tensor::P || t == tr::Tensor::dP || t == tr::Tensor::dS;
}

// Inputs, then outputs, then row statistics, then the N×N matrices.
int rank(tr::Tensor t) {
  switch (t) {
    case tr::Tensor::Q: return 0;
    case tr::Tensor::K: return 1;
    case tr::Tensor::V: return 2;
    case tr::Tensor::dO: return 3;
    case tr::Tensor::O: return 4;
    case tr::Tensor::dQ: return 5;
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
    default: return 16;
  }
}

}  // namespace

const HbmItem* HbmLayout::find(tr::Tensor t) const {
  for (const auto& i : items)
    if (i.grid->tensor == t) return &i;
  return nullptr;
}

HbmLayout layout_hbm(const Document& doc, Rect area, bool ghost) {
  HbmLayout out;
  std::vector<const TensorGrid*> grids;
  for (const auto& g : doc.coverage->grids())
    if (g.in_hbm || (ghost && g.tensor == tr::Tensor::S)) grids.push_back(&g);
  std::stable_sort(grids.begin(), grids.end(),
                   [](const TensorGrid* a, const TensorGrid* b) { return rank(a->tensor) < rank(b->tensor); });
  if (grids.empty()) return out;
  const float gap = 14, label_h = ImGui::GetTextLineHeight() + 4, size_h = ImGui::GetTextLineHeight() + 2;
  const float min_w = 12, min_vec_w = 8;
  const int N = std::max(1, doc.replay->meta().N);
  const float avail_h = std::max(10.0f, area.h() - label_h - size_h);
  // Width in elements of everything at one scale, and the gaps.
  double cols = 0;
  for (const auto* g : grids) cols += g->cols;
  // A name wider than its tensor (LSE over one column) pushes the next tensor along.
  const auto& f = theme::fonts();
  std::vector<float> label_w;
  for (const auto* g : grids)
    label_w.push_back(f.title->CalcTextSizeA(f.title->FontSize, 1e9f, 0, theme::tensor_display(g->tensor)).x + 4);
  const float gaps = gap * float(grids.size() - 1);
  double s = std::min(double(avail_h) / N, double(area.w() - gaps) / cols);
  // Thin tensors get a minimum width (and room for their name); the rest shrink to make room.
  auto min_width = [&](std::size_t i) {
    return std::max(grids[i]->cols == 1 ? min_vec_w : min_w, label_w[i]);
  };
  for (int iter = 0; iter < 4; ++iter) {
    double fixed = 0, scaled = 0;
    for (std::size_t i = 0; i < grids.size(); ++i) {
      if (grids[i]->cols * s < min_width(i))
        fixed += min_width(i);
      else
        scaled += grids[i]->cols;
    }
    if (scaled > 0) s = std::min(double(avail_h) / N, (double(area.w() - gaps) - fixed) / scaled);
  }
  s = std::max(s, 1e-4);
  float x = area.min.x;
  const float y = area.min.y + label_h;
  for (std::size_t i = 0; i < grids.size(); ++i) {
    const TensorGrid* g = grids[i];
    double w = g->cols * s;
    const double m = g->cols == 1 ? min_vec_w : min_w;
    if (w < m) {
      w = m;
      out.widened = true;
    }
    const float slot = std::max(float(w), label_w[i]);
    HbmItem it;
    it.grid = g;
    it.rect = {ImVec2(x, y), ImVec2(x + float(w), y + float(N * s))};
    it.label = {ImVec2(x, area.min.y), ImVec2(x + float(w), y)};
    out.items.push_back(it);
    x += slot + gap;
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
      const auto* info = find_tensor(r.meta(), g.tensor);
      // One head's share: the picture is one head.
      const double bytes = (info ? double(info->bytes) : double(g.rows) * g.cols * 4 * g.heads) / g.heads;
      if (g.cols == 1)
        std::snprintf(buf, sizeof buf, "N");
      else if (square(g.tensor))
        std::snprintf(buf, sizeof buf, "N×N · %s a head", format_bytes(bytes).c_str());
      else
        std::snprintf(buf, sizeof buf, "N×d");
      dl->AddText(f.small, f.small->FontSize, ImVec2(it.rect.min.x, it.rect.max.y + 2), theme::kTextDim, buf);
      if (!square(g.tensor) && g.cols > 1 && it.rect.w() > 30) {
        std::snprintf(buf, sizeof buf, "%s", format_bytes(bytes).c_str());
        dl->AddText(f.small, f.small->FontSize, ImVec2(it.rect.min.x, it.rect.max.y + 2 + f.small->FontSize),
                    theme::kTextDim, buf);
      }
    }
  }
  // Tiles in flight right now, for every CTA of this head.
  const Cursor c = doc.cursor();
  for (int t = 0; t < r.track_count(); ++t) {
    if (r.track_events(t).empty()) continue;
    if (c.order == Order::Real ? (c.x < r.track_begin_ns(t) || c.x > r.track_end_ns(t))
                               : (c.x < r.track_events(t).front() || c.x > r.track_events(t).back() + 1))
      continue;
    const TrackCursor tc = r.track_cursor(t, c);
    if (tc.active < 0) continue;
    const auto& e = r.trace().events[std::size_t(r.track_events(t)[std::size_t(tc.active)])];
    if ((e.kind != tr::Kind::Load && e.kind != tr::Kind::Store) || e.bh != bh) continue;
    const HbmItem* it = layout.find(e.tensor);
    if (!it) continue;
    // Loads in white, stores in a light tone of their tensor: many move at once, and the
    // tensor underneath should still show through.
    const Rect er = element_rect(*it->grid, it->rect, e.row0, e.rows, e.col0, e.cols);
    dl->AddRect(er.min, er.max,
                e.kind == tr::Kind::Load ? IM_COL32(255, 255, 255, 120)
                                         : theme::with_alpha(theme::mix(theme::tensor_color(e.tensor), IM_COL32(255, 255, 255, 255), 0.55f), 0.8f));
  }
}

}  // namespace fs::viz
