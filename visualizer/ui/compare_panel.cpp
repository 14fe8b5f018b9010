// Compare: two traces side by side, kept at the same progress (by default the same share of
// the pass's FLOPs). Step 01 against step 04 is the paper in one picture: the same work done,
// the bytes counters racing apart, S written in full on one side and never on the other.
#include <algorithm>
#include <cstdio>

#include "visualizer/model/labels.hpp"
#include "visualizer/ui/cache_view.hpp"
#include "visualizer/ui/hbm_view.hpp"
#include "visualizer/ui/panels.hpp"
#include "visualizer/ui/theme.hpp"
#include "visualizer/ui/widgets.hpp"

namespace fs::viz {

namespace tr = fs::trace;

namespace {

void side(Document& doc, Rect area, double full_bytes, const char* tag) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const auto& f = theme::fonts();
  const Replay& r = *doc.replay;
  const Totals t = r.totals(doc.cursor());
  const auto& m = r.meta();
  char buf[200];
  dl->AddText(f.title, f.title->FontSize, area.min, theme::kAccent, tag);
  const bool decoding = r.cache().on();
  if (decoding)  // N new tokens against a cache: its sequences and their keys, not N×N
    std::snprintf(buf, sizeof buf, "%s %s · B=%d N=%d d=%d · %d splits", m.step.c_str(), m.variant.c_str(), m.B, m.N, m.d,
                  r.cache().splits());
  else
    std::snprintf(buf, sizeof buf, "%s %s · N=%d d=%d%s", m.step.c_str(), m.variant.c_str(), m.N, m.d, m.causal ? " causal" : "");
  dl->AddText(f.title, f.title->FontSize, ImVec2(area.min.x + 22, area.min.y), theme::kText, buf);
  dl->AddText(f.small, f.small->FontSize, ImVec2(area.min.x, area.min.y + f.title->FontSize + 3), theme::kTextDim, m.gpu.c_str());

  // HBM on top, the traffic bars, then the ghost score matrix in what is left.
  const float top = area.min.y + f.title->FontSize + f.small->FontSize + 12;
  const Rect hbm{ImVec2(area.min.x, top), ImVec2(area.max.x, top + std::max(80.0f, area.h() * (decoding ? 0.42f : 0.3f)))};
  const HbmLayout layout = decoding ? HbmLayout{} : layout_hbm(doc, hbm, true);
  const auto& list = r.track_events(doc.selected_track);
  // The head shown: the followed CTA's; a decoding trace's S is one (sequence, K/V head)'s.
  const CacheFocus focus = decoding && r.track_count() > 0 ? cache_focus(r, doc.selected_track) : CacheFocus{};
  const int bh = decoding ? focus.b * r.cache().heads_kv() + focus.hk
                          : list.empty() ? 0 : r.trace().events[std::size_t(list.front())].bh;
  float y = hbm.min.y;
  if (decoding) {
    draw_cache_hbm(dl, doc, hbm, false);
    y = hbm.max.y;
  } else {
    draw_hbm(dl, doc, layout, bh, false);
  }
  for (const auto& it : layout.items) y = std::max(y, it.rect.max.y);
  y += 10;

  ImGui::PushID(tag);
  auto bar = [&](double value, double target, ImU32 color, const char* text, double untraced = 0) {
    ImGui::SetCursorScreenPos(ImVec2(area.min.x, y));
    value_bar(area.w(), 20, value, full_bytes, target, color, text, untraced);
    y += 24;
  };
  std::snprintf(buf, sizeof buf, "read %s", format_bytes(double(t.read_total())).c_str());
  bar(double(t.read_total()), double(m.io_read_bytes), IM_COL32(92, 156, 248, 210), buf, double(r.untraced_read()));
  std::snprintf(buf, sizeof buf, "written %s", format_bytes(double(t.written_total())).c_str());
  bar(double(t.written_total()), double(m.io_write_bytes), IM_COL32(240, 98, 98, 210), buf, double(r.untraced_written()));
  const double s_bytes = double(t.written[std::size_t(tr::Tensor::S)] + t.written[std::size_t(tr::Tensor::P)]);
  std::snprintf(buf, sizeof buf, "of which S and P: %s", s_bytes > 0 ? format_bytes(s_bytes).c_str() : "none");
  bar(s_bytes, 0, theme::tensor_color(tr::Tensor::S, 0.9f), buf);
  ImGui::PopID();

