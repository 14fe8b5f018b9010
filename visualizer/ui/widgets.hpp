// Drawing pieces more than one panel uses: a tensor's tile grid, legends, bars with a target
// mark, text helpers. Panels are built from these; none of them keeps state.
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

#include "visualizer/model/coverage.hpp"

namespace fs::viz {

struct Rect {
  ImVec2 min, max;
  float w() const { return max.x - min.x; }
  float h() const { return max.y - min.y; }
  bool contains(ImVec2 p) const { return p.x >= min.x && p.x < max.x && p.y >= min.y && p.y < max.y; }
};

enum class GridMode : unsigned char {
  Hbm,     // read (lighter) and written (solid) elements of an HBM tensor
  Scores,  // the ghost N×N score matrix: computed on chip, written to HBM, skipped
  // One round's scores of a clustered trace (Coverage::round_scores): a cell with any score
  // computed shows it, since in the original order a round's scores are scattered and a cell
  // holds computed and skipped ones alike; a cell with none is skipped (flat grey: hatching
  // thousands of scattered cells would cost more vertices than a draw list holds) or not yet.
  RoundScores,
};

// Draws head `bh` of a tensor's coverage into `r` (cells merged along rows when they look
// alike, so a large grid costs few rectangles).
void draw_grid(ImDrawList* dl, const TensorGrid& g, int bh, Rect r, GridMode mode);

// The screen rectangle of the element block rows [row0, row0+rows) × cols [col0, col0+cols)
// of a tensor drawn in `r`.
Rect element_rect(const TensorGrid& g, Rect r, int row0, int rows, int col0, int cols);
// The same for a block whose indices may be slots of a clustered round (`orders`): one
// rectangle per run of consecutive rows (× run of consecutive keys, for S-like tensors) they
// stand for, where they lie; runs closer than a pixel are one.
std::vector<Rect> element_rects(const TensorGrid& g, Rect r, SlotOrders orders, int row0, int rows, int col0, int cols);
// The smallest rectangle holding all of them.
Rect hull(const std::vector<Rect>& rects);

// A small coloured square and its label at the cursor, on one line.
void legend_item(ImU32 color, const char* label, bool outline_only = false);
void legend_hatch(const char* label);

// A horizontal bar: `value` of `full`, a mark at `target` (if > 0), text on it. `untraced`
// (traffic of the target that no event records, Replay::untraced_read) is drawn hatched just
// below the mark: the part of it the bar never fills.
void value_bar(float width, float height, double value, double full, double target, ImU32 color,
               const char* text, double untraced = 0);

// Diagonal hatching inside a rectangle (skipped blocks).
void hatch(ImDrawList* dl, Rect r, ImU32 color, float spacing);

class Replay;
// The tooltip of event `e` (an index into the trace's events): its kind and tile, its CTA (and
// lane), bytes, times, statistics, and what a click and a double-click on it do.
void event_tooltip(const Replay& r, int e);

// Centred text in a rectangle (clipped to it).
void centered_text(ImDrawList* dl, Rect r, ImU32 color, const char* text, ImFont* font = nullptr);

}  // namespace fs::viz
