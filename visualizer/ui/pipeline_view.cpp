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

}  // namespace

double pipeline_scale(const SmemPipeline& L, Rect area) {
  if (!L.valid) return 1;
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
    std::string l1, l2, l3;
    ImU32 c1 = theme::kTextDim;
    switch (sv.state) {
      case StageState::Computing:
        l1 = fit(f.small, room, {"computing tile " + j, "computing", "comp."});
        if (l1.rfind("computing tile", 0) != 0) l2 = "tile " + j;
        l3 = fit(f.small, room, {keys_text(sv)});
        c1 = theme::kAccent;
        break;
      case StageState::Loading:
        l1 = fit(f.small, room, {"in flight: tile " + j, "in flight", "loading"});
        if (l1.rfind("in flight:", 0) != 0) l2 = "tile " + j;
        l3 = sv.waited_on ? fit(f.small, room, {"the CTA waits for it", "CTA waits", "waited"})
                          : fit(f.small, room, {keys_text(sv) + " (cp.async)", keys_text(sv), "cp.async"});
        c1 = theme::kText;
        break;
      case StageState::Free:
        l1 = fit(f.small, room, {"free: tile " + j + " done", "free"});
        if (l1.rfind("free:", 0) != 0) l2 = fit(f.small, room, {"tile " + j + " done", "tile " + j});
        break;
      case StageState::Empty: l1 = "empty"; break;
    }
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
  float x = bar.min.x;
  auto region = [&](std::int64_t bytes, ImU32 fill, bool hatched, ImU32 hatch_c) {
    const float w = float(double(bytes) / budget * bar.w());
    const Rect r{ImVec2(x, bar.min.y), ImVec2(std::min(bar.max.x, x + w), bar.max.y)};
    if (fill) dl->AddRectFilled(r.min, r.max, fill);
    if (hatched) hatch(dl, r, hatch_c, 4);
    dl->AddLine(ImVec2(r.max.x, r.min.y), ImVec2(r.max.x, r.max.y), theme::kPanel, 1);
    x += w;
  };
  auto stage_fill = [&](tr::Tensor t, const StageView& s) {
    switch (s.state) {
      case StageState::Computing: region(L.kv_tile_bytes(), theme::tensor_color(t, 0.95f), false, 0); break;
      case StageState::Loading: region(L.kv_tile_bytes(), theme::tensor_color(t, 0.2f), true, theme::tensor_color(t, 0.7f)); break;
      case StageState::Free: region(L.kv_tile_bytes(), theme::tensor_color(t, 0.25f), false, 0); break;
      case StageState::Empty: region(L.kv_tile_bytes(), 0, false, 0); break;
    }
  };
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

}  // namespace fs::viz
