// The program itself under Xvfb: a screenshot is not blank and shows the panels (pixels of
// the tensors' colours where the HBM grid is drawn, event colours in the timeline's lanes),
// every shipped trace renders, --frames writes its sequence, a malformed trace exits non-zero
// with one line that names it, and with no display at all the program renders its storyboard
// through xvfb-run. Where xvfb-run or an OpenGL context is missing, every case is skipped
// (exit 77), never passed.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <imgui.h>
#include <stb_image.h>
#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>

#include "common/trace/trace_io.hpp"
#include "visualizer/tests/tc_bwd_trace.hpp"
#include "visualizer/ui/app.hpp"
#include "visualizer/ui/theme.hpp"

namespace stdfs = std::filesystem;
using namespace fs::viz;

namespace {

struct Result {
  int code = -1;
  std::string output;
};

Result run(const std::string& cmd) {
  Result r;
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen((cmd + " 2>&1").c_str(), "r"), pclose);
  if (!p) return r;
  std::array<char, 4096> buf;
  while (std::fgets(buf.data(), int(buf.size()), p.get())) r.output += buf.data();
  const int status = pclose(p.release());
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

const std::string kExe = FS_VIZ_EXE;
const std::string kXvfb = "xvfb-run -a -s \"-screen 0 1600x1000x24\" ";

stdfs::path scratch() {
  static const stdfs::path dir = [] {
    auto d = stdfs::temp_directory_path() / ("fs_viz_xvfb_" + std::to_string(::getpid()));
    stdfs::create_directories(d);
    return d;
  }();
  return dir;
}

struct Image {
  int w = 0, h = 0;
  std::vector<unsigned char> px;  // RGB
  bool load(const std::string& path) {
    int n = 0;
    unsigned char* data = stbi_load(path.c_str(), &w, &h, &n, 3);
    if (!data) return false;
    px.assign(data, data + std::size_t(w) * std::size_t(h) * 3);
    stbi_image_free(data);
    return true;
  }
  const unsigned char* at(int x, int y) const { return &px[(std::size_t(y) * std::size_t(w) + std::size_t(x)) * 3]; }
  // Pixels in the rectangle within `tol` of colour c.
  int count_near(int x0, int y0, int x1, int y1, ImU32 c, int tol) const {
    const int r = int(c & 0xFF), g = int((c >> 8) & 0xFF), b = int((c >> 16) & 0xFF);
    int n = 0;
    for (int y = std::max(0, y0); y < std::min(h, y1); ++y)
      for (int x = std::max(0, x0); x < std::min(w, x1); ++x) {
        const auto* p = at(x, y);
        n += std::abs(p[0] - r) <= tol && std::abs(p[1] - g) <= tol && std::abs(p[2] - b) <= tol;
      }
    return n;
  }
  // Pixels with a clearly saturated colour (events, tiles), not the grey UI.
  double saturated_share(int x0, int y0, int x1, int y1) const {
    int n = 0, all = 0;
    for (int y = std::max(0, y0); y < std::min(h, y1); ++y)
      for (int x = std::max(0, x0); x < std::min(w, x1); ++x, ++all) {
        const auto* p = at(x, y);
        n += std::max({p[0], p[1], p[2]}) - std::min({p[0], p[1], p[2]}) > 60;
      }
    return all ? double(n) / all : 0;
  }
  std::size_t distinct_colours() const {
    std::set<unsigned> s;
    for (std::size_t i = 0; i < px.size(); i += 3) s.insert(unsigned(px[i]) << 16 | unsigned(px[i + 1]) << 8 | px[i + 2]);
    return s.size();
  }
};

// Where the app puts its panels in a 1600×1000 frame with every default panel shown.
std::vector<PanelRect> default_layout() {
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;
  theme::load_fonts();
  unsigned char* p;
  int w, h;
  ImGui::GetIO().Fonts->GetTexDataAsRGBA32(&p, &w, &h);
  ImGui::GetIO().DisplaySize = ImVec2(1600, 1000);
  ImGui::NewFrame();
  const float menu = ImGui::GetFrameHeight();
  ImGui::EndFrame();
  ImGui::DestroyContext();
  App app;
  return app.layout(ImVec2(1600, 1000), menu);
}

PanelRect find(const std::vector<PanelRect>& l, Panel p) {
  for (const auto& r : l)
    if (r.panel == p) return r;
  return {};
}

// `lanes_share`: the least share of the timeline's lanes that events must colour (a
// synthetic run keeps every SM busy; a recorded one at N = 256 may have two CTAs).
void check_screenshot(const std::string& png, int min_tensor_px, double lanes_share) {
  Image img;
  REQUIRE(img.load(png));
  REQUIRE(img.w == 1600);
  REQUIRE(img.h == 1000);
  INFO(png);
  // Not blank: a real frame has text, gradients of alpha, many colours.
  REQUIRE(img.distinct_colours() > 200);
  const auto l = default_layout();
  const PanelRect mem = find(l, kPanelMemory), tl = find(l, kPanelTimeline);
  // The HBM half of the memory panel shows the tensors' tiles in their colours.
  {
    const int x0 = int(mem.pos.x), y0 = int(mem.pos.y + 60), x1 = int(mem.pos.x + mem.size.x * 0.6f),
              y1 = int(mem.pos.y + mem.size.y);
    int tensor_px = 0;
    for (auto t : {fs::trace::Tensor::Q, fs::trace::Tensor::K, fs::trace::Tensor::V, fs::trace::Tensor::O,
                   fs::trace::Tensor::S})
      tensor_px += img.count_near(x0, y0, x1, y1, theme::tensor_color(t), 70);
    REQUIRE(tensor_px > min_tensor_px);
  }
  // The timeline's lanes are full of coloured events.
  REQUIRE(img.saturated_share(int(tl.pos.x + 150), int(tl.pos.y + tl.size.y * 0.45f), int(tl.pos.x + tl.size.x - 20),
                              int(tl.pos.y + tl.size.y - 10)) > lanes_share);
}

}  // namespace

