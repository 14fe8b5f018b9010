// The UI without a window: an ImGui context with a fake display and no backend runs the
// whole app, so the panels' logic (layout, zoom at the cursor, pan, range selection, keys,
// error messages) is tested where there is no GL at all.
#include <catch2/catch.hpp>

#include <imgui.h>
#include <imgui_internal.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "tests/trace_fixtures.hpp"
#include "visualizer/model/decode.hpp"
#include "visualizer/model/document.hpp"
#include "visualizer/model/synthetic.hpp"
#include "visualizer/tests/dqacc_trace.hpp"
#include "visualizer/tests/tc_bwd_trace.hpp"
#include "visualizer/ui/app.hpp"
#include "visualizer/ui/theme.hpp"
#include "visualizer/ui/widgets.hpp"

using namespace fs::viz;
namespace tr = fs::trace;

namespace {

constexpr int kKeyLeft = 263, kKeyRight = 262, kKeyHome = 268, kKeyEnd = 269, kKeyEscape = 256;

// One ImGui context per test, as the app would have it, minus the backends.
struct Headless {
  Headless() {
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;
    io.DisplaySize = ImVec2(1600, 1000);
    io.DeltaTime = 1.0f / 60;
    io.KeyMap[ImGuiKey_LeftArrow] = kKeyLeft;
    io.KeyMap[ImGuiKey_RightArrow] = kKeyRight;
    io.KeyMap[ImGuiKey_Home] = kKeyHome;
    io.KeyMap[ImGuiKey_End] = kKeyEnd;
    io.KeyMap[ImGuiKey_Escape] = kKeyEscape;
    theme::load_fonts();
    theme::apply_style();
    unsigned char* px;
    int w, h;
    io.Fonts->GetTexDataAsRGBA32(&px, &w, &h);
  }
  ~Headless() { ImGui::DestroyContext(); }

  // Runs one frame with the mouse at `mouse` (and the given input), returns vertices drawn.
  int frame(App& app, ImVec2 mouse = ImVec2(-1e6f, -1e6f), float dt = 0) {
    ImGuiIO& io = ImGui::GetIO();
    io.MousePos = mouse;
    ImGui::NewFrame();
    app.frame(dt);
    ImGui::Render();
    io.MouseWheel = 0;
    for (bool& k : io.KeysDown) k = false;
    return ImGui::GetDrawData()->TotalVtxCount;
  }
};

SyntheticSpec small(SyntheticStep step) {
  SyntheticSpec s;
  s.step = step;
  s.N = 256;
  s.d = 32;
  s.Br = s.Bc = 32;
  s.H = 2;
  s.sms = 16;
  return s;
}

App& with_flash(App& app) {
  app.set_document(make_document(make_synthetic_trace(small(SyntheticStep::Flash)), "synthetic:flash"), false);
  return app;
}

PanelRect rect_of(const App& app, Panel p) {
  for (const auto& r : app.layout(ImGui::GetIO().DisplaySize, ImGui::GetFrameHeight()))
    if (r.panel == p) return r;
  FAIL("panel not laid out");
  return {};
}

}  // namespace

TEST_CASE("every panel draws with no backend, in both orders, with one trace or two", "[viz][ui]") {
  Headless h;
  App app;
  std::string bad;
  app.state().panels = parse_panels("all", bad);
  REQUIRE(h.frame(app) > 0);  // no trace: every panel says so
  with_flash(app);
  for (Order o : {Order::Real, Order::Logical})
    for (double f : {0.0, 0.3, 0.7, 1.0}) {
      Document& d = *app.state().doc;
      d.playback.set_order(*d.replay, o);
      d.playback.seek_fraction(*d.replay, f);
      d.sync();
      REQUIRE(h.frame(app) > 1000);
    }
  app.set_document(make_document(make_synthetic_trace(small(SyntheticStep::Naive)), "synthetic:naive"), true);
  REQUIRE((app.state().panels & kPanelCompare));
  REQUIRE(h.frame(app) > 1000);
}