  const TensorGrid* g = doc.coverage->grid(tr::Tensor::S);
  if (!g) return;
  y += 6;
  std::int64_t computed = 0, written = 0;
  for (int i = 0; i < g->grid_rows; ++i)
    for (int j = 0; j < g->grid_cols; ++j) {
      computed += g->at(bh, i, j).computed;
      written += g->at(bh, i, j).written;
    }
  const double NN = double(g->rows) * g->cols;
  if (decoding)  // a sequence's keys past its length are none of its scores
    std::snprintf(buf, sizeof buf, "S = τQKᵀ of seq %d · kv head %d: computed %.0f%% of its keys, written %.0f%%", focus.b, focus.hk,
                  100.0 * double(computed) / std::max(1.0, double(g->rows) * r.cache().length(focus.b)), 100.0 * double(written) / NN);
  else
    std::snprintf(buf, sizeof buf, "S = τQKᵀ: computed %.0f%%, written to HBM %.0f%%", 100.0 * double(computed) / NN,
                  100.0 * double(written) / NN);
  dl->AddText(f.small, f.small->FontSize, ImVec2(area.min.x, y), theme::tensor_color(tr::Tensor::S), buf);
  y += f.small->FontSize + 4;
  const float side_px = std::min(area.w(), area.max.y - y - 2);
  if (decoding && side_px > 8) {
    // One (sequence, K/V head)'s g·N rows against its keys: a strip, not a square.
    const Rect strip{ImVec2(area.min.x, y), ImVec2(area.max.x, y + std::min(side_px, std::max(12.0f, area.w() * float(g->rows) / float(g->cols) * 8)))};
    draw_grid(dl, *g, bh, strip, GridMode::Scores);
  } else if (side_px > 20) {
    const Rect sq{ImVec2(area.min.x + (area.w() - side_px) * 0.5f, y), ImVec2(area.min.x + (area.w() + side_px) * 0.5f, y + side_px)};
    draw_grid(dl, *g, bh, sq, GridMode::Scores);
  }
}

}  // namespace

void compare_panel(UiState& s) {
  if (!begin_panel(kPanelCompare)) return;
  if (!s.doc || !s.other) {
    ImGui::TextWrapped("Compare shows two traces side by side, at the same progress.");
    ImGui::Spacing();
    ImGui::TextDisabled("Open the second one from the trace browser (\"compare\"), or start with");
    ImGui::TextDisabled("  flashsteps_viz A.json --compare B.json");
    ImGui::Spacing();
    if (ImGui::Button("Compare synthetic step 01 with step 04")) {
      s.requests.push_back({"synthetic:naive", false});
      s.requests.push_back({"synthetic:flash", true});
    }
    end_panel();
    return;
  }
  Document& a = *s.doc;
  Document& b = *s.other;
  // One progress for both; moving it moves both.
  int by = int(s.sync_by);
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("in step by");
  ImGui::SameLine();
  ImGui::RadioButton("work (FLOPs)", &by, int(SyncBy::Work));
  ImGui::SameLine();
  ImGui::RadioButton("events", &by, int(SyncBy::Events));
  ImGui::SameLine();
  ImGui::RadioButton("time", &by, int(SyncBy::Time));
  s.sync_by = SyncBy(by);
  ImGui::SameLine(0, 16);
  double pct = 100 * progress(*a.replay, a.cursor(), s.sync_by);
  const double zero = 0, hundred = 100;
  ImGui::SetNextItemWidth(std::max(100.0f, ImGui::GetContentRegionAvail().x));
  if (ImGui::SliderScalar("##progress", ImGuiDataType_Double, &pct, &zero, &hundred, "%.0f%% done")) {
    const double p = pct / 100;
    a.playback.set_playing(false);
    a.playback.seek(*a.replay, cursor_at_progress(*a.replay, p, s.sync_by, a.playback.order()));
    a.sync();
    b.playback.seek(*b.replay, cursor_at_progress(*b.replay, p, s.sync_by, b.playback.order()));
    b.sync();
  }
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const double full = std::max({double(a.replay->grand_totals().read_total()), double(a.replay->grand_totals().written_total()),
                                double(b.replay->grand_totals().read_total()), double(b.replay->grand_totals().written_total()),
                                double(a.replay->meta().io_read_bytes), double(b.replay->meta().io_read_bytes), 1.0});
  const float half = (avail.x - 24) * 0.5f;
  side(a, {ImVec2(p0.x, p0.y + 4), ImVec2(p0.x + half, p0.y + avail.y)}, full, "A");
  ImGui::GetWindowDrawList()->AddLine(ImVec2(p0.x + half + 12, p0.y + 4), ImVec2(p0.x + half + 12, p0.y + avail.y), theme::kBorder);
  side(b, {ImVec2(p0.x + half + 24, p0.y + 4), ImVec2(p0.x + avail.x, p0.y + avail.y)}, full, "B");
  end_panel();
}

}  // namespace fs::viz
