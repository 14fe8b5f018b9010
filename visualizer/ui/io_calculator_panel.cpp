// IO calculator: HBM accesses of standard attention, FlashAttention and block-sparse
// FlashAttention (Theorem 2, Proposition 4, with our kernels' constants from
// model/io_formulas.hpp) for an N, d, SRAM size M and block sparsity s, drawn against N on
// log-log axes. The open trace's own IO-model count is the dot.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "visualizer/model/io_formulas.hpp"
#include "visualizer/model/labels.hpp"
#include "visualizer/ui/panels.hpp"
#include "visualizer/ui/theme.hpp"
#include "visualizer/ui/widgets.hpp"

namespace fs::viz {

namespace tr = fs::trace;

namespace {

struct Curve {
  const char* name;
  ImU32 color;
  double (*at)(const IoShape&);
};

double standard_at(const IoShape& s) { return io_standard(s).total(); }
double flash_at(const IoShape& s) { return io_flash(s).total(); }
double sparse_at(const IoShape& s) { return io_block_sparse(s).total(); }
double fa2_at(const IoShape& s) {
  const Tiles t = paper_tiles(s.N, s.d, s.sram_bytes);
  return io_flash_fa2(s.N, s.d, s.heads, t.Br, t.Bc, false).total();
}

}  // namespace

void io_calculator_panel(UiState& s) {
  if (!begin_panel(kPanelIo)) return;
  auto& io = s.io;
  const auto& f = theme::fonts();
  const float w = ImGui::GetContentRegionAvail().x;
  ImGui::PushItemWidth(w * 0.5f - 60);
  char label[32];
  std::snprintf(label, sizeof label, "N = %d", 1 << io.log2_N);
  ImGui::SliderInt("##N", &io.log2_N, 7, 17, label);
  ImGui::SameLine();
  int log2_d = int(std::lround(std::log2(std::max(16, io.d))));
  std::snprintf(label, sizeof label, "d = %d", 1 << log2_d);
  if (ImGui::SliderInt("##d", &log2_d, 4, 8, label)) io.d = 1 << log2_d;
  ImGui::SliderFloat("##M", &io.sram_kib, 16, 256, "M = %.0f KiB SRAM");
  ImGui::SameLine();
  ImGui::SliderFloat("##s", &io.sparsity, 0.01f, 1.0f, "s = %.2f nonzero");
  ImGui::PopItemWidth();

  IoShape shape;
  shape.N = double(1 << io.log2_N);
  shape.d = io.d;
  shape.sram_bytes = io.sram_kib * 1024.0;
  shape.sparsity = io.sparsity;
  const Tiles tiles = paper_tiles(shape.N, shape.d, shape.sram_bytes);
  const Curve curves[] = {
      {"standard  Θ(Nd + N²)", theme::tensor_color(tr::Tensor::S), standard_at},
      {"FlashAttention  Θ(N²d²/M)", theme::tensor_color(tr::Tensor::O), flash_at},
      {"block-sparse  Θ(Nd + N²d²s/M)", theme::tensor_color(tr::Tensor::V), sparse_at},
      {"step 04 loop order (FA2)", theme::tensor_color(tr::Tensor::Q), fa2_at},
  };
  ImGui::PushFont(f.small);
  ImGui::TextDisabled("per head, float32 · B_c = ⌈M/4d⌉ = %d, B_r = min(B_c, d) = %d", tiles.Bc, tiles.Br);
  for (const auto& c : curves) {
    const double v = c.at(shape);
    legend_item(c.color, c.name);
    ImGui::SameLine(w * 0.62f);
    ImGui::PushFont(f.mono);
    const double base = standard_at(shape);
    if (c.at == standard_at)
      ImGui::Text("%10s", format_bytes(v).c_str());
    else
      ImGui::Text("%10s  %5.1f× less", format_bytes(v).c_str(), base / v);
    ImGui::PopFont();
  }
  ImGui::PopFont();

  // The plot, log-log.
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  if (avail.y < 60) {
    end_panel();
    return;
  }
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const Rect box{ImVec2(p.x + 62, p.y + 8), ImVec2(p.x + avail.x - 8, p.y + avail.y - 20)};
  dl->AddRect(ImVec2(p.x, p.y), ImVec2(p.x + avail.x, p.y + avail.y), theme::kBorder, 3);
  // Log-log axes; the byte axis in powers of two, so its labels are round (1 MiB, 16 MiB, …).
  const double lx0 = 7, lx1 = 17;
  double ly0 = 1e300, ly1 = -1e300;
  IoShape at = shape;
  for (const auto& c : curves)
    for (double lx : {lx0, lx1}) {
      at.N = std::pow(2.0, lx);
      const double v = std::log2(std::max(1.0, c.at(at)));
      ly0 = std::min(ly0, v);
      ly1 = std::max(ly1, v);
    }
  const double ystep = std::max(1.0, std::ceil((ly1 - ly0) / 7.0));
  ly0 = std::floor(ly0 / ystep) * ystep;
  ly1 = std::ceil(ly1 / ystep) * ystep;
  auto X = [&](double lx) { return box.min.x + float((lx - lx0) / (lx1 - lx0)) * box.w(); };
  auto Y = [&](double bytes) { return box.max.y - float((std::log2(std::max(1.0, bytes)) - ly0) / (ly1 - ly0)) * box.h(); };
  for (double ly = ly0; ly <= ly1 + 1e-9; ly += ystep) {
    const float y = box.max.y - float((ly - ly0) / (ly1 - ly0)) * box.h();
    dl->AddLine(ImVec2(box.min.x, y), ImVec2(box.max.x, y), theme::kGrid);
    std::string l = format_bytes(std::pow(2.0, ly));
    if (l.find(".00") != std::string::npos) l.erase(l.find(".00"), 3);
    if (l.find(".0 ") != std::string::npos) l.erase(l.find(".0 "), 2);
    dl->AddText(f.small, f.small->FontSize, ImVec2(p.x + 2, y - f.small->FontSize * 0.5f), theme::kTextDim, l.c_str());
  }
  for (int lx = int(lx0); lx <= int(lx1); lx += 2) {
    const float x = X(lx);
    dl->AddLine(ImVec2(x, box.min.y), ImVec2(x, box.max.y), theme::kGrid);
    char l[16];
    std::snprintf(l, sizeof l, lx >= 10 ? "%dk" : "%d", lx >= 10 ? (1 << lx) / 1024 : 1 << lx);
    const float tw = f.small->CalcTextSizeA(f.small->FontSize, 1e9f, 0, l).x;
    dl->AddText(f.small, f.small->FontSize, ImVec2(std::min(x - tw * 0.5f, box.max.x - tw), box.max.y + 3), theme::kTextDim, l);
  }
  dl->AddText(f.small, f.small->FontSize, ImVec2(box.min.x - 40, box.max.y + 3), theme::kTextDim, "N →");
  for (const auto& c : curves) {
    ImVec2 pts[81];
    for (int i = 0; i <= 80; ++i) {
      const double lx = lx0 + (lx1 - lx0) * i / 80.0;
      at.N = std::pow(2.0, lx);
      pts[i] = ImVec2(X(lx), Y(c.at(at)));
    }
    dl->AddPolyline(pts, 81, c.color, 0, c.at == fa2_at ? 1.5f : 2.5f);
  }
  // The chosen N.
  const float xn = X(io.log2_N);
  dl->AddLine(ImVec2(xn, box.min.y), ImVec2(xn, box.max.y), theme::with_alpha(theme::kAccent, 0.6f));
  for (const auto& c : curves) dl->AddCircleFilled(ImVec2(xn, Y(c.at(shape))), 4, c.color);
  // The open trace's IO model, per head. A decoding trace is not on these axes: its N new tokens
  // read a cache of other lengths, once.
  if (s.doc && s.doc->replay->cache().on()) {
    dl->AddText(f.small, f.small->FontSize, ImVec2(box.min.x + 8, box.min.y + 4), theme::kTextDim,
                "this trace decodes: a few new tokens against a KV cache, read once (no N×N curve; its IO is the counters')");
  } else if (s.doc) {
    const auto& m = s.doc->replay->meta();
    const double heads = double(head_count(m));
    const double total = double(m.io_read_bytes + m.io_write_bytes) / heads;
    if (m.N > 0 && total > 0) {
      const double lx = std::log2(double(m.N));
      if (lx >= lx0 && lx <= lx1) {
        const ImVec2 c(X(lx), Y(total));
        dl->AddCircle(c, 6, theme::kText, 0, 2);
        dl->AddText(f.small, f.small->FontSize, ImVec2(c.x + 8, c.y - 8), theme::kText, ("this trace (" + m.step + ")").c_str());
      }
    }
  }
  end_panel();
}

}  // namespace fs::viz
