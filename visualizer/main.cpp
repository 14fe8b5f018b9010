// flashsteps_viz: replays traces of the step programs — tiles moving between HBM and SRAM,
// CTAs on SMs, bytes against the IO model. Run with --help for the options; docs/visualizer.md
// has the panels and the controls.
//
//   flashsteps_viz                          the tour's trace from docs/traces/ (or a synthetic one)
//   flashsteps_viz A.json --compare B.json  two traces side by side, in step
//   flashsteps_viz --screenshot out.png --at frac:0.4 --panels memory,timeline
//   flashsteps_viz --frames dir/ --frame-count 120
//   flashsteps_viz --bench                  load and frame time for 1,000,000 events
//
// With no display it runs itself under xvfb-run and renders a storyboard of PNGs.
#include <CLI/CLI.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "common/cli_numbers.hpp"
#include "common/trace/trace_io.hpp"
#include "visualizer/model/labels.hpp"
#include "visualizer/render.hpp"
#include "visualizer/ui/app.hpp"

namespace {

using namespace fs::viz;
namespace stdfs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Options {
  std::vector<std::string> paths;
  std::string compare;
  std::string synthetic;
  int N = 1024, d = 64, heads = 8, tile = 64, sms = 132;
  std::string screenshot, frames, storyboard;
  int frame_count = 60;
  std::string at = "frac:0.4";
  std::string order = "real";
  std::string panels;
  unsigned panel_flags = 0;  // --panels, parsed
  std::string size = "1600x1000";
  int cta = -1, kernel = 0;
  std::string scores = "sorted";  // a clustered trace's score matrix: sorted or original order
  int round = -1;                 // its round (-1: follow the CTA)
  bool bench = false;
  bool bench_no_file = false;
  std::int64_t bench_events = 1000000;
  int bench_frames = 240;
  std::vector<std::string> folders;
  int w = 1600, h = 1000;

  bool headless() const { return !screenshot.empty() || !frames.empty() || !storyboard.empty() || bench; }
};

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

std::string self_path(const char* argv0) {
  std::error_code ec;
  const auto p = stdfs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(argv0) : p.string();
}

std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (!path) return {};
  std::string all = path;
  std::size_t start = 0;
  while (start <= all.size()) {
    const std::size_t end = all.find(':', start);
    const std::string dir = all.substr(start, end == std::string::npos ? std::string::npos : end - start);
    const stdfs::path cand = stdfs::path(dir.empty() ? "." : dir) / name;
    if (::access(cand.c_str(), X_OK) == 0) return cand.string();
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return {};
}

// The repository's docs/traces: next to the working directory, or next to the build.
std::vector<std::string> default_folders(const std::string& exe) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const stdfs::path& root : {stdfs::current_path(ec), stdfs::path(exe).parent_path() / ".." / "..",
                                  stdfs::path(FS_SOURCE_DIR)}) {
    const auto dir = (root / "docs" / "traces").lexically_normal();
    if (stdfs::is_directory(dir, ec)) {
      out.push_back(dir.string());
      break;
    }
  }
  return out;
}

void seek(Document& doc, Cursor c) {
  doc.playback.set_playing(false);
  doc.playback.seek(*doc.replay, c);
  doc.sync();
}

// Renders a few frames (ImGui settles its layout over two) and keeps the last one.
bool capture(Renderer& ren, App& app, const std::string& path, std::string& error) {
  for (int i = 0; i < 3; ++i) ren.frame(app, 0, true);
  return ren.save_png(path, error);
}

int fail(const std::string& what, int code = 2) {
  std::fprintf(stderr, "flashsteps_viz: %s\n", what.c_str());
  return code;
}

