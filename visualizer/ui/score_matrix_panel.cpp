// The ghost score matrix: all N×N scores S = τQKᵀ of one head, and for each tile whether it
// was computed on chip only, also written to HBM, or skipped by a mask. Step 01 paints it
// solid; step 04 computes every tile and writes none — the paper's argument in one square.
//
// A clustered trace (step 07) shows one round at a time. In its sorted order (query slots ×
// key slots) the round computes only its clusters, blocks on the diagonal; in the original
// order (queries × keys) the same scores are scattered over the matrix. Strips along the edges
// give each query and key the colour of its cluster, so the two pictures can be matched.
//
// A decoding trace (step 10) has no N×N matrix: S is, per (sequence, K/V head), the g·N rows of
// that K/V head's query heads and new tokens against the sequence's keys. Each such S is a strip,
// its keys in column bands, one per split (the keys that split's CTA walked), so that the splits of
// one row read side by side; the keys past a sequence's length are none of its scores.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "visualizer/model/labels.hpp"
#include "visualizer/ui/cache_view.hpp"
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

// Tints of the splits' bands, alternating, light enough for the scores to show through.
ImU32 split_band(int split, float alpha) {
  return split % 2 == 0 ? IM_COL32(120, 170, 255, int(alpha * 255)) : IM_COL32(255, 255, 255, int(alpha * 0.6f * 255));
}