TEST_CASE("a screenshot of a synthetic step 04 trace shows the HBM grid and the timeline", "[viz][xvfb]") {
  const std::string png = (scratch() / "flash.png").string();
  const Result r = run(kXvfb + kExe + " --synthetic flash --at frac:0.4 --screenshot " + png);
  INFO(r.output);
  REQUIRE(r.code == 0);
  check_screenshot(png, 400, 0.15);
}

TEST_CASE("a screenshot of a synthetic step 01 trace, and of 01 against 04", "[viz][xvfb]") {
  const std::string png = (scratch() / "naive.png").string();
  Result r = run(kXvfb + kExe + " --synthetic naive --heads 1 --at frac:0.3 --screenshot " + png);
  INFO(r.output);
  REQUIRE(r.code == 0);
  check_screenshot(png, 400, 0.15);
  const std::string pair = (scratch() / "pair.png").string();
  r = run(kXvfb + kExe + " --synthetic pair --heads 1 --at frac:0.5 --screenshot " + pair);
  REQUIRE(r.code == 0);
  Image img;
  REQUIRE(img.load(pair));
  REQUIRE(img.distinct_colours() > 200);
}

// Step 09's lanes: in the schedule, the consumers' rows hold their products and softmax, the
// producer's row the copies it issues, so each kind's colour is in the panel.
TEST_CASE("a screenshot of a synthetic step 09 trace shows its lanes' schedule", "[viz][xvfb][lanes]") {
  const std::string png = (scratch() / "hopper.png").string();
  const Result r = run(kXvfb + kExe + " --synthetic hopper --N 1024 --d 128 --heads 2 --sms 8 --at frac:0.3" +
                       " --panels schedule --size 1200x300 --screenshot " + png);
  INFO(r.output);
  REQUIRE(r.code == 0);
  Image img;
  REQUIRE(img.load(png));
  namespace tr = fs::trace;
  for (const auto& [kind, tensor] : {std::pair{tr::Kind::ComputeS, tr::Tensor::S}, std::pair{tr::Kind::Softmax, tr::Tensor::P},
                                    std::pair{tr::Kind::AccumulateO, tr::Tensor::O}, std::pair{tr::Kind::Load, tr::Tensor::K}}) {
    INFO(tr::kind_name(kind));
    REQUIRE(img.count_near(0, 0, img.w, img.h, theme::kind_color(kind, tensor), 6) > 30);
  }
}

