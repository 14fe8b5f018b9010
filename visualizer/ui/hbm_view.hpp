// The HBM picture the memory and compare panels share: a trace's tensors side by side at
// one scale (an N×N score matrix really is N/d times the area of Q), each as its tile grid,
// with the tiles moving right now outlined.
#pragma once

#include <vector>

#include "visualizer/model/document.hpp"
#include "visualizer/ui/widgets.hpp"

namespace fs::viz {

struct HbmItem {
  const TensorGrid* grid = nullptr;
  Rect rect;      // the tensor itself
  Rect label;     // where its name and size go (above it)
};

struct HbmLayout {
  std::vector<HbmItem> items;
  bool widened = false;   // thin tensors were drawn wider than to scale, to stay visible
  const HbmItem* find(fs::trace::Tensor t) const;
};

// Lays out every tensor in HBM, plus the ghost S when the step never stores it (`ghost`).
HbmLayout layout_hbm(const Document& doc, Rect area, bool ghost);

// Draws the tensors of head `bh`, their labels, and outlines of the tiles that CTAs of this
// head are loading or storing at the cursor.
void draw_hbm(ImDrawList* dl, const Document& doc, const HbmLayout& layout, int bh, bool sizes);

}  // namespace fs::viz
