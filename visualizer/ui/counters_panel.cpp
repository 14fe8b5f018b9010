// Counters: HBM bytes read and written so far, per tensor and in total, against the IO
// model's count for the run (the mark on each bar), the L2 re-reads the model leaves out,
// FLOPs done, and the cumulative traffic over the run with the playhead on it. Traffic that no
// event records (a library's sort, memsets: Meta::untraced) is in the model's count: it is
// drawn hatched below the mark and listed, so that what the trace shows adds up to the model.
#include <algorithm>
#include <cstdio>

#include "visualizer/model/labels.hpp"
#include "visualizer/ui/panels.hpp"
#include "visualizer/ui/theme.hpp"
#include "visualizer/ui/widgets.hpp"

namespace fs::viz {

namespace tr = fs::trace;

namespace {

void ensure_curve(CountersCurve& c, const Replay& r, Order o) {
  if (c.replay == &r && c.order == o && !c.x.empty()) return;
  c.replay = &r;
  c.order = o;
  c.x.clear();
  c.read.clear();
  c.written.clear();
  const int n = 240;
  const double lo = o == Order::Real ? r.device_begin_ns() : 0.0, hi = o == Order::Real ? r.device_end_ns() : double(r.event_count());
  for (int i = 0; i <= n; ++i) {
    const double x = lo + (hi - lo) * i / n;
    const Totals t = r.totals({o, x});
    c.x.push_back(x);
    c.read.push_back(double(t.read_total()));
    c.written.push_back(double(t.written_total()));
  }
}

}  // namespace

void counters_panel(UiState& s) {
  if (!begin_panel(kPanelCounters)) return;
  Document* doc = s.doc.get();
  if (!doc) return end_empty_panel();
  const Replay& r = *doc->replay;
  const auto& meta = r.meta();
  const Cursor c = doc->cursor();
  const Totals now = r.totals(c);
  const Totals& all = r.grand_totals();
  const auto& f = theme::fonts();

  // Totals against the IO model.
  const double model_r = double(meta.io_read_bytes), model_w = double(meta.io_write_bytes);
  const float bw = ImGui::GetContentRegionAvail().x;
  char buf[160];
  const double full = std::max({model_r, model_w, double(all.read_total()), double(all.written_total()), 1.0});
  const double untraced_r = double(r.untraced_read()), untraced_w = double(r.untraced_written());
  std::snprintf(buf, sizeof buf, "read %s of %s", format_bytes(double(now.read_total())).c_str(), format_bytes(model_r).c_str());
  value_bar(bw, 20, double(now.read_total()), full, model_r, IM_COL32(92, 156, 248, 200), buf, untraced_r);
  std::snprintf(buf, sizeof buf, "written %s of %s", format_bytes(double(now.written_total())).c_str(), format_bytes(model_w).c_str());
  value_bar(bw, 20, double(now.written_total()), full, model_w, IM_COL32(240, 98, 98, 200), buf, untraced_w);
  std::snprintf(buf, sizeof buf, "%s of %s", format_flops(now.flops).c_str(), format_flops(r.pass_flops()).c_str());
  value_bar(bw, 20, now.flops, r.pass_flops(), 0, IM_COL32(77, 196, 138, 190), buf);
  ImGui::PushFont(f.small);
  const double moved = double(now.read_total() + now.written_total());
  ImGui::TextDisabled("bars: so far · mark: the IO model's total for the run · FLOPs: %s",
                      moved > 0 ? (format_count(now.flops / moved) + " per HBM byte so far").c_str() : "none yet");
  // What no event records, and the sums it closes.
  for (const auto& u : meta.untraced)
    ImGui::TextDisabled("+ %s read, %s written untraced: %s", format_bytes(double(std::max<std::int64_t>(0, u.read_bytes))).c_str(),
                        format_bytes(double(std::max<std::int64_t>(0, u.write_bytes))).c_str(), u.name.c_str());
  if (!meta.untraced.empty()) {
    const double total_r = double(all.read_total()) + untraced_r, total_w = double(all.written_total()) + untraced_w;
    const bool adds_up = total_r == model_r && total_w == model_w;
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(adds_up ? theme::kTextDim : theme::kWarning),
                       "events + untraced: read %s, written %s %s", format_bytes(total_r).c_str(), format_bytes(total_w).c_str(),
                       adds_up ? "= the IO model" : "≠ the IO model");
  }
  ImGui::PopFont();