// A 16-bit backward that adds dQ up in float32 dQacc (trace tensor 17), and step 08's shipped
// tensor-core traces, forward and backward (their SRAM drawn as the kernel's stages), through
// every panel.
TEST_CASE("every panel draws a dQacc backward and the step 08 traces", "[viz][ui][dqacc][pipeline]") {
  Headless h;
  App app;
  std::string bad;
  app.state().panels = parse_panels("all", bad);
  std::vector<std::unique_ptr<Document>> docs;
  docs.push_back(make_document(test::dqacc_trace(), "test:dqacc"));
  for (const char* v : {"fa2.fwd", "r1_mma.fwd", "r3_pipeline.fwd", "fa2.bwd", "deterministic.bwd", "key_warps.bwd"}) {
    std::string error;
    auto doc = load_document(std::string(FS_SOURCE_DIR) + "/docs/traces/08_tensor_cores_" + v + ".json", error);
    INFO(error);
    REQUIRE(doc);
    docs.push_back(std::move(doc));
  }
  // The backward at d = 256: a key tile's CTAs in pairs, each with half of d's columns.
  test::TcBwdSpec split;
  split.d = 256;
  split.split = 2;
  docs.push_back(make_document(test::tc_dkdv_trace(split), "test:tc_dkdv_d256"));
  // tc_dkdv_smem_kernel at backward_configs.cuh's tiles (d = 64: fa2; d = 128: deterministic),
  // and with a variant whose warp layout the trace does not say.
  for (int d : {64, 128}) {
    test::TcBwdSpec smem;
    smem.d = d;
    smem.keys = 128;
    smem.queries = d == 64 ? 128 : 64;
    smem.warps = 8;
    smem.atomic = d == 64;
    smem.variant = d == 64 ? "fa2" : "deterministic";
    docs.push_back(make_document(test::tc_dkdv_trace(smem), "test:tc_dkdv_smem_d" + std::to_string(d)));
    smem.variant = "tomorrow";
    docs.push_back(make_document(test::tc_dkdv_trace(smem), "test:tc_dkdv_smem_unknown_d" + std::to_string(d)));
  }
  for (auto& doc : docs) {
    INFO(doc->path);
    app.set_document(std::move(doc), false);
    for (Order o : {Order::Real, Order::Logical})
      for (double f : {0.0, 0.2, 0.5, 0.8, 1.0}) {
        Document& d = *app.state().doc;
        d.playback.set_order(*d.replay, o);
        d.playback.seek_fraction(*d.replay, f);
        d.sync();
        REQUIRE(h.frame(app) > 1000);
      }
  }
}

TEST_CASE("the layout tiles the display without overlaps, whatever is shown", "[viz][ui]") {
  Headless h;
  App app;
  for (const char* set : {"default", "all", "memory,timeline", "io", "compare,scores,counters,timeline", "timeline",
                          "schedule,timeline", "schedule", "memory,schedule"}) {
    std::string bad;
    app.state().panels = parse_panels(set, bad);
    REQUIRE(bad.empty());
    const ImVec2 d(1600, 1000);
    const auto rects = app.layout(d, 20);
    double area = 0;
    for (std::size_t i = 0; i < rects.size(); ++i) {
      const auto& a = rects[i];
      INFO(set << ": " << panel_key(a.panel));
      REQUIRE(a.pos.x >= 0);
      REQUIRE(a.pos.y >= 20);
      REQUIRE(a.pos.x + a.size.x <= d.x + 0.5f);
      REQUIRE(a.pos.y + a.size.y <= d.y + 0.5f);
      area += double(a.size.x) * a.size.y;
      for (std::size_t j = i + 1; j < rects.size(); ++j) {
        const auto& b = rects[j];
        const bool overlap = a.pos.x < b.pos.x + b.size.x - 0.5f && b.pos.x < a.pos.x + a.size.x - 0.5f &&
                             a.pos.y < b.pos.y + b.size.y - 0.5f && b.pos.y < a.pos.y + a.size.y - 0.5f;
        REQUIRE(!overlap);
      }
    }
    REQUIRE(area == Approx(1600.0 * 980.0).epsilon(0.01));
  }
  std::string bad;
  parse_panels("memory,frobnicate", bad);
  REQUIRE(bad == "frobnicate");
}

