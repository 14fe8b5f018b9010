#include "visualizer/ui/app.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "visualizer/model/labels.hpp"
#include "visualizer/ui/panels.hpp"
#include "visualizer/ui/theme.hpp"

namespace fs::viz {

namespace {

constexpr Panel kAllPanels[kPanelCount] = {kPanelMemory,  kPanelScores,  kPanelSms, kPanelTimeline, kPanelCounters,
                                           kPanelSoftmax, kPanelCompare, kPanelIo,  kPanelTraces,   kPanelSchedule};

// Whether any kernel of the trace records its CTAs in lanes (step 09's warpgroups).
bool has_lanes(const Replay& r) {
  for (const auto& k : r.trace().kernels)
    if (k.lanes > 1) return true;
  return false;
}

}  // namespace

const char* panel_title(Panel p) {
  switch (p) {
    case kPanelMemory: return "Memory hierarchy";
    case kPanelScores: return "Score matrix S (ghost)";
    case kPanelSms: return "SMs";
    case kPanelTimeline: return "Timeline";
    case kPanelCounters: return "Counters";
    case kPanelSoftmax: return "Online softmax";
    case kPanelCompare: return "Compare";
    case kPanelIo: return "IO calculator";
    case kPanelTraces: return "Trace browser";
    case kPanelSchedule: return "Schedule: a CTA's lanes";
  }
  return "?";
}

const char* panel_key(Panel p) {
  switch (p) {
    case kPanelMemory: return "memory";
    case kPanelScores: return "scores";
    case kPanelSms: return "sms";
    case kPanelTimeline: return "timeline";
    case kPanelCounters: return "counters";
    case kPanelSoftmax: return "softmax";
    case kPanelCompare: return "compare";
    case kPanelIo: return "io";
    case kPanelTraces: return "traces";
    case kPanelSchedule: return "schedule";
  }
  return "?";
}

unsigned parse_panels(const std::string& list, std::string& bad) {
  unsigned out = 0;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    if (item == "all") {
      out |= kPanelsDefault | kPanelIo | kPanelTraces | kPanelSchedule;
      continue;
    }
    if (item == "default") {
      out |= kPanelsDefault;
      continue;
    }
    bool found = false;
    for (Panel p : kAllPanels)
      if (item == panel_key(p)) {
        out |= p;
        found = true;
      }
    if (!found && bad.empty()) bad = item;
  }
  return out;
}

bool begin_panel(Panel p, ImGuiWindowFlags extra) {
  const ImGuiWindowFlags flags = ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse |
                                 ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoBringToFrontOnFocus | extra;
  if (!ImGui::Begin(panel_title(p), nullptr, flags)) {
    ImGui::End();
    return false;
  }
  return true;
}

void end_panel() { ImGui::End(); }

void end_empty_panel(const char* hint) {
  ImGui::TextDisabled("No trace open.%s%s", hint ? " " : "", hint ? hint : "");
  end_panel();
}

App::App() {
  synthetic_.B = 1;
  synthetic_.H = 8;
  synthetic_.N = 1024;
  synthetic_.d = 64;
}

void App::refresh_catalog() {
  state_.catalog = list_traces(state_.folders, state_.command_line);
  if (state_.catalog_selected >= int(state_.catalog.size())) state_.catalog_selected = -1;
}

bool App::open(const std::string& what, bool as_compare, std::string& error) {
  const std::string prefix = "synthetic:";
  if (what.rfind(prefix, 0) == 0) {
    const std::string kind = what.substr(prefix.size());
    SyntheticSpec spec = synthetic_;
    if (kind == "naive")
      spec.step = SyntheticStep::Naive;
    else if (kind == "flash")
      spec.step = SyntheticStep::Flash;
    else if (kind == "flash-causal") {
      spec.step = SyntheticStep::Flash;
      spec.causal = true;
    } else if (kind == "smyrf")
      spec.step = SyntheticStep::Smyrf;
    else if (kind == "hopper")
      spec.step = SyntheticStep::Hopper;
    else if (kind == "decode" || kind == "decode-contiguous") {  // its own shape: a decode is not N×N
      spec = decode_spec(kind == "decode");
      spec.sms = synthetic_.sms;
    }
    else if (kind == "bench")
      spec = spec_for_event_count(1000000);
    else {
      error = what + ": unknown synthetic trace (naive, flash, flash-causal, smyrf, hopper, decode, decode-contiguous, bench)";
      return false;
    }
    try {
      set_document(make_document(make_synthetic_trace(spec), what), as_compare);
    } catch (const std::exception& e) {
      error = what + ": " + e.what();
      return false;
    }
    return true;
  }
  auto doc = load_document(what, error);
  if (!doc) return false;
  set_document(std::move(doc), as_compare);
  return true;
}