  // Per tensor.
  if (ImGui::BeginTable("##tensors", 4, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp | ImGuiTableFlags_BordersInnerH)) {
    ImGui::TableSetupColumn("tensor", ImGuiTableColumnFlags_WidthFixed, 52);
    ImGui::TableSetupColumn("read");
    ImGui::TableSetupColumn("written");
    ImGui::TableSetupColumn("L2 re-reads");
    ImGui::TableHeadersRow();
    for (int t = 1; t < tr::kTensorCount; ++t) {
      const auto ti = std::size_t(t);
      if (all.read[ti] == 0 && all.written[ti] == 0 && all.cached[ti] == 0 && !find_tensor(meta, tr::Tensor(t))) continue;
      ImGui::TableNextRow();
      ImGui::TableSetColumnIndex(0);
      ImGui::TextColored(theme::tensor_color_vec(tr::Tensor(t)), "%s", theme::tensor_display(tr::Tensor(t)));
      ImGui::TableSetColumnIndex(1);
      ImGui::PushFont(f.mono);
      ImGui::Text("%s", all.read[ti] ? format_bytes(double(now.read[ti])).c_str() : "·");
      ImGui::TableSetColumnIndex(2);
      ImGui::Text("%s", all.written[ti] ? format_bytes(double(now.written[ti])).c_str() : "·");
      ImGui::TableSetColumnIndex(3);
      ImGui::TextDisabled("%s", all.cached[ti] ? format_bytes(double(now.cached[ti])).c_str() : "·");
      ImGui::PopFont();
    }
    ImGui::EndTable();
  }

  // Cumulative traffic over the run.
  auto& curve = s.counters_curve;
  ensure_curve(curve, r, c.order);
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  if (avail.y > 50 && curve.x.size() > 1) {
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const Rect box{ImVec2(p.x, p.y + 4), ImVec2(p.x + avail.x, p.y + avail.y - 2)};
    dl->AddRect(box.min, box.max, theme::kBorder, 3);
    const double top = std::max({full, curve.read.back(), curve.written.back()}) * 1.05;
    auto pt = [&](std::size_t i, double val) {
      return ImVec2(box.min.x + float(double(i) / double(curve.x.size() - 1)) * box.w(),
                    box.max.y - float(val / top) * (box.h() - 4) - 2);
    };
    for (double target : {model_r, model_w}) {
      if (target <= 0) continue;
      const float yy = box.max.y - float(target / top) * (box.h() - 4) - 2;
      dl->AddLine(ImVec2(box.min.x, yy), ImVec2(box.max.x, yy), IM_COL32(255, 255, 255, 50));
    }
    std::vector<ImVec2> pr, pw;
    for (std::size_t i = 0; i < curve.x.size(); ++i) {
      pr.push_back(pt(i, curve.read[i]));
      pw.push_back(pt(i, curve.written[i]));
    }
    dl->AddPolyline(pr.data(), int(pr.size()), IM_COL32(92, 156, 248, 255), 0, 2);
    dl->AddPolyline(pw.data(), int(pw.size()), IM_COL32(240, 98, 98, 255), 0, 2);
    const double lo = curve.x.front(), hi = curve.x.back();
    const float px = box.min.x + float(std::clamp((c.x - lo) / std::max(1e-9, hi - lo), 0.0, 1.0)) * box.w();
    dl->AddLine(ImVec2(px, box.min.y), ImVec2(px, box.max.y), theme::kAccent, 1.5f);
    dl->AddText(f.small, f.small->FontSize, ImVec2(box.min.x + 6, box.min.y + 3), theme::kTextDim,
                "HBM bytes over the run:");
    const float lx = box.min.x + 6 + f.small->CalcTextSizeA(f.small->FontSize, 1e9f, 0, "HBM bytes over the run:  ").x;
    dl->AddText(f.small, f.small->FontSize, ImVec2(lx, box.min.y + 3), IM_COL32(92, 156, 248, 255), "read");
    dl->AddText(f.small, f.small->FontSize, ImVec2(lx + 40, box.min.y + 3), IM_COL32(240, 98, 98, 255), "written");
  }
  end_panel();
}

}  // namespace fs::viz