// The panels write P̃ (P̃V, P̃ tiles) with the combining tilde U+0303, which ImGui draws where the
// font puts it, at lowercase height: on a capital P it fell on the letter's top stroke and P̃V read
// as PV. The fonts raise it above the capitals.
TEST_CASE("the tilde of P̃ is drawn above the P, not on it", "[viz][ui][fonts]") {
  Headless h;
  const auto& f = theme::fonts();
  if (!f.dejavu) {
    WARN("DejaVu fonts not installed: ImGui's default font, no tilde");
    return;
  }
  for (ImFont* font : {f.regular, f.small, f.mono, f.title}) {
    const ImFontGlyph* p = font->FindGlyphNoFallback(ImWchar('P'));
    const ImFontGlyph* tilde = font->FindGlyphNoFallback(ImWchar(0x0303));
    REQUIRE(p);
    REQUIRE(tilde);  // loaded: in the glyph ranges and in the font
    REQUIRE(tilde->Visible);
    REQUIRE(tilde->AdvanceX == 0);  // a mark over the letter before it
    REQUIRE(tilde->Y1 <= p->Y0);    // above the capital
    REQUIRE(tilde->Y0 >= -0.25f * font->FontSize);  // and near it
  }
}

// Step 09's lanes: the schedule shows the followed CTA's producer over its consumers; hovering a
// bar names its event, a click follows that lane; a trace in lanes opens with the schedule shown.
TEST_CASE("the schedule draws a CTA's lanes, and a click on a bar follows its lane", "[viz][ui][lanes]") {
  Headless h;
  App app;
  SyntheticSpec spec = small(SyntheticStep::Hopper);
  spec.N = 512;
  spec.d = 64;
  app.set_document(make_document(make_synthetic_trace(spec), "synthetic:hopper"), false);
  REQUIRE((app.state().panels & kPanelSchedule));
  Document& d = *app.state().doc;
  for (Order o : {Order::Real, Order::Logical})
    for (double f : {0.0, 0.4, 1.0}) {
      d.playback.set_order(*d.replay, o);
      d.playback.seek_fraction(*d.replay, f);
      d.sync();
      REQUIRE(h.frame(app) > 1000);
    }
  // Consumer 0's first S: where its bar is drawn, on the second of the three rows.
  const Replay& r = *d.replay;
  const auto& lanes = r.lanes_of(d.selected_track);
  REQUIRE(lanes.size() == 3);
  int s0 = -1;
  for (int e : r.track_events(lanes[1]))
    if (r.trace().events[std::size_t(e)].kind == tr::Kind::ComputeS) {
      s0 = e;
      break;
    }
  REQUIRE(s0 >= 0);
  h.frame(app);  // lays the panel out with the view fitted to the CTA
  const PanelRect pr = rect_of(app, kPanelSchedule);
  const auto& ev = r.trace().events[std::size_t(s0)];
  const TimeView& v = app.state().schedule.view;
  // The panel's geometry (schedule_panel.cpp): a header line, the ruler, then rows of at most 30 px
  // from the 96 px gutter; hit the bar's middle, halfway down the second row.
  const float left = pr.pos.x + ImGui::GetStyle().WindowPadding.x + 96;
  const float width = pr.size.x - 2 * ImGui::GetStyle().WindowPadding.x - 96 - 8;
  const float x = float(v.to_px(ev.ts_ns + 0.5 * ev.dur_ns, left, width));
  bool found = false;
  for (float y = pr.pos.y + 40; y < pr.pos.y + pr.size.y && !found; y += 2) {
    h.frame(app, ImVec2(x, y));
    found = app.state().hovered_event == s0;
  }
  REQUIRE(found);
  ImGuiIO& io = ImGui::GetIO();
  const ImVec2 at = io.MousePos;
  io.MouseDown[0] = true;
  h.frame(app, at);
  io.MouseDown[0] = false;
  h.frame(app, at);
  REQUIRE(d.selected_track == lanes[1]);
  // The memory panel and the rest draw the followed lane's CTA.
  std::string bad;
  app.state().panels = parse_panels("all", bad);
  REQUIRE(h.frame(app) > 1000);
}

