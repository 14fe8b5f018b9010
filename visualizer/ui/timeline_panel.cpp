// Timeline, in the manner of Tracy: the host's NVTX ranges and the kernels on top, then one
// row per CTA grouped by SM (a collapsed SM shows all its CTAs in one row); a CTA that records
// in lanes (step 09's warpgroups) has a row per lane, labelled with the lane's name, under its
// CTA's. A decoding trace's CTAs are grouped by (sequence, K/V head) instead, its splits one row
// each, side by side, then the combine's (the ruler's corner switches to SMs and back). The wheel zooms at the cursor, dragging pans, right-drag (or Shift-drag) selects a
// range, hovering shows an event, clicking one follows its CTA, double-clicking moves the
// playhead there; the ruler scrubs. Only what is visible is drawn: each row finds its first
// visible event by binary search, and runs of events narrower than a few pixels are drawn as
// one block.
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

constexpr float kGutter = 136;     // row labels
constexpr float kRulerH = 24;
constexpr float kHostRowH = 17;
constexpr float kSmRowH = 16;
constexpr float kCtaRowH = 13;
constexpr float kMinBlockPx = 4;   // narrower runs of events merge into one block

enum class RowType { Host, Kernels, Sm, Cta };

struct Row {
  RowType type;
  int index;   // host depth, SM group, or track
  float y, h;
};

struct Hover {
  int event = -1;
  int cluster_first = -1, cluster_count = 0;
  int track = -1;
  const tr::HostRange* range = nullptr;
  const tr::Kernel* kernel = nullptr;
};

// Maps a host time onto the current order's axis.
double axis_of_time(const Replay& r, Order o, double t) { return o == Order::Real ? t : r.logical_at_time(t); }

struct TrackDrawer {
  const Replay& r;
  Order order;
  const TimeView& v;
  float left, width;
  ImDrawList* dl;
  ImVec2 mouse;
  Hover* hover;

  double begin_of(const std::vector<int>& list, int track, int k) const {
    return order == Order::Real ? r.track_begins(track)[std::size_t(k)] : double(list[std::size_t(k)]);
  }
  double end_of(const std::vector<int>& list, int track, int k) const {
    return order == Order::Real ? r.track_ends(track)[std::size_t(k)] : double(list[std::size_t(k)]) + 1;
  }
  // First k whose end is at or after x.
  int first_ending_after(const std::vector<int>& list, int track, double x, int from) const {
    if (order == Order::Real) {
      const auto& ends = r.track_ends(track);
      return int(std::lower_bound(ends.begin() + from, ends.end(), x) - ends.begin());
    }
    return int(std::lower_bound(list.begin() + from, list.end(), std::int64_t(std::ceil(x - 1))) - list.begin());
  }

