// The memory panel's SRAM for a tensor-core forward (step 08): the CTA's shared memory as its
// real slots — Q with the rows each warp holds, the K/V stages with the tile computed and the
// tile in flight, P̃'s tile where it goes through SRAM — and the shared-memory bar as the
// kernel's memory map (Q, K stages, V stages, P, in address order). The backward's dK/dV
// kernel the same way: K and V kept, with the keys each warp holds; the Q/dO (+ LSE, D) stages;
// dSᵀ's tile, written by keys and read back by queries for dQ's atomics; its FlashAttention-2
// layout (tc_dkdv_smem_kernel): K and V with the keys of each row of warps, and the Pᵀ and dSᵀ
// tiles with the keys × queries block each warp writes, its keys' rows as they are read for dV
// and dK, dSᵀ's query columns as they are read for dQ; its dQ kernel: Q and dO kept, with each
// warp's rows; the K/V stages. The model is visualizer/model/smem_pipeline.hpp.
#pragma once

#include <imgui.h>

#include <utility>
#include <vector>

#include "visualizer/model/smem_pipeline.hpp"
#include "visualizer/ui/widgets.hpp"

namespace fs::viz {

// Where the slots were drawn, for the tiles moving in from HBM.
struct PipelineRects {
  Rect q;
  std::vector<Rect> k, v;  // per stage
  Rect p;                  // P̃'s SRAM tile, tc_dkdv_smem_kernel's Pᵀ (zero-sized when P stays in registers)
  // The backward: the tiles kept for the whole CTA and each stage's (LSE, D too), by tensor;
  // dSᵀ's tile (zero-sized without one).
  std::vector<std::pair<fs::trace::Tensor, Rect>> kept;
  std::vector<std::vector<std::pair<fs::trace::Tensor, Rect>>> staged;
  Rect ds;
  // The backward: where a load of tensor t at rows from row0 lands (its kept tile, or the stage
  // that holds that tile), or null.
  const Rect* landing(const PipelineView& view, fs::trace::Tensor t, int row0) const;
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

// What each warp holds of a register tile drawn as `card`: the forward's rows of a Br-row tile
// (draw_warp_bands); the dK/dV kernels' keys (the columns of S, dP, dS; the rows of dK, dV) and,
// tc_dkdv_smem_kernel, its queries (rows of S, dP, dS) and columns (of dK, dV), and each warp's
// block of dQ's share; the dQ kernel's rows.
void draw_register_bands(ImDrawList* dl, const SmemPipeline& L, Rect card, const ResidentTile& t);

}  // namespace fs::viz
