// Trace browser: the traces shipped in docs/traces/ and those named on the command line.
// Open one, or open it as the second trace of compare mode; synthetic traces for a machine
// that has none.
#include <cstdio>

#include "visualizer/model/labels.hpp"
#include "visualizer/ui/panels.hpp"
#include "visualizer/ui/theme.hpp"
#include "visualizer/ui/widgets.hpp"

namespace fs::viz {

void trace_browser_panel(UiState& s) {
  if (!begin_panel(kPanelTraces)) return;
  const auto& f = theme::fonts();
  if (s.doc) {
    ImGui::PushFont(f.small);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(theme::kAccent), "open:");
    ImGui::SameLine();
    ImGui::TextWrapped("%s", s.doc->path.c_str());
    if (s.other) {
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(theme::kAccent), "compare:");
      ImGui::SameLine();
      ImGui::TextWrapped("%s", s.other->path.c_str());
    }
    for (const auto& w : s.doc->warnings) ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(theme::kWarning), "! %s", w.c_str());
    ImGui::PopFont();
    ImGui::Separator();
  }
  if (s.catalog.empty()) {
    ImGui::TextDisabled("No traces found in:");
    for (const auto& d : s.folders) ImGui::TextDisabled("  %s", d.c_str());
    ImGui::TextDisabled("Record one with a step program: build/bin/step04_... --trace FILE");
  }
  const float h = ImGui::GetContentRegionAvail().y - ImGui::GetFrameHeightWithSpacing() * 2 - 4;
  if (ImGui::BeginChild("##list", ImVec2(0, std::max(40.0f, h)), false)) {
    for (int i = 0; i < int(s.catalog.size()); ++i) {
      const auto& e = s.catalog[std::size_t(i)];
      const bool open = s.doc && s.doc->path == e.path;
      ImGui::PushID(i);
      char label[512];
      std::snprintf(label, sizeof label, "%s%s", e.name.c_str(), e.from_command_line ? "  (command line)" : "");
      if (ImGui::Selectable(label, i == s.catalog_selected || open, ImGuiSelectableFlags_AllowDoubleClick,
                            ImVec2(ImGui::GetContentRegionAvail().x - 150, 0))) {
        s.catalog_selected = i;
        if (ImGui::IsMouseDoubleClicked(0)) s.requests.push_back({e.path, false});
      }
      ImGui::SameLine(ImGui::GetContentRegionAvail().x - 140);
      ImGui::TextDisabled("%9s", format_bytes(double(e.bytes)).c_str());
      ImGui::SameLine();
      if (ImGui::SmallButton("open")) s.requests.push_back({e.path, false});
      ImGui::SameLine();
      if (ImGui::SmallButton("compare")) s.requests.push_back({e.path, true});
      ImGui::PopID();
    }
  }
  ImGui::EndChild();
  ImGui::TextDisabled("synthetic (H200 timing model, no GPU needed):");
  if (ImGui::SmallButton("step 01")) s.requests.push_back({"synthetic:naive", false});
  ImGui::SameLine();
  if (ImGui::SmallButton("step 04")) s.requests.push_back({"synthetic:flash", false});
  ImGui::SameLine();
  if (ImGui::SmallButton("step 04 causal")) s.requests.push_back({"synthetic:flash-causal", false});
  ImGui::SameLine();
  if (ImGui::SmallButton("01 vs 04")) {
    s.requests.push_back({"synthetic:naive", false});
    s.requests.push_back({"synthetic:flash", true});
  }
  end_panel();
}

}  // namespace fs::viz