// How the reddish pixels of an image (the score matrix's computed cells) lie: the correlation
// of their x and y, 1 when they run along the diagonal, 0 when scattered.
double reddish_diagonality(const Image& img, int* count) {
  double n = 0, sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
  for (int y = 0; y < img.h; ++y)
    for (int x = 0; x < img.w; ++x) {
      const auto* p = img.at(x, y);
      // S's colour at the faint strengths of "computed on chip", over the panel.
      if (p[0] > 135 || p[0] - p[1] < 20 || p[0] - p[2] < 15) continue;
      n += 1, sx += x, sy += y, sxx += double(x) * x, syy += double(y) * y, sxy += double(x) * y;
    }
  *count = int(n);
  const double vx = sxx - sx * sx / n, vy = syy - sy * sy / n;
  return n > 1 && vx > 0 && vy > 0 ? (sxy - sx * sy / n) / std::sqrt(vx * vy) : 0;
}

TEST_CASE("a clustered trace's scores: its clusters on the diagonal in sorted order, scattered in the original", "[viz][xvfb][smyrf]") {
  // The end of the pass: round 2's every cluster is computed.
  const std::string base = kXvfb + kExe + " --synthetic smyrf --N 256 --heads 1 --at frac:1 --panels scores --size 800x800";
  int sorted_px = 0, original_px = 0;
  double sorted = 0, original = 0;
  for (const char* order : {"sorted", "original"}) {
    const std::string png = (scratch() / (std::string("scores_") + order + ".png")).string();
    const Result r = run(base + " --round 2 --scores " + order + " --screenshot " + png);
    INFO(r.output);
    REQUIRE(r.code == 0);
    Image img;
    REQUIRE(img.load(png));
    (order[0] == 's' ? sorted : original) = reddish_diagonality(img, order[0] == 's' ? &sorted_px : &original_px);
  }
  INFO("sorted: " << sorted << " over " << sorted_px << " px; original: " << original << " over " << original_px << " px");
  REQUIRE(sorted_px > 10000);  // an eighth of a square of some 700 px a side
  REQUIRE(original_px > 10000);
  REQUIRE(sorted > 0.9);
  REQUIRE(std::abs(original) < 0.4);
  // A round past the trace's is refused, in one line.
  const Result bad = run(base + " --round 9 --screenshot " + (scratch() / "never.png").string());
  REQUIRE(bad.code == 2);
  REQUIRE(bad.output.find("--round 9: synthetic:smyrf has 8 rounds") != std::string::npos);
}

namespace {

// In the K map of a decoding trace's memory panel (--panels memory at W×H: the left 28 % of the
// window, between its title and the block table), the 20-pixel bands of rows that hold pixels of
// both sequences' colours (the pages' strips and frames), as a share of the bands holding either;
// `seen`: those bands.
double mixed_bands(const Image& img, int* seen) {
  const int x0 = 0, x1 = int(img.w * 0.28f), y0 = 105, y1 = int(img.h * 0.6f);
  int either = 0, both = 0;
  for (int y = y0; y + 20 <= y1; y += 20) {
    const int a = img.count_near(x0, y, x1, y + 20, theme::sequence_color(0), 24);
    const int b = img.count_near(x0, y, x1, y + 20, theme::sequence_color(1), 24);
    either += a >= 3 || b >= 3;
    both += a >= 3 && b >= 3;
  }
  *seen = either;
  return either ? double(both) / either : 0;
}

}  // namespace