TEST_CASE("the wheel zooms the timeline at the cursor, dragging pans it", "[viz][ui][timeline]") {
  Headless h;
  App app;
  with_flash(app);
  h.frame(app);
  const PanelRect tl = rect_of(app, kPanelTimeline);
  const ImVec2 mouse(tl.pos.x + tl.size.x * 0.6f, tl.pos.y + tl.size.y * 0.7f);
  h.frame(app, mouse);
  TimeView& v = app.state().timeline.view[0];
  const TimeView before = v;
  // The time under the mouse, before and after: the lanes start after the 136 px gutter.
  const double left = tl.pos.x + 10 + 136, width = tl.size.x - 20 - 136 - 14;
  const double anchor = before.from_px(mouse.x, left, width);
  ImGui::GetIO().MouseWheel = 1;
  h.frame(app, mouse);
  REQUIRE(v.span() == Approx(before.span() * 0.8).epsilon(1e-6));
  REQUIRE(v.from_px(mouse.x, left, width) == Approx(anchor).epsilon(1e-3));

  // Drag 100 px to the left: the view moves right by 100 px worth of time.
  const TimeView zoomed = v;
  ImGuiIO& io = ImGui::GetIO();
  io.MouseDown[0] = true;
  h.frame(app, mouse);
  for (int i = 1; i <= 5; ++i) h.frame(app, ImVec2(mouse.x - 20.0f * i, mouse.y));
  io.MouseDown[0] = false;
  h.frame(app, ImVec2(mouse.x - 100, mouse.y));
  REQUIRE(v.x0 - zoomed.x0 == Approx(100.0 / width * zoomed.span()).epsilon(0.05));
  REQUIRE(v.span() == Approx(zoomed.span()));
}

TEST_CASE("right-drag selects a range of the timeline, Escape clears it", "[viz][ui][timeline]") {
  Headless h;
  App app;
  with_flash(app);
  h.frame(app);
  const PanelRect tl = rect_of(app, kPanelTimeline);
  const ImVec2 a(tl.pos.x + 400, tl.pos.y + tl.size.y * 0.7f);
  ImGuiIO& io = ImGui::GetIO();
  h.frame(app, a);
  io.MouseDown[1] = true;
  h.frame(app, a);
  for (int i = 1; i <= 4; ++i) h.frame(app, ImVec2(a.x + 50.0f * i, a.y));
  io.MouseDown[1] = false;
  h.frame(app, ImVec2(a.x + 200, a.y));
  const auto& ts = app.state().timeline;
  REQUIRE(ts.range_active);
  REQUIRE(ts.range1 > ts.range0);
  io.KeysDown[kKeyEscape] = true;
  h.frame(app, ImVec2(a.x + 200, a.y));
  REQUIRE(!app.state().timeline.range_active);
}

TEST_CASE("keys: Space plays, arrows step one event, L switches order", "[viz][ui][keys]") {
  Headless h;
  App app;
  with_flash(app);
  Document& d = *app.state().doc;
  ImGuiIO& io = ImGui::GetIO();
  h.frame(app);
  io.AddInputCharacter('l');
  h.frame(app);
  REQUIRE(d.playback.order() == Order::Logical);
  d.playback.rewind(*d.replay);
  io.KeysDown[kKeyRight] = true;
  h.frame(app);
  io.KeysDown[kKeyRight] = true;
  // A key held from one frame to the next is one press, so let it go in between.
  h.frame(app);
  h.frame(app);
  io.KeysDown[kKeyRight] = true;
  h.frame(app);
  REQUIRE(d.replay->done_count(d.cursor()) == 2);
  io.KeysDown[kKeyLeft] = true;
  h.frame(app);
  REQUIRE(d.replay->done_count(d.cursor()) == 1);
  io.AddInputCharacter(' ');
  h.frame(app);
  REQUIRE(d.playback.playing());
  const double x = d.cursor().x;
  h.frame(app, ImVec2(-1e6f, -1e6f), 0.5f);
  REQUIRE(d.cursor().x > x);
  io.AddInputCharacter('+');
  h.frame(app);
  REQUIRE(d.playback.speed() == 2.0);
  io.KeysDown[kKeyEnd] = true;
  h.frame(app);
  REQUIRE(d.playback.fraction(*d.replay) == 1.0);
}

TEST_CASE("a trace that cannot be opened is a message in the window, not a crash", "[viz][ui][errors]") {
  Headless h;
  App app;
  with_flash(app);
  app.state().requests.push_back({"/no/such/trace.json", false});
  h.frame(app);
  REQUIRE(!app.state().error.empty());
  REQUIRE(app.state().error.find("trace.json") != std::string::npos);
  h.frame(app);
  ImGuiWindow* w = ImGui::FindWindowByName("Could not open the trace");
  REQUIRE(w);
  REQUIRE(w->Active);
  REQUIRE(app.state().doc);  // what was open stays open
  std::string error;
  REQUIRE(!app.open("synthetic:nonsense", false, error));
  REQUIRE(error.find("unknown synthetic") != std::string::npos);
}

