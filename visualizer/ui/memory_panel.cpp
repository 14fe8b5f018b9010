// Memory hierarchy: HBM with the step's tensors at their true relative sizes, and the chip of
// the selected CTA (shared memory and registers) with the tiles it holds now, against the
// shared-memory budget. The tile in flight moves along its path, HBM → SRAM or back.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/trace/names.hpp"
#include "visualizer/model/labels.hpp"
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
    case tr::Kind::Store: return e.tensor;  // leaves from where it was computed
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
  // A tensor-core forward (step 08): its shared memory drawn as the kernel's slots.
  const SmemPipeline pipe = r.track_count() > 0 ? derive_smem_pipeline(r.trace(), tinfo.kernel) : SmemPipeline{};
  const PipelineView pview = pipe.valid ? pipeline_at(r, pipe, track, tc) : PipelineView{};

  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float legend_h = 2 * (f.small->FontSize + 5) + 6;
  const float head_h = ImGui::GetTextLineHeightWithSpacing() + f.small->FontSize + 4;
  const float split = std::floor(avail.x * 0.62f);
  const Rect hbm_area{ImVec2(p0.x, p0.y + head_h), ImVec2(p0.x + split - 16, p0.y + avail.y - legend_h)};
  const Rect chip_area{ImVec2(p0.x + split + 8, p0.y + head_h), ImVec2(p0.x + avail.x, p0.y + avail.y - legend_h)};

  // Headings.
  char buf[256];
  std::snprintf(buf, sizeof buf, "HBM · head %d of %lld", bh, static_cast<long long>(head_count(meta)));
  dl->AddText(f.title, f.title->FontSize, p0, theme::kText, buf);
  std::snprintf(buf, sizeof buf, "On chip · SM %d · CTA %d%s", tinfo.sm, tinfo.cta,
                r.track_count() > 0 && r.laned(track) ? (" · " + tr::lane_name(r.trace(), tinfo)).c_str() : "");
  dl->AddText(f.title, f.title->FontSize, ImVec2(chip_area.min.x, p0.y), theme::kText, buf);
  dl->AddText(f.small, f.small->FontSize, ImVec2(chip_area.min.x, p0.y + f.title->FontSize + 3), theme::kTextDim,
              (kname + " · click a CTA in the timeline or an SM to follow it").c_str());
  dl->AddText(f.small, f.small->FontSize, ImVec2(p0.x, p0.y + f.title->FontSize + 3), theme::kTextDim,
              "every tensor of the pass, drawn at its true relative size");
  dl->AddLine(ImVec2(p0.x + split - 4, p0.y), ImVec2(p0.x + split - 4, p0.y + avail.y - legend_h), theme::kBorder);

  // HBM.
  const HbmLayout layout = layout_hbm(*doc, hbm_area, true);
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
  for (const auto& st : pview.stages) {
    if (st.state != StageState::Loading) continue;
    for (tr::Tensor t : pipe.stage_tensors())
      if (const HbmItem* it = layout.find(t)) {
        const int cols = t == tr::Tensor::LSE || t == tr::Tensor::D ? 1 : pipe.d;
        const Rect er = element_rect(*it->grid, it->rect, st.key0, st.keys, 0, cols);
        dl->AddRect(ImVec2(er.min.x - 1, er.min.y - 1), ImVec2(er.max.x + 1, er.max.y + 1), IM_COL32(255, 255, 255, 170), 0, 0, 1.5f);
      }
  }

  // What this step does with HBM, under the picture.
  float hbm_bottom = hbm_area.min.y;
  for (const auto& it : layout.items) hbm_bottom = std::max(hbm_bottom, it.rect.max.y);
  const char* caption = step_caption(meta.step, meta.pass);
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
    if (pipe.valid) draw_smem_map(dl, pipe, pview, bar, budget);
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
                pipe.valid ? smem_map_caption(pipe, budget, chip_area.w()).c_str() : buf);
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
  for (int e : list) {
    const auto& ev = r.trace().events[std::size_t(e)];
    Residence w;
    const tr::Tensor t = on_chip_tensor(ev, &w);
    if (t == tr::Tensor::None || ev.kind == tr::Kind::Store || ev.rows <= 0 || ev.cols <= 0) continue;
    if (pipe.valid && w == Residence::Smem) continue;  // drawn as the kernel's slots instead
    auto it = std::find_if(slots.begin(), slots.end(), [&](const Slot& sl) { return sl.tensor == t && sl.where == w; });
    if (it == slots.end()) {
      slots.push_back({t, w, {}, 0, 0});
      it = slots.end() - 1;
    }
    it->max_rows = std::max(it->max_rows, ev.rows);
    it->max_cols = std::max(it->max_cols, ev.cols);
  }
  std::stable_sort(slots.begin(), slots.end(), [](const Slot& a, const Slot& b) {
    return a.where != b.where ? a.where < b.where : int(a.tensor) < int(b.tensor);
  });
  const float row_gap = f.regular->FontSize + 10, slot_gap = 6, pad = 10;
  const float label_h = f.small->FontSize * 2 + 8;
  // A slot is at least wide enough for its label, unless the row cannot hold that many.
  auto min_slot_in = [&](float width) {
    float m = 2 * f.small->FontSize * 2.6f;
    for (Residence w : {Residence::Smem, Residence::Regs}) {
      const auto n = std::count_if(slots.begin(), slots.end(), [&](const Slot& sl) { return sl.where == w; });
      if (n > 0) m = std::min(m, (width - slot_gap * float(n - 1)) / float(n));
    }
    return m;
  };
  // The scale at which every slot fits a row `row_h` tall and `width` wide.
  auto fit_slots = [&](float row_h, float width) {
    const float min_slot = min_slot_in(width);
    double sc = 1e9;
    for (const auto& sl : slots) sc = std::min(sc, double(row_h - label_h - pad) / sl.max_rows);
    for (Residence w : {Residence::Smem, Residence::Regs})
      for (int iter = 0; iter < 4; ++iter) {
        double fixed = 0, cols = 0, gaps = 0;
        for (const auto& sl : slots) {
          if (sl.where != w) continue;
          gaps += gaps > 0 || fixed > 0 || cols > 0 ? slot_gap : 0;
          if (sl.max_cols * sc + pad < min_slot)
            fixed += min_slot;
          else
            cols += sl.max_cols;
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
    auto sram = [&](float w, float h) { return pipeline_scale(pipe, Rect{ImVec2(0, 0), ImVec2(w, h)}); };
    // fit_slots leaves out the slots' padding (the fp32 drawing keeps that as it was): here it counts.
    auto regs = [&](float h, float w) { return fit_slots(h, w - pad * float(slots.size())); };
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
      for (const auto& sl : slots) tallest = std::max(tallest, double(sl.max_rows));
      rows_h = std::min(full_h, float(tallest * scale) + label_h + pad + 8);
    }
  }
  if (scale > 1e8 || scale <= 0) scale = 1;
  const float min_slot = min_slot_in(regs_w);
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
  const PipelineRects prects = pipe.valid ? draw_smem_pipeline(dl, pipe, pview, pipe_area, scale) : PipelineRects{};
  float x_smem = chip_area.min.x, x_regs = regs_x0;
  for (auto& sl : slots) {
    float& x = sl.where == Residence::Smem ? x_smem : x_regs;
    const float sy = sl.where == Residence::Smem ? smem_y : regs_y;
    const float w = std::max(min_slot, float(sl.max_cols * scale) + pad);
    sl.rect = {ImVec2(x, sy), ImVec2(x + w, sy + rows_h)};
    dl->AddRect(sl.rect.min, sl.rect.max, theme::with_alpha(theme::kBorder, 0.8f), 4);
    x += w + slot_gap;
  }
  auto slot_of = [&](tr::Tensor t, Residence w) -> const Slot* {
    if (t == tr::Tensor::P && w == Residence::Regs) t = tr::Tensor::S;
    if (t == tr::Tensor::dS && w == Residence::Regs) t = tr::Tensor::dP;
    for (const auto& sl : slots)
      if (sl.tensor == t && sl.where == w) return &sl;
    return nullptr;
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
    const Slot* sl = slot_of(t.tensor, t.where);
    if (!sl) continue;
    const Rect card = draw_tile_card(dl, sl->rect, t, scale, t.event == last_event);
    // Each warp holds its rows of S, P̃ and O as mma accumulators (the dK/dV kernels: its keys, and
    // in tc_dkdv_smem_kernel its queries of S, dP, dS and its columns of dK, dV).
    if (pipe.valid) draw_register_bands(dl, pipe, card, t);
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
      const Slot* sl = e.kind == tr::Kind::Load ? slot_of(chip_t, Residence::Smem) : slot_of(chip_t, Residence::Regs);
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
      if (pipe.valid && pipe.backward() && e.kind == tr::Kind::Load && !atomics) pslot = prects.landing(pview, e.tensor, e.row0);
      if (pipe.valid && !pipe.backward() && e.kind == tr::Kind::Load) {
        if (e.tensor == tr::Tensor::Q) pslot = &prects.q;
        for (std::size_t st = 0; st < pview.stages.size() && !pslot; ++st)
          if (pview.stages[st].tile >= 0 && pview.stages[st].key0 == e.row0 &&
              (e.tensor == tr::Tensor::K || e.tensor == tr::Tensor::V))
            pslot = e.tensor == tr::Tensor::K ? &prects.k[st] : &prects.v[st];
      }
      if ((sl || pslot) && it && r.placeable(e.tensor, e.bh, e.round)) {
        // A gathered tile travels from (or to) the span of its rows; each row draws its own thread.
        const std::vector<Rect> rows_in_hbm =
            element_rects(*it->grid, it->rect, r.slot_orders(e.tensor, e.bh, e.round), e.row0, e.rows, e.col0, e.cols);
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
  const tr::Tensor lt = tr::Tensor::Q;
  legend_item(theme::tensor_color(lt, 0.09f), "not touched yet");
  ImGui::SameLine(0, 12);
  legend_item(theme::tensor_color(lt, 0.5f), "read from HBM (stronger: read again)");
  ImGui::SameLine(0, 12);
  legend_item(theme::tensor_color(lt, 1.0f), "written to HBM");
  legend_item(IM_COL32(255, 255, 255, 200), "moving now (any CTA)", true);
  ImGui::SameLine(0, 12);
  legend_item(theme::kAccent, "held by the followed CTA", true);
  if (layout.widened) {
    ImGui::SameLine(0, 12);
    ImGui::TextDisabled("· thin tensors drawn wider than to scale");
  }
  ImGui::PopFont();
  end_panel();
}

}  // namespace fs::viz
