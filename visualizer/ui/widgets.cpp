#include "visualizer/ui/widgets.hpp"

#include <algorithm>
#include <cmath>

#include "common/trace/names.hpp"
#include "visualizer/model/labels.hpp"
#include "visualizer/model/replay.hpp"
#include "visualizer/ui/theme.hpp"

namespace fs::viz {

namespace {

ImU32 hbm_cell_color(const TensorGrid& g, const CellCounts& c, std::int64_t area) {
  if (area <= 0) return 0;
  const float fw = float(double(c.written) / double(area));
  const float fr = float(double(c.read) / double(area));
  if (fw > 0) return theme::tensor_color(g.tensor, 0.55f + 0.45f * std::min(1.0f, fw));
  if (fr > 0) {
    // Read once: half strength; read many times (K and V in FlashAttention-2 order): up to
    // 85 %, on a log scale so that 2× and 64× still look different.
    const float extra = std::min(1.0f, std::log2(std::max(1.0f, fr)) / 6.0f);
    return theme::tensor_color(g.tensor, 0.42f + 0.4f * extra);
  }
  if (c.cached > 0) return theme::tensor_color(g.tensor, 0.2f);
  return theme::tensor_color(g.tensor, 0.09f);
}

ImU32 score_cell_color(const CellCounts& c, std::int64_t area, bool computed_first, bool* skipped) {
  *skipped = false;
  if (area <= 0) return 0;
  if (c.written * 2 >= area) return theme::tensor_color(fs::trace::Tensor::S, 0.95f);
  if (c.skipped * 2 >= area && !(computed_first && c.computed > 0)) {
    *skipped = true;
    return theme::with_alpha(theme::kSkipped, 0.55f);
  }
  if (c.computed > 0) return theme::tensor_color(fs::trace::Tensor::S, 0.16f + 0.2f * float(std::min<double>(1.0, double(c.computed) / double(area))));
  return theme::tensor_color(fs::trace::Tensor::S, 0.04f);
}

}  // namespace

void draw_grid(ImDrawList* dl, const TensorGrid& g, int bh, Rect r, GridMode mode) {
  if (r.w() < 1 || r.h() < 1 || bh < 0 || bh >= g.heads) return;
  const double sx = r.w() / double(g.cols), sy = r.h() / double(g.rows);
  const float cw = float(g.cell_cols * sx), ch = float(g.cell_rows * sy);
  std::vector<Rect> hatched;
  for (int i = 0; i < g.grid_rows; ++i) {
    const float y0 = r.min.y + float(i * g.cell_rows * sy);
    const float y1 = std::min(r.max.y, r.min.y + float(std::min(g.rows, (i + 1) * g.cell_rows) * sy));
    int run_start = 0;
    ImU32 run_color = 0;
    bool run_skip = false;
    // Cells too faint to see (the "not yet" of the ghost S) are left to the panel: a
    // software renderer pays for every pixel filled.
    auto flush = [&](int end) {
      if (end <= run_start || ((run_color >> IM_COL32_A_SHIFT) & 0xFF) < 14) return;
      const float x0 = r.min.x + float(run_start * g.cell_cols * sx);
      const float x1 = std::min(r.max.x, r.min.x + float(std::min(g.cols, end * g.cell_cols) * sx));
      dl->AddRectFilled(ImVec2(x0, y0), ImVec2(x1, y1), run_color);
      if (run_skip && mode == GridMode::Scores) hatched.push_back({ImVec2(x0, y0), ImVec2(x1, y1)});
    };
    for (int j = 0; j < g.grid_cols; ++j) {
      const auto& c = g.at(bh, i, j);
      bool skip = false;
      const ImU32 col = mode == GridMode::Hbm
                            ? hbm_cell_color(g, c, g.cell_area(i, j))
                            : score_cell_color(c, g.cell_area(i, j), mode == GridMode::RoundScores, &skip);
      if (j == 0 || col != run_color || skip != run_skip) {
        flush(j);
        run_start = j;
        run_color = col;
        run_skip = skip;
      }
    }
    flush(g.grid_cols);
  }
  for (const auto& h : hatched) hatch(dl, h, IM_COL32(20, 22, 26, 150), std::max(4.0f, std::min(cw, ch) * 0.5f));
  // Tile boundaries, where there is room to see them.
  if (cw >= 5)
    for (int j = 1; j < g.grid_cols; ++j) {
      const float x = r.min.x + float(j * g.cell_cols * sx);
      dl->AddLine(ImVec2(x, r.min.y), ImVec2(x, r.max.y), theme::kGrid);
    }
  if (ch >= 5)
    for (int i = 1; i < g.grid_rows; ++i) {
      const float y = r.min.y + float(i * g.cell_rows * sy);
      dl->AddLine(ImVec2(r.min.x, y), ImVec2(r.max.x, y), theme::kGrid);
    }
  const ImU32 outline = mode != GridMode::Hbm && !g.in_hbm ? theme::tensor_color(g.tensor, 0.45f)
                                                          : theme::tensor_color(g.tensor, 0.8f);
  dl->AddRect(r.min, r.max, outline);
}

Rect element_rect(const TensorGrid& g, Rect r, int row0, int rows, int col0, int cols) {
  const double sx = r.w() / double(g.cols), sy = r.h() / double(g.rows);
  const int c0 = std::clamp(col0, 0, g.cols), c1 = std::clamp(col0 + cols, 0, g.cols);
  const int r0 = std::clamp(row0, 0, g.rows), r1 = std::clamp(row0 + rows, 0, g.rows);
  Rect out{ImVec2(r.min.x + float(c0 * sx), r.min.y + float(r0 * sy)),
           ImVec2(r.min.x + float(c1 * sx), r.min.y + float(r1 * sy))};
  // Never thinner than a line, so a one-row tile of a large tensor still shows.
  if (out.w() < 2) out.max.x = out.min.x + 2;
  if (out.h() < 2) out.max.y = out.min.y + 2;
  return out;
}

namespace {

// Runs of indices as screen spans along one axis (`scale` pixels an index from `origin`, at least
// 2 pixels each, as element_rect draws them), merged where they touch: a run per pixel at most,
// however many rows a large tensor's pixel holds.
std::vector<std::pair<float, float>> pixel_spans(const std::vector<std::pair<int, int>>& runs, float origin, double scale) {
  std::vector<std::pair<float, float>> spans;
  for (const auto& [a, b] : runs) {
    const float lo = origin + float(a * scale), hi = std::max(lo + 2, origin + float(b * scale));
    if (!spans.empty() && lo <= spans.back().second + 1)
      spans.back().second = std::max(spans.back().second, hi);
    else
      spans.push_back({lo, hi});
  }
  return spans;
}

}  // namespace

std::vector<Rect> element_rects(const TensorGrid& g, Rect r, SlotOrders orders, int row0, int rows, int col0, int cols) {
  if (!orders.mapped()) return {element_rect(g, r, row0, rows, col0, cols)};
  // Slots past the order (a damaged event) stand for no row.
  const int r0 = std::clamp(row0, 0, g.rows), r1 = int(std::clamp<std::int64_t>(std::int64_t(row0) + rows, 0, g.rows));
  const int c0 = std::clamp(col0, 0, g.cols), c1 = int(std::clamp<std::int64_t>(std::int64_t(col0) + cols, 0, g.cols));
  const auto ys = pixel_spans(row_runs(orders.rows, r0, r1 - r0), r.min.y, r.h() / double(g.rows));
  const auto xs = pixel_spans(row_runs(orders.cols, c0, c1 - c0), r.min.x, r.w() / double(g.cols));
  std::vector<Rect> out;
  out.reserve(ys.size() * xs.size());
  for (const auto& [y0, y1] : ys)
    for (const auto& [x0, x1] : xs) out.push_back({ImVec2(x0, y0), ImVec2(x1, y1)});
  return out;
}

Rect hull(const std::vector<Rect>& rects) {
  if (rects.empty()) return {};
  Rect h = rects.front();
  for (const auto& x : rects) {
    h.min = ImVec2(std::min(h.min.x, x.min.x), std::min(h.min.y, x.min.y));
    h.max = ImVec2(std::max(h.max.x, x.max.x), std::max(h.max.y, x.max.y));
  }
  return h;
}

void legend_item(ImU32 color, const char* label, bool outline_only) {
  const float h = ImGui::GetTextLineHeight();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 a(p.x, p.y + h * 0.2f), b(p.x + h * 0.6f, p.y + h * 0.8f);
  if (outline_only)
    dl->AddRect(a, b, color, 0, 0, 1.5f);
  else
    dl->AddRectFilled(a, b, color, 2);
  ImGui::Dummy(ImVec2(h * 0.6f, h));
  ImGui::SameLine(0, 4);
  ImGui::TextUnformatted(label);
}

void legend_hatch(const char* label) {
  const float h = ImGui::GetTextLineHeight();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const Rect r{ImVec2(p.x, p.y + h * 0.2f), ImVec2(p.x + h * 0.6f, p.y + h * 0.8f)};
  dl->AddRectFilled(r.min, r.max, theme::with_alpha(theme::kSkipped, 0.55f));
  hatch(dl, r, IM_COL32(20, 22, 26, 180), 3);
  ImGui::Dummy(ImVec2(h * 0.6f, h));
  ImGui::SameLine(0, 4);
  ImGui::TextUnformatted(label);
}

void value_bar(float width, float height, double value, double full, double target, ImU32 color,
               const char* text, double untraced) {
  const ImVec2 p = ImGui::GetCursorScreenPos();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 q(p.x + width, p.y + height);
  dl->AddRectFilled(p, q, IM_COL32(40, 44, 54, 255), 3);
  const double f = full > 0 ? std::clamp(value / full, 0.0, 1.0) : 0.0;
  if (f > 0) dl->AddRectFilled(p, ImVec2(p.x + float(f * width), q.y), color, 3);
  if (untraced > 0 && target > 0 && full > 0) {
    const float x1 = p.x + float(std::clamp(target / full, 0.0, 1.0) * width);
    const float x0 = p.x + float(std::clamp((target - untraced) / full, 0.0, 1.0) * width);
    const Rect u{ImVec2(x0, p.y), ImVec2(std::max(x0 + 2, x1), q.y)};
    dl->AddRectFilled(u.min, u.max, theme::with_alpha(theme::mix(color, theme::kSkipped, 0.6f), 0.8f));
    hatch(dl, u, IM_COL32(20, 22, 26, 170), 4);
  }
  if (target > 0 && full > 0) {
    // Ticks above and below, so the text on the bar stays readable.
    const float x = p.x + float(std::clamp(target / full, 0.0, 1.0) * width);
    dl->AddLine(ImVec2(x, p.y - 3), ImVec2(x, p.y + 4), theme::kText, 2);
    dl->AddLine(ImVec2(x, q.y - 4), ImVec2(x, q.y + 3), theme::kText, 2);
  }
  if (text && *text) {
    const ImVec2 ts = ImGui::CalcTextSize(text);
    dl->AddText(ImVec2(p.x + 6, p.y + (height - ts.y) * 0.5f), theme::kText, text);
  }
  ImGui::Dummy(ImVec2(width, height));
}

void hatch(ImDrawList* dl, Rect r, ImU32 color, float spacing) {
  if (r.w() <= 0 || r.h() <= 0) return;
  dl->PushClipRect(r.min, r.max, true);
  for (float s = -r.h(); s < r.w(); s += spacing)
    dl->AddLine(ImVec2(r.min.x + s, r.max.y), ImVec2(r.min.x + s + r.h(), r.min.y), color);
  dl->PopClipRect();
}

void centered_text(ImDrawList* dl, Rect r, ImU32 color, const char* text, ImFont* font) {
  ImFont* f = font ? font : ImGui::GetFont();
  const float size = f->FontSize;
  const ImVec2 ts = f->CalcTextSizeA(size, 1e9f, 0, text);
  if (ts.x > r.w() + 2 || ts.y > r.h() + 2) return;
  dl->AddText(f, size, ImVec2(r.min.x + (r.w() - ts.x) * 0.5f, r.min.y + (r.h() - ts.y) * 0.5f), color, text);
}

void event_tooltip(const Replay& r, int e_idx) {
  const auto& e = r.trace().events[std::size_t(e_idx)];
  const auto& tk = r.trace().tracks[std::size_t(e.track)];
  const std::string kname = tk.kernel < int(r.trace().kernels.size()) ? r.trace().kernels[std::size_t(tk.kernel)].name : "?";
  ImGui::BeginTooltip();
  ImGui::PushStyleColor(ImGuiCol_Text, theme::kind_color(e.kind, e.tensor));
  ImGui::Text("%s %s", kind_label(e.kind), tile_label(e).c_str());
  ImGui::PopStyleColor();
  if (r.laned(e.track))
    ImGui::TextDisabled("CTA %d of %s on SM %d · %s · head %d", tk.cta, kname.c_str(), tk.sm,
                        tr::lane_name(r.trace(), tk).c_str(), e.bh);
  else
    ImGui::TextDisabled("CTA %d of %s on SM %d · head %d", tk.cta, kname.c_str(), tk.sm, e.bh);
  // A decoding trace: the CTA's role, and what a cache row range is (slots of the K/V head bh).
  if (r.decode().on()) {
    if (const std::string role = r.decode().label(r.trace(), e.track); !role.empty()) ImGui::TextDisabled("%s", role.c_str());
    const CacheGeometry& c = r.cache();
    if ((e.tensor == tr::Tensor::K || e.tensor == tr::Tensor::V) && e.rows > 0) {
      const SlotKey a = c.key_at(e.row0), b = c.key_at(std::int64_t(e.row0) + e.rows - 1);
      if (a.seq >= 0 && a.seq == b.seq)
        ImGui::Text("slots %d–%d of kv head %d: sequence %d's keys %d–%d%s", e.row0, e.row0 + e.rows - 1, e.bh, a.seq, a.key,
                    b.key, c.paged() ? (", page " + std::to_string(a.page)).c_str() : "");
      else
        ImGui::Text("slots %d–%d of kv head %d", e.row0, e.row0 + e.rows - 1, e.bh);
    }
  }
  if (e.kind == tr::Kind::Load || e.kind == tr::Kind::Store)
    ImGui::Text("%s %s%s", e.kind == tr::Kind::Load ? "read" : "written", format_bytes(double(e.bytes)).c_str(),
                e.cached ? " · L2 re-read (the IO model does not count it)" : "");
  ImGui::Text("begins %s · lasts %s · seq %lld", format_ns(e.ts_ns).c_str(), format_ns(e.dur_ns).c_str(), (long long)e.seq);
  if (std::isfinite(e.m))
    ImGui::Text("%s after it: m = %.4f, ℓ = %.4f", sample_row_label(r, e).c_str(), double(e.m), double(e.l));
  ImGui::TextDisabled("click: follow this CTA · double-click: move the playhead here");
  ImGui::EndTooltip();
}

}  // namespace fs::viz
