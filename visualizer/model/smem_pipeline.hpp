// The shared memory of a tensor-core forward CTA (step 08, steps/08_tensor_cores/
// flash_tc_forward.cuh), as the kernel lays it out, and what each slot holds at a moment.
//
// The kernel: a CTA owns Br query rows; its W = block threads / 32 warps each own 16·MT
// consecutive rows of the Q tile (warp w: rows [16·MT·w, 16·MT·(w+1)), MT = Br / (16·W)) and
// hold them, and their rows of S and O, as mma fragments in registers. K and V tiles of Bc keys
// go through kStages shared-memory stages; with two, tile t+1 is in flight (cp.async) while
// tile t is computed. P goes through shared memory (an Br×Bc tile) or stays in registers.
// Shared memory per CTA = e·(Br·d + 2·kStages·Bc·d + (P in SRAM ? Br·Bc : 0)), e the element
// size (2: bf16, fp16).
//
// Everything here is derived from the trace: the warps from the kernel's block, the stages
// and P's place from its shared memory. Where that size fits two layouts (1 stage with P in
// SRAM and 2 stages with P in registers have the same size when Br = 2d, as in the step's
// ladder at d = 64), the variant in the trace's meta decides, from the table in
// smem_pipeline.cpp (a copy of forward_configs.cuh: the trace does not record kStages).
#pragma once

#include <string>
#include <vector>

#include "visualizer/model/replay.hpp"

namespace fs::viz {

struct SmemPipeline {
  bool valid = false;
  std::string why_not;  // when !valid: why (empty when the trace is not a tensor-core forward at all)
  int Br = 0, Bc = 0, d = 0;
  int elem_bytes = 2;
  int warps = 0;          // block threads / 32
  int rows_per_warp = 0;  // 16·MT
  int stages = 0;         // 1 or 2
  bool p_in_smem = false;
  int q_in_regs = -1;     // Q's A fragments kept in registers: 1, 0, or -1 when the trace cannot say
  bool from_variant = false;  // the variant's table entry settled an ambiguous shared-memory size
  std::string variant;        // the trace's (meta.variant)
  std::int64_t smem_bytes = 0;

  std::int64_t q_bytes() const { return std::int64_t(elem_bytes) * Br * d; }
  std::int64_t kv_tile_bytes() const { return std::int64_t(elem_bytes) * Bc * d; }  // one K or one V tile
  std::int64_t p_bytes() const { return p_in_smem ? std::int64_t(elem_bytes) * Br * Bc : 0; }
  std::int64_t total_bytes() const { return q_bytes() + 2 * stages * kv_tile_bytes() + p_bytes(); }
  // Rows [warp_row0(w), warp_row0(w) + rows_per_warp) of the Q tile are warp w's.
  int warp_row0(int w) const { return w * rows_per_warp; }
  // The stage tile t of a CTA's walk goes through.
  int stage_of(int t) const { return stages == 2 ? t & 1 : 0; }
};

// The layout of kernel `kernel`'s CTAs, or !valid: not a 16-bit (tensor-core) forward, tiles or
// block that do not split into whole 16-row warp tiles, or a shared-memory size that fits no
// layout (or two, with no variant to decide).
SmemPipeline derive_smem_pipeline(const tr::Trace& trace, int kernel);

// What a K/V stage holds.
enum class StageState : std::uint8_t {
  Empty,      // nothing issued into it yet
  Loading,    // cp.async issued, the tile has not landed
  Computing,  // landed: the tile the warps compute S and P̃V with now
  Free,       // the tile it held is done (its bytes are still there until the next load)
};

struct StageView {
  StageState state = StageState::Empty;
  int tile = -1;           // ordinal in the CTA's walk over K tiles (its t-th Load K event)
  int key0 = 0, keys = 0;  // the keys of that tile: [key0, key0 + keys)
  bool waited_on = false;  // Loading, and the CTA is stalled on it now (the Load K event in progress)
};

struct PipelineView {
  std::vector<StageView> stages;  // one per stage
  int tiles = 0;                  // K tiles the CTA visits (its Load K events)
  int computing = -1;             // ordinal of the tile computed now, or -1
  int in_flight = -1;             // ordinal of a prefetched tile (issued, not waited on yet), or -1
  bool q_loaded = false;          // the Load Q event is done
  // P through SRAM: the tile of P̃ the warps have written (its ordinal), and whether they are
  // writing and reading it back now (the P̃V event in progress).
  int p_tile = -1;
  bool p_live = false;
};

// The stages of CTA `track` at its cursor `tc`. The trace's events mark (flash_tc_forward.cuh):
// Load K of tile t ends when tile t has landed (after the cp.async wait and the barrier), and
// that event's span is the wait; the loads of tile t itself (one stage) or of tile t+1 (two
// stages; tile 0 with Q, before the loop) are issued where that span begins. A tile is computed
// from its landing to the next Load K (the last one: to the first store).
PipelineView pipeline_at(const Replay& r, const SmemPipeline& layout, int track, const TrackCursor& tc);

}  // namespace fs::viz