// A handful of frames that tell the story of the open trace: start, middle, end, the
// comparison with step 01, and the IO calculator.
int storyboard(Renderer& ren, App& app, const std::string& dir) {
  std::error_code ec;
  stdfs::create_directories(dir, ec);
  if (ec) return fail(dir + ": cannot create the folder (" + ec.message() + ")");
  UiState& s = app.state();
  std::vector<std::string> written;
  std::string error;
  auto shot = [&](const std::string& name) {
    const std::string path = (stdfs::path(dir) / name).string();
    if (!capture(ren, app, path, error)) return false;
    written.push_back(name);
    return true;
  };
  const unsigned panels = s.panels & ~unsigned(kPanelCompare | kPanelIo | kPanelTraces);
  s.panels = panels ? panels : kPanelsDefault;
  const std::pair<const char*, double> moments[] = {{"1_start.png", 0.06}, {"2_middle.png", 0.45}, {"3_end.png", 1.0}};
  for (const auto& [name, f] : moments) {
    Playback p = s.doc->playback;
    p.seek_fraction(*s.doc->replay, f);
    seek(*s.doc, p.cursor());
    if (!shot(name)) return fail(error, 1);
  }
  // Step 01 against step 04: a recorded pair if the browser has one, else synthetic.
  if (!s.other) {
    std::string first, second;
    for (const auto& e : s.catalog) {
      const bool fwd = e.name.find("fwd") != std::string::npos;
      if (first.empty() && fwd && e.name.rfind("01", 0) == 0) first = e.path;
      if (second.empty() && fwd && e.name.rfind("04", 0) == 0) second = e.path;
    }
    if (first.empty() || second.empty()) first = "synthetic:naive", second = "synthetic:flash";
    std::string err;
    if (!app.open(first, false, err) || !app.open(second, true, err)) return fail(err);
  }
  s.panels = kPanelCompare | kPanelScores | kPanelCounters | kPanelTimeline;
  seek(*s.doc, cursor_at_progress(*s.doc->replay, 0.5, s.sync_by, s.doc->playback.order()));
  if (!shot("4_compare.png")) return fail(error, 1);
  s.panels = kPanelIo | kPanelTraces | kPanelCounters;
  if (!shot("5_io_calculator.png")) return fail(error, 1);
  std::printf("storyboard: %zu frames in %s/:", written.size(), dir.c_str());
  for (const auto& w : written) std::printf(" %s", w.c_str());
  std::printf("\n");
  return 0;
}