TEST_CASE("compare mode keeps the second trace at the first one's progress", "[viz][ui][compare]") {
  Headless h;
  App app;
  with_flash(app);
  app.set_document(make_document(make_synthetic_trace(small(SyntheticStep::Naive)), "synthetic:naive"), true);
  Document& a = *app.state().doc;
  Document& b = *app.state().other;
  for (double f : {0.2, 0.5, 0.9}) {
    a.playback.seek_fraction(*a.replay, f);
    h.frame(app);
    REQUIRE(progress(*b.replay, b.cursor(), SyncBy::Work) ==
            Approx(progress(*a.replay, a.cursor(), SyncBy::Work)).margin(0.08));
  }
  app.close_compare();
  REQUIRE(!app.state().other);
  REQUIRE(!(app.state().panels & kPanelCompare));
  REQUIRE((app.state().panels & kPanelMemory));
}

// Step 07 (SMYRF): a clustered trace's tiles are slots of its rounds' sorted orders.
TEST_CASE("every panel draws a clustered trace, in sorted and original order, following or fixed", "[viz][ui][smyrf]") {
  Headless h;
  App app;
  std::string bad;
  app.state().panels = parse_panels("all", bad);
  SyntheticSpec spec = small(SyntheticStep::Smyrf);
  spec.hashes = 3;
  // The validator's findings: orders too short (the rounds are placed nowhere), events of a
  // round the clustering lacks (those events are).
  tr::Trace short_orders = make_synthetic_trace(spec), stray_rounds = make_synthetic_trace(spec);
  short_orders.meta.clusters.k_order.resize(10);
  for (auto& e : stray_rounds.events)
    if (e.round == 1) e.round = 9;
  std::vector<std::unique_ptr<Document>> docs;
  docs.push_back(make_document(make_synthetic_trace(spec), "synthetic:smyrf"));
  docs.push_back(make_document(std::move(short_orders), "test:orders too short"));
  docs.push_back(make_document(std::move(stray_rounds), "test:events of round 9 of 3"));
  for (auto& doc : docs) {
    INFO(doc->path);
    app.set_document(std::move(doc), false);
    REQUIRE(app.state().scores.round == -1);
    for (int round : {-1, 0, 2, 9})
      for (bool sorted : {true, false})
        for (Order o : {Order::Real, Order::Logical})
          for (double f : {0.0, 0.3, 0.6, 1.0}) {
            Document& d = *app.state().doc;
            app.state().scores = {round, sorted};
            d.playback.set_order(*d.replay, o);
            d.playback.seek_fraction(*d.replay, f);
            d.sync();
            REQUIRE(h.frame(app) > 1000);
          }
  }
  // Side by side with step 04: S holds every round's scores.
  app.set_document(make_document(make_synthetic_trace(spec), "synthetic:smyrf"), false);
  app.set_document(make_document(make_synthetic_trace(small(SyntheticStep::Flash)), "synthetic:flash"), true);
  for (double f : {0.2, 0.9}) {
    app.state().doc->playback.seek_fraction(*app.state().doc->replay, f);
    REQUIRE(h.frame(app) > 1000);
  }
  app.close_compare();
  // A round past the trace's (one chosen for another trace) goes back to following.
  REQUIRE(app.open("synthetic:smyrf", false, bad));
  app.state().scores.round = 2;
  h.frame(app);
  REQUIRE(app.state().scores.round == 2);
  REQUIRE(app.state().doc->replay->rounds() == 8);
  app.state().scores.round = 8;
  h.frame(app);
  REQUIRE(app.state().scores.round == -1);
}

TEST_CASE("a gathered tile is outlined row by row where its rows are", "[viz][ui][smyrf]") {
  TensorGrid g;
  g.rows = 8;
  g.cols = 4;
  const Rect area{ImVec2(0, 0), ImVec2(40, 80)};  // 10 px a row
  const std::int32_t order[] = {5, 3, 4, 0, 7, 1, 2, 6};
  // Slots 0..3 are rows 5, 3, 4, 0: runs [0, 1) and [3, 6).
  const auto rects = element_rects(g, area, SlotOrders{order, nullptr}, 0, 4, 0, 4);
  REQUIRE(rects.size() == 2);
  REQUIRE(rects[0].min.y == 0);
  REQUIRE(rects[0].max.y == 10);
  REQUIRE(rects[1].min.y == 30);
  REQUIRE(rects[1].max.y == 60);
  REQUIRE(rects[1].w() == 40);
  const Rect h = hull(rects);
  REQUIRE(h.min.y == 0);
  REQUIRE(h.max.y == 60);
  // Rows that are rows: the block itself.
  const auto block = element_rects(g, area, SlotOrders{}, 0, 4, 0, 4);
  REQUIRE(block.size() == 1);
  REQUIRE(block[0].max.y == 40);
  // S-like: runs of queries × runs of keys.
  g.cols = 8;
  const auto scores = element_rects(g, area, SlotOrders{order, order}, 0, 4, 0, 4);
  REQUIRE(scores.size() == 4);
}