void App::set_document(std::unique_ptr<Document> doc, bool as_compare) {
  if (as_compare) {
    state_.other = std::move(doc);
    if (!(state_.panels & kPanelCompare)) {
      panels_before_compare_ = state_.panels;
      state_.panels = (state_.panels | kPanelCompare) & ~unsigned(kPanelMemory | kPanelScores);
    }
    return;
  }
  state_.doc = std::move(doc);
  state_.timeline = TimelineState{};
  state_.schedule = ScheduleState{};
  // A trace in lanes opens with its schedule shown: the producer/consumer picture is its point; a
  // decoding trace's schedule is one row's splits side by side and their combine.
  if (state_.doc && (has_lanes(*state_.doc->replay) || state_.doc->replay->decode().on())) state_.panels |= kPanelSchedule;
  state_.scores.round = -1;  // follow: a fixed round may be past the new trace's
  state_.counters_curve = CountersCurve{};
  if (state_.doc && state_.doc->replay->meta().N > 0) {
    state_.io.log2_N = std::clamp(int(std::lround(std::log2(double(state_.doc->replay->meta().N)))), 7, 17);
    state_.io.d = std::clamp(state_.doc->replay->meta().d, 16, 256);
  }
}

void App::close_compare() {
  state_.other.reset();
  state_.panels = panels_before_compare_ & ~unsigned(kPanelCompare);
}

std::vector<PanelRect> App::layout(ImVec2 display, float menu_height) const {
  const unsigned v = state_.panels;
  std::vector<PanelRect> out;
  const float top = menu_height, W = display.x, H = std::max(1.0f, display.y - menu_height);
  // The bottom band, the display's width: the timeline, with the schedule above it (a little
  // less of the timeline then, so that the panels above keep half the height).
  const bool has_top = (v & ~unsigned(kPanelTimeline | kPanelSchedule)) != 0;
  const bool timeline = (v & kPanelTimeline) != 0, schedule = (v & kPanelSchedule) != 0;
  const float sc_h = !schedule ? 0 : has_top || timeline ? std::max(170.0f, std::floor(H * 0.2f)) : H;
  const float tl_h = !timeline ? 0 : has_top ? std::max(200.0f, std::floor(H * (schedule ? 0.3f : 0.36f))) : H - sc_h;
  if (timeline) out.push_back({kPanelTimeline, ImVec2(0, top + H - tl_h), ImVec2(W, tl_h)});
  if (schedule) out.push_back({kPanelSchedule, ImVec2(0, top + H - tl_h - sc_h), ImVec2(W, sc_h)});
  const float top_h = H - tl_h - sc_h;
  if (top_h < 1) return out;
  struct Col {
    std::vector<std::pair<Panel, float>> panels;
    float weight;
  };
  std::vector<Col> cols = {
      {{{kPanelMemory, 1.0f}, {kPanelCompare, 1.3f}}, (v & kPanelCompare) ? 0.6f : 0.5f},
      {{{kPanelScores, 1.35f}, {kPanelSms, 1.0f}}, 0.22f},
      {{{kPanelCounters, 1.15f}, {kPanelSoftmax, 1.0f}, {kPanelIo, 1.3f}, {kPanelTraces, 0.9f}}, 0.28f},
  };
  float wsum = 0;
  for (auto& c : cols) {
    c.panels.erase(std::remove_if(c.panels.begin(), c.panels.end(), [&](auto& p) { return !(v & p.first); }), c.panels.end());
    if (!c.panels.empty()) wsum += c.weight;
  }
  float x = 0;
  for (const auto& c : cols) {
    if (c.panels.empty()) continue;
    const float w = std::floor(W * c.weight / wsum);
    const float cw = (&c == &cols.back() || x + w > W - 2) ? W - x : w;
    float hsum = 0;
    for (const auto& p : c.panels) hsum += p.second;
    float y = top;
    for (std::size_t i = 0; i < c.panels.size(); ++i) {
      const float h = i + 1 == c.panels.size() ? top + top_h - y : std::floor(top_h * c.panels[i].second / hsum);
      out.push_back({c.panels[i].first, ImVec2(x, y), ImVec2(cw, h)});
      y += h;
    }
    x += cw;
  }
  return out;
}

