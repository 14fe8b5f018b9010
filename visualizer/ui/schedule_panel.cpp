// The followed CTA's schedule, as the FlashAttention-3 paper draws its producer and consumer
// warpgroups (§3.1, Figures 1 and 2), but from the run: the CTA's lanes one above the other on
// one time axis, each event a bar in its kind's colour, a lane's waits a thin idle line between
// them. In a step 09 trace the producer's bars are its TMA issues and the consumers' their
// products and softmax, so that the ping-pong of the two consumers (one's softmax under the
// other's products) and the producer running ahead of them can be seen. A CTA of one lane is
// drawn as one row. The wheel zooms at the cursor, dragging pans, hovering shows an event,
// clicking one follows its lane, double-clicking moves the playhead there.
//
// A decoding trace (step 10) has no lanes; its picture is one query row's splits, which the split
// kernel runs as CTAs of their own: the followed CTA's (sequence, K/V head) is drawn with its splits'
// CTAs as rows side by side, then the combine's CTAs that merge their rows, on one time axis.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "common/trace/names.hpp"
#include "visualizer/model/labels.hpp"
#include "visualizer/ui/panels.hpp"
#include "visualizer/ui/theme.hpp"
#include "visualizer/ui/widgets.hpp"

namespace fs::viz {

namespace tr = fs::trace;

namespace {

constexpr float kGutter = 96;     // lane names
constexpr float kRulerH = 20;
constexpr float kMaxRowH = 30;
constexpr float kRowGap = 6;

// The word a bar carries, as the paper's figure labels its blocks: the tile a copy brings or a
// product works on (its key tile j), else the phase.
std::string bar_label(const tr::Event& e, const Replay& r) {
  const tr::Meta& m = r.meta();
  const int bc = std::max(1, m.Bc);
  switch (e.kind) {
    case tr::Kind::Load: {
      const bool keyed = e.tensor == tr::Tensor::K || e.tensor == tr::Tensor::V;
      // A decoding trace's K and V rows are slots of the cache: the tile is that of the key there.
      const int key = keyed && r.cache().on() ? r.cache().key_at(e.row0).key : e.row0;
      return std::string(tensor_label(e.tensor)) + (keyed && key >= 0 ? " " + std::to_string(key / bc) : "");
    }
    case tr::Kind::Store: return std::string("store ") + tensor_label(e.tensor);
    case tr::Kind::ComputeS: return "QKᵀ " + std::to_string(e.col0 / bc);
    case tr::Kind::Softmax: return "softmax " + std::to_string(e.col0 / bc);
    case tr::Kind::AccumulateO: return "P̃V";
    default: return kind_label(e.kind);
  }
}

}  // namespace

void schedule_panel(UiState& s) {
  if (!begin_panel(kPanelSchedule, ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse)) return;
  Document* doc = s.doc.get();
  if (!doc || doc->replay->track_count() == 0) return end_empty_panel();
  const Replay& r = *doc->replay;
  const auto& f = theme::fonts();
  const int selected = std::clamp(doc->selected_track, 0, r.track_count() - 1);
  const auto& tk = r.trace().tracks[std::size_t(selected)];
  const std::string kname = tk.kernel < int(r.trace().kernels.size()) ? r.trace().kernels[std::size_t(tk.kernel)].name : "?";
  // The rows: the CTA's lanes; a decoding trace's, its row's splits and their combine.
  const DecodeSchedule& dec = r.decode();
  const int group = dec.on() ? dec.split_group_of(selected) : -1;
  std::vector<int> lanes;
  std::vector<std::string> names;
  if (group >= 0) {
    for (int t : dec.groups()[std::size_t(group)].tracks) {
      lanes.push_back(t);
      names.push_back("split " + std::to_string(dec.cta(t).split));
    }
    for (int t : dec.combine_of(group)) {
      lanes.push_back(t);
      names.push_back("combine " + std::to_string(r.trace().tracks[std::size_t(t)].cta));
    }
  } else {
    lanes = r.lanes_of(selected);
    for (int t : lanes) {
      const auto& lane = r.trace().tracks[std::size_t(t)];
      names.push_back(r.laned(t) ? tr::lane_name(r.trace(), lane) : "CTA " + std::to_string(lane.cta));
    }
  }

  // The CTA's span, over its lanes; the view fitted to it when another CTA is followed.
  double begin = r.track_begin_ns(lanes.front()), end = r.track_end_ns(lanes.front());
  for (int t : lanes) {
    if (r.track_events(t).empty()) continue;
    begin = std::min(begin, r.track_begin_ns(t));
    end = std::max(end, r.track_end_ns(t));
  }
  auto& st = s.schedule;
  TimeView& v = st.view;
  if (st.cta_track != lanes.front()) {
    st.cta_track = lanes.front();
    v.fit(begin, end);
  }

  char buf[256];
  if (group >= 0) {
    const DecodeGroup& g = dec.groups()[std::size_t(group)];
    std::snprintf(buf, sizeof buf, "%s: %zu split%s side by side, then the combine", g.label.c_str(), g.tracks.size(),
                  g.tracks.size() == 1 ? "" : "s");
  } else {
    std::snprintf(buf, sizeof buf, "CTA %d of %s · SM %d · %zu lane%s", tk.cta, kname.c_str(), tk.sm, lanes.size(),
                  lanes.size() == 1 ? "" : "s");
  }
  ImGui::PushFont(f.small);
  ImGui::TextUnformatted(buf);
  ImGui::SameLine();
  ImGui::TextDisabled("%s", group >= 0 ? "· each split a CTA over its share of the keys; the combine merges their partial O and LSE by "
                                         "the LSE · click a bar: follow that CTA"
                            : r.laned(selected) ? "· time since the CTA began · wheel: zoom · click a bar: follow its lane"
                                                : "· this kernel records each CTA as one lane (step 09's record each warpgroup)");
  ImGui::PopFont();

  ImGuiIO& io = ImGui::GetIO();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float legend_h = f.small->FontSize + 8;
  const float left = origin.x + kGutter, width = std::max(10.0f, avail.x - kGutter - 8);
  const float rows_h = std::max(10.0f, avail.y - kRulerH - legend_h);
  // Many lanes (a decoding row of many splits): thinner rows, thinner gaps, every k-th name.
  const float pitch = rows_h / float(lanes.size());
  const float gap = std::min(kRowGap, pitch * 0.25f), row_h = std::min(kMaxRowH, pitch - gap);
  const int name_every = std::max(1, int(std::ceil((f.small->FontSize - 1) / std::max(1.0f, row_h + gap))));
  const Rect area{ImVec2(left, origin.y + kRulerH), ImVec2(left + width, origin.y + kRulerH + rows_h)};

  // The ruler: ticks in time since the CTA began.
  double step = 1;
  for (double t : nice_ticks(v.x0 - begin, v.x1 - begin, std::max(2, int(width / 100)), &step)) {
    const float x = float(v.to_px(begin + t, left, width));
    dl->AddLine(ImVec2(x, origin.y + kRulerH - 5), ImVec2(x, area.max.y), theme::kGrid);
    const std::string l = format_ns(t == 0 ? 0.0 : t);  // a tick at −0 would read "-0 ns"
    dl->AddText(f.small, f.small->FontSize, ImVec2(x + 3, origin.y + 2), theme::kTextDim, l.c_str());
  }

  ImGui::SetCursorScreenPos(area.min);
  ImGui::InvisibleButton("##schedule", ImVec2(area.w(), std::max(1.0f, area.h())));
  const bool hovered = ImGui::IsItemHovered(), active = ImGui::IsItemActive();
  const ImVec2 mouse = io.MousePos;
  int hover_event = -1, hover_track = -1;
  bool present[tr::kKindCount] = {};
  tr::Tensor tensor_of[tr::kKindCount] = {};

  dl->PushClipRect(ImVec2(origin.x, area.min.y), area.max, true);
  for (std::size_t li = 0; li < lanes.size(); ++li) {
    const int track = lanes[li];
    const float y0 = area.min.y + float(li) * (row_h + gap) + gap * 0.5f, y1 = y0 + row_h;
    const bool sel = track == selected;
    const std::string& name = names[li];
    const float fy = y0 + (row_h - f.small->FontSize) * 0.5f;
    if (li % std::size_t(name_every) == 0 || sel)
      dl->AddText(f.small, f.small->FontSize, ImVec2(origin.x + 4, fy), sel ? theme::kAccent : theme::kText, name.c_str());
    dl->AddRectFilled(ImVec2(left, y0), ImVec2(left + width, y1), theme::with_alpha(theme::kPanelRaised, sel ? 1.0f : 0.6f), 3);
    const auto& list = r.track_events(track);
    // The first event that ends in view (ends are a running maximum, so this search holds).
    const auto& ends = r.track_ends(track);
    for (std::size_t k = std::size_t(std::lower_bound(ends.begin(), ends.end(), v.x0) - ends.begin()); k < list.size(); ++k) {
      const auto& e = r.trace().events[std::size_t(list[k])];
      if (e.ts_ns > v.x1) break;
      present[int(e.kind)] = true;
      tensor_of[int(e.kind)] = e.tensor;
      const float px0 = std::max(left, float(v.to_px(e.ts_ns, left, width)));
      // At least 2 px: the producer's issues last tens of nanoseconds, and they are the point.
      const float px1 = std::min(left + width, std::max(px0 + 2, float(v.to_px(e.ts_ns + e.dur_ns, left, width))));
      const ImU32 col = theme::kind_color(e.kind, e.tensor);
      if (e.kind == tr::Kind::Wait) {
        // Idle: a thin line through the row, not a block of work.
        const float ym = (y0 + y1) * 0.5f;
        dl->AddRectFilled(ImVec2(px0, ym - 1.5f), ImVec2(px1, ym + 1.5f), theme::mix(col, theme::kTextDim, 0.35f));
      } else {
        dl->AddRectFilled(ImVec2(px0, y0 + 2), ImVec2(px1, y1 - 2), col, 2);
        if (px1 - px0 > 5) dl->AddRect(ImVec2(px0, y0 + 2), ImVec2(px1, y1 - 2), IM_COL32(0, 0, 0, 90), 2);
        const std::string l = bar_label(e, r);
        const ImVec2 ts = f.small->CalcTextSizeA(f.small->FontSize, 1e9f, 0, l.c_str());
        if (ts.x + 6 < px1 - px0 && ts.y <= row_h + 1)
          dl->AddText(f.small, f.small->FontSize, ImVec2((px0 + px1 - ts.x) * 0.5f, y0 + (row_h - ts.y) * 0.5f),
                      IM_COL32(15, 16, 20, 255), l.c_str());
      }
      if (hovered && mouse.y >= y0 && mouse.y < y1 && mouse.x >= px0 && mouse.x < px1 + 1) {
        hover_event = list[k];
        hover_track = track;
      }
    }
  }
  // The playhead, on the real time axis whatever the order of playback.
  const float cx = float(v.to_px(r.convert(doc->cursor(), Order::Real).x, left, width));
  if (cx >= left && cx <= left + width) dl->AddLine(ImVec2(cx, area.min.y), ImVec2(cx, area.max.y), theme::kAccent, 1.5f);
  dl->PopClipRect();

  // Wheel zooms at the cursor, dragging pans; a click follows a lane, a double-click seeks.
  const double span = std::max(end - begin, 1.0);
  if (hovered && io.MouseWheel != 0)
    v.zoom_at(v.from_px(mouse.x, left, width), std::pow(0.8, double(io.MouseWheel)), begin, end, std::min(50.0, span));
  if (active && ImGui::IsMouseDragging(0, 2)) v.pan(-double(io.MouseDelta.x) / width * v.span(), begin, end);
  if (hover_event >= 0) {
    if (!active) event_tooltip(r, hover_event);
    s.hovered_event = hover_event;
    if (ImGui::IsMouseReleased(0) && ImGui::GetMouseDragDelta(0).x == 0) doc->select(hover_track);
    if (ImGui::IsMouseDoubleClicked(0)) {
      const auto& e = r.trace().events[std::size_t(hover_event)];
      doc->playback.seek(r, r.convert({Order::Real, e.ts_ns + e.dur_ns}, doc->playback.order()));
      doc->sync();
    }
  }

  // The kinds in view, in the colours of the bars.
  ImGui::SetCursorScreenPos(ImVec2(left, area.max.y + 4));
  ImGui::PushFont(f.small);
  bool first = true;
  for (int k = 0; k < tr::kKindCount; ++k) {
    if (!present[k]) continue;
    if (!first) ImGui::SameLine(0, 14);
    first = false;
    const auto kind = static_cast<tr::Kind>(k);
    legend_item(theme::kind_color(kind, kind == tr::Kind::Load ? tr::Tensor::K : tensor_of[k]),
                kind == tr::Kind::Wait ? "wait (idle)" : kind_label(kind));
  }
  ImGui::PopFont();
  end_panel();
}

}  // namespace fs::viz