  void draw(int track, float y0, float y1, bool labels) const {
    const auto& list = r.track_events(track);
    const int n = int(list.size());
    if (n == 0) return;
    int k = first_ending_after(list, track, v.x0, 0);
    const bool mouse_in_row = mouse.y >= y0 && mouse.y < y1;
    while (k < n) {
      const double b = begin_of(list, track, k);
      if (b > v.x1) break;
      const float px0 = std::max(left - 2, float(v.to_px(b, left, width)));
      const float px1 = std::min(left + width + 2, float(v.to_px(end_of(list, track, k), left, width)));
      const auto& e = r.trace().events[std::size_t(list[std::size_t(k)])];
      if (px1 - px0 < kMinBlockPx) {
        // A run of tiny events: one block up to where they reach kMinBlockPx.
        const double x_stop = v.from_px(px0 + kMinBlockPx, left, width);
        int k2 = std::max(k + 1, first_ending_after(list, track, x_stop, k));
        k2 = std::min(k2, n);
        const float bx1 = std::max(px0 + 1.0f, std::min(left + width, float(v.to_px(end_of(list, track, k2 - 1), left, width))));
        const ImU32 col = k2 - k > 1 ? theme::mix(theme::kind_color(e.kind, e.tensor), theme::kTextDim, 0.35f)
                                     : theme::kind_color(e.kind, e.tensor);
        dl->AddRectFilled(ImVec2(px0, y0), ImVec2(bx1, y1), col);
        if (mouse_in_row && mouse.x >= px0 && mouse.x < bx1 + 1) {
          hover->track = track;
          if (k2 - k == 1)
            hover->event = list[std::size_t(k)];
          else {
            hover->cluster_first = list[std::size_t(k)];
            hover->cluster_count = k2 - k;
          }
        }
        k = k2;
        continue;
      }
      const ImU32 col = theme::kind_color(e.kind, e.tensor);
      dl->AddRectFilled(ImVec2(px0, y0), ImVec2(px1, y1), col);
      if (px1 - px0 > 6) dl->AddRect(ImVec2(px0, y0), ImVec2(px1, y1), IM_COL32(0, 0, 0, 70));
      if (labels && px1 - px0 > 56) {
        const std::string l = e.kind == tr::Kind::Load || e.kind == tr::Kind::Store
                                  ? std::string(kind_label(e.kind)) + " " + tile_label(e)
                                  : std::string(kind_label(e.kind));
        dl->PushClipRect(ImVec2(px0 + 2, y0), ImVec2(px1 - 2, y1), true);
        // A wait is idle, drawn barely above the panel: its label in the dim text colour.
        const ImU32 text = e.kind == tr::Kind::Wait ? theme::kTextDim : IM_COL32(15, 16, 20, 255);
        dl->AddText(theme::fonts().small, theme::fonts().small->FontSize, ImVec2(px0 + 3, y0 - 1), text, l.c_str());
        dl->PopClipRect();
      }
      if (mouse_in_row && mouse.x >= px0 && mouse.x < px1) {
        hover->track = track;
        hover->event = list[std::size_t(k)];
      }
      ++k;
    }
  }
};

std::string axis_label(Order o, double x, double step) {
  if (o == Order::Logical) return "#" + format_count(std::max(0.0, std::round(x)));
  char buf[32];
  // Enough decimals that neighbouring ticks differ.
  if (step >= 1e6)
    std::snprintf(buf, sizeof buf, "%.*f ms", step >= 1e7 ? 1 : 2, x / 1e6);
  else if (step >= 1e3)
    std::snprintf(buf, sizeof buf, "%.*f µs", step >= 1e4 ? 0 : step >= 1e3 ? 1 : 2, x / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0f ns", x);
  return buf;
}

}  // namespace

