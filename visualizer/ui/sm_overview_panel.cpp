// Every SM at a glance: what the CTAs on it are doing at the cursor (the colour of their
// current event), how much shared memory they hold against the budget, and how many CTAs it
// hosts. Click an SM to follow one of its CTAs in the other panels.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "visualizer/model/labels.hpp"
#include "visualizer/ui/panels.hpp"
#include "visualizer/ui/theme.hpp"
#include "visualizer/ui/widgets.hpp"

namespace fs::viz {

namespace tr = fs::trace;

namespace {

struct SmNow {
  int active_ctas = 0;
  int first_active = -1;         // a track running now
  int last_active = -1;          // the last one found (the lanes of a CTA are found together)
  int latest = -1;               // else the last one that ran here before the cursor
  int next = -1;                 // else the first one to come
  const tr::Event* event = nullptr;  // first_active's current event
  std::int64_t smem = 0;
};

}  // namespace

void sm_overview_panel(UiState& s) {
  if (!begin_panel(kPanelSms)) return;
  Document* doc = s.doc.get();
  if (!doc || doc->replay->sm_groups().empty()) return end_empty_panel();
  const auto& r = *doc->replay;
  const auto& f = theme::fonts();
  const Cursor c = doc->cursor();
  const auto& groups = r.sm_groups();
  const double budget = double(std::max<std::int64_t>(r.meta().sram_budget_bytes, r.peak_smem()));

  // One box per SM of the GPU (by %smid), idle ones included.
  const int sm_total = std::max(1, r.sm_count());
  std::vector<int> group_of_sm(std::size_t(sm_total), -1);
  for (std::size_t gi = 0; gi < groups.size(); ++gi)
    if (groups[gi].sm >= 0) group_of_sm[std::size_t(groups[gi].sm)] = int(gi);
  std::vector<SmNow> now(groups.size());
  int busy = 0;
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    auto& n = now[gi];
    for (int t : groups[gi].tracks) {
      const auto& tl = r.track_events(t);
      if (tl.empty()) continue;
      const bool before = c.order == Order::Real ? c.x < r.track_begin_ns(t) : c.x < tl.front();
      const bool after = c.order == Order::Real ? c.x > r.track_end_ns(t) : c.x >= tl.back() + 1;
      if (before) {
        if (n.next < 0) n.next = t;
        continue;
      }
      if (after) {
        n.latest = t;
        continue;
      }
      const TrackCursor tc = r.track_cursor(t, c);
      if (tc.retired) {
        n.latest = t;
        continue;
      }
      // A CTA in lanes is several tracks, one after another in the group: count it once.
      if (n.first_active < 0 || &r.lanes_of(t) != &r.lanes_of(n.last_active)) ++n.active_ctas;
      n.last_active = t;
      n.smem += r.smem_after(t, tc.done);
      if (n.first_active < 0) {
        n.first_active = t;
        const int pos = tc.active >= 0 ? tc.active : std::max(0, tc.done - 1);
        n.event = &r.trace().events[std::size_t(tl[std::size_t(pos)])];
      }
    }
    busy += n.active_ctas > 0;
  }

  ImGui::PushFont(f.small);
  ImGui::Text("%d of %d SMs busy", busy, sm_total);
  ImGui::SameLine();
  ImGui::TextDisabled("(colour: what its CTA does · bar: shared memory)");
  ImGui::PopFont();

  const ImVec2 p = ImGui::GetCursorScreenPos();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const int n = sm_total;
  // The most columns whose boxes stay at least as tall as wide … within the space.
  int cols = std::max(1, int(std::ceil(std::sqrt(n * avail.x / std::max(1.0f, avail.y)))));
  cols = std::min(cols, n);
  const int rows = (n + cols - 1) / cols;
  const float gap = 3;
  const float bw = (avail.x - gap * (cols - 1)) / cols, bh = (avail.y - gap * (rows - 1)) / rows;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const int sel_group = r.sm_group_of_track(doc->selected_track);
  int hovered = -1;
  for (int i = 0; i < n; ++i) {
    const float x = p.x + (i % cols) * (bw + gap), y = p.y + (i / cols) * (bh + gap);
    const Rect box{ImVec2(x, y), ImVec2(x + bw, y + bh)};
    const int gi = group_of_sm[std::size_t(i)];
    static const SmNow unused;
    const auto& sn = gi >= 0 ? now[std::size_t(gi)] : unused;
    ImU32 fill = theme::kPanelRaised;
    if (sn.event) fill = theme::mix(theme::kind_color(sn.event->kind, sn.event->tensor), theme::kPanel, 0.15f);
    dl->AddRectFilled(box.min, box.max, fill);
    if (budget > 0 && sn.smem > 0) {
      const float w = float(std::min(1.0, double(sn.smem) / budget)) * (bw - 4);
      dl->AddRectFilled(ImVec2(x + 2, box.max.y - 4), ImVec2(x + 2 + w, box.max.y - 2), IM_COL32(255, 255, 255, 200));
    }
    // One dot per CTA resident now.
    for (int k = 0; k < std::min(sn.active_ctas, 8); ++k)
      dl->AddCircleFilled(ImVec2(x + 5 + k * 5.0f, y + 5), 1.6f, IM_COL32(255, 255, 255, 190));
    if (bw > 26 && bh > 22) {
      char id[16];
      std::snprintf(id, sizeof id, "%d", i);
      const ImVec2 ts = f.small->CalcTextSizeA(f.small->FontSize, 1e9f, 0, id);
      dl->AddText(f.small, f.small->FontSize, ImVec2(box.max.x - ts.x - 3, box.max.y - ts.y - 5),
                  sn.event ? IM_COL32(20, 20, 24, 230) : theme::kTextDim, id);
    }
    if (gi >= 0 && gi == sel_group) dl->AddRect(ImVec2(x - 1, y - 1), ImVec2(box.max.x + 1, box.max.y + 1), theme::kAccent, 0, 0, 2);
    if (gi >= 0 && box.contains(ImGui::GetIO().MousePos)) hovered = gi;
  }
  ImGui::InvisibleButton("##sms", avail);
  if (ImGui::IsItemHovered() && hovered >= 0) {
    const auto& sn = now[std::size_t(hovered)];
    ImGui::BeginTooltip();
    ImGui::Text("SM %d · %d CTAs over the run", groups[std::size_t(hovered)].sm, groups[std::size_t(hovered)].ctas);
    if (sn.event) {
      ImGui::Text("%d resident now; CTA %d: %s %s", sn.active_ctas, r.trace().tracks[std::size_t(sn.first_active)].cta,
                  kind_label(sn.event->kind), tile_label(*sn.event).c_str());
      // A decoding trace's CTA: which sequence, K/V head and split.
      if (const std::string role = r.decode().label(r.trace(), sn.first_active); !role.empty()) ImGui::TextDisabled("%s", role.c_str());
    }
    else
      ImGui::TextDisabled("idle now");
    ImGui::Text("shared memory held: %s", format_bytes(double(sn.smem)).c_str());
    ImGui::TextDisabled("click to follow its CTA");
    ImGui::EndTooltip();
    if (ImGui::IsItemClicked()) {
      const int pick = sn.first_active >= 0 ? sn.first_active : sn.latest >= 0 ? sn.latest : sn.next;
      if (pick >= 0) doc->select(pick);
    }
  }
  end_panel();
}

}  // namespace fs::viz
