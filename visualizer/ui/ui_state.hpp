// What the panels share: the open traces, what is selected and hovered, the timeline's view,
// and the requests panels make of the app (open a file, compare with another). Panels read and
// write it during a frame; the app acts on the requests between frames.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "visualizer/model/catalog.hpp"
#include "visualizer/model/document.hpp"
#include "visualizer/ui/time_view.hpp"

namespace fs::viz {

// The panels, as flags: the View menu and --panels pick which are shown.
enum Panel : unsigned {
  kPanelMemory = 1u << 0,
  kPanelScores = 1u << 1,
  kPanelSms = 1u << 2,
  kPanelTimeline = 1u << 3,
  kPanelCounters = 1u << 4,
  kPanelSoftmax = 1u << 5,
  kPanelCompare = 1u << 6,
  kPanelIo = 1u << 7,
  kPanelTraces = 1u << 8,
  kPanelSchedule = 1u << 9,
};
constexpr unsigned kPanelsDefault =
    kPanelMemory | kPanelScores | kPanelSms | kPanelTimeline | kPanelCounters | kPanelSoftmax;
constexpr int kPanelCount = 10;
const char* panel_title(Panel p);   // "Memory hierarchy", ...
const char* panel_key(Panel p);     // "memory", ... (for --panels)

struct OpenRequest {
  std::string path;          // a file, or "synthetic:naive" / "synthetic:flash"
  bool as_compare = false;   // open as the second trace of compare mode
};

struct TimelineState {
  TimeView view[2];               // per order (Real, Logical)
  bool view_set[2] = {false, false};
  std::vector<char> sm_expanded;  // per group of rows (an SM's): one lane per CTA, or all CTAs in one lane
  // A decoding trace's rows: by (sequence, K/V head), its splits side by side (the default), or by SM.
  bool by_sm = false;
  bool grouped_by_sequence = false;  // what sm_expanded was sized for
  int revealed_track = -1;        // the followed CTA whose lane was last scrolled into view
  bool range_active = false;
  double range0 = 0, range1 = 0;  // the selected range, in the current order's units
  bool range_dragging = false;
  bool panning = false;
  float scroll_y = 0;
};

// The producer/consumer schedule of the followed CTA: its time axis (in ns), fitted to the CTA
// whenever another is followed.
struct ScheduleState {
  TimeView view;
  int cta_track = -1;  // the first lane of the CTA the view was fitted to
};

struct IoCalculatorState {
  int log2_N = 13;
  int d = 64;
  float sram_kib = 100;
  float sparsity = 0.2f;
};

// The score matrix of a clustered trace (step 07): which round it shows, and in which order.
struct ScoresState {
  int round = -1;      // -1: the round of the followed CTA (Replay::round_to_follow)
  bool sorted = true;  // the round's slot space, where its clusters are blocks on the diagonal
};

// Cumulative HBM bytes sampled along a trace, for the counters' chart (computed once per
// trace and order, not per frame).
struct CountersCurve {
  const Replay* replay = nullptr;
  Order order = Order::Real;
  std::vector<double> x, read, written;
};

struct UiState {
  std::unique_ptr<Document> doc;    // the trace the panels show
  std::unique_ptr<Document> other;  // the second trace of compare mode
  SyncBy sync_by = SyncBy::Work;
  unsigned panels = kPanelsDefault;

  std::vector<std::string> folders;       // searched for traces (docs/traces)
  std::vector<std::string> command_line;  // files and folders named on the command line
  std::vector<CatalogEntry> catalog;
  int catalog_selected = -1;

  std::string error;        // the last load failure, shown until dismissed
  std::vector<OpenRequest> requests;

  TimelineState timeline;
  ScheduleState schedule;
  IoCalculatorState io;
  ScoresState scores;
  CountersCurve counters_curve;
  int hovered_event = -1;   // an event under the mouse in any panel, for cross-highlighting
  int hovered_track = -1;
};

}  // namespace fs::viz
