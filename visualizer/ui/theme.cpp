#include "visualizer/ui/theme.hpp"

#include <cmath>
#include <filesystem>
#include <iterator>

namespace fs::viz::theme {

namespace tr = fs::trace;

namespace {

Fonts g_fonts;

ImU32 rgb(int r, int g, int b, float a = 1.0f) { return IM_COL32(r, g, b, int(a * 255.0f + 0.5f)); }

struct Rgb {
  int r, g, b;
};

Rgb tensor_rgb(tr::Tensor t) {
  switch (t) {
    case tr::Tensor::Q: return {92, 156, 248};    // blue
    case tr::Tensor::K: return {242, 167, 66};    // amber
    case tr::Tensor::V: return {181, 126, 242};   // violet
    case tr::Tensor::O: return {77, 196, 138};    // green
    case tr::Tensor::LSE:
    case tr::Tensor::M:
    case tr::Tensor::L: return {111, 207, 214};   // teal: the row statistics
    case tr::Tensor::S: return {240, 98, 98};     // coral: the matrix FlashAttention never writes
    case tr::Tensor::P: return {240, 138, 190};   // pink
    case tr::Tensor::dO: return {133, 222, 174};
    case tr::Tensor::dQ:
    case tr::Tensor::dQacc: return {150, 190, 255};
    case tr::Tensor::dK: return {255, 200, 120};
    case tr::Tensor::dV: return {212, 176, 255};
    case tr::Tensor::dP: return {255, 150, 120};
    case tr::Tensor::dS: return {255, 112, 150};
    case tr::Tensor::D: return {160, 220, 220};
    case tr::Tensor::Order: return {178, 214, 96};    // lime: the clusters' indices
    case tr::Tensor::SortKey: return {132, 160, 100};  // olive: what the sort reads
    // Decoding: the new tokens' keys and values in lighter tones of K's and V's (they become rows of
    // the cache), the splits' partial results in duller tones of O's and LSE's (the combine makes
    // O and LSE of them).
    case tr::Tensor::KNew: return {255, 206, 140};
    case tr::Tensor::VNew: return {214, 184, 255};
    case tr::Tensor::OPart: return {132, 168, 112};
    case tr::Tensor::LSEPart: return {96, 156, 164};
    case tr::Tensor::None: break;
  }
  return {150, 150, 150};
}

// DejaVu's path on Debian (fonts-dejavu-core).
const char* const kFontDir = "/usr/share/fonts/truetype/dejavu/";

}  // namespace

ImU32 tensor_color(tr::Tensor t, float alpha) {
  const Rgb c = tensor_rgb(t);
  return rgb(c.r, c.g, c.b, alpha);
}

ImVec4 tensor_color_vec(tr::Tensor t) { return ImGui::ColorConvertU32ToFloat4(tensor_color(t)); }

ImU32 sequence_color(int b, float alpha) {
  if (b < 0) return with_alpha(kSkipped, alpha);
  // The first few by hand, clear of the accent's yellow and of K's amber and V's violet that fill
  // the pages; then hues far apart (the golden angle), stepping over the yellows.
  static const Rgb first[] = {{96, 210, 255}, {255, 112, 182}, {140, 230, 90}, {255, 140, 90}, {120, 140, 255}, {80, 230, 200}};
  if (b < int(std::size(first))) return rgb(first[b].r, first[b].g, first[b].b, alpha);
  float h = std::fmod(0.31f + 0.618034f * float(b), 1.0f);
  if (h > 0.1f && h < 0.2f) h += 0.1f;
  float r, g, bl;
  ImGui::ColorConvertHSVtoRGB(h, 0.5f, 0.95f, r, g, bl);
  return ImGui::ColorConvertFloat4ToU32(ImVec4(r, g, bl, alpha));
}

ImU32 mix(ImU32 a, ImU32 b, float t) {
  const ImVec4 x = ImGui::ColorConvertU32ToFloat4(a), y = ImGui::ColorConvertU32ToFloat4(b);
  return ImGui::ColorConvertFloat4ToU32(
      ImVec4(x.x + (y.x - x.x) * t, x.y + (y.y - x.y) * t, x.z + (y.z - x.z) * t, x.w + (y.w - x.w) * t));
}

ImU32 with_alpha(ImU32 c, float alpha) {
  return (c & ~IM_COL32_A_MASK) | (ImU32(alpha * 255.0f + 0.5f) << IM_COL32_A_SHIFT);
}

ImU32 kind_color(tr::Kind k, tr::Tensor t) {
  switch (k) {
    case tr::Kind::Load: return tensor_color(t);
    case tr::Kind::Store: return mix(tensor_color(t), IM_COL32(255, 255, 255, 255), 0.25f);
    case tr::Kind::ComputeS: return mix(tensor_color(tr::Tensor::S), kPanel, 0.45f);
    case tr::Kind::Softmax: return mix(tensor_color(tr::Tensor::P), kPanel, 0.45f);
    case tr::Kind::Rescale: return mix(tensor_color(tr::Tensor::L), kPanel, 0.35f);
    case tr::Kind::AccumulateO: return mix(tensor_color(tr::Tensor::O), kPanel, 0.45f);
    case tr::Kind::ComputeDP: return mix(tensor_color(tr::Tensor::dP), kPanel, 0.45f);
    case tr::Kind::ComputeDS: return mix(tensor_color(tr::Tensor::dS), kPanel, 0.45f);
    case tr::Kind::AccumulateDQ: return mix(tensor_color(tr::Tensor::dQ), kPanel, 0.45f);
    case tr::Kind::AccumulateDK: return mix(tensor_color(tr::Tensor::dK), kPanel, 0.45f);
    case tr::Kind::AccumulateDV: return mix(tensor_color(tr::Tensor::dV), kPanel, 0.45f);
    case tr::Kind::Skip: return kSkipped;
    case tr::Kind::Wait: return kWaiting;
  }
  return kSkipped;
}

const char* tensor_display(tr::Tensor t) {
  switch (t) {
    case tr::Tensor::L: return "ℓ";
    case tr::Tensor::M: return "m";
    case tr::Tensor::None: return "-";
    default: break;
  }
  static const char* const names[] = {"-",     "Q",     "K",      "V",       "O",  "LSE", "S",
                                       "P",     "dO",    "dQ",     "dK",      "dV", "dP",  "dS",
                                       "D",     "m",     "ℓ",      "dQacc",   "order", "sort key",
                                       "K new", "V new", "O part", "LSE part"};
  static_assert(std::size(names) == tr::kTensorCount, "a label for every tensor");
  const int i = int(t);
  return i >= 0 && i < tr::kTensorCount ? names[i] : "?";
}

namespace {

// Dear ImGui draws each code point's glyph where the font puts it, with no mark positioning (no
// GPOS): DejaVu's combining tilde U+0303 sits at lowercase height, so over a capital (P̃, the
// panels' only use but m̃ and ℓ̃) it falls on the letter's top stroke and P̃ reads as P. Raised
// here, once the atlas is built, to end where a capital begins; over m it floats a little high.
// DejaVu Sans Mono draws it in a cell of its own: moved back over the letter before it, no advance.
void raise_combining_tilde(ImFont* font) {
  const ImFontGlyph* cap = font ? font->FindGlyphNoFallback(ImWchar('P')) : nullptr;
  if (!cap) return;
  const float cap_top = cap->Y0;
  bool moved = false;
  for (ImFontGlyph& g : font->Glyphs) {
    if (g.Codepoint != 0x0303) continue;
    if (g.AdvanceX > 0) {
      g.X0 -= g.AdvanceX;
      g.X1 -= g.AdvanceX;
      g.AdvanceX = 0;
      moved = true;
    }
    if (g.Y1 > cap_top) {
      const float dy = std::floor(cap_top - g.Y1);
      g.Y0 += dy;
      g.Y1 += dy;
    }
  }
  if (moved) font->BuildLookupTable();
}

}  // namespace

Fonts load_fonts(float size) {
  ImGuiIO& io = ImGui::GetIO();
  Fonts f;
  const std::string sans = std::string(kFontDir) + "DejaVuSans.ttf";
  const std::string bold = std::string(kFontDir) + "DejaVuSans-Bold.ttf";
  const std::string mono = std::string(kFontDir) + "DejaVuSansMono.ttf";
  std::error_code ec;
  if (std::filesystem::exists(sans, ec) && std::filesystem::exists(mono, ec)) {
    // Latin, Greek and the symbols the panels write (τ ℓ → ≤ × · − ∘ Θ √ Σ ⁻¹ ² ▶ ❚ …).
    static ImVector<ImWchar> ranges;
    if (ranges.empty()) {
      ImFontGlyphRangesBuilder b;
      b.AddRanges(io.Fonts->GetGlyphRangesDefault());
      static const ImWchar greek[] = {0x0370, 0x03FF, 0};
      b.AddRanges(greek);
      b.AddText(u8"ℓτ→←↑↓↔≤≥≈×·−∘Θ√Σ∑⁻¹²³⁄∞…–—•▶◀▸▾■□▨▮▯◆●○✓✗‖∣⌈⌉µ½¼¾ᵀ\u0303");
      b.BuildRanges(&ranges);
    }
    ImFontConfig cfg;
    cfg.OversampleH = 2;
    cfg.OversampleV = 1;
    f.regular = io.Fonts->AddFontFromFileTTF(sans.c_str(), size, &cfg, ranges.Data);
    f.small = io.Fonts->AddFontFromFileTTF(sans.c_str(), size - 2.0f, &cfg, ranges.Data);
    f.mono = io.Fonts->AddFontFromFileTTF(mono.c_str(), size - 2.0f, &cfg, ranges.Data);
    // The mono face lacks a few symbols (ℓ): take them from the sans face.
    ImFontConfig merge = cfg;
    merge.MergeMode = true;
    io.Fonts->AddFontFromFileTTF(sans.c_str(), size - 2.0f, &merge, ranges.Data);
    f.title = std::filesystem::exists(bold, ec) ? io.Fonts->AddFontFromFileTTF(bold.c_str(), size + 1.0f, &cfg, ranges.Data)
                                                : f.regular;
    f.dejavu = f.regular && f.small && f.mono && f.title;
    if (f.dejavu && io.Fonts->Build())
      for (ImFont* font : {f.regular, f.small, f.mono, f.title}) raise_combining_tilde(font);
  }
  if (!f.dejavu) {
    io.Fonts->Clear();
    f.regular = f.small = f.mono = f.title = io.Fonts->AddFontDefault();
  }
  g_fonts = f;
  return f;
}

const Fonts& fonts() { return g_fonts; }

void apply_style() {
  ImGuiStyle& s = ImGui::GetStyle();
  ImGui::StyleColorsDark(&s);
  s.WindowRounding = 4;
  s.FrameRounding = 3;
  s.GrabRounding = 3;
  s.TabRounding = 3;
  s.WindowBorderSize = 1;
  s.FrameBorderSize = 0;
  s.WindowPadding = ImVec2(10, 8);
  s.FramePadding = ImVec2(7, 4);
  s.ItemSpacing = ImVec2(8, 5);
  s.ScrollbarSize = 12;
  s.WindowTitleAlign = ImVec2(0.0f, 0.5f);
  ImVec4* c = s.Colors;
  auto v = [](ImU32 u) { return ImGui::ColorConvertU32ToFloat4(u); };
  // The panels tile the whole display and the frame is cleared to kPanel, so their windows
  // draw no background: one full-screen pass less for a software renderer.
  c[ImGuiCol_WindowBg] = v(with_alpha(kPanel, 0.0f));
  c[ImGuiCol_ChildBg] = v(with_alpha(kPanel, 0.0f));
  c[ImGuiCol_PopupBg] = v(kPanelRaised);
  c[ImGuiCol_Border] = v(kBorder);
  c[ImGuiCol_Text] = v(kText);
  c[ImGuiCol_TextDisabled] = v(kTextDim);
  c[ImGuiCol_TitleBg] = v(IM_COL32(30, 33, 41, 255));
  c[ImGuiCol_TitleBgActive] = v(IM_COL32(36, 40, 50, 255));
  c[ImGuiCol_TitleBgCollapsed] = c[ImGuiCol_TitleBg];
  c[ImGuiCol_MenuBarBg] = v(IM_COL32(24, 26, 32, 255));
  c[ImGuiCol_FrameBg] = v(IM_COL32(40, 44, 54, 255));
  c[ImGuiCol_FrameBgHovered] = v(IM_COL32(52, 57, 70, 255));
  c[ImGuiCol_FrameBgActive] = v(IM_COL32(60, 66, 80, 255));
  c[ImGuiCol_Button] = v(IM_COL32(44, 49, 60, 255));
  c[ImGuiCol_ButtonHovered] = v(IM_COL32(60, 67, 82, 255));
  c[ImGuiCol_ButtonActive] = v(IM_COL32(74, 82, 100, 255));
  c[ImGuiCol_Header] = v(IM_COL32(48, 54, 66, 255));
  c[ImGuiCol_HeaderHovered] = v(IM_COL32(60, 67, 82, 255));
  c[ImGuiCol_HeaderActive] = v(IM_COL32(70, 78, 96, 255));
  c[ImGuiCol_SliderGrab] = v(with_alpha(kAccent, 0.45f));
  c[ImGuiCol_SliderGrabActive] = v(with_alpha(kAccent, 0.7f));
  c[ImGuiCol_CheckMark] = v(kAccent);
  c[ImGuiCol_Tab] = v(IM_COL32(36, 40, 50, 255));
  c[ImGuiCol_TabHovered] = v(IM_COL32(60, 67, 82, 255));
  c[ImGuiCol_TabActive] = v(IM_COL32(52, 58, 72, 255));
  c[ImGuiCol_TableHeaderBg] = v(IM_COL32(34, 38, 47, 255));
  c[ImGuiCol_TableBorderLight] = v(IM_COL32(44, 48, 58, 255));
  c[ImGuiCol_TableBorderStrong] = v(kBorder);
  c[ImGuiCol_PlotHistogram] = v(kAccent);
}

}  // namespace fs::viz::theme