// Step 10's decoding trace (synthetic: no GPU recording exists yet). At the default layout it
// passes what every shipped trace must (so will a recorded one); in the memory panel the paged
// cache's pages of the two sequences lie mixed all over the cache, where the contiguous cache has
// each sequence's slots in one run; the schedule has the splits' loads and the combine's partials.
TEST_CASE("a decoding trace's cache: pages scattered by the block table, or one run a sequence", "[viz][xvfb][decode]") {
  const std::string all = (scratch() / "decode.png").string();
  Result r = run(kXvfb + kExe + " --synthetic decode --order logical --at frac:0.5 --screenshot " + all);
  INFO(r.output);
  REQUIRE(r.code == 0);
  check_screenshot(all, 100, 0.004);
  double mixed[2] = {};
  int seen[2] = {};
  for (const bool paged : {true, false}) {
    const std::string png = (scratch() / (paged ? "decode_paged.png" : "decode_contiguous.png")).string();
    r = run(kXvfb + kExe + " --synthetic " + (paged ? "decode" : "decode-contiguous") +
            " --order logical --at frac:0.3 --panels memory --size 1400x700 --screenshot " + png);
    INFO(r.output);
    REQUIRE(r.code == 0);
    Image img;
    REQUIRE(img.load(png));
    // K's and V's colours fill the pages that have been read.
    REQUIRE(img.count_near(0, 100, img.w / 2, img.h * 3 / 5, theme::tensor_color(fs::trace::Tensor::K), 40) > 2000);
    REQUIRE(img.count_near(0, 100, img.w / 2, img.h * 3 / 5, theme::tensor_color(fs::trace::Tensor::V), 40) > 2000);
    mixed[paged ? 0 : 1] = mixed_bands(img, &seen[paged ? 0 : 1]);
  }
  INFO("bands with both sequences: paged " << mixed[0] << " of " << seen[0] << ", contiguous " << mixed[1] << " of " << seen[1]);
  REQUIRE(seen[0] >= 8);  // the pages' strips are found at all, down most of the K map
  REQUIRE(seen[1] >= 8);
  REQUIRE(mixed[0] > 0.6);
  REQUIRE(mixed[1] < 0.3);
  // The schedule: one row's splits (their K and V loads) and the combine (loading the partial LSEs).
  const std::string sched = (scratch() / "decode_schedule.png").string();
  r = run(kXvfb + kExe + " --synthetic decode --order logical --at frac:0.5 --panels schedule --size 1200x300 --screenshot " + sched);
  REQUIRE(r.code == 0);
  Image img;
  REQUIRE(img.load(sched));
  namespace tr = fs::trace;
  for (tr::Tensor t : {tr::Tensor::K, tr::Tensor::V, tr::Tensor::LSEPart, tr::Tensor::OPart}) {
    INFO(tr::tensor_name(t));
    REQUIRE(img.count_near(0, 0, img.w, img.h, theme::kind_color(tr::Kind::Load, t), 6) > 30);
  }
}

TEST_CASE("every shipped trace in docs/traces renders", "[viz][xvfb]") {
  const stdfs::path dir = stdfs::path(FS_SOURCE_DIR) / "docs" / "traces";
  std::error_code ec;
  int n = 0;
  for (stdfs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() != ".json") continue;
    const std::string png = (scratch() / (it->path().stem().string() + ".png")).string();
    // Logical order: recorded runs spend most of their real time between kernels.
    const Result r = run(kXvfb + kExe + " \"" + it->path().string() + "\" --order logical --at frac:0.5 --screenshot " + png);
    INFO(it->path() << "\n" << r.output);
    REQUIRE(r.code == 0);
    REQUIRE(r.output.find("warning") == std::string::npos);
    check_screenshot(png, 100, 0.004);  // the playhead alone is 0.15 %
    ++n;
  }
  WARN(n << " shipped trace(s) in " << dir);
}

namespace {

// The seq of the n-th event of this kind of CTA `cta` of kernel `kernel` in a trace file, or -1.
std::int64_t seq_of(const std::string& path, int kernel, int cta, fs::trace::Kind kind, int n = 0) {
  const fs::trace::Trace t = fs::trace::read_trace(path);
  for (const auto& e : t.events) {
    const auto& track = t.tracks[std::size_t(e.track)];
    if (track.kernel == kernel && track.cta == cta && e.kind == kind && n-- == 0) return e.seq;
  }
  return -1;
}

// A screenshot of the memory panel alone, 1300×760, of `path` at `at` (logical order), following
// `args` (--kernel, --cta) where given.
Image memory_shot(const std::string& path, const std::string& at, const std::string& name, const std::string& args = "") {
  const std::string png = (scratch() / (name + ".png")).string();
  const Result r = run(kXvfb + kExe + " " + path + " --order logical --at " + at + " " + args +
                       " --panels memory --size 1300x760 --screenshot " + png);
  INFO(r.output);
  REQUIRE(r.code == 0);
  Image img;
  REQUIRE(img.load(png));
  return img;
}

}  // namespace

