// Memory hierarchy: HBM with the step's tensors at their true relative sizes, and the chip of
// the selected CTA (shared memory and registers) with the tiles it holds now, against the
// shared-memory budget. The tile in flight moves along its path, HBM → SRAM or back.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/trace/names.hpp"
#include "visualizer/model/labels.hpp"
#include "visualizer/ui/cache_view.hpp"
#include "visualizer/ui/hbm_view.hpp"
#include "visualizer/ui/panels.hpp"
#include "visualizer/ui/pipeline_view.hpp"
#include "visualizer/ui/theme.hpp"

namespace fs::viz {

namespace tr = fs::trace;

namespace {

struct Slot {
  tr::Tensor tensor;
  Residence where;
  Rect rect;
  int max_rows, max_cols;  // the largest tile it ever holds
  int lane = 0;            // a CTA in lanes: the consumer whose registers it is (each has its own)
  int stack = 1;           // tiles it holds at once, one above the other (S or P̃ over a P̃ that waits for its P̃V)
  int first = -1, last = -1;  // the first and last events that put a tile there
  float label_w = 0;          // the wider of their tiles' labels
};

// Where an event puts a tile on chip (the same rule as the replay's residency), or None.
tr::Tensor on_chip_tensor(const tr::Event& e, Residence* where) {
  *where = Residence::Regs;
  switch (e.kind) {
    case tr::Kind::Load: *where = Residence::Smem; return e.tensor;
    case tr::Kind::ComputeS:
    case tr::Kind::Softmax: return tr::Tensor::S;  // S and P̃ share their registers
    case tr::Kind::Rescale:
    case tr::Kind::AccumulateO: return tr::Tensor::O;
    case tr::Kind::ComputeDP:
    case tr::Kind::ComputeDS: return tr::Tensor::dP;
    case tr::Kind::AccumulateDQ: return tr::Tensor::dQ;
    case tr::Kind::AccumulateDK: return tr::Tensor::dK;
    case tr::Kind::AccumulateDV: return tr::Tensor::dV;
    case tr::Kind::Store:  // leaves from where it was computed: a split's partial O from O's registers
      return e.tensor == tr::Tensor::OPart ? tr::Tensor::O : e.tensor;
    default: return tr::Tensor::None;
  }
}

float smooth(float t) { return t * t * (3 - 2 * t); }

// What the step does with HBM, in a sentence, for the steps this repository has.
const char* step_caption(const std::string& step, const std::string& pass) {
  auto is = [&](const char* n) { return step.rfind(n, 0) == 0; };
  const bool fwd = pass != "bwd";
  if (is("01") && fwd)
    return "Standard attention: S = τQKᵀ and P = softmax(S) are written to HBM and read back, N×N each — "
           "Θ(Nd + N²) bytes (Theorem 2).";
  if (is("01"))
    return "Standard backward: P is read back, dP and dS are written to HBM and read back, N×N each — "
           "Θ(Nd + N²) bytes (Theorem 5).";
  if (is("02") && fwd)
    return "Fused: S, the mask and the softmax in one kernel, so S never reaches HBM; P still does, and "
           "is read back for O = PV.";
  if (is("02")) return "Fused backward: dP, D and dS in one kernel, so dP never reaches HBM; P and dS still do.";
  if (is("03") && fwd)
    return "Tiled, two passes: each query tile streams K once for the row max, then K and V again; no N×N "
           "matrix in HBM, but K is read twice.";
  if (is("04") && fwd)
    return "FlashAttention: K and V tiles stream through SRAM past each Q tile; S and P never leave the "
           "chip — Θ(N²d²/M) bytes (Theorem 2).";
  if (is("07") && fwd)
    return "SMYRF: Q and K hashed, each round's rows sorted into clusters (the sort's bytes are untraced); "
           "per cluster its rows of Q, K and V are gathered through the order — scattered stripes — and "
           "merged into O by the LSE. Θ(hashes · N · d) bytes.";
  if (is("10"))
    return "Flash-Decoding: each split CTA reads its share of one sequence's keys, page by page through the block "
           "table, and writes a partial O and LSE per row; the combine merges the splits by their LSE.";
  if (is("07"))
    return "SMYRF backward: per round, each cluster's rows of Q, dO, K and V gathered again through the "
           "forward's orders; dQ, dK and dV read, added to and written back at their rows.";
  return nullptr;
}

// Draws a tile in its slot; returns where.
Rect draw_tile_card(ImDrawList* dl, Rect slot, const ResidentTile& t, double scale, bool fresh) {
  const auto& f = theme::fonts();
  const float w = std::max(3.0f, float(t.cols * scale)), h = std::max(3.0f, float(t.rows * scale));
  const ImVec2 c((slot.min.x + slot.max.x) * 0.5f, slot.min.y + (slot.h() - f.small->FontSize * 2) * 0.5f);
  const Rect r{ImVec2(c.x - w * 0.5f, c.y - h * 0.5f), ImVec2(c.x + w * 0.5f, c.y + h * 0.5f)};
  const tr::Tensor shown = t.tensor;
  dl->AddRectFilled(r.min, r.max, theme::tensor_color(shown, 0.85f), 2);
  if (fresh) dl->AddRect(ImVec2(r.min.x - 2, r.min.y - 2), ImVec2(r.max.x + 2, r.max.y + 2), theme::kAccent, 2, 0, 2);
  tr::Event as_event;
  as_event.tensor = t.tensor;
  as_event.row0 = t.row0;
  as_event.rows = t.rows;
  as_event.col0 = t.col0;
  as_event.cols = t.cols;
  std::string label = tile_label(as_event);
  if (t.tensor == tr::Tensor::P && t.where == Residence::Regs) label = "P̃" + label.substr(1);
  // A tile gathered from several loads (a decoding trace's pages) is no one range of rows.
  if (t.loads > 1)
    label = std::string(theme::tensor_display(t.tensor)) + "[" + std::to_string(t.rows) + " rows, " + std::to_string(t.loads) + " loads]";
  const float ty = slot.max.y - f.small->FontSize * 2 - 2;
  // A label wider than its slot drops its element range: the tensor's name still shows.
  const Rect line{ImVec2(slot.min.x, ty), ImVec2(slot.max.x, ty + f.small->FontSize + 2)};
  if (f.small->CalcTextSizeA(f.small->FontSize, 1e9f, 0, label.c_str()).x > line.w())
    label = label.substr(0, label.find('['));
  centered_text(dl, line, theme::kText, label.c_str(), f.small);
  char sz[48];
  std::snprintf(sz, sizeof sz, "%s", format_bytes(double(t.bytes)).c_str());
  centered_text(dl, {ImVec2(slot.min.x, ty + f.small->FontSize), ImVec2(slot.max.x, ty + 2 * f.small->FontSize + 2)},
                theme::kTextDim, sz, f.small);
  return r;
}

// --- Step 09's shared memory (hopper_forward_kernel, hopper_backward_kernel) ---------------------
// Its regions (SmemPipeline::regions) drawn in columns: the tile kept (the forward's Q with O's
// tile under it; the backward's K and V), then each stage (K over V; Q and dO with LSE and D
// beside them), then the backward's dSᵀ buffers and the consumers' dQ blocks. Each tile is
// filled by what it holds now: issued (hatched), in use (solid), done (faint).

constexpr float kHopperGap = 14, kHopperInner = 4, kHopperStrip = 6;
constexpr int kHopperLines = 4;  // under a column: a line per tile (two), and room for the caption

struct HopperColumn {
  std::string head;
  std::vector<int> cells;   // regions, one above the other
  std::vector<int> strips;  // beside each cell (LSE, D), or -1
};

std::vector<HopperColumn> hopper_columns(const SmemPipeline& L, const std::vector<SmemRegion>& regions) {
  auto find = [&](tr::Tensor t, int stage) {
    for (std::size_t i = 0; i < regions.size(); ++i)
      if (regions[i].tensor == t && regions[i].stage == stage) return int(i);
    return -1;
  };
  std::vector<HopperColumn> cols;
  const bool fwd = L.kernel == SmemKernel::HopperForward;
  if (fwd)
    cols.push_back({L.o_in_smem ? "Q, O" : "Q", {find(tr::Tensor::Q, -1), find(tr::Tensor::O, -1)}, {-1, -1}});
  else
    cols.push_back({"K, V", {find(tr::Tensor::K, -1), find(tr::Tensor::V, -1)}, {-1, -1}});
  for (int s = 0; s < L.stages; ++s) {
    const std::string head = "stage " + std::to_string(s);
    if (fwd)
      cols.push_back({head, {find(tr::Tensor::K, s), find(tr::Tensor::V, s)}, {-1, -1}});
    else
      cols.push_back({head, {find(tr::Tensor::Q, s), find(tr::Tensor::dO, s)}, {find(tr::Tensor::LSE, s), find(tr::Tensor::D, s)}});
  }
  if (!fwd) {
    cols.push_back({"dSᵀ", {find(tr::Tensor::dS, 0), find(tr::Tensor::dS, 1)}, {-1, -1}});
    cols.push_back({"dQ", {find(tr::Tensor::dQacc, 0), find(tr::Tensor::dQacc, 1)}, {-1, -1}});
  }
  for (auto& c : cols) {  // the forward's O at d = 256 has no tile
    for (std::size_t i = c.cells.size(); i-- > 0;)
      if (c.cells[i] < 0) {
        c.cells.erase(c.cells.begin() + std::ptrdiff_t(i));
        c.strips.erase(c.strips.begin() + std::ptrdiff_t(i));
      }
  }
  return cols;
}

// The forward's O tile has a region of its own, each consumer writing its half.
StageView o_view(const PipelineView& v, int half) {
  return half < int(v.o_halves.size()) ? v.o_halves[std::size_t(half)] : StageView{};
}

double hopper_scale(const SmemPipeline& L, Rect area) {
  const auto regions = L.regions();
  const auto cols = hopper_columns(L, regions);
  double wide = 0, tall = 0, fixed = kHopperGap * float(cols.size() - 1);
  for (const auto& c : cols) {
    int w = 0, h = 0;
    for (std::size_t i = 0; i < c.cells.size(); ++i) {
      w = std::max(w, regions[std::size_t(c.cells[i])].cols);
      h += regions[std::size_t(c.cells[i])].rows;
      if (c.strips[i] >= 0) fixed += (kHopperStrip + 2) / float(c.cells.size());
    }
    wide += w;
    tall = std::max(tall, double(h));
  }
  const auto& f = theme::fonts();
  const double h = area.h() - (f.regular->FontSize + 5) - 2 * kHopperInner - kHopperLines * (f.small->FontSize + 2) - 10;
  return std::clamp(std::min((area.w() - fixed) / wide, h / tall), 0.05, 4.0);
}

// A few words for what a tile holds.
std::string hold_words(const StageView& sv) {
  switch (sv.state) {
    case StageState::Loading: return sv.waited_on ? "waited for" : "copy issued";
    case StageState::Computing: return "in use";
    case StageState::Free: return "done";
    case StageState::Empty: break;
  }
  return "empty";
}

void fill_held(ImDrawList* dl, Rect r, tr::Tensor t, StageState state) {
  switch (state) {
    case StageState::Computing: dl->AddRectFilled(r.min, r.max, theme::tensor_color(t, 0.92f), 2); break;
    case StageState::Loading:
      dl->AddRectFilled(r.min, r.max, theme::tensor_color(t, 0.16f), 2);
      hatch(dl, r, theme::tensor_color(t, 0.55f), 6);
      dl->AddRect(r.min, r.max, IM_COL32(255, 255, 255, 200), 2, 0, 1.5f);
      break;
    case StageState::Free:
      dl->AddRectFilled(r.min, r.max, theme::tensor_color(t, 0.12f), 2);
      dl->AddRect(r.min, r.max, theme::tensor_color(t, 0.35f), 2);
      break;
    case StageState::Empty: dl->AddRect(r.min, r.max, theme::kBorder, 2); break;
  }
}

std::string region_name(const SmemPipeline& L, const SmemRegion& g) {
  if (g.tensor == tr::Tensor::dS) return "dSᵀ";
  if (g.tensor == tr::Tensor::V && L.fp8) return "Vᵀ";
  return tensor_label(g.tensor);
}

// Draws the columns at `scale`; returns each region's rect (by index into L.regions()).
std::vector<Rect> draw_hopper_smem(ImDrawList* dl, const SmemPipeline& L, const PipelineView& v, Rect area, double scale) {
  const auto& f = theme::fonts();
  const auto regions = L.regions();
  std::vector<Rect> rects(regions.size());
  const float s = float(scale), lh = f.small->FontSize + 2, top = area.min.y + f.regular->FontSize + 5;
  const ImU32 ink = IM_COL32(18, 20, 26, 255);
  float x = area.min.x, text_bottom = top;
  auto fits = [&](const std::string& t, float w) { return f.small->CalcTextSizeA(f.small->FontSize, 1e9f, 0, t.c_str()).x <= w; };
  for (const auto& col : hopper_columns(L, regions)) {
    float y = top, w = 0, strip_w = 0;
    bool live = false;
    std::vector<std::string> lines;
    for (std::size_t i = 0; i < col.cells.size(); ++i) {
      const SmemRegion& g = regions[std::size_t(col.cells[i])];
      const Rect r{ImVec2(x, y), ImVec2(x + float(g.cols) * s, y + float(g.rows) * s)};
      rects[std::size_t(col.cells[i])] = r;
      w = std::max(w, r.w());
      const bool halves = g.tensor == tr::Tensor::O || (g.stage < 0 && g.tensor != tr::Tensor::dS);  // a consumer's rows each
      StageView sv = g.tensor == tr::Tensor::O ? o_view(v, 0) : region_view(L, v, g);
      if (g.tensor == tr::Tensor::O) {
        for (int h = 0; h < L.consumers; ++h) {
          const float hh = r.h() / float(L.consumers);
          fill_held(dl, {ImVec2(r.min.x, r.min.y + hh * float(h)), ImVec2(r.max.x, r.min.y + hh * float(h + 1))}, g.tensor,
                    o_view(v, h).state);
          if (o_view(v, h).state == StageState::Computing) sv = o_view(v, h);
        }
      } else {
        fill_held(dl, r, g.tensor, sv.state);
      }
      // fp8's Vᵀ: the columns of its last box past the tile's keys are copied, never read.
      if (g.cols_read > 0 && g.cols_read < g.cols) {
        const Rect tail{ImVec2(r.min.x + float(g.cols_read) * s, r.min.y), r.max};
        dl->AddRectFilled(tail.min, tail.max, theme::with_alpha(theme::kPanel, 0.85f), 2);
        hatch(dl, tail, theme::with_alpha(theme::kBorder, 0.9f), 4);
        dl->AddLine(ImVec2(tail.min.x, tail.min.y), ImVec2(tail.min.x, tail.max.y), theme::kBorder, 1);
      }
      live = live || sv.state == StageState::Computing;
      // The consumers' rows (keys): a line between them, and whose they are, once it holds a tile.
      if (halves && sv.state != StageState::Empty && L.consumers > 1) {
        const float hh = r.h() / float(L.consumers);
        for (int h = 1; h < L.consumers; ++h)
          dl->AddLine(ImVec2(r.min.x + 1, r.min.y + hh * float(h)), ImVec2(r.max.x - 1, r.min.y + hh * float(h)), theme::kPanel, 2);
        for (int h = 0; h < L.consumers && hh >= f.small->FontSize * 2; ++h) {
          const Rect b{ImVec2(r.min.x, r.min.y + hh * float(h)), ImVec2(r.max.x, r.min.y + hh * float(h + 1))};
          const std::string who = (i == 0 ? "consumer " : region_name(L, g) + " · c") + std::to_string(h);
          if (fits(who, b.w() - 4))
            centered_text(dl, b, sv.state == StageState::Computing || g.tensor == tr::Tensor::O ? ink : theme::kText,
                          who.c_str(), f.small);
        }
      } else {
        std::string name = region_name(L, g);
        const std::string ranged = name + "[" + std::to_string(sv.key0) + ":" + std::to_string(sv.key0 + sv.keys) + ")";
        if (sv.state != StageState::Empty && fits(ranged, r.w() - 4)) name = ranged;
        centered_text(dl, r, sv.state == StageState::Computing ? ink : theme::kText, name.c_str(), f.small);
      }
      if (sv.state == StageState::Computing)
        dl->AddRect(ImVec2(r.min.x - 2, r.min.y - 2), ImVec2(r.max.x + 2, r.max.y + 2), theme::kAccent, 3, 0, 2);
      if (i < col.strips.size() && col.strips[i] >= 0) {
        const SmemRegion& st = regions[std::size_t(col.strips[i])];
        const Rect sr{ImVec2(r.max.x + 2, r.min.y), ImVec2(r.max.x + 2 + kHopperStrip, r.max.y)};
        rects[std::size_t(col.strips[i])] = sr;
        fill_held(dl, sr, st.tensor, region_view(L, v, st).state);
        strip_w = kHopperStrip + 2;
      }
      // Its line under the column: the tile (the key or query tile's number, or the range) and its state.
      const int unit = g.tensor == tr::Tensor::dQacc ? 0 : L.kernel == SmemKernel::HopperForward ? (g.tensor == tr::Tensor::Q || g.tensor == tr::Tensor::O ? 0 : L.Bc) : g.stage >= 0 ? L.Br : 0;
      std::string what = region_name(L, g);
      if (g.tensor == tr::Tensor::dQacc) what = "dQ c" + std::to_string(g.stage);
      if (sv.state != StageState::Empty)
        what += unit > 0 ? " " + std::to_string(sv.key0 / unit) : " " + std::to_string(sv.key0) + "–" + std::to_string(sv.key0 + sv.keys - 1);
      lines.push_back(what + ": " + hold_words(sv));
      y = r.max.y + kHopperInner;
    }
    const float room = w + strip_w + kHopperGap - 4;
    dl->AddText(f.regular, f.regular->FontSize, ImVec2(x, area.min.y), live ? theme::kAccent : theme::kText,
                fits(col.head, room + 40) ? col.head.c_str() : col.head.substr(0, 1).c_str());
    float ty = y;
    for (const auto& l : lines) {
      std::string t = l;
      if (!fits(t, room)) t = t.substr(0, t.find(':'));
      dl->AddText(f.small, f.small->FontSize, ImVec2(x, ty), theme::kTextDim, t.c_str());
      ty += lh;
    }
    text_bottom = std::max(text_bottom, ty);
    x += w + strip_w + kHopperGap;
  }
  // The caption: who moves what, as far as there is room.
  std::string caption;
  auto add = [&](const std::string& sentence) {
    const std::string next = caption.empty() ? sentence : caption + " " + sentence;
    if (text_bottom + 6 + f.small->CalcTextSizeA(f.small->FontSize, 1e9f, area.w(), next.c_str()).y <= area.max.y) caption = next;
  };
  if (L.kernel == SmemKernel::HopperForward) {
    add("The producer issues the CTA's i-th K and V tiles (TMA) into stage i mod " + std::to_string(L.stages) +
        "; both consumers free K after their S, V after their P̃V.");
    if (L.o_in_smem) add("Each consumer writes its 64 rows of O to the O tile for a TMA store.");
    if (L.fp8)
      add(L.vt_keys() > L.Bc ? "fp8: one byte an element; V's stages hold Vᵀ in boxes of 128 keys, a tile of " +
                                   std::to_string(L.Bc) + " taking " + std::to_string(L.vt_keys() / 128) +
                                   " (the hatched " + std::to_string(L.vt_keys() - L.Bc) + " columns are never read)."
                             : std::string("fp8: one byte an element; V's stages hold Vᵀ."));
  } else {
    add("K and V stay for the whole CTA, 64 keys a consumer. Q, dO, LSE and D of each query tile go through " +
        std::to_string(L.stages) + " stages, refilled once both consumers' dV, dK products are done; dSᵀ is double-buffered; each consumer stages its dQ block (float32) for the TMA reduce-add to dQacc.");
  }
  if (L.tiles_only) add("(The trace's size counts the tiles alone: no alignment slack or barriers drawn.)");
  if (L.from_table) add("(The trace has no shared-memory size: the stages are variant " + L.variant + "'s.)");
  if (!caption.empty())
    dl->AddText(f.small, f.small->FontSize, ImVec2(area.min.x, text_bottom + 6), theme::kTextDim, caption.c_str(), nullptr, area.w());
  return rects;
}

// The shared-memory bar: the regions in address order, filled by what they hold now.
void draw_hopper_map(ImDrawList* dl, const SmemPipeline& L, const PipelineView& v, Rect bar, double budget) {
  float x = bar.min.x;
  for (const auto& g : L.regions()) {
    const float w = float(double(g.bytes) / budget * bar.w());
    const Rect r{ImVec2(x, bar.min.y), ImVec2(std::min(bar.max.x, x + w), bar.max.y)};
    if (g.tensor == tr::Tensor::None) {
      dl->AddRectFilled(r.min, r.max, theme::kBorder);
    } else {
      StageView sv = region_view(L, v, g);
      if (g.tensor == tr::Tensor::O)
        for (int h = 0; h < L.consumers; ++h) sv.state = std::max(sv.state, o_view(v, h).state);
      if (sv.state == StageState::Loading) {
        dl->AddRectFilled(r.min, r.max, theme::tensor_color(g.tensor, 0.3f));
      } else if (sv.state != StageState::Empty) {
        dl->AddRectFilled(r.min, r.max, theme::tensor_color(g.tensor, sv.state == StageState::Computing ? 0.95f : 0.25f));
      }
      dl->AddLine(ImVec2(r.max.x, r.min.y), ImVec2(r.max.x, r.max.y), theme::kPanel);
    }
    x += w;
  }
}

std::string hopper_map_caption(const SmemPipeline& L, double budget) {
  const std::string st = std::to_string(L.stages), b = format_bytes(budget), total = format_bytes(double(L.total_bytes()));
  if (L.kernel == SmemKernel::HopperForward)
    return total + " = Q + " + st + " stages × (K + " + (L.fp8 ? "Vᵀ" : "V") + ")" + (L.o_in_smem ? " + O" : "") +
           (L.tiles_only ? "" : " + barriers") + " · budget " + b;
  return total + " = K, V + " + st + " × (Q, dO, LSE, D) + 2 dSᵀ + 2 dQ" + (L.tiles_only ? "" : " + barriers") + " · budget " + b;
}

}  // namespace

void memory_panel(UiState& s) {
  if (!begin_panel(kPanelMemory)) return;
  Document* doc = s.doc.get();
  if (!doc) return end_empty_panel("Pick one in the trace browser (View → Trace browser).");
  const auto& r = *doc->replay;
  const auto& meta = r.meta();
  const auto& f = theme::fonts();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const int track = std::clamp(doc->selected_track, 0, std::max(0, r.track_count() - 1));
  const auto& list = r.track_events(track);
  const Cursor cur = doc->cursor();
  const TrackCursor tc = r.track_count() > 0 ? r.track_cursor(track, cur) : TrackCursor{};
  // A CTA in lanes holds what each lane put on chip: the producer's tiles in SRAM, the consumers' in registers.
  const auto tiles = r.track_count() > 0 ? r.cta_tiles(track, cur) : std::vector<ResidentTile>{};
  const int bh = list.empty() ? 0 : r.trace().events[std::size_t(list.front())].bh;
  const auto& tinfo = r.trace().tracks.empty() ? tr::Track{} : r.trace().tracks[std::size_t(track)];
  const std::string kname = tinfo.kernel < int(r.trace().kernels.size()) ? r.trace().kernels[std::size_t(tinfo.kernel)].name : "?";
  // A tensor-core kernel (steps 08, 09): its shared memory drawn as the kernel's slots.
  const SmemPipeline pipe = r.track_count() > 0 ? derive_smem_pipeline(r.trace(), tinfo.kernel) : SmemPipeline{};
  const PipelineView pview = pipe.valid ? pipeline_at(r, pipe, track, cur) : PipelineView{};
  const std::vector<SmemRegion> regions = pipe.regions();  // step 09's

  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float legend_h = 2 * (f.small->FontSize + 5) + 6;
  const float head_h = ImGui::GetTextLineHeightWithSpacing() + f.small->FontSize + 4;
  const float split = std::floor(avail.x * 0.62f);
  const Rect hbm_area{ImVec2(p0.x, p0.y + head_h), ImVec2(p0.x + split - 16, p0.y + avail.y - legend_h)};
  const Rect chip_area{ImVec2(p0.x + split + 8, p0.y + head_h), ImVec2(p0.x + avail.x, p0.y + avail.y - legend_h)};

  // Headings.
  char buf[256];
  // A decoding trace's HBM is its KV cache, one K/V head of it, and one sequence's small tensors.
  const bool decoding = r.cache().on();
  const CacheFocus focus = decoding && r.track_count() > 0 ? cache_focus(r, track) : CacheFocus{};
  if (decoding)
    std::snprintf(buf, sizeof buf, "HBM · the KV cache · kv head %d · sequence %d", focus.hk, focus.b);
  else
    std::snprintf(buf, sizeof buf, "HBM · head %d of %lld", bh, static_cast<long long>(head_count(meta)));
  dl->AddText(f.title, f.title->FontSize, p0, theme::kText, buf);
  const std::string role = decoding && r.track_count() > 0 ? r.decode().label(r.trace(), track) : "";
  if (!role.empty())
    std::snprintf(buf, sizeof buf, "On chip · SM %d · %s", tinfo.sm, role.c_str());
  else
    std::snprintf(buf, sizeof buf, "On chip · SM %d · CTA %d%s", tinfo.sm, tinfo.cta,
                  r.track_count() > 0 && r.laned(track) ? (" · " + tr::lane_name(r.trace(), tinfo)).c_str() : "");
  dl->AddText(f.title, f.title->FontSize, ImVec2(chip_area.min.x, p0.y), theme::kText, buf);
  dl->AddText(f.small, f.small->FontSize, ImVec2(chip_area.min.x, p0.y + f.title->FontSize + 3), theme::kTextDim,
              (kname + (role.empty() ? "" : " · CTA " + std::to_string(tinfo.cta)) + " · click a CTA in the timeline or an SM to follow it").c_str());
  dl->AddText(f.small, f.small->FontSize, ImVec2(p0.x, p0.y + f.title->FontSize + 3), theme::kTextDim,
              decoding ? (r.cache().paged() ? "pages in slot order, each framed in its sequence's colour; hover one, or a row of the table"
                                            : "the cache in slot order, a sequence's keys one run; hover one")
                       : "every tensor of the pass, drawn at its true relative size");
  dl->AddLine(ImVec2(p0.x + split - 4, p0.y), ImVec2(p0.x + split - 4, p0.y + avail.y - legend_h), theme::kBorder);

  // HBM.
  const HbmLayout layout = decoding ? HbmLayout{} : layout_hbm(*doc, hbm_area, true);
  CacheRects cache_rects;
  if (decoding)
    cache_rects = draw_cache_hbm(dl, *doc, hbm_area, true);
  else
    draw_hbm(dl, *doc, layout, bh, true);
  // Where the selected CTA's tiles came from (a gathered tile: each of its rows).
  for (const auto& t : tiles) {
    if (t.where != Residence::Smem || !r.placeable(t.tensor, t.bh, t.round)) continue;
    if (pipe.valid && t.tensor == tr::Tensor::dQacc) continue;  // added to by atomics, never held in SRAM
    if (const HbmItem* it = layout.find(t.tensor))
      for (const Rect& er : element_rects(*it->grid, it->rect, r.slot_orders(t.tensor, t.bh, t.round), t.row0, t.rows,
                                          t.col0, t.cols))
        dl->AddRect(ImVec2(er.min.x - 1, er.min.y - 1), ImVec2(er.max.x + 1, er.max.y + 1), theme::kAccent, 0, 0, 1.5f);
  }
  // And, with stages, where the tiles in flight come from.
  auto outline_in_flight = [&](tr::Tensor t, const StageView& st) {
    if (const HbmItem* it = layout.find(t)) {
      const int cols = t == tr::Tensor::LSE || t == tr::Tensor::D ? 1 : pipe.d;
      const Rect er = element_rect(*it->grid, it->rect, st.key0, st.keys, 0, cols);
      dl->AddRect(ImVec2(er.min.x - 1, er.min.y - 1), ImVec2(er.max.x + 1, er.max.y + 1), IM_COL32(255, 255, 255, 170), 0, 0, 1.5f);
    }
  };
  for (const auto& g : regions) {
    const StageView st = region_view(pipe, pview, g);
    if (st.state == StageState::Loading) outline_in_flight(g.tensor, st);
  }
  for (const auto& st : pview.stages)
    if (st.state == StageState::Loading && !pipe.hopper())
      for (tr::Tensor t : pipe.stage_tensors()) outline_in_flight(t, st);

  // What this step does with HBM, under the picture.
  float hbm_bottom = hbm_area.min.y;
  for (const auto& it : layout.items) hbm_bottom = std::max(hbm_bottom, it.rect.max.y);
  // (A decoding trace's cache fills the whole area: the docs and the tooltips say what it does.)
  const char* caption = decoding ? nullptr : step_caption(meta.step, meta.pass);
  if (caption && hbm_area.max.y - hbm_bottom > 3 * f.regular->FontSize + 30) {
    ImGui::SetCursorScreenPos(ImVec2(hbm_area.min.x, hbm_bottom + 2 * f.small->FontSize + 14));
    ImGui::PushTextWrapPos(hbm_area.max.x);
    ImGui::PushStyleColor(ImGuiCol_Text, theme::kTextDim);
    ImGui::TextWrapped("%s", caption);
    ImGui::PopStyleColor();
    ImGui::PopTextWrapPos();
  }

  // The chip: budget bar, then shared memory, then registers.
  dl->PushClipRect(ImVec2(chip_area.min.x, p0.y), ImVec2(chip_area.max.x, chip_area.max.y + 2), true);
  const double budget = double(std::max<std::int64_t>(meta.sram_budget_bytes, r.peak_smem()));
  const double kernel_smem = tinfo.kernel < int(r.trace().kernels.size())
                                 ? double(r.trace().kernels[std::size_t(tinfo.kernel)].smem_bytes)
                                 : double(meta.smem_per_cta_bytes);
  std::int64_t smem_now = 0, regs_now = 0;
  for (const auto& t : tiles) (t.where == Residence::Smem ? smem_now : regs_now) += t.bytes;
  float y = chip_area.min.y + 2;
  const float bar_h = 18;
  {
    const Rect bar{ImVec2(chip_area.min.x, y), ImVec2(chip_area.max.x, y + bar_h)};
    dl->AddRectFilled(bar.min, bar.max, IM_COL32(40, 44, 54, 255), 3);
    float x = bar.min.x;
    if (pipe.valid && budget > 0) (pipe.hopper() ? draw_hopper_map : draw_smem_map)(dl, pipe, pview, bar, budget);
    for (const auto& t : tiles) {
      if (pipe.valid || t.where != Residence::Smem || budget <= 0) continue;
      const float w = float(double(t.bytes) / budget * bar.w());
      dl->AddRectFilled(ImVec2(x, bar.min.y), ImVec2(std::min(bar.max.x, x + w), bar.max.y), theme::tensor_color(t.tensor, 0.9f));
      x += w;
    }
    if (kernel_smem > 0 && budget > 0) {
      const float kx = bar.min.x + float(kernel_smem / budget * bar.w());
      dl->AddLine(ImVec2(kx, bar.min.y - 3), ImVec2(kx, bar.max.y + 3), theme::kText, 2);
    }
    dl->AddRect(bar.min, bar.max, theme::kBorder, 3);
    y += bar_h + 3;
    std::snprintf(buf, sizeof buf, "%s loaded · kernel's shared memory %s · budget %s", format_bytes(double(smem_now)).c_str(),
                  kernel_smem > 0 ? format_bytes(kernel_smem).c_str() : "0 B", format_bytes(budget).c_str());
    dl->AddText(f.small, f.small->FontSize, ImVec2(chip_area.min.x, y), theme::kTextDim,
                pipe.valid && pipe.hopper() ? hopper_map_caption(pipe, budget).c_str()
                : pipe.valid  ? smem_map_caption(pipe, budget, chip_area.w()).c_str()
                              : buf);
    y += f.small->FontSize + 8;
    if (!pipe.valid && !pipe.why_not.empty()) {  // a tensor-core trace whose slots cannot be told
      dl->AddText(f.small, f.small->FontSize, ImVec2(chip_area.min.x, y - 4), theme::kWarning,
                  ("stages unknown: " + pipe.why_not).c_str(), nullptr, chip_area.w());
      y += f.small->CalcTextSizeA(f.small->FontSize, 1e9f, chip_area.w(), ("stages unknown: " + pipe.why_not).c_str()).y + 4;
    }
  }

  // Slots: every tensor this CTA ever holds, in a stable place (tiles arrive where the next
  // one of their kind will), each as wide as its widest tile at one scale for all, so that
  // tile sizes compare.
  std::vector<Slot> slots;
  std::vector<int> cta_events;  // a CTA in lanes: every lane's (its consumers compute what a producer only loads)
  for (int lt : r.track_count() > 0 ? r.lanes_of(track) : std::vector<int>{})
    cta_events.insert(cta_events.end(), r.track_events(lt).begin(), r.track_events(lt).end());
  int gathered = 0;  // a decoding trace's tile: the rows of the run of loads it is gathered from
  for (std::size_t i = 0; i < cta_events.size(); ++i) {
    const int e = cta_events[i];
    const auto& ev = r.trace().events[std::size_t(e)];
    const tr::Event* prev = i > 0 ? &r.trace().events[std::size_t(cta_events[i - 1])] : nullptr;
    const bool gathers = decoding && prev && prev->track == ev.track && prev->kind == tr::Kind::Load &&
                         ev.kind == tr::Kind::Load && prev->tensor == ev.tensor;
    gathered = gathers ? gathered + ev.rows : ev.rows;
    Residence w;
    const tr::Tensor t = on_chip_tensor(ev, &w);
    if (t == tr::Tensor::None || ev.kind == tr::Kind::Store || ev.rows <= 0 || ev.cols <= 0) continue;
    if (pipe.valid && w == Residence::Smem) continue;  // drawn as the kernel's slots instead
    const int lane = w == Residence::Regs ? r.trace().tracks[std::size_t(ev.track)].lane : 0;
    auto it = std::find_if(slots.begin(), slots.end(),
                           [&](const Slot& sl) { return sl.tensor == t && sl.where == w && sl.lane == lane; });
    if (it == slots.end()) {
      slots.push_back({t, w, {}, 0, 0, lane});
      it = slots.end() - 1;
    }
    it->max_rows = std::max(it->max_rows, gathered);
    it->max_cols = std::max(it->max_cols, ev.cols);
    if (it->first < 0) it->first = e;
    it->last = e;
  }
  for (auto& sl : slots)
    for (int e : {sl.first, sl.last})
      sl.label_w = std::max(sl.label_w, f.small->CalcTextSizeA(f.small->FontSize, 1e9f, 0,
                                                               tile_label(r.trace().events[std::size_t(e)]).c_str()).x + 6);
  // A lane whose P̃V lags (step 09's fa3: S j+1 before P̃V j) holds P̃ j beside S j+1 or P̃ j+1:
  // its slot of S and P̃ holds two tiles, the newer above the P̃ that waits for its P̃V.
  for (int lt : r.track_count() > 0 ? r.lanes_of(track) : std::vector<int>{}) {
    if (!r.pv_lags(lt)) continue;
    const int lane = r.trace().tracks[std::size_t(lt)].lane;
    for (auto& sl : slots)
      if (sl.tensor == tr::Tensor::S && sl.where == Residence::Regs && sl.lane == lane) sl.stack = 2;
  }
  std::stable_sort(slots.begin(), slots.end(), [](const Slot& a, const Slot& b) {
    return a.where != b.where ? a.where < b.where : a.lane != b.lane ? a.lane < b.lane : int(a.tensor) < int(b.tensor);
  });
  const float row_gap = f.regular->FontSize + 10, slot_gap = 6, pad = 10;
  const float label_h = f.small->FontSize * 2 + 8;
  // A slot is at least wide enough for its label (or, in a row of many, for its tensor's name), as
  // far as its share of the row goes.
  auto min_slot_in = [&](float width) {
    float m = 2 * f.small->FontSize * 2.6f;
    for (Residence w : {Residence::Smem, Residence::Regs}) {
      const auto n = std::count_if(slots.begin(), slots.end(), [&](const Slot& sl) { return sl.where == w; });
      if (n > 0) m = std::min(m, (width - slot_gap * float(n - 1)) / float(n));
    }
    return m;
  };
  auto slot_min = [&](const Slot& sl, float width) {
    const auto n = std::count_if(slots.begin(), slots.end(), [&](const Slot& x) { return x.where == sl.where; });
    const float share = (width - slot_gap * float(n - 1)) / float(std::max<std::ptrdiff_t>(1, n));
    return std::max(min_slot_in(width), std::min(share, sl.label_w));
  };
  // The scale at which every slot, its padding included, fits a row `row_h` tall and `width` wide
  // (a slot of `stack` tiles: each with its label, one above the other).
  auto fit_slots = [&](float row_h, float width) {
    double sc = 1e9;
    for (const auto& sl : slots)
      sc = std::min(sc, double(row_h - pad - float(sl.stack) * label_h) / (double(sl.stack) * sl.max_rows));
    for (Residence w : {Residence::Smem, Residence::Regs})
      for (int iter = 0; iter < 4; ++iter) {
        double fixed = 0, cols = 0, gaps = 0;
        for (const auto& sl : slots) {
          if (sl.where != w) continue;
          gaps += gaps > 0 || fixed > 0 || cols > 0 ? slot_gap : 0;
          if (sl.max_cols * sc + pad < slot_min(sl, width)) {
            fixed += slot_min(sl, width);
          } else {
            cols += sl.max_cols;
            fixed += pad;
          }
        }
        if (cols > 0) sc = std::min(sc, (width - gaps - fixed) / cols - 1e-9);
      }
    return sc;
  };
  // Two rows of equal height, SRAM above registers. With the kernel's slots, SRAM gets the
  // height (or, where the chip is wide, the width beside the registers) that draws both at the
  // largest common scale.
  const float both_h = std::max(80.0f, chip_area.max.y - y - 2 * row_gap - f.small->FontSize * 2 - 10);
  float smem_h = both_h * 0.5f, rows_h = smem_h;
  float regs_x0 = chip_area.min.x, regs_w = chip_area.w();
  const float smem_y = y + row_gap;
  float regs_y = smem_y + smem_h + row_gap, regs_title_y = smem_y + smem_h + 4;
  Rect pipe_area{};
  double scale = 1e9;
  if (!pipe.valid) {
    scale = fit_slots(rows_h, chip_area.w());
  } else {
    const float sep = 16;
    auto bisect = [](float lo, float hi, auto&& first_minus_second) {
      for (int i = 0; i < 24; ++i) {
        const float mid = (lo + hi) * 0.5f;
        (first_minus_second(mid) < 0 ? lo : hi) = mid;
      }
      return (lo + hi) * 0.5f;
    };
    auto sram = [&](float w, float h) {
      const Rect a{ImVec2(0, 0), ImVec2(w, h)};
      return pipe.hopper() ? hopper_scale(pipe, a) : pipeline_scale(pipe, a);
    };
    auto regs = [&](float h, float w) { return fit_slots(h, w); };
    // Stacked: the SRAM row's height where both rows draw at one scale.
    const float h_a = std::floor(bisect(40, both_h - 40, [&](float h) { return sram(chip_area.w(), h) - regs(both_h - h, chip_area.w()); }));
    const double s_a = std::min(sram(chip_area.w(), h_a), regs(both_h - h_a, chip_area.w()));
    // Side by side: the SRAM's width, the registers beside it, both the full height.
    const float full_h = both_h + row_gap;
    const float w_b = std::floor(bisect(60, chip_area.w() - sep - 60, [&](float w) { return sram(w, full_h) - regs(full_h, chip_area.w() - sep - w); }));
    const double s_b = std::min(sram(w_b, full_h), regs(full_h, chip_area.w() - sep - w_b));
    if (s_a >= s_b) {
      scale = s_a;
      smem_h = h_a;
      rows_h = both_h - h_a;
      regs_y = smem_y + smem_h + row_gap;
      regs_title_y = smem_y + smem_h + 4;
      pipe_area = {ImVec2(chip_area.min.x, smem_y), ImVec2(chip_area.max.x, smem_y + smem_h)};
    } else {
      scale = s_b;
      pipe_area = {ImVec2(chip_area.min.x, smem_y), ImVec2(chip_area.min.x + w_b, smem_y + full_h)};
      regs_x0 = pipe_area.max.x + sep;
      regs_w = chip_area.max.x - regs_x0;
      regs_y = smem_y;
      regs_title_y = y;
      double tallest = 0;
      float stack_labels = 1;
      for (const auto& sl : slots)
        if (double(sl.stack) * sl.max_rows > tallest) {
          tallest = double(sl.stack) * sl.max_rows;
          stack_labels = float(sl.stack);
        }
      rows_h = std::min(full_h, float(tallest * scale) + stack_labels * label_h + pad + 8);
    }
  }
  if (scale > 1e8 || scale <= 0) scale = 1;
  {
    const float title_w = (pipe.valid ? pipe_area.w() : chip_area.w()) - 4;
    const char* smem_title = !pipe.valid ? "Loaded from HBM (SRAM)"
                             : f.regular->CalcTextSizeA(f.regular->FontSize, 1e9f, 0, "Shared memory (SRAM), as the kernel lays it out").x <= title_w
                                 ? "Shared memory (SRAM), as the kernel lays it out"
                                 : f.regular->CalcTextSizeA(f.regular->FontSize, 1e9f, 0, "Shared memory (SRAM)").x <= title_w ? "Shared memory (SRAM)" : "SRAM";
    dl->AddText(f.regular, f.regular->FontSize, ImVec2(chip_area.min.x, y), theme::kTextDim, smem_title);
    const char* regs_title = f.regular->CalcTextSizeA(f.regular->FontSize, 1e9f, 0, "Computed on chip (registers)").x <= regs_w
                                 ? "Computed on chip (registers)" : "Registers";
    dl->AddText(f.regular, f.regular->FontSize, ImVec2(regs_x0, regs_title_y), theme::kTextDim, regs_title);
  }
  const PipelineRects prects = pipe.valid && !pipe.hopper() ? draw_smem_pipeline(dl, pipe, pview, pipe_area, scale) : PipelineRects{};
  const std::vector<Rect> hrects = pipe.valid && pipe.hopper() ? draw_hopper_smem(dl, pipe, pview, pipe_area, scale) : std::vector<Rect>{};
  float x_smem = chip_area.min.x, x_regs = regs_x0;
  for (auto& sl : slots) {
    float& x = sl.where == Residence::Smem ? x_smem : x_regs;
    const float sy = sl.where == Residence::Smem ? smem_y : regs_y;
    const float w = std::max(slot_min(sl, regs_w), float(sl.max_cols * scale) + pad);
    sl.rect = {ImVec2(x, sy), ImVec2(x + w, sy + rows_h)};
    dl->AddRect(sl.rect.min, sl.rect.max, theme::with_alpha(theme::kBorder, 0.8f), 4);
    for (int k = 1; k < sl.stack; ++k) {
      const float ky = sl.rect.min.y + sl.rect.h() * float(k) / float(sl.stack);
      dl->AddLine(ImVec2(sl.rect.min.x + 4, ky), ImVec2(sl.rect.max.x - 4, ky), theme::with_alpha(theme::kBorder, 0.5f));
    }
    x += w + slot_gap;
  }
  auto lane_of = [&](int event) { return event >= 0 ? r.trace().tracks[std::size_t(r.trace().events[std::size_t(event)].track)].lane : 0; };
  auto slot_of = [&](tr::Tensor t, Residence w, int lane = 0) -> const Slot* {
    if (t == tr::Tensor::P && w == Residence::Regs) t = tr::Tensor::S;
    if (t == tr::Tensor::dS && w == Residence::Regs) t = tr::Tensor::dP;
    for (const auto& sl : slots)
      if (sl.tensor == t && sl.where == w && (w == Residence::Smem || sl.lane == lane)) return &sl;
    return nullptr;
  };
  // In a slot of two tiles (a lane whose P̃V lags), the newest tile of S or P̃ goes above, an
  // older P̃ (one that waits for its P̃V) below.
  std::vector<int> newest_score;  // by lane: the event that put it there
  auto newest_of = [&](int lane) -> int& {
    if (lane >= int(newest_score.size())) newest_score.resize(std::size_t(lane) + 1, -1);
    return newest_score[std::size_t(lane)];
  };
  for (const auto& t : tiles)
    if (t.where == Residence::Regs && (t.tensor == tr::Tensor::S || t.tensor == tr::Tensor::P))
      newest_of(lane_of(t.event)) = std::max(newest_of(lane_of(t.event)), t.event);
  auto place_in = [&](const Slot& sl, const ResidentTile& t) {
    if (sl.stack < 2) return sl.rect;
    const float h = sl.rect.h() / float(sl.stack);
    const int at = t.event < newest_of(lane_of(t.event)) ? 1 : 0;
    return Rect{ImVec2(sl.rect.min.x, sl.rect.min.y + h * float(at)), ImVec2(sl.rect.max.x, sl.rect.min.y + h * float(at + 1))};
  };
  const int last_event = tc.done > 0 ? list[std::size_t(tc.done) - 1] : -1;
  // The atomic dK/dV kernel computes a tile's share of dQ and adds it to dQacc within that
  // tile's Load dQacc event (its AccumulateDQ is recorded after): meanwhile the registers hold
  // that share, whatever the last AccumulateDQ said.
  std::vector<ResidentTile> on_chip = tiles;
  if (pipe.valid && pipe.atomic_dq && tc.active >= 0) {
    const int ei = list[std::size_t(tc.active)];
    const auto& e = r.trace().events[std::size_t(ei)];
    if (e.tensor == tr::Tensor::dQacc && e.kind != tr::Kind::Skip) {
      const ResidentTile share{tr::Tensor::dQ, Residence::Regs, e.bh, e.row0, e.rows, e.col0, e.cols,
                               std::int64_t(e.rows) * e.cols * 4, ei, e.round};
      auto it = std::find_if(on_chip.begin(), on_chip.end(),
                             [](const ResidentTile& t) { return t.tensor == tr::Tensor::dQ && t.where == Residence::Regs; });
      if (it != on_chip.end())
        *it = share;
      else
        on_chip.push_back(share);
    }
  }
  for (const auto& t : on_chip) {
    if (pipe.valid && t.where == Residence::Smem) continue;
    const Slot* sl = slot_of(t.tensor, t.where, lane_of(t.event));
    if (!sl) continue;
    const Rect card = draw_tile_card(dl, place_in(*sl, t), t, scale, t.event == last_event);
    // Each warp holds its rows of S, P̃ and O as mma accumulators (the dK/dV kernels: its keys, and
    // in tc_dkdv_smem_kernel its queries of S, dP, dS and its columns of dK, dV).
    if (pipe.valid && !pipe.hopper()) draw_register_bands(dl, pipe, card, t);
  }

  // Running statistics of the sampled row, next to the registers.
  float stats_y = pipe.valid ? smem_y + both_h + row_gap + 6 : regs_y + rows_h + 6;
  for (int k = tc.done - 1; k >= 0; --k) {
    const auto& e = r.trace().events[std::size_t(list[std::size_t(k)])];
    if (!std::isfinite(e.m)) continue;
    std::snprintf(buf, sizeof buf, "%s:  m = %.3f   ℓ = %.3f", sample_row_label(r, e).c_str(), double(e.m), double(e.l));
    // A clustered row's label names its slot too; where that does not fit, the row alone (the
    // softmax panel has the slot).
    if (f.mono->CalcTextSizeA(f.mono->FontSize, 1e9f, 0, buf).x > chip_area.w() && e.round >= 0 &&
        r.placeable(tr::Tensor::Q, e.bh, e.round))
      std::snprintf(buf, sizeof buf, "row %d:  m = %.3f   ℓ = %.3f", r.row_of_slot(tr::Tensor::Q, e.bh, e.round, e.sample_row),
                    double(e.m), double(e.l));
    dl->AddText(f.mono, f.mono->FontSize, ImVec2(chip_area.min.x, stats_y), theme::tensor_color(tr::Tensor::L), buf);
    stats_y += f.mono->FontSize + 4;
    break;
  }

  // What the CTA does now, and the tile in flight.
  if (!tc.started || r.track_count() == 0) {
    std::snprintf(buf, sizeof buf, "not started yet (begins at %s)", format_ns(r.track_begin_ns(track)).c_str());
  } else if (tc.retired) {
    std::snprintf(buf, sizeof buf, "retired at %s: its tiles are gone; what it stored is in HBM", format_ns(r.track_end_ns(track)).c_str());
  } else if (tc.active >= 0) {
    const auto& e = r.trace().events[std::size_t(list[std::size_t(tc.active)])];
    // The atomic dK/dV kernel's dQacc events are its atomics.
    const char* atomics = pipe.valid && pipe.atomic_dq && e.tensor == tr::Tensor::dQacc ? " · atomics" : "";
    std::snprintf(buf, sizeof buf, "now: %s %s%s  (%d%%)%s", kind_label(e.kind), tile_label(e).c_str(),
                  e.bytes > 0 ? ("  " + format_bytes(double(e.bytes))).c_str() : "", int(tc.frac * 100), atomics);
  } else if (tc.done > 0) {
    const auto& e = r.trace().events[std::size_t(list[std::size_t(tc.done) - 1])];
    std::snprintf(buf, sizeof buf, "last: %s %s", kind_label(e.kind), tile_label(e).c_str());
  } else {
    std::snprintf(buf, sizeof buf, "between events");
  }
  dl->AddText(f.regular, f.regular->FontSize, ImVec2(chip_area.min.x, stats_y), theme::kAccent, buf, nullptr,
              chip_area.w());

  if (tc.active >= 0) {
    const int e_idx = list[std::size_t(tc.active)];
    const auto& e = r.trace().events[std::size_t(e_idx)];
    if (e.kind == tr::Kind::Load || e.kind == tr::Kind::Store) {
      Residence w;
      const tr::Tensor chip_t = on_chip_tensor(e, &w);
      const Slot* sl = e.kind == tr::Kind::Load ? slot_of(chip_t, Residence::Smem) : slot_of(chip_t, Residence::Regs, lane_of(e_idx));
      if (!sl) sl = slot_of(chip_t, Residence::Smem);
      // A 16-bit backward adds dQ up in float32 dQacc: what it stores there leaves from the dQ
      // accumulator in registers, and the pass that rounds dQacc into dQ stores the dQacc tile it loaded.
      if (!sl && e.kind == tr::Kind::Store && chip_t == tr::Tensor::dQacc) sl = slot_of(tr::Tensor::dQ, Residence::Regs);
      if (!sl && e.kind == tr::Kind::Store && chip_t == tr::Tensor::dQ) sl = slot_of(tr::Tensor::dQacc, Residence::Smem);
      // The atomic dK/dV kernel's Load and Store of dQacc are its atomics: dQ's share goes from
      // the warps' registers to HBM, and nothing comes back to SRAM.
      const bool atomics = pipe.valid && pipe.atomic_dq && e.tensor == tr::Tensor::dQacc;
      if (atomics) sl = slot_of(tr::Tensor::dQ, Residence::Regs);
      const bool to_hbm = e.kind == tr::Kind::Store || atomics;
      const HbmItem* it = layout.find(e.tensor);
      // With the kernel's slots, a load lands in its own: Q's, or the stage its tile goes to.
      const Rect* pslot = nullptr;
      if (pipe.valid && pipe.hopper() && e.kind == tr::Kind::Load)  // step 09: the region of its tensor that holds its tile
        for (std::size_t g = 0; g < regions.size() && !pslot; ++g) {
          const StageView sv = region_view(pipe, pview, regions[g]);
          if (regions[g].tensor == e.tensor && sv.state != StageState::Empty && sv.key0 == e.row0) pslot = &hrects[g];
        }
      if (pipe.valid && !pipe.hopper() && pipe.backward() && e.kind == tr::Kind::Load && !atomics)
        pslot = prects.landing(pview, e.tensor, e.row0);
      if (pipe.valid && !pipe.hopper() && !pipe.backward() && e.kind == tr::Kind::Load) {
        if (e.tensor == tr::Tensor::Q) pslot = &prects.q;
        for (std::size_t st = 0; st < pview.stages.size() && !pslot; ++st)
          if (pview.stages[st].tile >= 0 && pview.stages[st].key0 == e.row0 &&
              (e.tensor == tr::Tensor::K || e.tensor == tr::Tensor::V))
            pslot = e.tensor == tr::Tensor::K ? &prects.k[st] : &prects.v[st];
      }
      // Where its rows are in HBM: a decoding trace's in the cache's pages or its sequence's rows.
      const std::vector<Rect> rows_in_hbm =
          decoding ? cache_rects.rows_of(r, e)
          : it && r.placeable(e.tensor, e.bh, e.round)
              ? element_rects(*it->grid, it->rect, r.slot_orders(e.tensor, e.bh, e.round), e.row0, e.rows, e.col0, e.cols)
              : std::vector<Rect>{};
      if ((sl || pslot) && !rows_in_hbm.empty()) {
        // A gathered tile travels from (or to) the span of its rows; each row draws its own thread.
        const Rect hr = hull(rows_in_hbm);
        const float w2 = std::max(3.0f, float(e.cols * scale)), h2 = std::max(3.0f, float(e.rows * scale));
        const ImVec2 sc = pslot ? ImVec2((pslot->min.x + pslot->max.x) * 0.5f, (pslot->min.y + pslot->max.y) * 0.5f)
                                : ImVec2((sl->rect.min.x + sl->rect.max.x) * 0.5f,
                                         sl->rect.min.y + (sl->rect.h() - f.small->FontSize * 2) * 0.5f);
        const Rect cr{ImVec2(sc.x - w2 * 0.5f, sc.y - h2 * 0.5f), ImVec2(sc.x + w2 * 0.5f, sc.y + h2 * 0.5f)};
        const Rect from = to_hbm ? cr : hr, to = to_hbm ? hr : cr;
        const float t = smooth(float(std::clamp(tc.frac, 0.0, 1.0)));
        auto lerp = [&](ImVec2 a, ImVec2 b) { return ImVec2(a.x + (b.x - a.x) * t, a.y + (b.y - a.y) * t); };
        const ImVec2 a((from.min.x + from.max.x) * 0.5f, (from.min.y + from.max.y) * 0.5f);
        const ImVec2 b((to.min.x + to.max.x) * 0.5f, (to.min.y + to.max.y) * 0.5f);
        dl->AddBezierCubic(a, ImVec2(a.x + (b.x - a.x) * 0.5f, a.y), ImVec2(a.x + (b.x - a.x) * 0.5f, b.y), b,
                           theme::tensor_color(e.tensor, 0.55f), 1.5f);
        if (rows_in_hbm.size() > 1) {
          const ImVec2 chip((cr.min.x + cr.max.x) * 0.5f, (cr.min.y + cr.max.y) * 0.5f);
          for (const Rect& row : rows_in_hbm)
            dl->AddLine(ImVec2(row.max.x, (row.min.y + row.max.y) * 0.5f), chip, theme::tensor_color(e.tensor, 0.25f));
        }
        const Rect m{lerp(from.min, to.min), lerp(from.max, to.max)};
        dl->AddRectFilled(m.min, m.max, theme::tensor_color(e.tensor, 0.95f), 2);
        dl->AddRect(m.min, m.max, IM_COL32(255, 255, 255, 220), 2, 0, 1.5f);
      }
    }
  }

  dl->PopClipRect();

  // Legend.
  ImGui::SetCursorScreenPos(ImVec2(p0.x, p0.y + avail.y - legend_h + 6));
  ImGui::PushFont(f.small);
  if (decoding) {
    // The cache's slots in K's colour, its pages' owners in the sequences' colours.
    legend_item(theme::tensor_color(tr::Tensor::K, 0.15f), "holds a key");
    ImGui::SameLine(0, 12);
    legend_item(theme::tensor_color(tr::Tensor::K, 0.85f), "read from HBM");
    ImGui::SameLine(0, 12);
    legend_item(theme::sequence_color(focus.b), "frame: its sequence (number: its place in the table)", true);
    ImGui::SameLine(0, 12);
    legend_item(theme::with_alpha(theme::kBorder, 0.6f), "unused page", true);
    legend_item(IM_COL32(255, 255, 255, 200), "moving now (any CTA)", true);
    ImGui::SameLine(0, 12);
    legend_item(theme::kAccent, "the followed split: its pages (edge), the tile it holds", true);
  } else {
    const tr::Tensor lt = tr::Tensor::Q;
    legend_item(theme::tensor_color(lt, 0.09f), "not touched yet");
    ImGui::SameLine(0, 12);
    legend_item(theme::tensor_color(lt, 0.5f), "read from HBM (stronger: read again)");
    ImGui::SameLine(0, 12);
    legend_item(theme::tensor_color(lt, 1.0f), "written to HBM");
    legend_item(IM_COL32(255, 255, 255, 200), "moving now (any CTA)", true);
    ImGui::SameLine(0, 12);
    legend_item(theme::kAccent, "held by the followed CTA", true);
  }
  if (layout.widened) {
    ImGui::SameLine(0, 12);
    ImGui::TextDisabled("· thin tensors drawn wider than to scale");
  }
  ImGui::PopFont();
  end_panel();
}

}  // namespace fs::viz