void App::frame(float dt) {
  UiState& s = state_;
  if (s.doc) {
    s.doc->playback.advance(*s.doc->replay, dt);
    if (s.other) {
      const double p = progress(*s.doc->replay, s.doc->cursor(), s.sync_by);
      s.other->playback.seek(*s.other->replay, cursor_at_progress(*s.other->replay, p, s.sync_by, s.other->playback.order()));
      s.other->sync();
      s.other->follow();
    }
    s.doc->sync();
    s.doc->follow();
  }
  keyboard();
  float menu_h = 0;
  if (show_menu) {
    menu_bar();
    menu_h = ImGui::GetFrameHeight();
  }
  const ImVec2 display = ImGui::GetIO().DisplaySize;
  for (const auto& pr : layout(display, menu_h)) {
    ImGui::SetNextWindowPos(pr.pos, ImGuiCond_Always);
    ImGui::SetNextWindowSize(pr.size, ImGuiCond_Always);
    switch (pr.panel) {
      case kPanelMemory: memory_panel(s); break;
      case kPanelScores: score_matrix_panel(s); break;
      case kPanelSms: sm_overview_panel(s); break;
      case kPanelTimeline: timeline_panel(s); break;
      case kPanelCounters: counters_panel(s); break;
      case kPanelSoftmax: softmax_panel(s); break;
      case kPanelCompare: compare_panel(s); break;
      case kPanelIo: io_calculator_panel(s); break;
      case kPanelTraces: trace_browser_panel(s); break;
      case kPanelSchedule: schedule_panel(s); break;
    }
  }
  error_banner();
  help_window();
  process_requests();
}

void App::keyboard() {
  ImGuiIO& io = ImGui::GetIO();
  if (io.WantTextInput || !state_.doc) return;
  Document& d = *state_.doc;
  const Replay& r = *d.replay;
  bool moved = false;
  for (int i = 0; i < io.InputQueueCharacters.Size; ++i) {
    switch (io.InputQueueCharacters[i]) {
      case ' ':
        if (!d.playback.playing() && d.playback.fraction(r) >= 1.0) d.playback.rewind(r);
        d.playback.toggle();
        break;
      case 'l':
      case 'L':
        d.playback.set_order(r, d.playback.order() == Order::Real ? Order::Logical : Order::Real);
        moved = true;
        break;
      case '+':
      case '=': d.playback.set_speed(d.playback.speed() * 2); break;
      case '-': d.playback.set_speed(d.playback.speed() / 2); break;
      case 'f':
      case 'F': state_.timeline.view_set[0] = state_.timeline.view_set[1] = false; break;
      default: break;
    }
  }
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_RightArrow))) {
    d.playback.step(r, +1);
    moved = true;
  }
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_LeftArrow))) {
    d.playback.step(r, -1);
    moved = true;
  }
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Home))) {
    d.playback.rewind(r);
    moved = true;
  }
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_End))) {
    d.playback.to_end(r);
    moved = true;
  }
  if (moved) d.sync();
}

void App::menu_bar() {
  UiState& s = state_;
  if (!ImGui::BeginMainMenuBar()) return;
  ImGui::PushFont(theme::fonts().title);
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(theme::kAccent), "flashsteps");
  ImGui::PopFont();
  if (ImGui::BeginMenu("File")) {
    if (ImGui::MenuItem("Synthetic step 01 (naive)")) s.requests.push_back({"synthetic:naive", false});
    if (ImGui::MenuItem("Synthetic step 04 (FlashAttention)")) s.requests.push_back({"synthetic:flash", false});
    if (ImGui::MenuItem("Synthetic step 04, causal")) s.requests.push_back({"synthetic:flash-causal", false});
    if (ImGui::MenuItem("Synthetic step 07 (SMYRF clusters)")) s.requests.push_back({"synthetic:smyrf", false});
    if (ImGui::MenuItem("Synthetic step 09 (Hopper: producer, consumers)")) s.requests.push_back({"synthetic:hopper", false});
    if (ImGui::MenuItem("Synthetic step 10 (decoding, paged KV cache)")) s.requests.push_back({"synthetic:decode", false});
    if (ImGui::MenuItem("Synthetic step 10, contiguous cache")) s.requests.push_back({"synthetic:decode-contiguous", false});
    if (ImGui::MenuItem("Compare synthetic 01 with 04")) {
      s.requests.push_back({"synthetic:naive", false});
      s.requests.push_back({"synthetic:flash", true});
    }
    if (ImGui::MenuItem("Close the compared trace", nullptr, false, bool(s.other))) close_compare();
    ImGui::Separator();
    if (ImGui::MenuItem("Rescan trace folders")) refresh_catalog();
    if (ImGui::MenuItem("Quit", "Ctrl+Q")) quit_ = true;
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("View")) {
    for (Panel p : kAllPanels) {
      bool on = (s.panels & p) != 0;
      if (ImGui::MenuItem(panel_title(p), nullptr, &on)) s.panels = on ? (s.panels | p) : (s.panels & ~unsigned(p));
    }
    ImGui::EndMenu();
  }
  if (s.doc && ImGui::BeginMenu("Playback")) {
    Document& d = *s.doc;
    if (ImGui::MenuItem(d.playback.playing() ? "Pause" : "Play", "Space")) d.playback.toggle();
    if (ImGui::MenuItem("One event forward", "→")) d.playback.step(*d.replay, +1);
    if (ImGui::MenuItem("One event back", "←")) d.playback.step(*d.replay, -1);
    if (ImGui::MenuItem("Real time", "L", d.playback.order() == Order::Real)) d.playback.set_order(*d.replay, Order::Real);
    if (ImGui::MenuItem("Logical order", "L", d.playback.order() == Order::Logical))
      d.playback.set_order(*d.replay, Order::Logical);
    bool loop = d.playback.loop();
    if (ImGui::MenuItem("Loop", nullptr, &loop)) d.playback.set_loop(loop);
    if (ImGui::MenuItem("Fit the timeline", "F")) s.timeline.view_set[0] = s.timeline.view_set[1] = false;
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("Help")) {
    if (ImGui::MenuItem("Controls")) show_help_ = true;
    ImGui::EndMenu();
  }
  if (s.doc) {
    ImGui::SameLine(0, 24);
    ImGui::TextDisabled("%s", s.doc->title.c_str());
    if (!s.doc->warnings.empty()) {
      ImGui::SameLine();
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(theme::kWarning), "· %zu validator finding%s", s.doc->warnings.size(),
                         s.doc->warnings.size() == 1 ? "" : "s");
      if (ImGui::IsItemHovered()) {
        ImGui::BeginTooltip();
        for (const auto& w : s.doc->warnings) ImGui::TextUnformatted(w.c_str());
        ImGui::EndTooltip();
      }
    }
  }
  ImGui::EndMainMenuBar();
}