// Step 08's dK/dV kernel in the memory panel: its SRAM as the kernel lays it out. key_warps'
// backward (tc_dkdv_kernel) at seq 107, its followed CTA reading dSᵀ back for dQ's atomics: dSᵀ's tile is drawn beside K and V and the two Q/dO stages; the
// deterministic variant's tc_dkdv_kernel (a hand-made trace) has no dSᵀ tile.
TEST_CASE("step 08's backward: the dK/dV kernel's shared memory with its dS tile, or without", "[viz][xvfb][pipeline]") {
  const int W = 1300, H = 760;
  // The chip's side, above its registers: the shared memory's slots.
  auto sram_px = [&](const Image& img, fs::trace::Tensor t) {
    return img.count_near(int(W * 0.62f), int(H * 0.2f), W, int(H * 0.5f), theme::tensor_color(t), 40);
  };
  const Image atomic =
      memory_shot(std::string(FS_SOURCE_DIR) + "/docs/traces/08_tensor_cores_key_warps.bwd.json", "seq:107", "bwd_atomic");
  fs::viz::test::TcBwdSpec spec;
  spec.atomic = false;
  spec.variant = "deterministic";
  const std::string det = (scratch() / "tc_dkdv_deterministic.bwd.json").string();
  fs::trace::write_trace(fs::viz::test::tc_dkdv_trace(spec), det);
  const std::int64_t dv = seq_of(det, 0, 0, fs::trace::Kind::AccumulateDV, 1);  // tile 1's
  REQUIRE(dv >= 0);
  const Image plain = memory_shot(det, "seq:" + std::to_string(dv), "bwd_deterministic");
  const int ds = sram_px(atomic, fs::trace::Tensor::dS), q = sram_px(atomic, fs::trace::Tensor::Q),
            none = sram_px(plain, fs::trace::Tensor::dS);
  INFO("dS " << ds << " px, Q " << q << " px; deterministic dS " << none << " px");
  REQUIRE(ds > 3000);   // an 86-px square, less its lines and labels
  REQUIRE(q > 3000);    // the stage computed
  REQUIRE(none < 100);  // the registers' dS is further down
}

// tc_dkdv_smem_kernel (fa2 on the H200 at d = 64: 128 keys, 128 queries, 8 warps in 4 rows) while
// CTA 0 computes tile 0's P and dS: both tiles drawn in SRAM, split into the warps' blocks, 4
// rows of 32 keys × 2 columns of 64 queries; tc_dkdv_kernel (key_warps) at the same event has no
// P tile.
TEST_CASE("step 08's backward: tc_dkdv_smem_kernel's P and dS tiles in SRAM, with each warp's block", "[viz][xvfb][pipeline]") {
  const int W = 1300, H = 760;
  auto shot = [&](const std::string& variant) {
    const std::string path = std::string(FS_SOURCE_DIR) + "/docs/traces/08_tensor_cores_" + variant + ".bwd.json";
    const std::int64_t seq = seq_of(path, 1, 0, fs::trace::Kind::ComputeDS);
    REQUIRE(seq >= 0);
    return memory_shot(path, "seq:" + std::to_string(seq), "dkdv_" + variant, "--kernel 1 --cta 0");
  };
  const Image img = shot("fa2");
  // The chip's side, above its registers. The two pinks differ by less than 40 a channel.
  const int x0 = int(W * 0.62f), y0 = int(H * 0.2f), x1 = W, y1 = int(H * 0.5f);
  const ImU32 P = theme::tensor_color(fs::trace::Tensor::P), dS = theme::tensor_color(fs::trace::Tensor::dS);
  const int p_px = img.count_near(x0, y0, x1, y1, P, 25), ds_px = img.count_near(x0, y0, x1, y1, dS, 25);
  INFO("P " << p_px << " px, dS " << ds_px << " px");
  REQUIRE(p_px > 5000);  // a square of some 95 px, less its lines and labels
  REQUIRE(ds_px > 5000);
  // P's tile: the rows and columns with many of its pixels (not its heading), then the lines
  // between the warps' blocks (the panel's colour, across the tile): one down the middle
  // (queries 0–63 | 64–127), three across (32 keys each), and none a quarter of the way across,
  // inside warp 0's block.
  int bx0 = W, by0 = H, bx1 = 0, by1 = 0;
  for (int y = y0; y < y1; ++y)
    if (img.count_near(x0, y, x1, y + 1, P, 25) > 40) by0 = std::min(by0, y), by1 = std::max(by1, y);
  for (int x = x0; x < x1; ++x)
    if (img.count_near(x, y0, x + 1, y1, P, 25) > 40) bx0 = std::min(bx0, x), bx1 = std::max(bx1, x);
  INFO("P's tile: [" << bx0 << ", " << bx1 << "] × [" << by0 << ", " << by1 << "]");
  REQUIRE(bx1 - bx0 > 60);
  REQUIRE(std::abs((bx1 - bx0) - (by1 - by0)) < 6);  // 128 keys × 128 queries
  // Of the points along a line, the share where a 3-px band across it has the panel's colour.
  auto line_share = [&](int xa, int ya, int xb, int yb, bool vertical) {
    int hit = 0, n = 0;
    for (int t = vertical ? ya : xa; t < (vertical ? yb : xb); ++t, ++n)
      hit += vertical ? img.count_near(xa - 1, t, xa + 2, t + 1, theme::kPanel, 12) > 0
                      : img.count_near(t, ya - 1, t + 1, ya + 2, theme::kPanel, 12) > 0;
    return n ? double(hit) / n : 0;
  };
  const int mx = (bx0 + bx1) / 2, h = by1 - by0;
  REQUIRE(line_share(mx, by0 + 4, mx, by1 - 4, true) > 0.9);
  for (int k = 1; k < 4; ++k) {
    INFO("the line after key " << 32 * k);
    REQUIRE(line_share(bx0 + 4, by0 + h * k / 4, bx1 - 4, by0 + h * k / 4, false) > 0.9);
  }
  REQUIRE(line_share(bx0 + (bx1 - bx0) / 4, by0 + 4, bx0 + (bx1 - bx0) / 4, by0 + h / 4 - 4, true) < 0.1);
  // tc_dkdv_kernel at key_warps' tiles: P stays in registers, so no P in SRAM.
  REQUIRE(shot("key_warps").count_near(x0, y0, x1, y1, P, 25) < 100);
}

