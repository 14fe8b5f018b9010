// One palette for every panel: a tensor has the same colour in the HBM grids, the SRAM view,
// the timeline, the counters and the legends, so the eye can follow a tile across them.
#pragma once

#include <imgui.h>

#include "common/trace/trace.hpp"

namespace fs::viz::theme {

// Surfaces and text.
constexpr ImU32 kPanel = IM_COL32(26, 29, 36, 255);  // panels, and the clear colour behind them
constexpr ImU32 kPanelRaised = IM_COL32(34, 38, 47, 255);
constexpr ImU32 kBorder = IM_COL32(52, 57, 69, 255);
constexpr ImU32 kGrid = IM_COL32(255, 255, 255, 18);
constexpr ImU32 kText = IM_COL32(222, 227, 236, 255);
constexpr ImU32 kTextDim = IM_COL32(140, 149, 166, 255);
constexpr ImU32 kAccent = IM_COL32(255, 214, 102, 255);   // the playhead, the selection
constexpr ImU32 kWarning = IM_COL32(255, 120, 100, 255);
constexpr ImU32 kSkipped = IM_COL32(88, 92, 104, 255);
constexpr ImU32 kWaiting = IM_COL32(48, 53, 64, 255);  // a lane idle at a barrier: just above the panel

// A tensor's colour at full strength, and with alpha (0…1).
ImU32 tensor_color(fs::trace::Tensor t, float alpha = 1.0f);
ImVec4 tensor_color_vec(fs::trace::Tensor t);
// A decoding trace's sequence b (its pages of the KV cache, its block table row); grey for −1 (no
// sequence's: an unused page).
ImU32 sequence_color(int b, float alpha = 1.0f);
// An event's colour on the timeline: loads and stores take their tensor's colour, on-chip
// work a darker tone of what it produces, skips grey, waits barely above the panel (idle).
ImU32 kind_color(fs::trace::Kind k, fs::trace::Tensor t);

// Mixes two colours: t = 0 gives a, 1 gives b.
ImU32 mix(ImU32 a, ImU32 b, float t);
ImU32 with_alpha(ImU32 c, float alpha);

// The label shown for a tensor ("ℓ" for l, "m" for m, the rest as named).
const char* tensor_display(fs::trace::Tensor t);

// Fonts: DejaVu Sans when it is installed (it has the τ, ℓ, →, ≤ the panels use), ImGui's
// own otherwise. Call before the font atlas is built.
struct Fonts {
  ImFont* regular = nullptr;
  ImFont* small = nullptr;
  ImFont* mono = nullptr;
  ImFont* title = nullptr;
  bool dejavu = false;
};
Fonts load_fonts(float size = 15.0f);
const Fonts& fonts();

void apply_style();

}  // namespace fs::viz::theme