// A decoding trace's scores: a strip per (sequence, K/V head), its splits' key ranges as bands.
void decode_scores(Document& doc, const TensorGrid& g) {
  const Replay& r = *doc.replay;
  const CacheGeometry& cache = r.cache();
  const DecodeSchedule& dec = r.decode();
  const auto& f = theme::fonts();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const Cursor c = doc.cursor();
  const int track = std::clamp(doc.selected_track, 0, std::max(0, r.track_count() - 1));
  const CacheFocus focus = r.track_count() > 0 ? cache_focus(r, track) : CacheFocus{};
  const int Hkv = cache.heads_kv();

  ImGui::PushFont(f.small);
  ImGui::TextColored(theme::tensor_color_vec(tr::Tensor::S), "S = τQKᵀ");
  ImGui::SameLine();
  ImGui::TextDisabled("per (sequence, K/V head): %d query row%s (%d head%s × %d new token%s) × its keys", cache.group_rows(),
                      cache.group_rows() == 1 ? "" : "s", cache.group(), cache.group() == 1 ? "" : "s", cache.new_tokens(),
                      cache.new_tokens() == 1 ? "" : "s");
  std::int64_t computed = 0, written = 0, keys_total = 0;
  for (int b = 0; b < cache.sequences(); ++b) keys_total += std::int64_t(cache.length(b)) * Hkv * cache.group_rows();
  for (int bh : g.touched)
    for (int i = 0; i < g.grid_rows; ++i)
      for (int j = 0; j < g.grid_cols; ++j) {
        computed += g.at(bh, i, j).computed;
        written += g.at(bh, i, j).written;
      }
  ImGui::Text("computed %.0f%% of the keys' scores", keys_total > 0 ? 100.0 * double(computed) / double(keys_total) : 0.0);
  ImGui::SameLine();
  ImGui::TextColored(theme::tensor_color_vec(tr::Tensor::S), "written to HBM %s", written > 0 ? format_bytes(double(written) * 4).c_str() : "never");
  ImGui::SameLine();
  ImGui::TextDisabled("· %d split%s a sequence", cache.splits(), cache.splits() == 1 ? "" : "s");
  ImGui::PopFont();

  // The strips: every (sequence, K/V head) where they fit, else the followed sequence's, else its one.
  std::vector<int> shown;  // S's heads: b·H_kv + hk
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float legend_h = 2 * ImGui::GetTextLineHeightWithSpacing() + 4;
  const float band_h = f.small->FontSize + 2, label_h = f.small->FontSize + 2, gap = 6;
  const float room = avail.y - legend_h;
  auto fits = [&](int n) { return (room - float(n) * (band_h + label_h + gap)) / float(n) >= 10; };
  const int all = cache.sequences() * Hkv;
  if (fits(all))
    for (int bh = 0; bh < all; ++bh) shown.push_back(bh);
  else if (fits(Hkv))
    for (int hk = 0; hk < Hkv; ++hk) shown.push_back(focus.b * Hkv + hk);
  else
    shown.push_back(focus.b * Hkv + focus.hk);
  const int n = int(shown.size());
  const float strip_h = std::clamp((room - float(n) * (band_h + label_h + gap)) / float(n), 6.0f, 90.0f);
  const float x0 = p.x + 2, w = avail.x - 6;
  const double kx = double(w) / double(std::max(1, g.cols));  // pixels a key (the room's, seqlen_cache)
  int hover_bh = -1, hover_key = -1, hover_row = -1;
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  float y = p.y;
  for (int bh : shown) {
    const int b = bh / Hkv, hk = bh % Hkv;
    const bool followed = b == focus.b && hk == focus.hk;
    char buf[96];
    std::snprintf(buf, sizeof buf, "seq %d · kv head %d · %d keys", b, hk, cache.length(b));
    dl->AddText(f.small, f.small->FontSize, ImVec2(x0, y), followed ? theme::kAccent : theme::kTextDim, buf);
    y += label_h;
    // The splits' bands: the keys each split CTA of this (sequence, K/V head) walked.
    const Rect strip{ImVec2(x0, y + band_h), ImVec2(x0 + w, y + band_h + strip_h)};
    for (const auto& grp : dec.groups()) {
      if (grp.role != DecodeRole::Split || grp.b != b || grp.hk != hk || grp.rb != 0) continue;
      for (int t : grp.tracks) {
        const DecodeCta& cta = dec.cta(t);
        if (cta.key1 <= cta.key0) continue;
        const float a = x0 + float(cta.key0 * kx), e = x0 + float(cta.key1 * kx);
        const bool mine = t == track || (dec.cta(track).role == DecodeRole::Split && dec.group_of(track) == dec.group_of(t) &&
                                         dec.cta(track).split == cta.split);
        dl->AddRectFilled(ImVec2(a, y + 1), ImVec2(e - 1, y + band_h - 1), mine ? theme::with_alpha(theme::kAccent, 0.8f) : split_band(cta.split, 0.45f), 2);
        std::snprintf(buf, sizeof buf, "split %d", cta.split);
        centered_text(dl, {ImVec2(a, y), ImVec2(e, y + band_h)}, IM_COL32(16, 18, 22, 255), buf, f.small);
        dl->AddRectFilled(ImVec2(a, strip.min.y), ImVec2(e - 1, strip.max.y), split_band(cta.split, 0.07f));
        if (cta.key0 > 0) dl->AddLine(ImVec2(a, strip.min.y - 2), ImVec2(a, strip.max.y + 2), IM_COL32(255, 255, 255, 90), 1.5f);
      }
    }
    draw_grid(dl, g, bh, strip, GridMode::Scores);
    // Past the sequence's keys: none of its scores.
    if (cache.length(b) < g.cols) {
      const Rect none{ImVec2(x0 + float(cache.length(b) * kx), strip.min.y), strip.max};
      dl->AddRectFilled(none.min, none.max, theme::with_alpha(theme::kPanel, 0.85f));
      hatch(dl, none, theme::with_alpha(theme::kBorder, 0.6f), 6);
    }
    if (followed) dl->AddRect(ImVec2(strip.min.x - 2, strip.min.y - 2), ImVec2(strip.max.x + 2, strip.max.y + 2), theme::with_alpha(theme::kAccent, 0.6f));
    // Tiles computed now: any CTA's in white, the followed one's in the accent colour.
    for (int t = 0; t < r.track_count(); ++t) {
      const auto& tl = r.track_events(t);
      if (tl.empty() || (c.order == Order::Real ? (c.x < r.track_begin_ns(t) || c.x > r.track_end_ns(t))
                                                : (c.x < tl.front() || c.x > tl.back() + 1)))
        continue;
      const TrackCursor tc = r.track_cursor(t, c);
      if (tc.active < 0) continue;
      const auto& e = r.trace().events[std::size_t(tl[std::size_t(tc.active)])];
      if (e.kind != tr::Kind::ComputeS || e.bh != bh) continue;
      const Rect er = element_rect(g, strip, e.row0, e.rows, e.col0, e.cols);
      dl->AddRect(er.min, er.max, t == track ? theme::kAccent : IM_COL32(255, 255, 255, 200), 0, 0, t == track ? 2.0f : 1.0f);
    }
    if (strip.contains(mouse) && ImGui::IsWindowHovered()) {
      hover_bh = bh;
      hover_key = int((mouse.x - strip.min.x) / kx);
      hover_row = int((mouse.y - strip.min.y) / strip.h() * g.rows);
    }
    y = strip.max.y + gap;
  }
  if (hover_bh >= 0) {
    const int b = hover_bh / Hkv, hk = hover_bh % Hkv;
    const int gi = std::clamp(hover_row / g.cell_rows, 0, g.grid_rows - 1), gj = std::clamp(hover_key / g.cell_cols, 0, g.grid_cols - 1);
    const auto& cell = g.at(hover_bh, gi, gj);
    const int row = std::clamp(hover_row, 0, g.rows - 1), t = row / cache.group(), h = hk * cache.group() + row % cache.group();
    ImGui::BeginTooltip();
    ImGui::Text("sequence %d, K/V head %d: row %d (head %d, new token %d) · keys %d–%d", b, hk, row, h, t, gj * g.cell_cols,
                std::min(g.cols, (gj + 1) * g.cell_cols) - 1);
    if (hover_key >= cache.length(b)) {
      ImGui::TextDisabled("past the sequence's %d keys: no scores", cache.length(b));
    } else {
      ImGui::Text("computed on chip: %.0f%%", 100.0 * double(cell.computed) / double(std::max<std::int64_t>(1, g.cell_area(gi, gj))));
      for (const auto& grp : dec.groups())
        if (grp.role == DecodeRole::Split && grp.b == b && grp.hk == hk)
          for (int tk : grp.tracks)
            if (hover_key >= dec.cta(tk).key0 && hover_key < dec.cta(tk).key1)
              ImGui::Text("by %s (CTA %d)", dec.label(r.trace(), tk).c_str(), r.trace().tracks[std::size_t(tk)].cta);
      const std::int64_t slot = cache.slot_of(b, hover_key);
      if (slot >= 0)
        ImGui::TextDisabled("key %d: slot %lld%s", hover_key, (long long)slot,
                            cache.paged() ? (" (page " + std::to_string(cache.page_of_slot(slot)) + ")").c_str() : "");
    }
    ImGui::EndTooltip();
  }

  ImGui::SetCursorScreenPos(ImVec2(p.x, p.y + room + 4));
  ImGui::PushFont(f.small);
  legend_item(theme::tensor_color(tr::Tensor::S, 0.04f), "not yet");
  ImGui::SameLine(0, 10);
  legend_item(theme::tensor_color(tr::Tensor::S, 0.3f), "computed on chip only");
  ImGui::SameLine(0, 10);
  legend_item(IM_COL32(255, 255, 255, 200), "computing now", true);
  legend_item(split_band(0, 0.45f), "a split's keys");
  ImGui::SameLine(0, 10);
  legend_item(theme::with_alpha(theme::kAccent, 0.8f), "the followed split's");
  ImGui::SameLine(0, 10);
  legend_hatch("past the sequence's keys");
  ImGui::PopFont();
  end_panel();
}

}  // namespace

void score_matrix_panel(UiState& s) {
  if (!begin_panel(kPanelScores)) return;
  Document* doc = s.doc.get();
  const TensorGrid* g = doc ? doc->coverage->grid(tr::Tensor::S) : nullptr;
  if (!doc || !g) return end_empty_panel();
  if (doc->replay->cache().on()) return decode_scores(*doc, *g);
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