TEST_CASE("the frames option writes an animation sequence", "[viz][xvfb]") {
  const auto dir = scratch() / "frames";
  const Result r = run(kXvfb + kExe + " --synthetic flash --N 256 --heads 2 --size 640x400 --frame-count 5 --frames " + dir.string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  for (int i = 0; i < 5; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "frame_%04d.png", i);
    Image img;
    REQUIRE(img.load((dir / name).string()));
    REQUIRE(img.w == 640);
  }
}

TEST_CASE("a malformed trace exits non-zero with one line that names it", "[viz][xvfb][errors]") {
  const auto bad = scratch() / "truncated.json";
  std::ofstream(bad) << "{\"otherData\": {\"schema\": \"flashsteps-trace\", ";
  const Result r = run(kXvfb + kExe + " " + bad.string() + " --screenshot " + (scratch() / "never.png").string());
  INFO(r.output);
  REQUIRE(r.code == 2);
  REQUIRE(r.output.find("truncated.json") != std::string::npos);
  REQUIRE(r.output.find("flashsteps_viz: ") == 0);
  REQUIRE(std::count(r.output.begin(), r.output.end(), '\n') == 1);
  REQUIRE(!stdfs::exists(scratch() / "never.png"));
  const Result missing = run(kXvfb + kExe + " /no/such/trace.json --screenshot " + (scratch() / "never.png").string());
  REQUIRE(missing.code == 2);
}

TEST_CASE("with no display the program renders its storyboard through xvfb-run", "[viz][xvfb]") {
  const auto dir = scratch() / "storyboard";
  const Result r = run("env -u DISPLAY -u WAYLAND_DISPLAY " + kExe + " --synthetic flash --N 256 --heads 2 --storyboard " + dir.string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  REQUIRE(r.output.find("storyboard: 5 frames") != std::string::npos);
  for (const char* n : {"1_start.png", "2_middle.png", "3_end.png", "4_compare.png", "5_io_calculator.png"})
    REQUIRE(stdfs::exists(dir / n));
}

int main(int argc, char** argv) {
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing = listing || std::string(argv[i]).rfind("--list", 0) == 0;
  int code = 0;
  if (!listing) {
    if (run("command -v xvfb-run").code != 0) {
      std::printf("SKIPPED (Xvfb test): xvfb-run is not installed (apt-get install xvfb)\n");
      return 77;
    }
    // One probe: an OpenGL 3.3 context under Xvfb (Mesa's llvmpipe) or nothing to test.
    const Result probe = run(kXvfb + kExe + " --synthetic flash --N 64 --heads 1 --size 320x240 --screenshot " +
                             (scratch() / "probe.png").string());
    if (probe.code != 0) {
      std::printf("SKIPPED (Xvfb test): no OpenGL 3.3 context under Xvfb: %s", probe.output.c_str());
      stdfs::remove_all(scratch());
      return 77;
    }
  }
  code = Catch::Session().run(argc, argv);
  if (!listing) stdfs::remove_all(scratch());
  return code;
}
