// Online softmax: for the selected CTA's sampled row, the running max m and normaliser ℓ
// after each K tile, and the factor exp(m_old − m_new) by which everything accumulated so far
// is rescaled when the max moves (Algorithm 1 l.10-12). Tiles after the playhead are faint.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "visualizer/model/labels.hpp"
#include "visualizer/model/running_stats.hpp"
#include "visualizer/ui/panels.hpp"
#include "visualizer/ui/theme.hpp"
#include "visualizer/ui/widgets.hpp"

namespace fs::viz {

namespace tr = fs::trace;

namespace {

struct Plot {
  Rect box;
  double lo, hi;
  float x_of(std::size_t i, std::size_t n) const {
    return box.min.x + 8 + (n > 1 ? float(double(i) / double(n - 1)) : 0.5f) * (box.w() - 16);
  }
  float y_of(double v) const {
    const double t = hi > lo ? (v - lo) / (hi - lo) : 0.5;
    return box.max.y - 6 - float(t) * (box.h() - 22);
  }
};

void frame(ImDrawList* dl, const Rect& box, const char* title, ImU32 color) {
  dl->AddRect(box.min, box.max, theme::kBorder, 3);
  dl->AddText(theme::fonts().small, theme::fonts().small->FontSize, ImVec2(box.min.x + 6, box.min.y + 2), color, title);
}

}  // namespace

void softmax_panel(UiState& s) {
  if (!begin_panel(kPanelSoftmax)) return;
  Document* doc = s.doc.get();
  if (!doc) return end_empty_panel();
  const Replay& r = *doc->replay;
  if (!r.has_running_stats()) {
    const tr::Meta& m = r.meta();
    const std::string step = "Step " + m.step;
    auto say = [](const char* headline, const std::string& why) {
      ImGui::TextWrapped("%s", headline);
      ImGui::Spacing();
      ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
      ImGui::TextWrapped("%s", why.c_str());
      ImGui::PopStyleColor();
    };
    if (m.pass == "bwd")  // the backward recomputes P from the forward's LSE: no m or ℓ to follow
      say("The backward keeps no running statistics.",
          step + " recomputes P = exp(τS − LSE) tile by tile from the LSE the forward stored: each row's max and sum "
                 "are already in it.");
    else if (m.step < "04")  // steps 01-03: the softmax over a whole row of S
      say("This step keeps no running statistics.",
          step + " computes each row's max m and sum ℓ in one pass over the whole row of S, read back from HBM. From "
                 "step 04 on, m and ℓ are updated tile by tile on chip (the online softmax), and this panel follows "
                 "them.");
    else  // an online softmax whose kernels record no statistics events (step 09's)
      say("This trace records no running statistics.",
          step + " updates m and ℓ tile by tile on chip (the online softmax), in registers its kernels do not "
                 "record; the traces of steps 04 and 08 show them.");
    end_panel();
    return;
  }
  const int track = doc->selected_track;
  const auto pts = running_stats(r, track);
  const auto& f = theme::fonts();
  const TrackCursor tc = r.track_cursor(track, doc->cursor());
  std::size_t seen = 0;
  while (seen < pts.size() && pts[seen].position < tc.done) ++seen;
  const auto& tk = r.trace().tracks[std::size_t(track)];
  if (pts.empty()) {
    ImGui::TextDisabled("CTA %d recorded no statistics (select another CTA: click it in the timeline).", tk.cta);
    end_panel();
    return;
  }
  ImGui::PushFont(f.small);
  ImGui::Text("CTA %d · sampled %s · K tiles seen %zu of %zu", tk.cta,
              sample_row_label(r, r.trace().events[std::size_t(pts.front().event)]).c_str(), seen, pts.size());
  ImGui::TextDisabled("m_new = max(m, m̃)     ℓ_new = e^(m − m_new)·ℓ + e^(m̃ − m_new)·ℓ̃");
  ImGui::PopFont();
  if (seen > 0) {
    const auto& p = pts[seen - 1];
    ImGui::PushFont(f.mono);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(theme::tensor_color(tr::Tensor::K)), "m = %.4f", p.m);
    ImGui::SameLine(0, 16);
    ImGui::TextColored(theme::tensor_color_vec(tr::Tensor::L), "ℓ = %.3f", p.l);
    ImGui::SameLine(0, 16);
    ImGui::TextColored(theme::tensor_color_vec(tr::Tensor::V), "rescale %.4f", p.rescale);
    ImGui::PopFont();
  }

  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float gap = 6, h = (avail.y - 2 * gap) / 3;
  if (h < 24) {
    end_panel();
    return;
  }
  const std::size_t n = pts.size();
  double mlo = 1e300, mhi = -1e300, lhi = 0;
  for (const auto& p : pts) {
    mlo = std::min(mlo, p.m);
    mhi = std::max(mhi, p.m);
    lhi = std::max(lhi, p.l);
  }
  if (mhi - mlo < 1e-6) mlo -= 0.5, mhi += 0.5;
  const Plot pm{{p0, ImVec2(p0.x + avail.x, p0.y + h)}, mlo, mhi};
  const Plot pl{{ImVec2(p0.x, p0.y + h + gap), ImVec2(p0.x + avail.x, p0.y + 2 * h + gap)}, 0, lhi * 1.05};
  const Plot pr{{ImVec2(p0.x, p0.y + 2 * (h + gap)), ImVec2(p0.x + avail.x, p0.y + 3 * h + 2 * gap)}, 0, 1};
  frame(dl, pm.box, "running max m", theme::tensor_color(tr::Tensor::K));
  frame(dl, pl.box, "normaliser ℓ", theme::tensor_color(tr::Tensor::L));
  frame(dl, pr.box, "rescale exp(m_old − m_new)  (1: max unchanged)", theme::tensor_color(tr::Tensor::V));

