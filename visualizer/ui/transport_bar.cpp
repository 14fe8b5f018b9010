// Transport: back to the start, one event back, play/pause, one event forward, to the end;
// speed; real time or logical order; and a scrub bar over the whole run.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "visualizer/model/labels.hpp"
#include "visualizer/ui/panels.hpp"
#include "visualizer/ui/theme.hpp"

namespace fs::viz {

namespace {

enum class Icon { ToStart, StepBack, Play, Pause, StepForward, ToEnd };

// Icons drawn as shapes, so that they look the same with any font.
bool icon_button(const char* id, Icon icon, const char* tip) {
  const float h = ImGui::GetFrameHeight();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const bool pressed = ImGui::InvisibleButton(id, ImVec2(h * 1.25f, h));
  const bool hovered = ImGui::IsItemHovered();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(p, ImVec2(p.x + h * 1.25f, p.y + h),
                    ImGui::GetColorU32(hovered ? ImGuiCol_ButtonHovered : ImGuiCol_Button), 3);
  const ImU32 c = theme::kText;
  const float cx = p.x + h * 0.625f, cy = p.y + h * 0.5f, s = h * 0.26f;
  auto tri_right = [&](float x) { dl->AddTriangleFilled(ImVec2(x - s * 0.8f, cy - s), ImVec2(x - s * 0.8f, cy + s), ImVec2(x + s * 0.8f, cy), c); };
  auto tri_left = [&](float x) { dl->AddTriangleFilled(ImVec2(x + s * 0.8f, cy - s), ImVec2(x + s * 0.8f, cy + s), ImVec2(x - s * 0.8f, cy), c); };
  auto bar = [&](float x) { dl->AddRectFilled(ImVec2(x - 1.5f, cy - s), ImVec2(x + 1.5f, cy + s), c); };
  switch (icon) {
    case Icon::ToStart: bar(cx - s * 0.9f); tri_left(cx + s * 0.3f); break;
    case Icon::StepBack: tri_left(cx - s * 0.2f); bar(cx + s * 0.9f); break;
    case Icon::Play: tri_right(cx + s * 0.1f); break;
    case Icon::Pause: dl->AddRectFilled(ImVec2(cx - s * 0.7f, cy - s), ImVec2(cx - s * 0.2f, cy + s), c);
                      dl->AddRectFilled(ImVec2(cx + s * 0.2f, cy - s), ImVec2(cx + s * 0.7f, cy + s), c); break;
    case Icon::StepForward: bar(cx - s * 0.9f); tri_right(cx + s * 0.2f); break;
    case Icon::ToEnd: tri_right(cx - s * 0.3f); bar(cx + s * 0.9f); break;
  }
  if (hovered && tip) ImGui::SetTooltip("%s", tip);
  return pressed;
}

}  // namespace

void transport_bar(UiState& s) {
  Document* doc = s.doc.get();
  if (!doc) return;
  const Replay& r = *doc->replay;
  Playback& pb = doc->playback;
  bool moved = false;
  if (icon_button("##start", Icon::ToStart, "to the first device event (Home)")) {
    pb.rewind(r);
    moved = true;
  }
  ImGui::SameLine(0, 3);
  if (icon_button("##back", Icon::StepBack, "one event back (←)")) {
    pb.step(r, -1);
    moved = true;
  }
  ImGui::SameLine(0, 3);
  if (icon_button("##play", pb.playing() ? Icon::Pause : Icon::Play, "play / pause (Space)")) {
    if (!pb.playing() && pb.fraction(r) >= 1.0) pb.rewind(r);
    pb.toggle();
  }
  ImGui::SameLine(0, 3);
  if (icon_button("##fwd", Icon::StepForward, "one event forward (→)")) {
    pb.step(r, +1);
    moved = true;
  }
  ImGui::SameLine(0, 3);
  if (icon_button("##end", Icon::ToEnd, "to the end (End)")) {
    pb.to_end(r);
    moved = true;
  }
  ImGui::SameLine(0, 12);
  static const double speeds[] = {1.0 / 16, 1.0 / 8, 1.0 / 4, 1.0 / 2, 1, 2, 4, 8, 16, 32, 64};
  char label[32];
  std::snprintf(label, sizeof label, pb.speed() < 1 ? "1/%.0f×" : "%.0f×", pb.speed() < 1 ? 1 / pb.speed() : pb.speed());
  ImGui::SetNextItemWidth(72);
  if (ImGui::BeginCombo("##speed", label)) {
    for (double sp : speeds) {
      char l[32];
      std::snprintf(l, sizeof l, sp < 1 ? "1/%.0f×" : "%.0f×", sp < 1 ? 1 / sp : sp);
      if (ImGui::Selectable(l, sp == pb.speed())) pb.set_speed(sp);
    }
    ImGui::EndCombo();
  }
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("speed: at 1× the kernels play in %.0f s (+ / − change it)", Playback::kSecondsAt1x);
  ImGui::SameLine(0, 12);
  int order = pb.order() == Order::Real ? 0 : 1;
  if (ImGui::RadioButton("real time", &order, 0)) {
    pb.set_order(r, Order::Real);
    moved = true;
  }
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("events where %%globaltimer put them (32 ns steps)");
  ImGui::SameLine();
  if (ImGui::RadioButton("logical order", &order, 1)) {
    pb.set_order(r, Order::Logical);
    moved = true;
  }
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("one event after another, in seq order (L toggles)");
  ImGui::SameLine(0, 12);
  bool loop = pb.loop();
  if (ImGui::Checkbox("loop", &loop)) pb.set_loop(loop);
  if (pb.order() == Order::Real) {
    ImGui::SameLine();
    bool skip = pb.skip_idle();
    if (ImGui::Checkbox("skip idle", &skip)) pb.set_skip_idle(skip);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("while playing, jump over stretches where no kernel runs");
  }
  ImGui::SameLine(0, 16);
  const Cursor c = pb.cursor();
  char where[128];
  const double t_ns = r.convert(c, Order::Real).x;
  const std::int64_t done = r.done_count(c);
  std::snprintf(where, sizeof where, "t = %s   ·   %s of %s events", format_ns(t_ns).c_str(),
                format_count(double(done)).c_str(), format_count(double(r.event_count())).c_str());
  ImGui::PushFont(theme::fonts().mono);
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted(where);
  ImGui::PopFont();
  ImGui::SameLine(0, 16);
  double frac = pb.fraction(r);
  const double lo = 0, hi = 1;
  ImGui::SetNextItemWidth(std::max(80.0f, ImGui::GetContentRegionAvail().x));
  if (ImGui::SliderScalar("##scrub", ImGuiDataType_Double, &frac, &lo, &hi, "")) {
    pb.seek_fraction(r, frac);
    moved = true;
  }
  if (moved) doc->sync();
}

}  // namespace fs::viz
