// The memory panel's SRAM for a tensor-core forward (step 08): the CTA's shared memory as its
// real slots — Q with the rows each warp holds, the K/V stages with the tile computed and the
// tile in flight, P̃'s tile where it goes through SRAM — and the shared-memory bar as the
// kernel's memory map (Q, K stages, V stages, P, in address order). The model is
// visualizer/model/smem_pipeline.hpp.
#pragma once

#include <imgui.h>

#include <vector>

#include "visualizer/model/smem_pipeline.hpp"
#include "visualizer/ui/widgets.hpp"

namespace fs::viz {

// Where the slots were drawn, for the tiles moving in from HBM.
struct PipelineRects {
  Rect q;
  std::vector<Rect> k, v;  // per stage
  Rect p;                  // P̃'s SRAM tile (zero-sized when P stays in registers)
};

// The largest scale (pixels per element) at which the slots, their headings and their status
// lines fit in `area`.
double pipeline_scale(const SmemPipeline& L, Rect area);

// Draws the slots at `scale` from the top left of `area`, then a caption of what this variant
// keeps where, wrapped, as far as the area's height allows.
PipelineRects draw_smem_pipeline(ImDrawList* dl, const SmemPipeline& L, const PipelineView& v, Rect area,
                                 double scale);

// The shared-memory bar: the kernel's regions in address order, coloured by what they hold now,
// against `budget` bytes; and the line of text under it.
void draw_smem_map(ImDrawList* dl, const SmemPipeline& L, const PipelineView& v, Rect bar, double budget);
std::string smem_map_caption(const SmemPipeline& L, double budget, float width);

// Warp w's rows as lines across a Br-row tile drawn in `r` (S, P̃, O in registers, Q, P̃ in SRAM).
void draw_warp_bands(ImDrawList* dl, const SmemPipeline& L, Rect r, bool labels);

}  // namespace fs::viz
