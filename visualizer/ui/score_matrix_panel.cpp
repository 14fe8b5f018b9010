// The ghost score matrix: all N×N scores S = τQKᵀ of one head, and for each tile whether it
// was computed on chip only, also written to HBM, or skipped by a mask. Step 01 paints it
// solid; step 04 computes every tile and writes none — the paper's argument in one square.
//
// A clustered trace (step 07) shows one round at a time. In its sorted order (query slots ×
// key slots) the round computes only its clusters, blocks on the diagonal; in the original
// order (queries × keys) the same scores are scattered over the matrix. Strips along the edges
// give each query and key the colour of its cluster, so the two pictures can be matched.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "visualizer/model/labels.hpp"
#include "visualizer/ui/panels.hpp"
#include "visualizer/ui/theme.hpp"
#include "visualizer/ui/widgets.hpp"

namespace fs::viz {

namespace tr = fs::trace;

namespace {

// Neighbouring clusters get hues far apart (the golden angle).
ImU32 cluster_color(int c) {
  float r, g, b;
  ImGui::ColorConvertHSVtoRGB(std::fmod(0.08f + 0.618034f * float(c), 1.0f), 0.5f, 0.9f, r, g, b);
  return ImGui::ColorConvertFloat4ToU32(ImVec4(r, g, b, 0.9f));
}

// One edge of the square, a pixel line at a time, in the colour of the cluster of the first
// index it covers (-1: in no cluster, left dark).
void cluster_strip(ImDrawList* dl, Rect strip, bool vertical, const std::vector<int>& cluster_of) {
  const int n = int(cluster_of.size());
  const float len = vertical ? strip.h() : strip.w();
  if (n == 0 || len < 1) return;
  int run_cluster = -2;
  float run_start = 0;
  auto flush = [&](float end) {
    if (run_cluster < 0 || end <= run_start) return;
    const Rect r = vertical ? Rect{ImVec2(strip.min.x, strip.min.y + run_start), ImVec2(strip.max.x, strip.min.y + end)}
                            : Rect{ImVec2(strip.min.x + run_start, strip.min.y), ImVec2(strip.min.x + end, strip.max.y)};
    dl->AddRectFilled(r.min, r.max, cluster_color(run_cluster));
  };
  for (int px = 0; px < int(std::ceil(len)); ++px) {
    const int c = cluster_of[std::size_t(std::min(n - 1, int(double(px) / len * n)))];
    if (c != run_cluster) {
      flush(float(px));
      run_cluster = c;
      run_start = float(px);
    }
  }
  flush(len);
}

// What one clustered round looks like, for the head shown: each query's and key's cluster
// (indexed by slot in the sorted order, by row in the original), and the round's clusters.
struct RoundPicture {
  std::vector<int> query_cluster, key_cluster;
  std::vector<ClusterBox> boxes;
};

RoundPicture round_picture(const Replay& r, int bh, int round, bool sorted) {
  RoundPicture p;
  const auto& meta = r.meta();
  const int N = meta.N;
  p.boxes = cluster_boxes(meta);
  // By slot: a query's cluster is its chunk; a key's the first cluster whose keys hold its slot
  // (with fewer keys than queries per cluster, some keys are in none).
  std::vector<int> q_by_slot(std::size_t(N), -1), k_by_slot(std::size_t(N), -1);
  for (int c = int(p.boxes.size()) - 1; c >= 0; --c) {
    const auto& b = p.boxes[std::size_t(c)];
    for (int i = b.q0; i < b.q1; ++i) q_by_slot[std::size_t(i)] = c;
    for (int j = b.k0; j < b.k1; ++j) k_by_slot[std::size_t(j)] = c;
  }
  if (sorted) {
    p.query_cluster = std::move(q_by_slot);
    p.key_cluster = std::move(k_by_slot);
    return p;
  }
  const SlotOrders o = r.slot_orders(tr::Tensor::S, bh, round);
  p.query_cluster.assign(std::size_t(N), -1);
  p.key_cluster.assign(std::size_t(N), -1);
  if (!o.mapped()) return p;
  for (int slot = 0; slot < N; ++slot) {
    p.query_cluster[std::size_t(o.rows[slot])] = q_by_slot[std::size_t(slot)];
    p.key_cluster[std::size_t(o.cols[slot])] = k_by_slot[std::size_t(slot)];
  }
  return p;
}

// The round picker and the order toggle; returns the round shown.
int round_controls(UiState& s, const Replay& r, int track, Cursor c) {
  ScoresState& sc = s.scores;
  if (sc.round >= r.rounds()) sc.round = -1;
  const int followed = r.round_to_follow(track, c);
  const int round = sc.round >= 0 ? sc.round : followed;
  char preview[48];
  std::snprintf(preview, sizeof preview, sc.round >= 0 ? "round %d" : "round %d (follow)", round);
  ImGui::SetNextItemWidth(ImGui::CalcTextSize("round 00 (follow)").x + ImGui::GetFrameHeight() + 12);
  if (ImGui::BeginCombo("##round", preview)) {
    char item[48];
    std::snprintf(item, sizeof item, "follow the CTA (now round %d)", followed);
    if (ImGui::Selectable(item, sc.round < 0)) sc.round = -1;
    for (int k = 0; k < r.rounds(); ++k) {
      std::snprintf(item, sizeof item, "round %d", k);
      if (ImGui::Selectable(item, sc.round == k)) sc.round = k;
    }
    ImGui::EndCombo();
  }
  ImGui::SameLine();
  if (ImGui::RadioButton("sorted", sc.sorted)) sc.sorted = true;
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("sorted order: query slots × key slots of the round, its clusters blocks on the diagonal");
  ImGui::SameLine();
  if (ImGui::RadioButton("original", !sc.sorted)) sc.sorted = false;
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("original order: queries × keys, the same scores where they are");
  return round;
}

}  // namespace

void score_matrix_panel(UiState& s) {
  if (!begin_panel(kPanelScores)) return;
  Document* doc = s.doc.get();
  const TensorGrid* g = doc ? doc->coverage->grid(tr::Tensor::S) : nullptr;
  if (!doc || !g) return end_empty_panel();
  const auto& r = *doc->replay;
  const auto& f = theme::fonts();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const auto& list = r.track_events(doc->selected_track);
  const int bh = list.empty() ? 0 : r.trace().events[std::size_t(list.front())].bh;
  const Cursor c = doc->cursor();

  ImGui::PushFont(f.small);
  ImGui::TextColored(theme::tensor_color_vec(tr::Tensor::S), "S = τQKᵀ");
  ImGui::SameLine();
  ImGui::TextDisabled("N×N = %d×%d, head %d", g->rows, g->cols, bh);
  // A clustered trace: one round's scores, in its sorted order or the original one.
  const bool clustered = r.clustered();
  const int round = clustered ? round_controls(s, r, doc->selected_track, c) : -1;
  const bool sorted = clustered && s.scores.sorted;
  if (clustered) g = doc->coverage->round_scores(round, sorted);

  // Totals over this head.
  std::int64_t computed = 0, written = 0, skipped = 0;
  for (int i = 0; i < g->grid_rows; ++i)
    for (int j = 0; j < g->grid_cols; ++j) {
      const auto& cell = g->at(bh, i, j);
      computed += cell.computed;
      written += cell.written;
      skipped += cell.skipped;
    }
  const double NN = double(g->rows) * g->cols;
  if (clustered) ImGui::Text("round %d, %s order: computed %.1f%%", round, sorted ? "sorted" : "original", 100.0 * double(computed) / NN);
  else ImGui::Text("computed %.0f%%", 100.0 * double(computed) / NN);
  ImGui::SameLine();
  if (clustered)
    ImGui::TextDisabled("· its clusters: %.1f%% of N×N", 100.0 * round_score_share(r.meta()));
  else
    ImGui::TextColored(theme::tensor_color_vec(tr::Tensor::S), "written to HBM %.0f%%", 100.0 * double(written) / NN);
  if (skipped > 0 && !clustered) {
    ImGui::SameLine();
    ImGui::TextDisabled("skipped %.0f%%", 100.0 * double(skipped) / NN);
  }
  ImGui::PopFont();

  const ImVec2 p = ImGui::GetCursorScreenPos();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float legend_h = 2 * ImGui::GetTextLineHeightWithSpacing() + 4;
  // The clusters' strips go left of and above the square.
  const float strip = clustered ? 5.0f : 0.0f, gap = clustered ? 3.0f : 0.0f;
  const float side = std::max(10.0f, std::min(avail.x - strip - gap, avail.y - legend_h - strip - gap));
  const float x0 = p.x + (avail.x - side + strip + gap) * 0.5f, y0 = p.y + strip + gap;
  const Rect area{ImVec2(x0, y0), ImVec2(x0 + side, y0 + side)};
  draw_grid(dl, *g, bh, area, clustered ? GridMode::RoundScores : GridMode::Scores);

  const RoundPicture picture = clustered ? round_picture(r, bh, round, sorted) : RoundPicture{};
  if (clustered) {
    cluster_strip(dl, {ImVec2(area.min.x - gap - strip, area.min.y), ImVec2(area.min.x - gap, area.max.y)}, true,
                  picture.query_cluster);
    cluster_strip(dl, {ImVec2(area.min.x, area.min.y - gap - strip), ImVec2(area.max.x, area.min.y - gap)}, false,
                  picture.key_cluster);
    // In the sorted order each cluster is one block: its outline.
    if (sorted)
      for (const auto& b : picture.boxes) {
        const Rect br = element_rect(*g, area, b.q0, b.q1 - b.q0, b.k0, b.k1 - b.k0);
        dl->AddRect(br.min, br.max, IM_COL32(255, 255, 255, 90));
      }
  }

  // Tiles being computed now, by any CTA of this head (and, clustered, of this round); the
  // selected CTA's in the accent colour. In the original order a clustered tile is where its
  // queries and keys are, scattered over the matrix: only the followed CTA's is outlined (every
  // CTA's together would cover the square).
  for (int t = 0; t < r.track_count(); ++t) {
    const auto& tl = r.track_events(t);
    if (tl.empty()) continue;
    if (c.order == Order::Real ? (c.x < r.track_begin_ns(t) || c.x > r.track_end_ns(t))
                               : (c.x < tl.front() || c.x > tl.back() + 1))
      continue;
    const TrackCursor tc = r.track_cursor(t, c);
    if (tc.active < 0) continue;
    const auto& e = r.trace().events[std::size_t(tl[std::size_t(tc.active)])];
    const bool score_tile = e.kind == tr::Kind::ComputeS || e.kind == tr::Kind::Softmax ||
                            (e.kind == tr::Kind::Store && e.tensor == tr::Tensor::S);
    if (!score_tile || e.bh != bh || e.cols >= g->cols || e.round != round) continue;
    if (clustered && !r.placeable(tr::Tensor::S, e.bh, e.round)) continue;
    const bool followed = t == doc->selected_track;
    if (clustered && !sorted && !followed) continue;
    const SlotOrders placed = clustered && !sorted ? r.slot_orders(tr::Tensor::S, e.bh, e.round) : SlotOrders{};
    for (const Rect& er : element_rects(*g, area, placed, e.row0, e.rows, e.col0, e.cols))
      dl->AddRect(er.min, er.max, followed ? theme::kAccent : IM_COL32(255, 255, 255, 200), 0, 0, followed ? 2.0f : 1.0f);
  }

  // Hover: the cell under the mouse.
  ImGui::SetCursorScreenPos(ImVec2(p.x, p.y));
  ImGui::InvisibleButton("##scores", ImVec2(avail.x, side + strip + gap));
  if (ImGui::IsItemHovered() && area.contains(ImGui::GetIO().MousePos)) {
    const ImVec2 m = ImGui::GetIO().MousePos;
    const int col = int((m.x - area.min.x) / area.w() * g->cols), row = int((m.y - area.min.y) / area.h() * g->rows);
    const int gi = std::clamp(row / g->cell_rows, 0, g->grid_rows - 1), gj = std::clamp(col / g->cell_cols, 0, g->grid_cols - 1);
    const auto& cell = g->at(bh, gi, gj);
    const double a = double(g->cell_area(gi, gj));
    const int r0 = gi * g->cell_rows, r1 = std::min(g->rows, (gi + 1) * g->cell_rows);
    const int c0 = gj * g->cell_cols, c1 = std::min(g->cols, (gj + 1) * g->cell_cols);
    ImGui::BeginTooltip();
    if (sorted)
      ImGui::Text("query slots [%d, %d) × key slots [%d, %d) of round %d", r0, r1, c0, c1, round);
    else if (clustered)
      ImGui::Text("S[%d:%d, %d:%d) in round %d", r0, r1, c0, c1, round);
    else
      ImGui::Text("S[%d:%d, %d:%d)", r0, r1, c0, c1);
    ImGui::Text("computed on chip: %.0f%%", 100.0 * double(cell.computed) / a);
    if (!clustered) ImGui::Text("written to HBM:   %.0f%%", 100.0 * double(cell.written) / a);
    if (cell.read > 0) ImGui::Text("read back from HBM: %.1f×", double(cell.read) / a);
    if (cell.skipped > 0)
      ImGui::Text(clustered ? "outside the round's clusters: %.0f%%" : "skipped (masked): %.0f%%",
                  100.0 * double(cell.skipped) / a);
    ImGui::EndTooltip();
  }

  ImGui::PushFont(f.small);
  legend_item(theme::tensor_color(tr::Tensor::S, 0.04f), "not yet");
  ImGui::SameLine(0, 10);
  legend_item(theme::tensor_color(tr::Tensor::S, 0.3f), "computed on chip only");
  ImGui::SameLine(0, 10);
  if (clustered) {
    legend_item(IM_COL32(255, 255, 255, 200), "computing now", true);
    legend_item(theme::with_alpha(theme::kSkipped, 0.55f), "outside the round's clusters");
    ImGui::SameLine(0, 10);
    legend_item(cluster_color(0), "edges: each one's cluster");
  } else {
    legend_item(theme::tensor_color(tr::Tensor::S, 0.95f), "written to HBM");
    legend_hatch("skipped (causal / block-sparse mask)");
    ImGui::SameLine(0, 10);
    legend_item(IM_COL32(255, 255, 255, 200), "computing now", true);
  }
  ImGui::PopFont();
  end_panel();
}

}  // namespace fs::viz
