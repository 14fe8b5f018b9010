#include "visualizer/ui/pipeline_view.hpp"

#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <string>

#include "visualizer/model/labels.hpp"
#include "visualizer/ui/theme.hpp"

namespace fs::viz {

namespace tr = fs::trace;

namespace {

constexpr float kColGap = 14, kInnerGap = 4;
constexpr int kLinesBelow = 3;     // under a stage: its state, its tile, its keys
constexpr int kCaptionLines = 2;   // kept free for the caption when sizing
constexpr ImU32 kInk = IM_COL32(18, 20, 26, 255);  // text on a solid tile

float line_h() { return theme::fonts().small->FontSize + 2; }
float header_h() { return theme::fonts().regular->FontSize + 5; }

float text_w(ImFont* f, const std::string& s) { return f->CalcTextSizeA(f->FontSize, 1e9f, 0, s.c_str()).x; }

// The first option that fits in `width`; empty when none does.
std::string fit(ImFont* f, float width, std::initializer_list<std::string> options) {
  for (const auto& o : options)
    if (text_w(f, o) <= width) return o;
  return {};
}

std::string keys_text(const StageView& s) {
  return "keys " + std::to_string(s.key0) + "–" + std::to_string(s.key0 + s.keys - 1);
}

// What a stage holds, in words, for the lines under it: its state and tile j (l1, in c1, and l2
// where l1 had to be short), then `what` it holds or whether the CTA waits for it (l3).
struct StageLines {
  std::string l1, l2, l3;
  ImU32 c1;
};
StageLines stage_lines(const StageView& sv, const std::string& j, const std::string& what, float room) {
  const auto& f = theme::fonts();
  StageLines o{{}, {}, {}, theme::kTextDim};
  switch (sv.state) {
    case StageState::Computing:
      o.l1 = fit(f.small, room, {"computing tile " + j, "computing", "comp."});
      if (o.l1.rfind("computing tile", 0) != 0) o.l2 = "tile " + j;
      o.l3 = fit(f.small, room, {what});
      o.c1 = theme::kAccent;
      break;
    case StageState::Loading:
      o.l1 = fit(f.small, room, {"in flight: tile " + j, "in flight", "loading"});
      if (o.l1.rfind("in flight:", 0) != 0) o.l2 = "tile " + j;
      o.l3 = sv.waited_on ? fit(f.small, room, {"the CTA waits for it", "CTA waits", "waited"})
                          : fit(f.small, room, {what + " (cp.async)", what, "cp.async"});
      o.c1 = theme::kText;
      break;
    case StageState::Free:
      o.l1 = fit(f.small, room, {"free: tile " + j + " done", "free"});
      if (o.l1.rfind("free:", 0) != 0) o.l2 = fit(f.small, room, {"tile " + j + " done", "tile " + j});
      break;
    case StageState::Empty: o.l1 = "empty"; break;
  }
  return o;
}

// The key tile's number: tile j holds keys [j·Bc, (j+1)·Bc).
int key_tile(const SmemPipeline& L, const StageView& s) { return L.Bc > 0 ? s.key0 / L.Bc : s.tile; }

void text_at(ImDrawList* dl, ImFont* f, ImVec2 p, ImU32 c, const std::string& s) {
  if (!s.empty()) dl->AddText(f, f->FontSize, p, c, s.c_str());
}

// A K or V tile of a stage, filled by what the stage holds.
void draw_kv_tile(ImDrawList* dl, const SmemPipeline& L, Rect r, tr::Tensor t, const StageView& s) {
  const auto& f = theme::fonts();
  ImU32 label_c = theme::tensor_color(t, 0.9f);
  switch (s.state) {
    case StageState::Computing:
      dl->AddRectFilled(r.min, r.max, theme::tensor_color(t, 0.92f), 2);
      label_c = kInk;
      break;
    case StageState::Loading:
      dl->AddRectFilled(r.min, r.max, theme::tensor_color(t, 0.16f), 2);
      hatch(dl, r, theme::tensor_color(t, 0.55f), 6);
      dl->AddRect(r.min, r.max, IM_COL32(255, 255, 255, 200), 2, 0, 1.5f);
      label_c = theme::kText;
      break;
    case StageState::Free:
      dl->AddRectFilled(r.min, r.max, theme::tensor_color(t, 0.12f), 2);
      dl->AddRect(r.min, r.max, theme::tensor_color(t, 0.35f), 2);
      label_c = theme::tensor_color(t, 0.6f);
      break;
    case StageState::Empty: dl->AddRect(r.min, r.max, theme::kBorder, 2); break;
  }
  std::string name = tensor_label(t);
  if (s.state != StageState::Empty) {
    const std::string full = name + "[" + std::to_string(s.key0) + ":" + std::to_string(s.key0 + s.keys) + ")";
    if (text_w(f.small, full) + 4 <= r.w()) name = full;
  }
  centered_text(dl, r, label_c, name.c_str(), f.small);
  (void)L;
}

// --- The backward (tc_dkdv_kernel, tc_dkdv_smem_kernel, tc_dq_kernel) -----------------------

constexpr float kStatW = 6;         // a stage's LSE and D: strips beside Q and dO (Br floats, too thin to scale)
constexpr int kBwdCaptionLines = 5;  // kept free for the caption when sizing (it says more than the forward's)

int kept_el(const SmemPipeline& L) { return L.dkdv() ? L.Bc : L.Br; }   // rows of a kept tile
int stage_el(const SmemPipeline& L) { return L.dkdv() ? L.Br : L.Bc; }  // rows of a stage's tile
const char* kept_unit(const SmemPipeline& L) { return L.dkdv() ? "keys" : "rows"; }
const char* stage_unit(const SmemPipeline& L) { return L.dkdv() ? "queries" : "keys"; }
std::string range_text(int a, int n) { return std::to_string(a) + "–" + std::to_string(a + n - 1); }
// The tile's number in its tensor: query tile i (dK/dV), key tile j (dQ).
int stage_tile_no(const SmemPipeline& L, const StageView& s) {
  const int rows = stage_el(L);
  return rows > 0 ? s.key0 / rows : s.tile;
}

// Warps first, first + step, … below `warps`: "1,5".
std::string warp_list(int first, int step, int warps) {
  std::string s = std::to_string(first);
  for (int w = first + step; step > 0 && w < warps; w += step) s += "," + std::to_string(w);
  return s;
}

// Draws text segments one after another from p, each in its colour.
void segments(ImDrawList* dl, ImFont* f, ImVec2 p, std::initializer_list<std::pair<std::string, ImU32>> parts) {
  for (const auto& [s, c] : parts) {
    text_at(dl, f, p, c, s);
    p.x += text_w(f, s);
  }
}

// The warps' rows of a kept tile in r: lines between them, and (labels) which rows each holds,
// counted in the head from `first`, and which warps hold them (tc_dkdv_smem_kernel's rows have
// several).
void kept_bands(ImDrawList* dl, const SmemPipeline& L, Rect r, int first, bool labels) {
  const auto& f = theme::fonts();
  const int bands = L.row_groups;
  if (bands <= 0) return;  // the trace does not say
  const float band = r.h() / float(bands);
  for (int g = 1; g < bands; ++g) {
    const float y = r.min.y + band * float(g);
    dl->AddLine(ImVec2(r.min.x + 1, y), ImVec2(r.max.x - 1, y), theme::kPanel, 2);
  }
  if (!labels || band < f.small->FontSize) return;
  const std::string unit = kept_unit(L);
  auto who = [&](int g) { return (L.band_warps() > 1 ? "warps " : "warp ") + warp_list(g, bands, L.warps); };
  auto brief = [&](int g) { return "w" + warp_list(g, bands, L.warps); };
  const std::string widest = unit + " " + range_text(first + L.warp_row0(bands - 1), L.rows_per_warp);
  const bool two_lines = band >= 2 * f.small->FontSize + 2 && text_w(f.small, widest) + 4 <= r.w() &&
                         text_w(f.small, who(bands - 1)) + 4 <= r.w();
  // Every band says the same: the longest form that fits the widest of them.
  auto one_line = [&](int g) {
    const std::string rows = range_text(first + L.warp_row0(g), L.rows_per_warp);
    return std::vector<std::string>{who(g) + " · " + unit + " " + rows, brief(g) + " · " + unit + " " + rows,
                                    brief(g) + ": " + rows, who(g), brief(g)};
  };
  std::size_t form = 0;
  const auto widest_forms = one_line(bands - 1);
  while (form < widest_forms.size() && text_w(f.small, widest_forms[form]) > r.w() - 4) ++form;
  for (int g = 0; g < bands; ++g) {
    const Rect b{ImVec2(r.min.x, r.min.y + band * float(g)), ImVec2(r.max.x, r.min.y + band * float(g + 1))};
    const std::string rows = range_text(first + L.warp_row0(g), L.rows_per_warp);
    if (two_lines) {
      const Rect top{b.min, ImVec2(b.max.x, b.min.y + b.h() * 0.5f + 1)};
      const Rect bottom{ImVec2(b.min.x, b.min.y + b.h() * 0.5f - 1), b.max};
      centered_text(dl, {top.min, ImVec2(top.max.x, top.max.y + f.small->FontSize * 0.25f)}, kInk, who(g).c_str(), f.small);
      centered_text(dl, {ImVec2(bottom.min.x, bottom.min.y - f.small->FontSize * 0.25f), bottom.max}, kInk,
                    (unit + " " + rows).c_str(), f.small);
    } else if (form < widest_forms.size()) {
      centered_text(dl, b, kInk, one_line(g)[form].c_str(), f.small);
    }
  }
}

// A stage's LSE or D: a strip filled as the stage's tiles are.
void draw_stat_strip(ImDrawList* dl, Rect r, tr::Tensor t, const StageView& s) {
  switch (s.state) {
    case StageState::Computing: dl->AddRectFilled(r.min, r.max, theme::tensor_color(t, 0.92f), 1); break;
    case StageState::Loading:
      dl->AddRectFilled(r.min, r.max, theme::tensor_color(t, 0.3f), 1);
      dl->AddRect(r.min, r.max, IM_COL32(255, 255, 255, 200), 1);
      break;
    case StageState::Free:
      dl->AddRectFilled(r.min, r.max, theme::tensor_color(t, 0.14f), 1);
      dl->AddRect(r.min, r.max, theme::tensor_color(t, 0.35f), 1);
      break;
    case StageState::Empty: dl->AddRect(r.min, r.max, theme::kBorder, 1); break;
  }
}

// The CTA's columns of d (d = 256: half of them) under a tile: an accent line along its bottom.
void mark_columns(ImDrawList* dl, const SmemPipeline& L, const PipelineView& v, Rect r) {
  if (L.split <= 1 || L.d <= 0) return;
  const float x0 = r.min.x + r.w() * float(v.col0) / float(L.d), x1 = r.min.x + r.w() * float(v.col0 + L.cols()) / float(L.d);
  dl->AddRectFilled(ImVec2(x0, r.max.y - 3), ImVec2(x1, r.max.y), theme::kAccent);
}

// dSᵀ's column is at least this wide, for the lines under it (at d = 256 its Br queries are
// narrow beside the stages' d columns).
float ds_col_w(const SmemPipeline& L, float s) { return std::max(float(L.Br) * s, text_w(theme::fonts().small, "read back") + 4); }

bool live(DsPhase p) { return p == DsPhase::Writing || p == DsPhase::Operand || p == DsPhase::Reading; }

// A keys × queries tile of P ∘ Z or dSᵀ in r, filled by its phase, with what the warps do with it
// now: each its block (written: tc_dkdv_smem_kernel's Sᵀ blocks, tc_dkdv_kernel's rows of keys),
// its keys' rows across every query (read as operands), or, dSᵀ for dQ's share, query columns.
// `labels`: which warps, where they fit; otherwise the tile's name (the column's second tile).
void draw_pds_tile(ImDrawList* dl, const SmemPipeline& L, Rect r, tr::Tensor t, DsPhase phase, bool labels) {
  const auto& f = theme::fonts();
  const float fill = live(phase) ? 0.9f : phase == DsPhase::Written ? 0.55f : phase == DsPhase::Spent ? 0.14f : 0;
  if (fill > 0) dl->AddRectFilled(r.min, r.max, theme::tensor_color(t, fill), 2);
  dl->AddRect(r.min, r.max, theme::tensor_color(t, phase != DsPhase::None ? 0.6f : 0.35f), 2);
  const ImU32 ink = fill >= 0.5f ? kInk : theme::tensor_color(t, 0.7f);
  // A grid of `rows` × `cols` blocks, and the label of each (block row g, column o: a long form
  // and a short one), where it fits.
  auto grid = [&](int rows, int cols, bool with_labels, auto&& label) {
    const float bw = r.w() / float(cols), bh = r.h() / float(rows);
    for (int g = 1; g < rows; ++g)
      dl->AddLine(ImVec2(r.min.x + 1, r.min.y + bh * float(g)), ImVec2(r.max.x - 1, r.min.y + bh * float(g)), theme::kPanel, 2);
    for (int o = 1; o < cols; ++o)
      dl->AddLine(ImVec2(r.min.x + bw * float(o), r.min.y + 1), ImVec2(r.min.x + bw * float(o), r.max.y - 1), theme::kPanel, 2);
    if (bh < f.small->FontSize) return;
    for (int g = 0; g < rows; ++g)
      for (int o = 0; o < cols; ++o) {
        const Rect b{ImVec2(r.min.x + bw * float(o), r.min.y + bh * float(g)),
                     ImVec2(r.min.x + bw * float(o + 1), r.min.y + bh * float(g + 1))};
        if (with_labels) {
          const auto [full, brief] = label(g, o);
          centered_text(dl, b, ink, fit(f.small, bw - 4, {full, brief}).c_str(), f.small);
        } else if (g == 0 && o == 0) {  // its name in the first block, clear of the lines
          centered_text(dl, b, ink, (std::string(tensor_label(t)) + "ᵀ").c_str(), f.small);
        }
      }
  };
  using Forms = std::pair<std::string, std::string>;
  if (phase == DsPhase::Reading && L.dq_row_tiles > 0) {
    // By query columns: group g's 16·T queries go to warps g, g + groups, … (ldmatrix.trans).
    const int groups = L.dq_row_groups();
    grid(1, groups, true, [&](int, int g) {
      const std::string who = "w" + warp_list(g, groups, L.warps);
      return Forms{who, who};
    });
  } else if (phase == DsPhase::Operand && L.row_groups > 0) {
    grid(L.row_groups, 1, labels, [&](int g, int) {
      const std::string ws = warp_list(g, L.row_groups, L.warps);
      return Forms{"warps " + ws, "w" + ws};
    });
  } else if (phase != DsPhase::None && phase != DsPhase::Reading && L.row_groups > 0) {
    grid(L.row_groups, L.band_warps(), labels, [&](int g, int o) {
      const std::string w = std::to_string(g + L.row_groups * o);
      return Forms{"warp " + w, "w" + w};
    });
  } else if (!labels || L.row_groups <= 0) {  // no warps to name: the tile's own name
    centered_text(dl, r, ink, (std::string(tensor_label(t)) + "ᵀ").c_str(), f.small);
  }
}

double bwd_scale(const SmemPipeline& L, Rect area) {
  const bool pds = L.ds_in_smem();  // the column of dSᵀ (and P)
  const int ncols = 1 + L.stages + (pds ? 1 : 0);
  const double fixed = kColGap * float(ncols - 1) + (L.dkdv() ? L.stages * (2 + kStatW) : 0);
  const double tall = 2.0 * std::max(kept_el(L), stage_el(L));
  const double h = area.h() - header_h() - kInnerGap - (kLinesBelow + kBwdCaptionLines) * line_h() - 10;
  const double cols = double(L.d) * (1 + L.stages);
  double s = std::min((area.w() - fixed) / (cols + (pds ? L.Br : 0)), h / tall);
  if (pds && float(L.Br * s) < ds_col_w(L, float(s)))  // dSᵀ at its least width
    s = std::min((area.w() - fixed - ds_col_w(L, 0)) / cols, h / tall);
  return std::clamp(s, 0.05, 4.0);
}

PipelineRects draw_bwd(ImDrawList* dl, const SmemPipeline& L, const PipelineView& v, Rect area, double scale) {
  PipelineRects out;
  const auto& f = theme::fonts();
  const bool dkdv = L.dkdv();
  const float s = float(scale);
  const float top = area.min.y + header_h();
  float x = area.min.x;
  float text_bottom = top;
  const auto kept = L.kept_tensors();     // K, V or Q, dO
  const auto staged = L.stage_tensors();  // Q, dO (LSE, D) or K, V
  auto lines_under = [&](float x0, float y, std::initializer_list<std::pair<std::string, ImU32>> lines) {
    for (const auto& [l, c] : lines) {
      if (l.empty()) continue;
      text_at(dl, f.small, ImVec2(x0, y), c, l);
      y += line_h();
    }
    text_bottom = std::max(text_bottom, y);
  };

  // The kept tiles, one above the other: one band per row of warps, the keys (rows) it holds.
  {
    const float w = float(L.d) * s, h = float(kept_el(L)) * s;
    const float room = w + kColGap - 4;
    const std::string a = tensor_label(kept[0]), b = tensor_label(kept[1]), nw = std::to_string(L.warps);
    for (const std::string& tail : {" · " + nw + " warps", " · " + nw + "w", std::string()})
      if (text_w(f.regular, a + ", " + b + tail) <= room || tail.empty()) {
        segments(dl, f.regular, ImVec2(x, area.min.y),
                 {{a, theme::tensor_color(kept[0])}, {", ", theme::kTextDim}, {b, theme::tensor_color(kept[1])}, {tail, theme::kTextDim}});
        break;
      }
    for (int i = 0; i < 2; ++i) {
      const float y0 = top + float(i) * (h + kInnerGap);
      const Rect r{ImVec2(x, y0), ImVec2(x + w, y0 + h)};
      out.kept.emplace_back(kept[std::size_t(i)], r);
      const tr::Tensor t = kept[std::size_t(i)];
      const int bands = std::max(1, L.row_groups);
      const float band = h / float(bands);
      for (int k = 0; k < bands; ++k) {
        const Rect bk{ImVec2(x, y0 + band * float(k)), ImVec2(x + w, y0 + band * float(k + 1))};
        if (v.kept_loaded)
          dl->AddRectFilled(bk.min, bk.max, theme::tensor_color(t, k % 2 ? 0.72f : 0.92f));
        else
          hatch(dl, bk, theme::tensor_color(t, 0.45f), 6);
      }
      dl->AddRect(r.min, r.max, v.kept_loaded ? theme::tensor_color(t) : IM_COL32(255, 255, 255, 200), 2);
      if (v.kept_loaded) {
        kept_bands(dl, L, r, v.kept_row0, i == 0);
        if (i == 1 || L.row_groups <= 0)  // its name in the first band, clear of the lines between warps
          centered_text(dl, {r.min, ImVec2(r.max.x, r.min.y + band)}, kInk, tensor_label(t), f.small);
        if (dkdv && t == tr::Tensor::K) mark_columns(dl, L, v, r);
      } else {
        centered_text(dl, r, theme::kText, tensor_label(t), f.small);
      }
    }
    const float ty = top + 2 * h + kInnerGap + 3;
    lines_under(x, ty,
                {{fit(f.small, room, {std::string(kept_unit(L)) + " " + range_text(v.kept_row0, std::max(1, v.kept_rows)),
                                      range_text(v.kept_row0, std::max(1, v.kept_rows))}),
                  theme::kTextDim},
                 {fit(f.small, room, {format_bytes(double(L.kept_tile_bytes())) + " each", format_bytes(double(L.kept_tile_bytes()))}),
                  theme::kTextDim},
                 {L.rows_per_warp > 0 ? fit(f.small, room, {std::to_string(L.rows_per_warp) + " " + kept_unit(L) + " a warp",
                                                            std::to_string(L.rows_per_warp) + "/warp"})
                                      : fit(f.small, room, {"warps: not traced", "warps: ?"}),
                  theme::kTextDim}});
    x += w + kColGap;
  }

  // The stages: two tiles each (and, dK/dV, the strips of LSE and D beside them).
  out.staged.resize(std::size_t(L.stages));
  for (int st = 0; st < L.stages; ++st) {
    const StageView sv = st < int(v.stages.size()) ? v.stages[std::size_t(st)] : StageView{};
    const float w = float(L.d) * s, h = float(stage_el(L)) * s;
    const float strips = dkdv ? 2 + kStatW : 0;
    const float room = w + strips + kColGap - 4;
    char buf[32];
    std::snprintf(buf, sizeof buf, "stage %d", st);
    text_at(dl, f.regular, ImVec2(x, area.min.y), sv.state == StageState::Computing ? theme::kAccent : theme::kText,
            fit(f.regular, room, {buf, "s" + std::to_string(st)}));
    auto& slots = out.staged[std::size_t(st)];
    for (int i = 0; i < 2; ++i) {
      const float y0 = top + float(i) * (h + kInnerGap);
      const Rect r{ImVec2(x, y0), ImVec2(x + w, y0 + h)};
      slots.emplace_back(staged[std::size_t(i)], r);
      draw_kv_tile(dl, L, r, staged[std::size_t(i)], sv);
      if (dkdv && sv.state != StageState::Empty) mark_columns(dl, L, v, r);
      if (dkdv) {
        const Rect sr{ImVec2(r.max.x + 2, y0), ImVec2(r.max.x + 2 + kStatW, y0 + h)};
        slots.emplace_back(staged[std::size_t(2 + i)], sr);
        draw_stat_strip(dl, sr, staged[std::size_t(2 + i)], sv);
      }
    }
    const float col_bottom = top + 2 * h + kInnerGap;
    if (sv.state == StageState::Computing)
      dl->AddRect(ImVec2(x - 3, top - 3), ImVec2(x + w + strips + 3, col_bottom + 3), theme::kAccent, 3, 0, 2);
    const std::string j = std::to_string(stage_tile_no(L, sv));
    const std::string rows = sv.keys > 0 ? range_text(sv.key0, sv.keys) : std::string();
    const std::string what = fit(f.small, room, {std::string(stage_unit(L)) + " " + rows, rows});
    const auto [l1, l2, l3, c1] = stage_lines(sv, j, what, room);
    lines_under(x, col_bottom + 3, {{l1, c1}, {l2, theme::kTextDim}, {l3, theme::kTextDim}});
    x += w + strips + kColGap;
  }

  // P ∘ Z and dSᵀ (tc_dkdv_smem_kernel) or dSᵀ alone (atomic tc_dkdv_kernel), keys × queries:
  // written by the warps' blocks (rows), read back by their keys (dV, dK) or by query columns (dQ).
  if (L.ds_in_smem()) {
    const float w = float(L.Br) * s, h = float(L.Bc) * s;
    const tr::Tensor P = tr::Tensor::P, dS = tr::Tensor::dS;
    if (L.p_in_smem)
      segments(dl, f.regular, ImVec2(x, area.min.y),
               {{"Pᵀ", theme::tensor_color(P)}, {", ", theme::kTextDim}, {"dSᵀ", theme::tensor_color(dS)}});
    else
      text_at(dl, f.regular, ImVec2(x, area.min.y), theme::tensor_color(dS), "dSᵀ");
    std::vector<std::pair<tr::Tensor, DsPhase>> tiles;
    if (L.p_in_smem) tiles.emplace_back(P, v.p_phase);
    tiles.emplace_back(dS, v.ds_phase);
    for (std::size_t i = 0; i < tiles.size(); ++i) {
      const auto [t, phase] = tiles[i];
      const float y0 = top + float(i) * (h + kInnerGap);
      const Rect r{ImVec2(x, y0), ImVec2(x + w, y0 + h)};
      (t == P ? out.p : out.ds) = r;
      draw_pds_tile(dl, L, r, t, phase, i == 0);
      if (live(phase))
        dl->AddRect(ImVec2(r.min.x - 3, r.min.y - 3), ImVec2(r.max.x + 3, r.max.y + 3), theme::kAccent, 3, 0, 2);
    }
    const float room = ds_col_w(L, s);
    const std::string i = std::to_string(L.Br > 0 ? v.ds_row0 / L.Br : v.ds_tile);
    std::string l2, l3;
    ImU32 c2 = theme::kTextDim;
    switch (v.ds_phase) {
      case DsPhase::Writing:
        l2 = fit(f.small, room, {L.p_in_smem ? "written by blocks" : "written by keys", "writing", "write"});
        c2 = theme::kAccent;
        break;
      case DsPhase::Written:
        l2 = L.p_in_smem && v.p_phase == DsPhase::Spent ? fit(f.small, room, {"dSᵀ kept for dQ", "kept for dQ", "kept"})
                                                        : fit(f.small, room, {"written: tile " + i, "written"});
        break;
      case DsPhase::Operand:
        l2 = fit(f.small, room, {"read by keys", "read", ""});
        c2 = theme::kAccent;
        break;
      case DsPhase::Reading:
        l2 = fit(f.small, room,
                 {L.p_in_smem ? "dSᵀ read by queries" : "read by queries", "read by queries", "read back", "read"});
        c2 = theme::kAccent;
        break;
      case DsPhase::Spent: l2 = fit(f.small, room, {"spent: tile " + i, "spent"}); break;
      case DsPhase::None: l2 = "empty"; break;
    }
    if (v.dq_atomic_tile >= 0) l3 = fit(f.small, room, {"dQ: atomics → HBM", "atomics → HBM", "atomics"});
    const std::string bytes = format_bytes(double(L.ds_bytes()));
    lines_under(x, top + float(tiles.size()) * (h + kInnerGap) - kInnerGap + 3,
                {{fit(f.small, room, {L.p_in_smem ? bytes + " each" : bytes, bytes}), theme::kTextDim},
                 {l2, c2},
                 {l3, theme::kAccent}});
  }

  // The caption: what this kernel keeps where, as far as there is room.
  std::string caption;
  // Each sentence in a long form and a short one (the same, when it has none): the long forms
  // where all of them fit, else the short ones, as far as there is room.
  std::vector<std::pair<std::string, std::string>> sentences;
  auto add = [&](std::initializer_list<std::string> forms) {
    sentences.emplace_back(*forms.begin(), *(forms.end() - 1));
  };
  const std::string band = std::to_string(L.rows_per_warp);
  const std::string owned = band + "w to " + band + "w+" + std::to_string(L.rows_per_warp - 1);
  if (dkdv && L.p_in_smem) {
    // tc_dkdv_smem_kernel: warp w's keys from its row, w mod G; its queries and columns from its
    // place in that row, w div G (the font has no ⌊⌋).
    const std::string G = std::to_string(L.row_groups), k = std::to_string(L.rows_per_warp),
                      q = std::to_string(L.warp_queries()), c = std::to_string(L.warp_cols());
    if (L.row_groups > 0)
      add({"K, V: kept all CTA long. The " + std::to_string(L.warps) + " warps stand in " + G + " rows of " + k +
               " keys: warp w owns keys from " + k + "(w mod " + G + "), and with o = w div " + G + " computes Sᵀ, dPᵀ for " +
               q + " queries from " + q + "o (its block of Pᵀ, dSᵀ) and accumulates dK, dV for " + c + " columns from " + c +
               "o, in its registers.",
           "Warp w: keys " + k + "(w mod " + G + ")+, queries " + q + "(w div " + G + ")+ (Sᵀ), columns " + c + "(w div " + G +
               ")+ (dK, dV)."});
    else
      add({"K, V: kept all CTA long. Which keys and queries each of the " + std::to_string(L.warps) +
               " warps takes, the trace does not say (several rows of warps fit these tiles).",
           "The warps' layout: not in the trace."});
    add({"Pᵀ (P ∘ Z) and dSᵀ: SRAM tiles, keys × queries. Each warp writes its block of both, then reads its keys' rows "
         "across every query (ldmatrix) as the A operand of dV += (P ∘ Z)ᵀ dO and dK += dSᵀ Q: a warp's rows of dV need "
         "every query's P, not only its own.",
         "Pᵀ, dSᵀ: written by blocks, read by keys for dV, dK."});
    if (L.atomic_dq)
      add({"dSᵀ is read again by queries (ldmatrix.trans) for dQ += dS·K, added to the float32 dQacc in HBM by atomics.",
           "dSᵀ: read by queries for dQ's atomics."});
    else
      add({"dQ has its own kernel (tc_dq_kernel), which recomputes S and dP by query tile.", "dQ: its own kernel (tc_dq_kernel)."});
  } else if (dkdv) {
    add({"K, V: kept all CTA long. Warp w owns keys " + owned + ": their rows of Sᵀ, dPᵀ, dK and dV are in its registers.",
         "Warp w owns keys " + owned + " (in registers: Sᵀ, dPᵀ, dK, dV)."});
    if (L.atomic_dq)
      add({"dSᵀ: written once, by each warp's keys; read back by queries (ldmatrix.trans) for dQ += dS·K, added to the "
           "float32 dQacc in HBM by atomics.",
           "dSᵀ: written by keys, read by queries for dQ, added to dQacc in HBM by atomics."});
    else
      add({"No dSᵀ tile: dQ has its own kernel (tc_dq_kernel), which recomputes S and dP by query tile.",
           "dQ: its own kernel (tc_dq_kernel)."});
  }
  if (dkdv) {
    add({"Two stages: tile i+1's Q, dO, LSE and D (strips) arrive (cp.async) while tile i is computed.",
         "Tile i+1 arrives while tile i is computed."});
    if (L.kv_in_regs == 1) add({"Each warp also keeps its rows of K and V in registers, loaded once."});
    if (L.kv_in_regs == 0) add({"Each warp reads its rows of K and V from SRAM (ldmatrix) for every query tile."});
    if (L.split > 1)
      add({"d = " + std::to_string(L.d) + ": " + std::to_string(L.split) +
               " CTAs share the key tile; each computes Sᵀ and dPᵀ over all of d and accumulates columns " +
               range_text(v.col0, L.cols()) + " of dK, dV" + (L.atomic_dq ? " and dQ" : "") + " (underlined).",
           "This CTA: columns " + range_text(v.col0, L.cols()) + " of d (underlined)."});
    if (L.from_variant)
      add({"(Several rows of warps fit these tiles: backward_configs.cuh's " + std::to_string(L.row_groups) + " are drawn.)"});
  } else {
    add({"Q, dO: kept all CTA long. Warp w owns rows " + owned + ": their rows of S, dP, dS and dQ are in its registers.",
         "Warp w owns rows " + owned + " (in registers: S, dP, dS, dQ)."});
    add({"dQ: registers. dS, rounded to 16 bits, is the A operand of dQ += dS·K, summed over every key tile and stored "
         "once: no atomics, the same bits every run.",
         "dQ: summed in registers, stored once; no atomics."});
    add({"Two stages: tile j+1's K and V arrive (cp.async) while tile j is computed. LSE and D: read into registers once.",
         "Tile j+1 arrives while tile j is computed."});
    if (L.from_variant)
      add({"(" + format_bytes(double(L.smem_bytes)) + " and the grid fit more than one tile size: backward_configs.cuh's is drawn.)"});
  }
  auto fits = [&](const std::string& text) {
    return text_bottom + 6 + f.small->CalcTextSizeA(f.small->FontSize, 1e9f, area.w(), text.c_str()).y <= area.max.y;
  };
  for (const auto& [full, brief] : sentences) caption += (caption.empty() ? "" : " ") + full;
  if (!fits(caption)) {
    caption.clear();
    for (const auto& [full, brief] : sentences) {
      const std::string next = caption.empty() ? brief : caption + " " + brief;
      if (fits(next)) caption = next;
    }
  }
  if (!caption.empty())
    dl->AddText(f.small, f.small->FontSize, ImVec2(area.min.x, text_bottom + 6), theme::kTextDim, caption.c_str(), nullptr,
                area.w());
  return out;
}

// The shared-memory bar, drawn left to right in address order: each region its bytes' share of
// the budget; a stage's tile filled by its state (computing, loading: hatched, free, empty).
struct MapCursor {
  ImDrawList* dl;
  Rect bar;
  double budget;
  float x;
  void region(std::int64_t bytes, ImU32 fill, bool hatched, ImU32 hatch_c) {
    const float w = float(double(bytes) / budget * bar.w());
    const Rect r{ImVec2(x, bar.min.y), ImVec2(std::min(bar.max.x, x + w), bar.max.y)};
    if (fill) dl->AddRectFilled(r.min, r.max, fill);
    if (hatched) hatch(dl, r, hatch_c, 4);
    dl->AddLine(ImVec2(r.max.x, r.min.y), ImVec2(r.max.x, r.max.y), theme::kPanel, 1);
    x += w;
  }
  void stage(tr::Tensor t, std::int64_t bytes, const StageView& s) {
    switch (s.state) {
      case StageState::Computing: region(bytes, theme::tensor_color(t, 0.95f), false, 0); break;
      case StageState::Loading: region(bytes, theme::tensor_color(t, 0.2f), true, theme::tensor_color(t, 0.7f)); break;
      case StageState::Free: region(bytes, theme::tensor_color(t, 0.25f), false, 0); break;
      case StageState::Empty: region(bytes, 0, false, 0); break;
    }
  }
};

void draw_bwd_map(ImDrawList* dl, const SmemPipeline& L, const PipelineView& v, Rect bar, double budget) {
  MapCursor map{dl, bar, budget, bar.min.x};
  auto region = [&](std::int64_t bytes, ImU32 fill, bool hatched, ImU32 hatch_c) { map.region(bytes, fill, hatched, hatch_c); };
  auto stage_fill = [&](tr::Tensor t, std::int64_t bytes, const StageView& s) { map.stage(t, bytes, s); };
  auto stage = [&](int st) { return st < int(v.stages.size()) ? v.stages[std::size_t(st)] : StageView{}; };
  // Address order, as the kernel carves its dynamic shared memory: dK/dV: K, V, the Q stages,
  // the dO stages, Pᵀ (tc_dkdv_smem_kernel), dSᵀ, the LSE stages, the D stages; dQ: Q, dO, the K
  // stages, the V stages.
  const auto kept = L.kept_tensors();
  const auto staged = L.stage_tensors();
  for (tr::Tensor t : kept)
    region(L.kept_tile_bytes(), v.kept_loaded ? theme::tensor_color(t, 0.9f) : 0, !v.kept_loaded, theme::tensor_color(t, 0.6f));
  for (int i = 0; i < 2; ++i)
    for (int st = 0; st < L.stages; ++st) stage_fill(staged[std::size_t(i)], L.stage_tile_bytes(), stage(st));
  auto pds_fill = [&](tr::Tensor t, DsPhase phase) {
    const float a = live(phase) ? 0.95f : phase == DsPhase::Written ? 0.6f : 0.25f;
    region(L.ds_bytes(), v.ds_tile < 0 ? 0 : theme::tensor_color(t, a), false, 0);
  };
  if (L.p_in_smem) pds_fill(tr::Tensor::P, v.p_phase);
  if (L.ds_in_smem()) pds_fill(tr::Tensor::dS, v.ds_phase);
  if (L.stat_bytes() > 0)
    for (int i = 2; i < 4; ++i)
      for (int st = 0; st < L.stages; ++st) stage_fill(staged[std::size_t(i)], L.stat_bytes(), stage(st));
}

std::string bwd_map_caption(const SmemPipeline& L, double budget, float width) {
  const auto& f = theme::fonts();
  const std::string total = format_bytes(double(L.total_bytes())), kept = format_bytes(double(L.kept_tile_bytes())),
                    stg = format_bytes(double(L.stage_tile_bytes())), b = format_bytes(budget), st = std::to_string(L.stages);
  if (L.dkdv()) {
    const std::string stat = format_bytes(double(L.stat_bytes()));
    const std::string pds = L.p_in_smem ? " + Pᵀ, dSᵀ" : L.ds_in_smem() ? " + dSᵀ" : "";
    const std::string pds_bytes = L.ds_in_smem() ? pds + " " + format_bytes(double(L.ds_bytes())) + (L.p_in_smem ? " each" : "") : "";
    return fit(f.small, width,
               {total + " = K, V " + kept + " each + " + st + " stages × (Q, dO " + stg + " each + LSE, D " + stat + " each)" +
                    pds_bytes + " · budget " + b,
                total + " = K, V " + kept + " each + " + st + " × (Q, dO " + stg + " + LSE, D " + stat + ")" + pds_bytes + " · budget " + b,
                total + " = K, V + " + st + " × (Q, dO, LSE, D)" + pds + " · of " + b,
                total + " of " + b});
  }
  return fit(f.small, width,
             {total + " = Q, dO " + kept + " each + " + st + " stages × (K, V " + stg + " each) · budget " + b,
              total + " = Q, dO + " + st + " × (K, V " + stg + ") · budget " + b, total + " = Q, dO + " + st + " × (K, V) · of " + b,
              total + " of " + b});
}

// Lines every `unit` of `n` rows (or columns) across r.
void unit_lines(ImDrawList* dl, Rect r, int n, int unit, bool vertical) {
  if (n <= 0 || unit <= 0) return;
  for (int k = unit; k < n; k += unit) {
    const float f = float(k) / float(n);
    if (vertical)
      dl->AddLine(ImVec2(r.min.x + r.w() * f, r.min.y + 1), ImVec2(r.min.x + r.w() * f, r.max.y - 1), theme::kPanel, 2);
    else
      dl->AddLine(ImVec2(r.min.x + 1, r.min.y + r.h() * f), ImVec2(r.max.x - 1, r.min.y + r.h() * f), theme::kPanel, 2);
  }
}

}  // namespace

double pipeline_scale(const SmemPipeline& L, Rect area) {
  if (!L.valid) return 1;
  if (L.backward()) return bwd_scale(L, area);
  const int ncols = 1 + L.stages + (L.p_in_smem ? 1 : 0);
  const double cols = double(L.d) * (1 + L.stages) + (L.p_in_smem ? L.Bc : 0);
  const double tall = std::max(double(L.Br), 2.0 * L.Bc);
  const double w = area.w() - kColGap * float(ncols - 1);
  const double h = area.h() - header_h() - kInnerGap - (kLinesBelow + kCaptionLines) * line_h() - 10;
  return std::clamp(std::min(w / cols, h / tall), 0.05, 4.0);
}

void draw_warp_bands(ImDrawList* dl, const SmemPipeline& L, Rect r, bool labels) {
  if (!L.valid || L.warps <= 0) return;
  const auto& f = theme::fonts();
  const float band = r.h() / float(L.warps);
  for (int w = 1; w < L.warps; ++w) {
    const float y = r.min.y + band * float(w);
    dl->AddLine(ImVec2(r.min.x + 1, y), ImVec2(r.max.x - 1, y), theme::kPanel, 2);
  }
  if (!labels || band < f.small->FontSize) return;
  // Every band says the same: the rows too where the widest of them fits.
  const std::string widest = "rows " + std::to_string(L.warp_row0(L.warps - 1)) + "–" + std::to_string(L.Br - 1);
  const bool with_rows = band >= 2 * f.small->FontSize + 2 && text_w(f.small, widest) + 4 <= r.w();
  for (int w = 0; w < L.warps; ++w) {
    const Rect b{ImVec2(r.min.x, r.min.y + band * float(w)), ImVec2(r.max.x, r.min.y + band * float(w + 1))};
    const int r0 = L.warp_row0(w), r1 = r0 + L.rows_per_warp - 1;
    const std::string one = "warp " + std::to_string(w);
    const std::string rows = "rows " + std::to_string(r0) + "–" + std::to_string(r1);
    if (with_rows) {
      const Rect top{b.min, ImVec2(b.max.x, b.min.y + b.h() * 0.5f + 1)};
      const Rect bottom{ImVec2(b.min.x, b.min.y + b.h() * 0.5f - 1), b.max};
      centered_text(dl, {top.min, ImVec2(top.max.x, top.max.y + f.small->FontSize * 0.25f)}, kInk, one.c_str(), f.small);
      centered_text(dl, {ImVec2(bottom.min.x, bottom.min.y - f.small->FontSize * 0.25f), bottom.max}, kInk, rows.c_str(), f.small);
    } else {
      const std::string s = fit(f.small, b.w() - 2, {one, "w" + std::to_string(w)});
      centered_text(dl, b, kInk, s.c_str(), f.small);
    }
  }
}

PipelineRects draw_smem_pipeline(ImDrawList* dl, const SmemPipeline& L, const PipelineView& v, Rect area,
                                 double scale) {
  PipelineRects out;
  if (!L.valid) return out;
  if (L.backward()) return draw_bwd(dl, L, v, area, scale);
  const auto& f = theme::fonts();
  const float s = float(scale);
  const float top = area.min.y + header_h();
  float x = area.min.x;
  float text_bottom = top;
  char buf[96];

  // Q: one band per warp, each the 16·MT rows that warp holds as mma fragments.
  {
    const float w = float(L.d) * s, h = float(L.Br) * s;
    out.q = {ImVec2(x, top), ImVec2(x + w, top + h)};
    const std::string head = fit(f.regular, w + kColGap - 4,
                                 {"Q · " + std::to_string(L.warps) + " warps", "Q · " + std::to_string(L.warps) + "w", "Q"});
    text_at(dl, f.regular, ImVec2(x, area.min.y), theme::tensor_color(tr::Tensor::Q), head);
    const float band = h / float(std::max(1, L.warps));
    for (int i = 0; i < L.warps; ++i) {
      const Rect b{ImVec2(x, top + band * float(i)), ImVec2(x + w, top + band * float(i + 1))};
      if (v.q_loaded)
        dl->AddRectFilled(b.min, b.max, theme::tensor_color(tr::Tensor::Q, i % 2 ? 0.72f : 0.92f));
      else
        hatch(dl, b, theme::tensor_color(tr::Tensor::Q, 0.45f), 6);
    }
    dl->AddRect(out.q.min, out.q.max, v.q_loaded ? theme::tensor_color(tr::Tensor::Q) : IM_COL32(255, 255, 255, 200), 2);
    if (v.q_loaded) draw_warp_bands(dl, L, out.q, true);
    float ty = out.q.max.y + 3;
    text_at(dl, f.small, ImVec2(x, ty), theme::kTextDim, format_bytes(double(L.q_bytes())));
    ty += line_h();
    text_at(dl, f.small, ImVec2(x, ty), theme::kTextDim,
            fit(f.small, w + kColGap - 4, {std::to_string(L.rows_per_warp) + " rows a warp", std::to_string(L.rows_per_warp) + " rows/warp"}));
    text_bottom = std::max(text_bottom, ty + line_h());
    x += w + kColGap;
  }

  // The K/V stages.
  out.k.resize(std::size_t(L.stages));
  out.v.resize(std::size_t(L.stages));
  for (int st = 0; st < L.stages; ++st) {
    const StageView sv = st < int(v.stages.size()) ? v.stages[std::size_t(st)] : StageView{};
    const float w = float(L.d) * s, h = float(L.Bc) * s;
    const Rect kr{ImVec2(x, top), ImVec2(x + w, top + h)};
    const Rect vr{ImVec2(x, top + h + kInnerGap), ImVec2(x + w, top + 2 * h + kInnerGap)};
    out.k[std::size_t(st)] = kr;
    out.v[std::size_t(st)] = vr;
    const float room = w + kColGap - 4;
    std::snprintf(buf, sizeof buf, "stage %d", st);
    text_at(dl, f.regular, ImVec2(x, area.min.y), sv.state == StageState::Computing ? theme::kAccent : theme::kText,
            fit(f.regular, room, {buf, "s" + std::to_string(st)}));
    draw_kv_tile(dl, L, kr, tr::Tensor::K, sv);
    draw_kv_tile(dl, L, vr, tr::Tensor::V, sv);
    if (sv.state == StageState::Computing)
      dl->AddRect(ImVec2(kr.min.x - 3, kr.min.y - 3), ImVec2(vr.max.x + 3, vr.max.y + 3), theme::kAccent, 3, 0, 2);
    // What it holds, in words: up to three short lines under it.
    const std::string j = std::to_string(key_tile(L, sv));
    const auto [l1, l2, l3, c1] = stage_lines(sv, j, keys_text(sv), room);
    float ty = vr.max.y + 3;
    for (const auto* line : {&l1, &l2, &l3}) {
      if (line->empty()) continue;
      text_at(dl, f.small, ImVec2(x, ty), line == &l1 ? c1 : theme::kTextDim, *line);
      ty += line_h();
    }
    text_bottom = std::max(text_bottom, ty);
    x += w + kColGap;
  }

  // P̃'s tile, when it goes through shared memory: each warp writes its rows, reads them back.
  if (L.p_in_smem) {
    const float w = float(L.Bc) * s, h = float(L.Br) * s;
    out.p = {ImVec2(x, top), ImVec2(x + w, top + h)};
    text_at(dl, f.regular, ImVec2(x, area.min.y), theme::tensor_color(tr::Tensor::P), "P̃");
    const tr::Tensor P = tr::Tensor::P;
    if (v.p_live) {
      dl->AddRectFilled(out.p.min, out.p.max, theme::tensor_color(P, 0.9f), 2);
      dl->AddRect(ImVec2(out.p.min.x - 3, out.p.min.y - 3), ImVec2(out.p.max.x + 3, out.p.max.y + 3), theme::kAccent, 3, 0, 2);
    } else if (v.p_tile >= 0) {
      dl->AddRectFilled(out.p.min, out.p.max, theme::tensor_color(P, 0.14f), 2);
    }
    dl->AddRect(out.p.min, out.p.max, theme::tensor_color(P, v.p_tile >= 0 ? 0.6f : 0.35f), 2);
    draw_warp_bands(dl, L, out.p, false);
    const float room = w + 4;
    float ty = out.p.max.y + 3;
    text_at(dl, f.small, ImVec2(x, ty), theme::kTextDim, format_bytes(double(L.p_bytes())));
    ty += line_h();
    if (v.p_live) {
      text_at(dl, f.small, ImVec2(x, ty), theme::kAccent, fit(f.small, room, {"written, read back", "written,", "live"}));
      ty += line_h();
      if (text_w(f.small, "written, read back") > room) {
        text_at(dl, f.small, ImVec2(x, ty), theme::kAccent, fit(f.small, room, {"read back"}));
        ty += line_h();
      }
    } else if (v.p_tile >= 0) {
      text_at(dl, f.small, ImVec2(x, ty), theme::kTextDim, fit(f.small, room, {"spent", ""}));
      ty += line_h();
    }
    text_bottom = std::max(text_bottom, ty);
  }

  // The caption: what this variant keeps where, as far as there is room.
  std::string caption;
  auto add = [&](const std::string& sentence) {
    const std::string next = caption.empty() ? sentence : caption + " " + sentence;
    const float hgt = f.small->CalcTextSizeA(f.small->FontSize, 1e9f, area.w(), next.c_str()).y;
    if (text_bottom + 6 + hgt <= area.max.y) caption = next;
  };
  add(L.p_in_smem ? "P̃: SRAM tile. Each warp writes its rows of P̃ and reads them back (ldmatrix) as the A operand of P̃V."
                  : "P̃: registers. S's accumulators, rounded to 16 bits, are the A operand of P̃V: no SRAM round trip.");
  add(L.stages == 2 ? "Two stages: tile j+1's K and V arrive (cp.async) while tile j is computed."
                    : "One stage: each tile is loaded, then computed; the warps wait for every load.");
  if (L.q_in_regs == 1) add("Each warp keeps its rows of Q in registers, loaded once.");
  if (L.q_in_regs == 0) add("Each warp reads its rows of Q from SRAM (ldmatrix) for every tile.");
  if (L.from_variant)
    add("(" + format_bytes(double(L.smem_bytes)) + " fits one stage with P̃ in SRAM or two with P̃ in registers: variant " +
        L.variant + " says which.)");
  if (!caption.empty())
    dl->AddText(f.small, f.small->FontSize, ImVec2(area.min.x, text_bottom + 6), theme::kTextDim, caption.c_str(), nullptr,
                area.w());
  return out;
}

void draw_smem_map(ImDrawList* dl, const SmemPipeline& L, const PipelineView& v, Rect bar, double budget) {
  if (!L.valid || budget <= 0) return;
  if (L.backward()) return draw_bwd_map(dl, L, v, bar, budget);
  MapCursor map{dl, bar, budget, bar.min.x};
  auto region = [&](std::int64_t bytes, ImU32 fill, bool hatched, ImU32 hatch_c) { map.region(bytes, fill, hatched, hatch_c); };
  auto stage_fill = [&](tr::Tensor t, const StageView& s) { map.stage(t, L.kv_tile_bytes(), s); };
  // Address order, as the kernel carves its dynamic shared memory: Q, K stages, V stages, P.
  region(L.q_bytes(), v.q_loaded ? theme::tensor_color(tr::Tensor::Q, 0.9f) : 0, !v.q_loaded,
         theme::tensor_color(tr::Tensor::Q, 0.6f));
  for (tr::Tensor t : {tr::Tensor::K, tr::Tensor::V})
    for (int st = 0; st < L.stages; ++st)
      stage_fill(t, st < int(v.stages.size()) ? v.stages[std::size_t(st)] : StageView{});
  if (L.p_in_smem)
    region(L.p_bytes(), v.p_tile < 0 ? 0 : theme::tensor_color(tr::Tensor::P, v.p_live ? 0.95f : 0.25f), false, 0);
}

std::string smem_map_caption(const SmemPipeline& L, double budget, float width) {
  if (L.backward()) return bwd_map_caption(L, budget, width);
  const auto& f = theme::fonts();
  const std::string total = format_bytes(double(L.total_bytes())), q = format_bytes(double(L.q_bytes())),
                    kv = format_bytes(double(L.kv_tile_bytes())), p = format_bytes(double(L.p_bytes())),
                    b = format_bytes(budget), st = std::to_string(L.stages);
  const std::string pp = L.p_in_smem ? " + P̃ " + p : " (P̃ in registers)";
  return fit(f.small, width,
             {total + " = Q " + q + " + " + st + (L.stages == 1 ? " stage" : " stages") + " × (K " + kv + " + V " + kv +
                  ")" + pp + " · budget " + b,
              total + " = Q " + q + " + " + st + " × (K + V " + kv + ")" + pp + " · budget " + b,
              total + " = Q + " + st + " × (K + V)" + (L.p_in_smem ? " + P̃" : "") + " · of " + b,
              total + " of " + b});
}

void draw_register_bands(ImDrawList* dl, const SmemPipeline& L, Rect card, const ResidentTile& t) {
  if (!L.valid) return;
  if (!L.backward()) {
    if (t.rows == L.Br) draw_warp_bands(dl, L, card, false);
    return;
  }
  switch (t.tensor) {
    case tr::Tensor::S:
    case tr::Tensor::P:
    case tr::Tensor::dP:
    case tr::Tensor::dS:
      // dK/dV: the warp's keys are columns of S's (query, key) tile (tc_dkdv_smem_kernel's warps
      // also split its queries, the rows); dQ: its rows.
      if (L.dkdv()) {
        unit_lines(dl, card, t.cols, L.rows_per_warp, true);
        unit_lines(dl, card, t.rows, L.warp_queries(), false);
      } else {
        unit_lines(dl, card, t.rows, L.rows_per_warp, false);
      }
      break;
    case tr::Tensor::dK:
    case tr::Tensor::dV:  // the warp's keys, and (tc_dkdv_smem_kernel) its columns
      unit_lines(dl, card, t.rows, L.rows_per_warp, false);
      unit_lines(dl, card, t.cols, L.warp_cols(), true);
      break;
    case tr::Tensor::dQ:
    case tr::Tensor::dQacc:
      if (L.dkdv()) {  // the atomic share: 16·T queries × dq_cols() columns a warp (T unknown: no lines)
        if (L.dq_row_tiles <= 0) break;
        unit_lines(dl, card, t.rows, 16 * L.dq_row_tiles, false);
        unit_lines(dl, card, t.cols, L.dq_cols(), true);
      } else {
        unit_lines(dl, card, t.rows, L.rows_per_warp, false);
      }
      break;
    default: break;
  }
}

const Rect* PipelineRects::landing(const PipelineView& view, tr::Tensor t, int row0) const {
  for (const auto& [kt, r] : kept)
    if (kt == t) return &r;
  for (std::size_t st = 0; st < staged.size() && st < view.stages.size(); ++st)
    if (view.stages[st].tile >= 0 && view.stages[st].key0 == row0)
      for (const auto& [tt, r] : staged[st])
        if (tt == t) return &r;
  return nullptr;
}

}  // namespace fs::viz
