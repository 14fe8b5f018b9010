// The HBM of a decoding trace (step 10), which the memory and compare panels draw in place of the
// tensors side by side: the KV cache as its block table scatters it. K and V of one K/V head are
// drawn as pages in slot order, folded into columns as a long tensor would be (a contiguous cache
// has one "page" of seqlen_cache slots per cache sequence). Each page is framed in the colour of
// the sequence whose table row names it; its slots are dark where they hold no key, faint in K's
// (V's) colour where they do, bright once read (solid once written, by an append); unused pages
// are dimmed. Under the pages, the block table: a row per sequence, the pages that gather its keys
// in key order. Then the followed sequence's small tensors, a row per head: Q, k_new and v_new,
// the splits' partial O and LSE, O and LSE. The followed CTA's split is marked in the accent
// colour (its pages framed, the tile it holds outlined), the loads in flight outlined in white.
#pragma once

#include <vector>

#include "visualizer/model/document.hpp"
#include "visualizer/ui/widgets.hpp"

namespace fs::viz {

// The sequence and K/V head a decoding view shows for a followed track: its CTA's (DecodeCta: b,
// hk), else sequence 0, K/V head 0.
struct CacheFocus {
  int b = 0, hk = 0;
};
CacheFocus cache_focus(const Replay& r, int track);

// Where a decoding view drew its tensors, for the memory panel's tile in flight: the screen
// rectangles of an event's rows (K's and V's slots of the K/V head shown, a small tensor's rows of
// the sequence shown), or none where it is not drawn.
struct CacheRects {
  struct Fold {  // pages folded into columns, in slot order down each column
    Rect area;
    int pages = 1, cols = 1, per_col = 1;
    float page_w = 1, page_h = 1;
    Rect page(int p) const;
  };
  struct Small {
    const TensorGrid* grid = nullptr;
    Rect box;
    int first = 0, heads = 1;  // the heads drawn, a row each: [first, first + heads)
  };
  Fold k, v;
  int hk = 0;  // the K/V head whose cache is drawn
  std::vector<Small> small;
  std::vector<Rect> rows_of(const Replay& r, const fs::trace::Event& e) const;
};

// Draws a decoding trace's HBM into `area`. With `interactive` (the memory panel's) hovering a page
// or a row of the block table highlights that sequence's pages (Document::hovered_sequence) and
// shows what it holds; a click follows the sequence's first split of the followed K/V head.
CacheRects draw_cache_hbm(ImDrawList* dl, Document& doc, Rect area, bool interactive);

}  // namespace fs::viz