int bench(const Options& o) {
  const SyntheticSpec spec = spec_for_event_count(o.bench_events);
  auto t0 = Clock::now();
  fs::trace::Trace trace = make_synthetic_trace(spec);
  const double gen_ms = ms_since(t0);
  const std::size_t events = trace.events.size();
  // The load a person waits for: fa_trace reads the file, the model indexes it.
  double write_ms = 0, read_ms = 0;
  std::uintmax_t file_bytes = 0;
  if (!o.bench_no_file) {
    const std::string path =
        (stdfs::temp_directory_path() / ("flashsteps_bench_" + std::to_string(::getpid()) + ".json")).string();
    t0 = Clock::now();
    fs::trace::write_trace(trace, path);
    write_ms = ms_since(t0);
    file_bytes = stdfs::file_size(path);
    trace = {};
    t0 = Clock::now();
    trace = fs::trace::read_trace(path);
    read_ms = ms_since(t0);
    std::error_code ec;
    stdfs::remove(path, ec);
  }
  t0 = Clock::now();
  auto doc = make_document(std::move(trace), "synthetic:bench");
  const double index_ms = ms_since(t0);

  Renderer ren;
  std::string error;
  if (!ren.init(o.w, o.h, true, false, error)) return fail(error, 1);
  App app;
  app.set_document(std::move(doc), false);
  UiState& s = app.state();
  if (o.panel_flags) s.panels = o.panel_flags;
  // A session in three parts: the whole run in view, then zoomed in 20×, then 500× (the
  // lanes full of individual events), the playhead sweeping the run in each.
  std::vector<double> ms;
  const int n = std::max(30, o.bench_frames);
  for (int i = 0; i < n; ++i) {
    Document& d = *s.doc;
    const int part = i * 3 / n;
    const double f = double(i % (n / 3)) / double(n / 3);
    Playback p = d.playback;
    p.seek_fraction(*d.replay, f);
    seek(d, p.cursor());
    if (i > 0 && s.timeline.view_set[0]) {
      const double lo = d.playback.lo(*d.replay), hi = d.playback.hi(*d.replay);
      const double span = (hi - lo) / (part == 0 ? 1.0 : part == 1 ? 20.0 : 500.0);
      s.timeline.view[0].x0 = d.cursor().x - span * 0.5;
      s.timeline.view[0].x1 = d.cursor().x + span * 0.5;
    }
    // On screen (the Xvfb window), and finished: the time includes all of the rendering and
    // the swap, not just the submission.
    const auto t = Clock::now();
    ren.frame(app, 1.0f / 30, false);
    ren.finish();
    ms.push_back(ms_since(t));
  }
  ren.shutdown();
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  const double mean = std::accumulate(ms.begin() + 3, ms.end(), 0.0) / double(ms.size() - 3);
  const double p50 = sorted[sorted.size() / 2], p95 = sorted[sorted.size() * 95 / 100], mx = sorted.back();
  std::printf("bench: synthetic %s, %s events on %zu tracks (N=%d d=%d H=%d, %dx%d tiles), renderer: %s\n",
              spec.step == SyntheticStep::Flash ? "step 04" : "step 01", format_count(double(events)).c_str(),
              s.doc->replay->trace().tracks.size(), spec.N, spec.d, spec.H, spec.Br, spec.Bc, ren.renderer_name().c_str());
  if (o.bench_no_file)
    std::printf("load:  index %.0f ms (the trace was generated in memory in %.0f ms; no file read)\n", index_ms, gen_ms);
  else
    std::printf("load:  %.0f ms = read %.0f ms (fa_trace, a %s file) + index %.0f ms; generated in %.0f ms, written in %.0f ms\n",
                read_ms + index_ms, read_ms, format_bytes(double(file_bytes)).c_str(), index_ms, gen_ms, write_ms);
  std::printf("frame: %dx%d, %zu frames: mean %.1f ms, median %.1f ms, p95 %.1f ms, max %.1f ms — target 33 ms %s\n",
              o.w, o.h, ms.size(), mean, p50, p95, mx, p95 <= 33.0 ? "met (p95)" : "MISSED (p95)");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App cli{"flashsteps_viz: replay how FlashAttention's tiles move between HBM and SRAM"};
  cli.add_option("traces", o.paths, "trace files or folders (default: docs/traces/)");
  cli.add_option("--compare", o.compare, "a second trace, shown side by side in step");
  cli.add_option("--synthetic", o.synthetic, "open a synthetic trace: naive, flash, flash-causal, smyrf, hopper, decode, decode-contiguous or pair (01 vs 04)");
  cli.add_option("--N", o.N, "synthetic: sequence length")->transform(fs::decimal<int>())->check(CLI::Range(1, 1 << 20));
  cli.add_option("--d", o.d, "synthetic: head dimension")->transform(fs::decimal<int>())->check(CLI::Range(1, 1024));
  cli.add_option("--heads", o.heads, "synthetic: B·H")->transform(fs::decimal<int>())->check(CLI::Range(1, 4096));
  cli.add_option("--tile", o.tile, "synthetic: Br = Bc of step 04")->transform(fs::decimal<int>())->check(CLI::Range(1, 1024));
  cli.add_option("--sms", o.sms, "synthetic: SMs")->transform(fs::decimal<int>())->check(CLI::Range(1, 1024));
  cli.add_option("--screenshot", o.screenshot, "render one frame to this PNG and exit");
  cli.add_option("--frames", o.frames, "render an animation into this folder (frame_0000.png, …) and exit");
  cli.add_option("--frame-count", o.frame_count, "frames of --frames")->transform(fs::decimal<int>())->check(CLI::Range(2, 100000));
  cli.add_option("--storyboard", o.storyboard, "render a short storyboard into this folder and exit");
  cli.add_option("--at", o.at, "the moment: seq:N, frac:F (0…1) or t:NS")->capture_default_str();
  cli.add_option("--order", o.order, "real or logical")->check(CLI::IsMember({"real", "logical"}))->capture_default_str();
  cli.add_option("--panels", o.panels,
                 "comma-separated: memory,scores,sms,timeline,counters,softmax,compare,io,traces,schedule (or all, default)");
  cli.add_option("--size", o.size, "window and image size WxH")->capture_default_str();
  cli.add_option("--cta", o.cta, "follow this CTA (block index) of --kernel")->transform(fs::decimal<int>());
  cli.add_option("--kernel", o.kernel, "kernel of --cta (0 = the first launch)")->transform(fs::decimal<int>());
  cli.add_option("--scores", o.scores, "a clustered trace's score matrix: sorted (slot space) or original order")
      ->check(CLI::IsMember({"sorted", "original"}))
      ->capture_default_str();
  cli.add_option("--round", o.round, "a clustered trace's round in the score matrix (default: the followed CTA's)")
      ->transform(fs::decimal<int>())
      ->check(CLI::Range(0, fs::trace::kMaxRounds - 1));
  cli.add_option("--traces-dir", o.folders, "folders the trace browser lists (default: docs/traces)");
  cli.add_flag("--bench", o.bench, "load and frame time of a synthetic trace at 1280x800, then exit");
  cli.add_option("--bench-events", o.bench_events, "events of the --bench trace")->transform(fs::decimal<std::int64_t>())->check(CLI::Range(1000, 50000000));
  cli.add_option("--bench-frames", o.bench_frames, "frames --bench renders")->transform(fs::decimal<int>());
  cli.add_flag("--bench-no-file", o.bench_no_file, "--bench indexes the generated trace without writing and reading a file");
  try {
    cli.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return cli.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(e.what());  // one line and exit code 2, as the step programs do
  }
  if (std::sscanf(o.size.c_str(), "%dx%d", &o.w, &o.h) != 2 || o.w < 320 || o.h < 240 || o.w > 8192 || o.h > 8192)
    return fail("--size " + o.size + ": expected WxH between 320x240 and 8192x8192");
  if (o.bench && o.size == "1600x1000") o.w = 1280, o.h = 800;
  if (!o.panels.empty()) {
    std::string bad;
    o.panel_flags = parse_panels(o.panels, bad);
    if (!bad.empty()) return fail("--panels: unknown panel '" + bad + "'");
  }
  const std::string exe = self_path(argv[0]);

  // No display: run again under a virtual one and render the storyboard (unless a headless
  // output was asked for already).
  if (!std::getenv("DISPLAY") && !std::getenv("WAYLAND_DISPLAY")) {
    if (std::getenv("FS_VIZ_UNDER_XVFB")) return fail("xvfb-run started, but no display is reachable", 1);
    const std::string xvfb = find_on_path("xvfb-run");
    const std::string board = (stdfs::path(exe).parent_path() / ".." / "storyboard").lexically_normal().string();
    if (xvfb.empty())
      return fail(std::string("no display, and xvfb-run is not installed: install it (apt-get install xvfb) or run "
                              "where there is a display") + (o.headless() ? "" : "; the storyboard would go to " + board),
                  1);
    if (!o.headless()) std::printf("No display: rendering a storyboard with Xvfb instead.\n");
    std::fflush(stdout);
    ::setenv("FS_VIZ_UNDER_XVFB", "1", 1);
    const std::string screen = "-screen 0 " + std::to_string(std::max(o.w, 1600)) + "x" + std::to_string(std::max(o.h, 1000)) + "x24";
    // Our own folder for the X authority file (-f): xvfb-run then makes no temporary folder of its
    // own, whose removal can fail after the program has run (xvfb-run's exit code 5, which hid the
    // program's); this one is removed here, and a failure to remove it changes no exit code.
    char auth_dir[] = "/tmp/flashsteps-viz-XXXXXX";
    if (!::mkdtemp(auth_dir)) return fail("cannot make a folder for Xvfb's authority file in /tmp", 1);
    const std::string auth = std::string(auth_dir) + "/Xauthority";
    std::vector<std::string> args = {xvfb, "-a", "-f", auth, "-s", screen, exe};
    for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
    if (!o.headless()) args.insert(args.end(), {"--storyboard", board});
    std::vector<char*> cargs;
    for (auto& a : args) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    const pid_t child = ::fork();
    if (child == 0) {
      ::execv(xvfb.c_str(), cargs.data());
      std::fprintf(stderr, "flashsteps_viz: cannot run %s\n", xvfb.c_str());
      ::_exit(1);
    }
    int status = 0;
    const bool waited = child > 0 && ::waitpid(child, &status, 0) == child;
    std::error_code ignored;
    stdfs::remove_all(auth_dir, ignored);
    if (!waited) return fail("cannot run " + xvfb, 1);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  }

  if (o.bench) {
    try {
      return bench(o);
    } catch (const std::exception& e) {
      return fail(e.what(), 1);
    }
  }

  App app;
  UiState& s = app.state();
  auto& base = app.synthetic_base();
  base.N = o.N;
  base.d = o.d;
  base.H = o.heads;
  base.Br = base.Bc = o.tile;
  base.sms = o.sms;
  s.folders = o.folders.empty() ? default_folders(exe) : o.folders;
  s.command_line = o.paths;
  app.refresh_catalog();
  const std::string command_line_error = command_line_problem(o.paths);
  if (!command_line_error.empty() && o.headless()) return fail(command_line_error);
  if (o.panel_flags) s.panels = o.panel_flags;

  // What to open: the synthetic trace asked for, else the command line's first trace or the
  // tour's default from docs/traces, else a synthetic step 04.
  std::vector<std::pair<std::string, bool>> to_open;
  if (o.synthetic == "pair")
    to_open = {{"synthetic:naive", false}, {"synthetic:flash", true}};
  else if (!o.synthetic.empty())
    to_open = {{"synthetic:" + o.synthetic, false}};
  else if (!command_line_error.empty())
    s.error = command_line_error;  // the browser lists what there is; nothing opens by itself
  else if (const int i = default_entry(s.catalog); i >= 0)
    to_open = {{s.catalog[std::size_t(i)].path, false}};
  else
    to_open = {{"synthetic:flash", false}};
  if (!o.compare.empty()) to_open.push_back({o.compare, true});
  const unsigned chosen_panels = s.panels;
  for (const auto& [what, as_compare] : to_open) {
    std::string error;
    if (!app.open(what, as_compare, error)) {
      if (o.headless()) return fail(error);
      s.error = error;
    }
  }
  if (!o.panels.empty()) s.panels = chosen_panels;
  auto prepare = [&](Document& d) {
    d.playback.set_order(*d.replay, o.order == "logical" ? Order::Logical : Order::Real);
    // The CTA's first track: its first lane, when it records in lanes.
    if (o.cta >= 0)
      for (int t = 0; t < d.replay->track_count(); ++t) {
        const auto& tk = d.replay->trace().tracks[std::size_t(t)];
        if (tk.cta == o.cta && tk.kernel == o.kernel) {
          d.selected_track = d.replay->lanes_of(t).front();
          break;
        }
      }
  };
  if (s.doc) prepare(*s.doc);
  if (s.other) prepare(*s.other);
  s.scores.sorted = o.scores == "sorted";
  if (o.round >= 0 && s.doc) {
    if (o.round >= s.doc->replay->rounds())
      return fail("--round " + std::to_string(o.round) + ": " + s.doc->path + " has " +
                  (s.doc->replay->clustered() ? std::to_string(s.doc->replay->rounds()) + " rounds" : "no clusters"));
    s.scores.round = o.round;
  }
  if (o.headless() && s.doc) {
    for (const auto& w : s.doc->warnings) std::fprintf(stderr, "flashsteps_viz: warning: %s: %s\n", s.doc->path.c_str(), w.c_str());
    Cursor c;
    std::string error;
    if (!parse_moment(o.at, *s.doc, c, error)) return fail(error);
    seek(*s.doc, c);
  }

  Renderer ren;
  std::string error;
  if (!ren.init(o.w, o.h, !o.headless(), true, error)) return fail(error, 1);
  if (!s.doc && o.headless()) return fail("no trace to render");

  if (!o.screenshot.empty()) {
    if (!capture(ren, app, o.screenshot, error)) return fail(error, 1);
    std::printf("wrote %s (%dx%d)\n", o.screenshot.c_str(), o.w, o.h);
    return 0;
  }
  if (!o.frames.empty()) {
    std::error_code ec;
    stdfs::create_directories(o.frames, ec);
    if (ec) return fail(o.frames + ": cannot create the folder (" + ec.message() + ")");
    for (int i = 0; i < o.frame_count; ++i) {
      Playback p = s.doc->playback;
      p.seek_fraction(*s.doc->replay, double(i) / double(o.frame_count - 1));
      seek(*s.doc, p.cursor());
      char name[32];
      std::snprintf(name, sizeof name, "frame_%04d.png", i);
      if (!capture(ren, app, (stdfs::path(o.frames) / name).string(), error)) return fail(error, 1);
    }
    std::printf("wrote %d frames to %s/\n", o.frame_count, o.frames.c_str());
    return 0;
  }
  if (!o.storyboard.empty()) return storyboard(ren, app, o.storyboard);

  // Interactive.
  if (s.doc) s.doc->playback.set_playing(true);
  auto last = Clock::now();
  while (!ren.should_close() && !app.quit_requested()) {
    const auto now = Clock::now();
    const float dt = std::min(0.1f, float(std::chrono::duration<double>(now - last).count()));
    last = now;
    ren.frame(app, dt, false);
  }
  return 0;
}