// Decoding traces (step 10): the hand-built fixture (tests/trace_fixtures.hpp) and synthetic ones,
// paged, contiguous and with an append, through every panel, following a split CTA, the combine,
// the append; in compare mode; the timeline's rows by sequence and by SM.
TEST_CASE("every panel draws a decoding trace", "[viz][ui][decode]") {
  Headless h;
  App app;
  std::string bad;
  app.state().panels = parse_panels("all", bad);
  SyntheticSpec append = decode_spec(true);
  append.append = true;
  append.new_tokens = 2;
  std::vector<std::unique_ptr<Document>> docs;
  docs.push_back(make_document(fs::test::decode_trace(), "test:decode"));
  docs.push_back(make_document(make_synthetic_trace(decode_spec(true)), "synthetic:decode"));
  docs.push_back(make_document(make_synthetic_trace(decode_spec(false)), "synthetic:decode-contiguous"));
  docs.push_back(make_document(make_synthetic_trace(append), "synthetic:decode-append"));
  // One split (no combine: the split kernel writes O and LSE), and 32 query heads over one K/V head
  // (two row blocks of 16, each with its splits), sequences of 700, 130 and no keys.
  SyntheticSpec one = decode_spec(true), wide = decode_spec(false);
  one.splits = 1;
  wide.B = 3;
  wide.H = 32;
  wide.heads_kv = 1;
  wide.keys = {700, 130, 0};
  docs.push_back(make_document(make_synthetic_trace(one), "synthetic:decode-one-split"));
  docs.push_back(make_document(make_synthetic_trace(wide), "synthetic:decode-row-blocks"));
  for (auto& doc : docs) {
    INFO(doc->path);
    app.set_document(std::move(doc), false);
    Document& d = *app.state().doc;
    REQUIRE((app.state().panels & kPanelSchedule));
    const DecodeSchedule& dec = d.replay->decode();
    REQUIRE(dec.on());
    for (const auto& g : dec.groups())
      for (int track : {g.tracks.front(), g.tracks.back()}) {
        d.select(track);
        for (Order o : {Order::Real, Order::Logical})
          for (double f : {0.0, 0.35, 1.0}) {
            d.playback.set_order(*d.replay, o);
            d.playback.seek_fraction(*d.replay, f);
            d.sync();
            d.selected_track = track;
            REQUIRE(h.frame(app) > 1000);
          }
      }
    app.state().timeline.by_sm = true;
    REQUIRE(h.frame(app) > 1000);
    REQUIRE(app.state().timeline.sm_expanded.size() == d.replay->sm_groups().size());
    app.state().timeline.by_sm = false;
    REQUIRE(h.frame(app) > 1000);
    REQUIRE(app.state().timeline.sm_expanded.size() == dec.groups().size());
  }
  // Compare: a decoding trace beside step 04's, and beside itself.
  app.set_document(make_document(make_synthetic_trace(small(SyntheticStep::Flash)), "synthetic:flash"), true);
  REQUIRE(h.frame(app) > 1000);
  app.set_document(make_document(make_synthetic_trace(decode_spec(true)), "synthetic:decode"), true);
  REQUIRE(h.frame(app) > 1000);
  std::string error;
  REQUIRE(app.open("synthetic:decode", false, error));
  REQUIRE(app.open("synthetic:decode-contiguous", false, error));
  REQUIRE(h.frame(app) > 1000);
}

