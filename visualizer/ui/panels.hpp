// The panels, one per file, each drawing one window over the shared UiState. The app places
// the windows (begin_panel) and calls these once a frame.
#pragma once

#include <imgui.h>

#include "visualizer/ui/ui_state.hpp"

namespace fs::viz {

// Opens panel p's window with the app's flags; returns false when it is not drawn this frame
// (then the panel must not call End either).
bool begin_panel(Panel p, ImGuiWindowFlags extra = 0);
void end_panel();
// A panel with nothing to draw (no trace open): says so, with `hint` when given, and ends the
// panel. For the early return: `if (!doc) return end_empty_panel();`
void end_empty_panel(const char* hint = nullptr);

void memory_panel(UiState& s);          // memory_panel.cpp: HBM tensors and the CTA's SRAM
void score_matrix_panel(UiState& s);    // score_matrix_panel.cpp: the ghost N×N S, or a clustered round's
void sm_overview_panel(UiState& s);     // sm_overview_panel.cpp: every SM at a glance
void timeline_panel(UiState& s);        // timeline_panel.cpp: host rows and CTA rows
void schedule_panel(UiState& s);        // schedule_panel.cpp: a CTA's lanes, producer over consumers
void transport_bar(UiState& s);         // transport_bar.cpp: play, step, speed, scrub
void counters_panel(UiState& s);        // counters_panel.cpp: bytes and FLOPs vs the IO model
void softmax_panel(UiState& s);         // softmax_panel.cpp: running m, ℓ and rescales
void compare_panel(UiState& s);         // compare_panel.cpp: two traces in step
void io_calculator_panel(UiState& s);   // io_calculator_panel.cpp: Theorem 2, Proposition 4
void trace_browser_panel(UiState& s);   // trace_browser_panel.cpp: docs/traces and the CLI's

}  // namespace fs::viz