  auto line = [&](const Plot& pl2, auto value, ImU32 col) {
    for (std::size_t i = 1; i < n; ++i) {
      const ImU32 c = i < seen ? col : theme::with_alpha(col, 0.22f);
      dl->AddLine(ImVec2(pl2.x_of(i - 1, n), pl2.y_of(value(pts[i - 1]))), ImVec2(pl2.x_of(i, n), pl2.y_of(value(pts[i]))), c, 2);
    }
    for (std::size_t i = 0; i < n; ++i)
      dl->AddCircleFilled(ImVec2(pl2.x_of(i, n), pl2.y_of(value(pts[i]))), i + 1 == seen ? 4.0f : 2.2f,
                          i < seen ? col : theme::with_alpha(col, 0.22f));
  };
  line(pm, [](const StatPoint& p) { return p.m; }, theme::tensor_color(tr::Tensor::K));
  line(pl, [](const StatPoint& p) { return p.l; }, theme::tensor_color(tr::Tensor::L));
  // Rescale factors as bars; a bar below 1 is a moment the max moved.
  const float bw = std::max(1.0f, (pr.box.w() - 16) / float(n) * 0.6f);
  const float y1 = pr.y_of(1.0);
  dl->AddLine(ImVec2(pr.box.min.x + 4, y1), ImVec2(pr.box.max.x - 4, y1), IM_COL32(255, 255, 255, 40));
  for (std::size_t i = 0; i < n; ++i) {
    const float x = pr.x_of(i, n);
    const ImU32 col = theme::tensor_color(tr::Tensor::V, i < seen ? (pts[i].rescale < 0.999 ? 1.0f : 0.5f) : 0.15f);
    dl->AddRectFilled(ImVec2(x - bw * 0.5f, pr.y_of(pts[i].rescale)), ImVec2(x + bw * 0.5f, pr.y_of(0)), col);
  }
  // Axis values.
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", mhi);
  dl->AddText(f.small, f.small->FontSize, ImVec2(pm.box.max.x - 50, pm.box.min.y + 2), theme::kTextDim, buf);
  std::snprintf(buf, sizeof buf, "%.1f", lhi);
  dl->AddText(f.small, f.small->FontSize, ImVec2(pl.box.max.x - 50, pl.box.min.y + 2), theme::kTextDim, buf);

  // Hover a tile.
  ImGui::InvisibleButton("##stats", avail);
  if (ImGui::IsItemHovered()) {
    const float mx = ImGui::GetIO().MousePos.x;
    std::size_t best = 0;
    for (std::size_t i = 1; i < n; ++i)
      if (std::fabs(pm.x_of(i, n) - mx) < std::fabs(pm.x_of(best, n) - mx)) best = i;
    const auto& p = pts[best];
    ImGui::SetTooltip("K tile %zu: keys [%d, %d)\nm = %.4f  ℓ = %.4f\nrescale exp(m_old − m_new) = %.4f", best, p.key0,
                      p.key0 + p.keys, p.m, p.l, p.rescale);
  }
  end_panel();
}

}  // namespace fs::viz