// Hovering the cache's pages highlights the sequence they belong to; a click follows its first split.
TEST_CASE("hovering a page of the cache names its sequence, a click follows it", "[viz][ui][decode]") {
  Headless h;
  App app;
  std::string bad;
  app.state().panels = parse_panels("memory,timeline", bad);
  app.set_document(make_document(make_synthetic_trace(decode_spec(true)), "synthetic:decode"), false);
  app.state().panels = parse_panels("memory,timeline", bad);
  Document& d = *app.state().doc;
  d.playback.seek_fraction(*d.replay, 0.5);
  d.sync();
  h.frame(app);
  const PanelRect mem = rect_of(app, kPanelMemory);
  // Sweep the panel: every sequence's pages are somewhere under the mouse, and nothing else is.
  std::vector<int> seen(2, 0);
  ImVec2 on_seq1(-1, -1);
  for (float y = mem.pos.y + 40; y < mem.pos.y + mem.size.y; y += 6)
    for (float x = mem.pos.x + 10; x < mem.pos.x + mem.size.x * 0.6f; x += 9) {
      h.frame(app, ImVec2(x, y));
      const int s = d.hovered_sequence;
      REQUIRE(s >= -1);
      REQUIRE(s < 2);
      if (s >= 0) ++seen[std::size_t(s)];
      if (s == 1 && on_seq1.x < 0) on_seq1 = ImVec2(x, y);
    }
  REQUIRE(seen[0] > 0);
  REQUIRE(seen[1] > 0);
  // A click there follows sequence 1's first split (of the followed K/V head, 0).
  ImGuiIO& io = ImGui::GetIO();
  h.frame(app, on_seq1);
  io.MouseDown[0] = true;
  h.frame(app, on_seq1);
  io.MouseDown[0] = false;
  h.frame(app, on_seq1);
  const DecodeCta& c = d.replay->decode().cta(d.selected_track);
  REQUIRE(c.role == DecodeRole::Split);
  REQUIRE(c.b == 1);
  REQUIRE(c.hk == 0);
  REQUIRE(c.split == 0);
  // Away from the picture, nothing is hovered.
  h.frame(app, ImVec2(-1e6f, -1e6f));
  REQUIRE(d.hovered_sequence == -1);
}

// The schedule of a decoding trace: the followed CTA's splits as rows side by side, then the
// combine's CTAs that merge its rows; a click on a split's bar follows that split.
TEST_CASE("the schedule of a decoding trace draws one row's splits and their combine", "[viz][ui][decode]") {
  Headless h;
  App app;
  std::string bad;
  app.set_document(make_document(make_synthetic_trace(decode_spec(true)), "synthetic:decode"), false);
  app.state().panels = parse_panels("schedule", bad);
  Document& d = *app.state().doc;
  const Replay& r = *d.replay;
  const DecodeSchedule& dec = r.decode();
  const DecodeGroup& g = dec.groups().front();
  REQUIRE(g.role == DecodeRole::Split);
  d.select(g.tracks.front());
  const std::vector<int> combine = dec.combine_of(0);
  REQUIRE(!combine.empty());
  h.frame(app);
  const PanelRect pr = rect_of(app, kPanelSchedule);
  const float left = pr.pos.x + ImGui::GetStyle().WindowPadding.x + 96;
  const float width = pr.size.x - 2 * ImGui::GetStyle().WindowPadding.x - 96 - 8;
  const TimeView& v = app.state().schedule.view;
  // Each row's first event is somewhere on its row: split 1's, then the combine's.
  auto hit = [&](int track) {
    const int e = r.track_events(track).front();
    const auto& ev = r.trace().events[std::size_t(e)];
    const float x = float(v.to_px(ev.ts_ns + 0.5 * ev.dur_ns, left, width));
    for (float y = pr.pos.y + 30; y < pr.pos.y + pr.size.y; y += 2) {
      h.frame(app, ImVec2(x, y));
      if (app.state().hovered_event == e) return ImVec2(x, y);
    }
    return ImVec2(-1, -1);
  };
  const ImVec2 at_combine = hit(combine.front());
  REQUIRE(at_combine.x >= 0);
  const ImVec2 at_split1 = hit(g.tracks[1]);
  REQUIRE(at_split1.x >= 0);
  REQUIRE(at_split1.y < at_combine.y);  // the combine below the splits
  ImGuiIO& io = ImGui::GetIO();
  io.MouseDown[0] = true;
  h.frame(app, at_split1);
  io.MouseDown[0] = false;
  h.frame(app, at_split1);
  REQUIRE(d.selected_track == g.tracks[1]);
}
