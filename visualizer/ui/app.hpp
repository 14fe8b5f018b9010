// The application: owns the UI state, lays the panels out, runs the menu, the keyboard and
// the playback clock, and opens traces when panels ask. It draws with ImGui only; the window,
// the GL context and the screenshots are main.cpp's, so the tests run it with no backend.
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

#include "visualizer/model/synthetic.hpp"
#include "visualizer/ui/ui_state.hpp"

namespace fs::viz {

struct PanelRect {
  Panel panel;
  ImVec2 pos, size;
};

class App {
 public:
  App();

  UiState& state() { return state_; }
  const UiState& state() const { return state_; }

  // The spec "synthetic:…" traces are made from (N, d, heads, tiles, SMs).
  SyntheticSpec& synthetic_base() { return synthetic_; }

  // Opens a trace file, or "synthetic:naive", "synthetic:flash", "synthetic:flash-causal",
  // "synthetic:smyrf", "synthetic:hopper", "synthetic:decode" (step 10 over a paged cache, decode_spec;
  // "synthetic:decode-contiguous" over a contiguous one), "synthetic:bench" (1,000,000 events). On failure sets
  // `error` (one line) and keeps what was open.
  bool open(const std::string& what, bool as_compare, std::string& error);
  void set_document(std::unique_ptr<Document> doc, bool as_compare);
  void close_compare();

  // Re-reads the trace folders and the command line's paths.
  void refresh_catalog();

  // One frame between ImGui::NewFrame and ImGui::Render: plays `dt` seconds, handles keys,
  // draws the menu and every visible panel, then acts on what panels asked for.
  void frame(float dt);

  // Where each visible panel goes in a display of this size (below the menu bar).
  std::vector<PanelRect> layout(ImVec2 display, float menu_height) const;

  bool quit_requested() const { return quit_; }
  bool show_menu = true;

 private:
  void menu_bar();
  void keyboard();
  void process_requests();
  void error_banner();
  void help_window();

  UiState state_;
  SyntheticSpec synthetic_;
  bool quit_ = false;
  bool show_help_ = false;
  unsigned panels_before_compare_ = kPanelsDefault;
};

// "memory,timeline" → flags; unknown names set `bad` to the first one.
unsigned parse_panels(const std::string& list, std::string& bad);

}  // namespace fs::viz