void timeline_panel(UiState& s) {
  if (!begin_panel(kPanelTimeline, ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse)) return;
  Document* doc = s.doc.get();
  if (!doc) return end_empty_panel();
  transport_bar(s);
  const Replay& r = *doc->replay;
  const Order order = doc->playback.order();
  auto& ts = s.timeline;
  const int oi = order == Order::Real ? 0 : 1;
  TimeView& v = ts.view[oi];
  const double lo = 0, hi = std::max(1e-9, r.extent(order));
  const double min_span = order == Order::Real ? 50.0 : 8.0;
  if (!ts.view_set[oi]) {
    v.fit(doc->playback.lo(r), doc->playback.hi(r));
    ts.view_set[oi] = true;
  }
  // The groups of rows: SMs, or a decoding trace's (sequence, K/V head)s.
  struct RowGroup {
    std::string label;
    const std::vector<int>* tracks;
  };
  const DecodeSchedule& dec = r.decode();
  const bool by_sequence = dec.on() && !ts.by_sm;
  std::vector<RowGroup> groups;
  if (by_sequence)
    for (const auto& g : dec.groups()) groups.push_back({g.label, &g.tracks});
  else
    for (const auto& g : r.sm_groups()) groups.push_back({"SM " + std::to_string(g.sm), &g.tracks});
  auto group_of = [&](int track) { return by_sequence ? dec.group_of(track) : r.sm_group_of_track(track); };
  auto ctas_of = [&](const RowGroup& g) {  // a CTA in lanes is several tracks, one after another
    int n = 0;
    for (std::size_t i = 0; i < g.tracks->size(); ++i)
      n += i == 0 || &r.lanes_of((*g.tracks)[i]) != &r.lanes_of((*g.tracks)[i - 1]);
    return n;
  };
  if (ts.sm_expanded.size() != groups.size() || ts.grouped_by_sequence != by_sequence) {
    const bool few = r.track_count() <= 48;
    ts.sm_expanded.assign(groups.size(), few ? 1 : 0);
    ts.grouped_by_sequence = by_sequence;
    ts.revealed_track = -1;
  }

  ImGuiIO& io = ImGui::GetIO();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const auto& f = theme::fonts();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float left = origin.x + kGutter, width = std::max(10.0f, avail.x - kGutter - 14);
  const Cursor cur = doc->cursor();

  // Follow the playhead while playing: page forward when it leaves the view.
  if (doc->playback.playing() && (cur.x > v.x1 || cur.x < v.x0)) {
    const double span = v.span();
    v.x0 = cur.x - 0.1 * span;
    v.x1 = v.x0 + span;
  }

  // Ruler: ticks, and the place to scrub.
  const Rect ruler{ImVec2(left, origin.y), ImVec2(left + width, origin.y + kRulerH)};
  dl->AddRectFilled(ImVec2(origin.x, origin.y), ImVec2(origin.x + avail.x, ruler.max.y), theme::kPanelRaised);
  double step = 1;
  const auto ticks = nice_ticks(v.x0, v.x1, std::max(2, int(width / 110)), &step);
  for (double t : ticks) {
    const float x = float(v.to_px(t, left, width));
    dl->AddLine(ImVec2(x, ruler.max.y - 6), ImVec2(x, ruler.max.y), theme::kTextDim);
    const std::string l = axis_label(order, t, step);
    dl->AddText(f.small, f.small->FontSize, ImVec2(x + 3, ruler.min.y + 3), theme::kTextDim, l.c_str());
  }
  if (dec.on()) {
    // A decoding trace: the corner switches the rows between (sequence, K/V head) and SM.
    const char* what = by_sequence ? "▾ rows: by sequence" : "▾ rows: by SM";
    ImGui::SetCursorScreenPos(ImVec2(origin.x, ruler.min.y));
    if (ImGui::InvisibleButton("##rows_by", ImVec2(kGutter - 4, kRulerH))) ts.by_sm = !ts.by_sm;
    const bool hot = ImGui::IsItemHovered();
    dl->AddText(f.small, f.small->FontSize, ImVec2(origin.x + 6, ruler.min.y + 4), hot ? theme::kText : theme::kTextDim, what);
    if (hot)
      ImGui::SetTooltip(by_sequence ? "rows grouped by (sequence, K/V head): its splits' CTAs side by side, then the combine's; "
                                      "click: group by SM"
                                    : "rows grouped by the SM each CTA ran on; click: group by (sequence, K/V head)");
  } else {
    dl->AddText(f.small, f.small->FontSize, ImVec2(origin.x + 6, ruler.min.y + 4), theme::kTextDim,
                order == Order::Real ? "time since t0" : "logical order (seq)");
  }
  ImGui::SetCursorScreenPos(ruler.min);
  ImGui::InvisibleButton("##ruler", ImVec2(ruler.w(), ruler.h()));
  if (ImGui::IsItemActive()) {
    doc->playback.set_playing(false);
    doc->playback.seek(r, {order, std::clamp(v.from_px(io.MousePos.x, left, width), 0.0, hi)});
    doc->sync();
  }
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("click or drag to move the playhead");

  // Rows.
  std::vector<Row> rows;
  float y = 0;
  for (int d = 0; d < std::max(1, r.host_depth()); ++d) {
    rows.push_back({RowType::Host, d, y, kHostRowH});
    y += kHostRowH;
  }
  rows.push_back({RowType::Kernels, 0, y, kHostRowH});
  y += kHostRowH + 4;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    rows.push_back({RowType::Sm, int(g), y, kSmRowH});
    y += kSmRowH + 1;
    if (ts.sm_expanded[g])
      for (int t : *groups[g].tracks) {
        rows.push_back({RowType::Cta, t, y, kCtaRowH});
        y += kCtaRowH + 1;
      }
  }
  const float content_h = y;
  const Rect area{ImVec2(origin.x, ruler.max.y + 2), ImVec2(origin.x + avail.x, origin.y + avail.y)};
  const float view_h = area.h();
  // A newly followed CTA (a click elsewhere, the SM following on): bring its SM into view,
  // expanded, unless it is visible already.
  if (ts.revealed_track != doc->selected_track && r.track_count() > 0) {
    ts.revealed_track = doc->selected_track;
    const int g = group_of(doc->selected_track);
    if (g >= 0 && groups[std::size_t(g)].tracks->size() <= 16) ts.sm_expanded[std::size_t(g)] = 1;
    for (const auto& row : rows)
      if (row.type == RowType::Sm && row.index == g) {
        const bool visible = row.y >= ts.scroll_y && row.y + 3 * kCtaRowH <= ts.scroll_y + view_h;
        if (!visible) ts.scroll_y = std::max(0.0f, row.y - 2 * kSmRowH);
      }
  }
  ts.scroll_y = std::clamp(ts.scroll_y, 0.0f, std::max(0.0f, content_h - view_h));

  ImGui::SetCursorScreenPos(area.min);
  ImGui::InvisibleButton("##rows", ImVec2(std::max(1.0f, area.w() - 12), std::max(1.0f, view_h)),
                         ImGuiButtonFlags_MouseButtonLeft | ImGuiButtonFlags_MouseButtonRight);
  const bool lanes_hovered = ImGui::IsItemHovered();
  const bool lanes_active = ImGui::IsItemActive();

  dl->PushClipRect(area.min, area.max, true);
  Hover hover;
  const ImVec2 mouse = io.MousePos;
  TrackDrawer drawer{r, order, v, left, width, dl, lanes_hovered ? mouse : ImVec2(-1e9f, -1e9f), &hover};
  for (const auto& row : rows) {
    const float y0 = area.min.y + row.y - ts.scroll_y, y1 = y0 + row.h;
    if (y1 < area.min.y || y0 > area.max.y) continue;
    const bool in_row = lanes_hovered && mouse.y >= y0 && mouse.y < y1;
    switch (row.type) {
      case RowType::Host: {
        if (row.index == 0)
          dl->AddText(f.small, f.small->FontSize, ImVec2(origin.x + 6, y0 + 1), theme::kText, "host (NVTX)");
        for (const auto& hr : r.trace().ranges) {
          if (hr.depth != row.index) continue;
          const double a = axis_of_time(r, order, hr.ts_ns), b = axis_of_time(r, order, hr.ts_ns + hr.dur_ns);
          if (b < v.x0 || a > v.x1) continue;
          const float px0 = std::max(left, float(v.to_px(a, left, width)));
          const float px1 = std::min(left + width, float(v.to_px(b, left, width)));
          if (px1 - px0 < 1) continue;
          const ImU32 col = row.index == 0 ? IM_COL32(92, 104, 128, 255) : IM_COL32(112, 124, 150, 255);
          dl->AddRectFilled(ImVec2(px0, y0 + 1), ImVec2(px1, y1 - 1), col, 2);
          if (px1 - px0 > 30) {
            dl->PushClipRect(ImVec2(px0 + 2, y0), ImVec2(px1 - 2, y1), true);
            dl->AddText(f.small, f.small->FontSize, ImVec2(px0 + 4, y0 + 1), theme::kText, hr.name.c_str());
            dl->PopClipRect();
          }
          if (in_row && mouse.x >= px0 && mouse.x < px1) hover.range = &hr;
        }
        for (const auto& m : r.trace().marks) {
          const float x = float(v.to_px(axis_of_time(r, order, m.ts_ns), left, width));
          if (row.index == 0 && x >= left && x <= left + width)
            dl->AddTriangleFilled(ImVec2(x - 4, y0), ImVec2(x + 4, y0), ImVec2(x, y0 + 6), theme::kAccent);
        }
        break;
      }
      case RowType::Kernels: {
        dl->AddText(f.small, f.small->FontSize, ImVec2(origin.x + 6, y0 + 1), theme::kText, "kernels");
        for (const auto& k : r.trace().kernels) {
          const double a = axis_of_time(r, order, k.ts_ns), b = axis_of_time(r, order, k.ts_ns + k.dur_ns);
          if (b < v.x0 || a > v.x1) continue;
          const float px0 = std::max(left, float(v.to_px(a, left, width)));
          const float px1 = std::min(left + width, float(v.to_px(b, left, width)));
          dl->AddRectFilled(ImVec2(px0, y0 + 1), ImVec2(std::max(px0 + 1, px1), y1 - 1), IM_COL32(70, 120, 110, 255), 2);
          if (px1 - px0 > 30) {
            dl->PushClipRect(ImVec2(px0 + 2, y0), ImVec2(px1 - 2, y1), true);
            dl->AddText(f.small, f.small->FontSize, ImVec2(px0 + 4, y0 + 1), theme::kText, k.name.c_str());
            dl->PopClipRect();
          }
          if (in_row && mouse.x >= px0 && mouse.x < px1) hover.kernel = &k;
        }
        break;
      }
      case RowType::Sm: {
        const RowGroup& g = groups[std::size_t(row.index)];
        // A line above each SM group, so groups read as units (a band would cost a
        // software renderer a fill of the whole row).
        dl->AddLine(ImVec2(origin.x, y0 - 1), ImVec2(area.max.x, y0 - 1), IM_COL32(255, 255, 255, 14));
        const int ctas = ctas_of(g);
        std::string label = std::string(ts.sm_expanded[std::size_t(row.index)] ? "▾ " : "▸ ") + g.label;
        // The CTA count where it fits (a sequence's label is long already).
        const std::string counted = label + " · " + std::to_string(ctas) + (ctas == 1 ? " CTA" : " CTAs");
        if (f.small->CalcTextSizeA(f.small->FontSize, 1e9f, 0, counted.c_str()).x < kGutter - 10) label = counted;
        const bool sel = group_of(doc->selected_track) == row.index;
        dl->PushClipRect(ImVec2(origin.x, y0 - 1), ImVec2(left - 2, y1 + 1), true);
        dl->AddText(f.small, f.small->FontSize, ImVec2(origin.x + 6, y0), sel ? theme::kAccent : theme::kText, label.c_str());
        dl->PopClipRect();
        if (in_row && mouse.x < left && !label.empty()) ImGui::SetTooltip("%s · %d CTA%s", g.label.c_str(), ctas, ctas == 1 ? "" : "s");
        for (int t : *g.tracks) drawer.draw(t, y0 + 2, y1 - 1, false);
        if (in_row && mouse.x < left && ImGui::IsMouseClicked(0))
          ts.sm_expanded[std::size_t(row.index)] = !ts.sm_expanded[std::size_t(row.index)];
        break;
      }
      case RowType::Cta: {
        const auto& tk = r.trace().tracks[std::size_t(row.index)];
        const bool sel = row.index == doc->selected_track;
        const ImU32 text = sel ? theme::kAccent : theme::kTextDim;
        const float fs = f.small->FontSize - 1;
        if (sel) dl->AddRectFilled(ImVec2(origin.x, y0), ImVec2(area.max.x, y1), theme::with_alpha(theme::kAccent, 0.08f));
        char label[48];
        if (r.laned(row.index)) {
          // The CTA on its first lane's row, each lane's name at the gutter's edge, and a bar
          // down the gutter that holds the CTA's rows together.
          const auto& lanes = r.lanes_of(row.index);
          dl->AddLine(ImVec2(origin.x + 18, y0), ImVec2(origin.x + 18, y1 + (row.index == lanes.back() ? 0 : 1)),
                      theme::with_alpha(theme::kTextDim, 0.6f), 2);
          if (row.index == lanes.front()) {
            std::snprintf(label, sizeof label, "CTA %d", tk.cta);
            dl->AddText(f.small, fs, ImVec2(origin.x + 22, y0 - 1), text, label);
          }
          const std::string name = tr::lane_name(r.trace(), tk);
          const float w = f.small->CalcTextSizeA(fs, 1e9f, 0, name.c_str()).x;
          dl->AddText(f.small, fs, ImVec2(left - 6 - w, y0 - 1), text, name.c_str());
        } else if (by_sequence && dec.cta(row.index).role == DecodeRole::Split) {
          // A split's row: which split, and where it ran.
          std::snprintf(label, sizeof label, "split %d · SM %d", dec.cta(row.index).split, tk.sm);
          dl->AddText(f.small, fs, ImVec2(origin.x + 22, y0 - 1), text, label);
        } else if (by_sequence) {
          std::snprintf(label, sizeof label, "CTA %d · SM %d", tk.cta, tk.sm);
          dl->AddText(f.small, fs, ImVec2(origin.x + 22, y0 - 1), text, label);
        } else {
          std::snprintf(label, sizeof label, "CTA %d · k%d", tk.cta, tk.kernel);
          dl->AddText(f.small, fs, ImVec2(origin.x + 22, y0 - 1), text, label);
        }
        drawer.draw(row.index, y0 + 1, y1, true);
        break;
      }
    }
  }

  // The selected range, and the playhead.
  if (ts.range_active || ts.range_dragging) {
    const double a = std::min(ts.range0, ts.range1), b = std::max(ts.range0, ts.range1);
    const float x0 = std::max(left, float(v.to_px(a, left, width))), x1 = std::min(left + width, float(v.to_px(b, left, width)));
    if (x1 > x0) {
      dl->AddRectFilled(ImVec2(x0, area.min.y), ImVec2(x1, area.max.y), IM_COL32(120, 170, 255, 40));
      dl->AddLine(ImVec2(x0, area.min.y), ImVec2(x0, area.max.y), IM_COL32(120, 170, 255, 180));
      dl->AddLine(ImVec2(x1, area.min.y), ImVec2(x1, area.max.y), IM_COL32(120, 170, 255, 180));
    }
  }
  const float cx = float(v.to_px(cur.x, left, width));
  if (cx >= left && cx <= left + width) {
    dl->AddLine(ImVec2(cx, area.min.y), ImVec2(cx, area.max.y), theme::kAccent, 1.5f);
  }
  dl->PopClipRect();
  if (cx >= left && cx <= left + width)
    dl->AddTriangleFilled(ImVec2(cx - 6, ruler.min.y), ImVec2(cx + 6, ruler.min.y), ImVec2(cx, ruler.min.y + 9), theme::kAccent);
  dl->AddLine(ImVec2(left - 1, ruler.min.y), ImVec2(left - 1, area.max.y), theme::kBorder);

  // The vertical scrollbar (drawn, and dragged).
  if (content_h > view_h) {
    const Rect sb{ImVec2(area.max.x - 10, area.min.y), ImVec2(area.max.x - 2, area.max.y)};
    const float th = std::max(20.0f, view_h * view_h / content_h);
    const float ty = sb.min.y + (view_h - th) * (ts.scroll_y / (content_h - view_h));
    dl->AddRectFilled(sb.min, sb.max, IM_COL32(255, 255, 255, 10), 4);
    dl->AddRectFilled(ImVec2(sb.min.x, ty), ImVec2(sb.max.x, ty + th), IM_COL32(255, 255, 255, 60), 4);
    ImGui::SetCursorScreenPos(sb.min);
    ImGui::InvisibleButton("##vscroll", ImVec2(sb.w(), sb.h()));
    if (ImGui::IsItemActive()) ts.scroll_y += io.MouseDelta.y * content_h / view_h;
  }

  // Interaction: wheel zooms at the cursor (Shift+wheel scrolls the rows), left-drag pans,
  // right-drag or Shift+left-drag selects a range, Escape clears it.
  if (lanes_hovered && io.MouseWheel != 0) {
    if (io.KeyShift)
      ts.scroll_y -= io.MouseWheel * 3 * kSmRowH;
    else if (mouse.x >= left) {
      const double anchor = v.from_px(mouse.x, left, width);
      v.zoom_at(anchor, std::pow(0.8, double(io.MouseWheel)), lo, hi, min_span);
    }
  }
  const bool selecting = ImGui::IsMouseDown(1) || (ImGui::IsMouseDown(0) && io.KeyShift);
  if (lanes_active && selecting && (ImGui::IsMouseDragging(1, 2) || ImGui::IsMouseDragging(0, 2))) {
    if (!ts.range_dragging) {
      ts.range_dragging = true;
      ts.range0 = v.from_px(io.MouseClickedPos[ImGui::IsMouseDown(1) ? 1 : 0].x, left, width);
    }
    ts.range1 = v.from_px(mouse.x, left, width);
  } else if (lanes_active && ImGui::IsMouseDragging(0, 2)) {
    v.pan(-double(io.MouseDelta.x) / width * v.span(), lo, hi);
    ts.scroll_y -= io.MouseDelta.y;
    ts.panning = true;
  }
  if (ts.range_dragging && !ImGui::IsMouseDown(0) && !ImGui::IsMouseDown(1)) {
    ts.range_dragging = false;
    ts.range_active = std::fabs(v.to_px(ts.range1, left, width) - v.to_px(ts.range0, left, width)) > 3;
  }
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape))) ts.range_active = false;

  // Clicks on events: follow the CTA; double-click: move the playhead there.
  const int picked = hover.event >= 0 ? hover.event : hover.cluster_first;
  if (lanes_hovered && picked >= 0 && ImGui::IsMouseReleased(0) && !ts.panning && !io.KeyShift)
    doc->select(hover.track);
  if (lanes_hovered && picked >= 0 && ImGui::IsMouseDoubleClicked(0)) {
    const auto& e = r.trace().events[std::size_t(picked)];
    doc->playback.seek(r, order == Order::Real ? Cursor{order, e.ts_ns + e.dur_ns} : Cursor{order, double(picked) + 1});
    doc->sync();
  }
  if (!ImGui::IsMouseDown(0)) ts.panning = false;

  // Hover details.
  s.hovered_event = -1;
  if (lanes_hovered && !lanes_active) {
    if (hover.event >= 0) {
      s.hovered_event = hover.event;
      event_tooltip(r, hover.event);
    } else if (hover.cluster_first >= 0) {
      ImGui::SetTooltip("%d events (zoom in to see them one by one)", hover.cluster_count);
    } else if (hover.range) {
      ImGui::SetTooltip("%s\nbegins %s · lasts %s", hover.range->name.c_str(), format_ns(hover.range->ts_ns).c_str(),
                        format_ns(hover.range->dur_ns).c_str());
    } else if (hover.kernel) {
      ImGui::SetTooltip("%s · grid %d×%d×%d · block %d×%d×%d · %s shared memory\nbegins %s · lasts %s",
                        hover.kernel->name.c_str(), hover.kernel->grid[0], hover.kernel->grid[1], hover.kernel->grid[2],
                        hover.kernel->block[0], hover.kernel->block[1], hover.kernel->block[2],
                        format_bytes(double(hover.kernel->smem_bytes)).c_str(), format_ns(hover.kernel->ts_ns).c_str(),
                        format_ns(hover.kernel->dur_ns).c_str());
    }
  }

  // What the selected range holds.
  if (ts.range_active) {
    const double a = std::min(ts.range0, ts.range1), b = std::max(ts.range0, ts.range1);
    const Totals ta = r.totals({order, a}), tb = r.totals({order, b});
    char buf[200];
    std::snprintf(buf, sizeof buf, "range %s · %s events · read %s · written %s  (Esc clears)",
                  order == Order::Real ? format_ns(b - a).c_str() : (format_count(b - a) + " positions").c_str(),
                  format_count(double(tb.events - ta.events)).c_str(),
                  format_bytes(double(tb.read_total() - ta.read_total())).c_str(),
                  format_bytes(double(tb.written_total() - ta.written_total())).c_str());
    const ImVec2 tsz = f.small->CalcTextSizeA(f.small->FontSize, 1e9f, 0, buf);
    const ImVec2 at(std::min(left + width - tsz.x - 8, std::max(left + 4, float(v.to_px(a, left, width)) + 4)), area.max.y - tsz.y - 6);
    dl->AddRectFilled(ImVec2(at.x - 4, at.y - 2), ImVec2(at.x + tsz.x + 4, at.y + tsz.y + 2), IM_COL32(20, 30, 50, 230), 3);
    dl->AddText(f.small, f.small->FontSize, at, theme::kText, buf);
  }
  end_panel();
}

}  // namespace fs::viz
