// The ghost score matrix: all N×N scores S = τQKᵀ of one head, and for each tile whether it
// was computed on chip only, also written to HBM, or skipped by a mask. Step 01 paints it
// solid; step 04 computes every tile and writes none — the paper's argument in one square.
#include <algorithm>
#include <cstdio>

#include "visualizer/model/labels.hpp"
#include "visualizer/ui/panels.hpp"
#include "visualizer/ui/theme.hpp"
#include "visualizer/ui/widgets.hpp"

namespace fs::viz {

namespace tr = fs::trace;

void score_matrix_panel(UiState& s) {
  if (!begin_panel(kPanelScores)) return;
  Document* doc = s.doc.get();
  const TensorGrid* g = doc ? doc->coverage->grid(tr::Tensor::S) : nullptr;
  if (!doc || !g) return end_empty_panel();
  const auto& r = *doc->replay;
  const auto& f = theme::fonts();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const auto& list = r.track_events(doc->selected_track);
  const int bh = list.empty() ? 0 : r.trace().events[std::size_t(list.front())].bh;

  // Totals over this head.
  std::int64_t computed = 0, written = 0, skipped = 0;
  for (int i = 0; i < g->grid_rows; ++i)
    for (int j = 0; j < g->grid_cols; ++j) {
      const auto& c = g->at(bh, i, j);
      computed += c.computed;
      written += c.written;
      skipped += c.skipped;
    }
  const double NN = double(g->rows) * g->cols;
  ImGui::PushFont(f.small);
  ImGui::TextColored(theme::tensor_color_vec(tr::Tensor::S), "S = τQKᵀ");
  ImGui::SameLine();
  ImGui::TextDisabled("N×N = %d×%d, head %d", g->rows, g->cols, bh);
  ImGui::Text("computed %.0f%%", 100.0 * double(computed) / NN);
  ImGui::SameLine();
  ImGui::TextColored(theme::tensor_color_vec(tr::Tensor::S), "written to HBM %.0f%%", 100.0 * double(written) / NN);
  if (skipped > 0) {
    ImGui::SameLine();
    ImGui::TextDisabled("skipped %.0f%%", 100.0 * double(skipped) / NN);
  }
  ImGui::PopFont();

  const ImVec2 p = ImGui::GetCursorScreenPos();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float legend_h = 2 * ImGui::GetTextLineHeightWithSpacing() + 4;
  const float side = std::max(10.0f, std::min(avail.x, avail.y - legend_h));
  const Rect area{ImVec2(p.x + (avail.x - side) * 0.5f, p.y), ImVec2(p.x + (avail.x + side) * 0.5f, p.y + side)};
  draw_grid(dl, *g, bh, area, GridMode::Scores);

  // Tiles being computed now, by any CTA of this head; the selected CTA's in the accent colour.
  const Cursor c = doc->cursor();
  for (int t = 0; t < r.track_count(); ++t) {
    const auto& tl = r.track_events(t);
    if (tl.empty()) continue;
    if (c.order == Order::Real ? (c.x < r.track_begin_ns(t) || c.x > r.track_end_ns(t))
                               : (c.x < tl.front() || c.x > tl.back() + 1))
      continue;
    const TrackCursor tc = r.track_cursor(t, c);
    if (tc.active < 0) continue;
    const auto& e = r.trace().events[std::size_t(tl[std::size_t(tc.active)])];
    const bool score_tile = e.kind == tr::Kind::ComputeS || e.kind == tr::Kind::Softmax ||
                            (e.kind == tr::Kind::Store && e.tensor == tr::Tensor::S);
    if (!score_tile || e.bh != bh || e.cols >= g->cols) continue;
    const Rect er = element_rect(*g, area, e.row0, e.rows, e.col0, e.cols);
    dl->AddRect(er.min, er.max, t == doc->selected_track ? theme::kAccent : IM_COL32(255, 255, 255, 200), 0, 0,
                t == doc->selected_track ? 2.0f : 1.0f);
  }

  // Hover: the cell under the mouse.
  ImGui::InvisibleButton("##scores", ImVec2(avail.x, side));
  if (ImGui::IsItemHovered() && area.contains(ImGui::GetIO().MousePos)) {
    const ImVec2 m = ImGui::GetIO().MousePos;
    const int col = int((m.x - area.min.x) / area.w() * g->cols), row = int((m.y - area.min.y) / area.h() * g->rows);
    const int gi = std::clamp(row / g->cell_rows, 0, g->grid_rows - 1), gj = std::clamp(col / g->cell_cols, 0, g->grid_cols - 1);
    const auto& cell = g->at(bh, gi, gj);
    const double a = double(g->cell_area(gi, gj));
    ImGui::BeginTooltip();
    ImGui::Text("S[%d:%d, %d:%d)", gi * g->cell_rows, std::min(g->rows, (gi + 1) * g->cell_rows), gj * g->cell_cols,
                std::min(g->cols, (gj + 1) * g->cell_cols));
    ImGui::Text("computed on chip: %.0f%%", 100.0 * double(cell.computed) / a);
    ImGui::Text("written to HBM:   %.0f%%", 100.0 * double(cell.written) / a);
    if (cell.read > 0) ImGui::Text("read back from HBM: %.1f×", double(cell.read) / a);
    if (cell.skipped > 0) ImGui::Text("skipped (masked): %.0f%%", 100.0 * double(cell.skipped) / a);
    ImGui::EndTooltip();
  }

  ImGui::PushFont(f.small);
  legend_item(theme::tensor_color(tr::Tensor::S, 0.04f), "not yet");
  ImGui::SameLine(0, 10);
  legend_item(theme::tensor_color(tr::Tensor::S, 0.3f), "computed on chip only");
  ImGui::SameLine(0, 10);
  legend_item(theme::tensor_color(tr::Tensor::S, 0.95f), "written to HBM");
  legend_hatch("skipped (causal / block-sparse mask)");
  ImGui::SameLine(0, 10);
  legend_item(IM_COL32(255, 255, 255, 200), "computing now", true);
  ImGui::PopFont();
  end_panel();
}

}  // namespace fs::viz