void App::error_banner() {
  UiState& s = state_;
  if (s.error.empty()) return;
  const ImVec2 d = ImGui::GetIO().DisplaySize;
  const float w = std::min(d.x - 40, 900.0f);
  ImGui::SetNextWindowPos(ImVec2((d.x - w) * 0.5f, 40), ImGuiCond_Always);
  ImGui::SetNextWindowSize(ImVec2(w, 0), ImGuiCond_Always);
  ImGui::PushStyleColor(ImGuiCol_WindowBg, IM_COL32(90, 30, 30, 245));
  ImGui::Begin("Could not open the trace", nullptr,
               ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse | ImGuiWindowFlags_NoSavedSettings);
  ImGui::TextWrapped("%s", s.error.c_str());
  if (ImGui::Button("Dismiss")) s.error.clear();
  ImGui::End();
  ImGui::PopStyleColor();
}

void App::help_window() {
  if (!show_help_) return;
  ImGui::SetNextWindowPos(ImVec2(ImGui::GetIO().DisplaySize.x * 0.5f, 80), ImGuiCond_Appearing, ImVec2(0.5f, 0));
  ImGui::PushStyleColor(ImGuiCol_WindowBg, theme::kPanelRaised);  // floats over the panels
  ImGui::Begin("Controls", &show_help_, ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoSavedSettings);
  static const char* const rows[][2] = {
      {"Space", "play / pause"},
      {"← →", "one event back / forward"},
      {"Home End", "to the start / the end"},
      {"L", "real time ↔ logical order"},
      {"+ −", "faster / slower"},
      {"F", "fit the timeline"},
      {"wheel", "zoom the timeline at the cursor (Shift: scroll lanes)"},
      {"drag", "pan the timeline"},
      {"right-drag, Shift-drag", "select a range (Esc clears)"},
      {"click an event / an SM", "follow that CTA"},
      {"double-click an event", "move the playhead there"},
      {"click the ruler", "scrub"},
  };
  if (ImGui::BeginTable("##keys", 2, ImGuiTableFlags_SizingFixedFit)) {
    for (const auto& r : rows) {
      ImGui::TableNextRow();
      ImGui::TableSetColumnIndex(0);
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(theme::kAccent), "%s", r[0]);
      ImGui::TableSetColumnIndex(1);
      ImGui::TextUnformatted(r[1]);
    }
    ImGui::EndTable();
  }
  ImGui::End();
  ImGui::PopStyleColor();
}

void App::process_requests() {
  auto requests = std::move(state_.requests);
  state_.requests.clear();
  for (const auto& rq : requests) {
    std::string error;
    if (!open(rq.path, rq.as_compare, error)) state_.error = error;
  }
}

}  // namespace fs::viz
