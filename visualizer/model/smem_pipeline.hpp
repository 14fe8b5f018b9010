// The shared memory of a tensor-core CTA of step 08 as the kernel lays it out, and what each
// slot holds at a moment: the forward (steps/08_tensor_cores/flash_tc_forward.cuh) and the
// kernels of the backward that stream tiles (flash_tc_backward.cuh: two dK/dV kernels, one dQ).
//
// The forward: a CTA owns Br query rows; its W = block threads / 32 warps each own 16·MT
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
//
// The backward's dK/dV kernel (tc_dkdv_kernel): a CTA owns a key tile, K and V (Bc keys, the
// trace's Bc), kept for the whole CTA; warp w owns keys [16w, 16w + 16) of it (Bc = 16·W) and
// holds their rows of dK, dV, Sᵀ and dPᵀ in registers. Q, dO (Br queries, the trace's Br), LSE
// and D stream through two stages. The atomic variant writes dSᵀ (Bc×Br) to shared memory once,
// reads it back for dQ's share, and adds that to dQacc (float32, HBM) by atomics. At d = 256 a
// key tile's CTAs come in pairs (the grid says so: ceil(N / Bc)·split CTAs a head), each
// accumulating d / 2 of the columns. Shared memory, in address order:
//   K, V: e·Bc·d each · Q, dO: 2 stages × e·Br·d each · dSᵀ: e·Bc·Br (atomic only) · LSE, D: 2 stages × 4·Br each
// Its FlashAttention-2 layout (tc_dkdv_smem_kernel) streams the same stages, one CTA a key tile
// (no split), with the warps in G rows (kKeyGroups): warp w owns keys [Bc/G·(w mod G), +Bc/G)
// and, with o = w / G and W/G warps to a row, computes Sᵀ and dPᵀ for queries [Br/(W/G)·o, +)
// and accumulates dK, dV for columns [d/(W/G)·o, +). A warp's dV rows need every query's P, so
// (P ∘ Z)ᵀ and dSᵀ (Bc×Br each) go through shared memory whether dQ is atomic or not: each warp
// writes its block of both, then reads its keys' rows across all queries. Shared memory:
//   K, V · Q, dO: 2 stages · (P ∘ Z)ᵀ, dSᵀ: e·Bc·Br each · LSE, D: 2 stages
// The size does not say whether dQ is atomic (the trace's tensors do: dQacc is one only then),
// nor G, where several fit the tiles (the table in smem_pipeline.cpp does, for step 08's
// variants; otherwise the warps' layout is left unknown and not drawn).
// The deterministic dQ kernel (tc_dq_kernel) is the forward's shape: a CTA owns Br query rows
// (16·MT a warp), keeps Q and dO, and streams K, V tiles of Bc keys through two stages; dQ stays
// in registers. Its Br and Bc are not in the trace's meta (those are the dK/dV kernel's): its
// grid (ceil(N / Br) CTAs a head) and shared memory e·(2·Br·d + 4·Bc·d) give them, and where
// they fit more than one pair, the table in smem_pipeline.cpp (a copy of backward_configs.cuh),
// which also says whether tc_dkdv_kernel keeps K and V's fragments in registers.
//
// Step 09 (steps/09_hopper), whose CTAs record in lanes: lane 0 issues the TMA copies (the
// producer warpgroup, or the wgmma rung's copying thread), lanes 1 and 2 are the consumer
// warpgroups. hopper_forward_kernel (HopperConfig): 128 query rows a CTA, 64 a consumer; shared
// memory, 1024-aligned: Q (Br × d) · K: kStages × Bc × d · V: likewise (fp8: Vᵀ, d × 128·kVBoxes,
// whole boxes of 128 keys) · O (Br × d, 16-bit, d ≤ 128 only) · 8-byte mbarriers, 2 + 4·kStages.
// fp8 (Fp8Cfg): 1-byte Q, K and Vᵀ, Bc = 224 keys (kE4m3BlockKV), 2 stages: at d = 128,
// Q 16 KiB + 2 × (K 28 KiB + Vᵀ 32 KiB) + O 32 KiB. Key tile t of the CTA's k-th work
// tile goes to stage (g + t) mod kStages, g the key tiles of its earlier work tiles (a persistent
// CTA walks several): the producer's i-th Load K (Load V) goes to stage i mod kStages. K's and
// V's stages are freed apart (K after both consumers' S, V after their P̃V), so a stage's K can
// hold a later tile than its V. hopper_backward_kernel (HopperBwdConfig): a CTA keeps K and V (Bc
// = 128 keys, 64 a consumer); Q, dO, LSE and D of Br queries stream through two stages; dSᵀ (Bc ×
// Br) is double-buffered; each consumer stages its 64 × 64 float32 block of dQ for the TMA
// reduce-add. Shared memory: K, V · Q stages · dO stages · dSᵀ × 2 · dQ blocks × 2 · LSE stages ·
// D stages · mbarriers (1 + 2·kStages). kStages solves the size (the table in smem_pipeline.cpp,
// a copy of configs.cuh, is checked against it, never believed over it); a size that counts the
// tiles alone (no O tile, alignment or barriers, as the synthetic trace's) is read as such.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "visualizer/model/replay.hpp"

namespace fs::viz {

// Which of step 08's kernels a layout is.
enum class SmemKernel : std::uint8_t {
  Forward,   // tc_forward_kernel: Q kept, K and V streamed
  Dkdv,      // tc_dkdv_kernel: K and V kept, Q, dO, LSE and D streamed; P and dS in registers
  DkdvSmem,  // tc_dkdv_smem_kernel: the same stages, warps in rows of keys; P and dS through SRAM
  Dq,        // tc_dq_kernel: Q and dO kept, K and V streamed
  HopperForward,   // step 09's hopper_forward_kernel: Q kept a work tile, K and V streamed, in lanes
  HopperBackward,  // step 09's hopper_backward_kernel: K and V kept, Q, dO, LSE and D streamed, in lanes
};

// Step 09: a region of the CTA's shared memory, in address order, and the tile it holds.
struct SmemRegion {
  tr::Tensor tensor = tr::Tensor::None;  // None: the alignment slack or the mbarriers
  int stage = -1;                        // its stage or buffer (the consumer, for dQ's blocks); -1: one of it
  int rows = 0, cols = 0;                // the tile's elements, as drawn (fp8's Vᵀ: d rows of vt_keys() keys)
  std::int64_t bytes = 0;
  int cols_read = 0;                     // of cols, those the kernel reads (fp8's Vᵀ: the tile's Bc keys); 0: all
};

struct SmemPipeline {
  bool valid = false;
  std::string why_not;  // when !valid: why (empty when the kernel is none of step 08's that stream tiles)
  SmemKernel kernel = SmemKernel::Forward;
  // Forward and dQ kernel: Br query rows a CTA, Bc keys a stage. dK/dV kernel: Br queries a
  // stage, Bc keys a CTA.
  int Br = 0, Bc = 0, d = 0;
  int elem_bytes = 2;
  int warps = 0;          // block threads / 32
  int rows_per_warp = 0;  // of the tile the CTA keeps: 16·MT of Q's rows (forward, dQ), 16 keys (dK/dV),
                          // Bc / kKeyGroups keys (tc_dkdv_smem_kernel); 0 when unknown
  int row_groups = 0;     // the warps' rows over the kept tile: `warps` (one warp a row), kKeyGroups
                          // (tc_dkdv_smem_kernel), 0 when the trace cannot say
  int stages = 0;         // 1 or 2
  bool p_in_smem = false;  // the forward's P̃ (Br×Bc); tc_dkdv_smem_kernel's (P ∘ Z)ᵀ (Bc×Br), always
  int q_in_regs = -1;     // Q's A fragments kept in registers: 1, 0, or -1 when the trace cannot say
  bool from_variant = false;  // a table entry (the forward's: the variant's; the dQ kernel's: its
                              // head dimension's) settled an ambiguous shared-memory size, or
                              // (tc_dkdv_smem_kernel) which of several warp layouts it runs
  std::string variant;        // the trace's (meta.variant)
  std::int64_t smem_bytes = 0;
  // The dK/dV kernel.
  int split = 1;           // CTAs a key tile's columns are split over (2 at d = 256)
  bool atomic_dq = false;  // dSᵀ through SRAM, dQ's share added to dQacc by atomics
  int kv_in_regs = -1;     // K and V's A fragments kept in registers: 1, 0, or -1 when unknown
  int dq_row_tiles = 1;    // 16-row tiles of dQ's share a warp adds (kDqRowTiles); 0 when unknown
  // Step 09.
  int consumers = 0;          // consumer warpgroups (lanes 1 .. consumers), 64 rows (keys) each
  bool o_in_smem = false;     // the forward's O leaves through SRAM (a TMA store): d ≤ 128
  bool fp8 = false;           // the forward's fp8 variant: 1-byte Q, K and Vᵀ
  bool tiles_only = false;    // the trace's size counts the tiles alone (no alignment, no barriers)
  bool from_table = false;    // kStages from the table (the trace's size was 0)

  bool hopper() const { return kernel == SmemKernel::HopperForward || kernel == SmemKernel::HopperBackward; }
  // fp8's Vᵀ stage: whole boxes of 128 keys (HopperConfig::kVBoxes · 128), d rows each; a tile of
  // 224 keys takes two, their last 32 columns never read (the next tile's keys).
  int vt_keys() const { return fp8 ? (Bc + 127) / 128 * 128 : Bc; }
  bool backward() const { return kernel != SmemKernel::Forward && kernel != SmemKernel::HopperForward; }
  bool dkdv() const { return kernel == SmemKernel::Dkdv || kernel == SmemKernel::DkdvSmem; }
  std::int64_t q_bytes() const { return std::int64_t(elem_bytes) * Br * d; }
  std::int64_t kv_tile_bytes() const { return std::int64_t(elem_bytes) * Bc * d; }  // one K or one V tile
  std::int64_t p_bytes() const { return p_in_smem ? std::int64_t(elem_bytes) * Br * Bc : 0; }
  // The backward: one of the two tiles kept for the whole CTA (K or V; Q or dO), one of the two
  // tiles of a stage (Q or dO; K or V), LSE or D of a stage, and dSᵀ.
  std::int64_t kept_tile_bytes() const { return dkdv() ? kv_tile_bytes() : q_bytes(); }
  std::int64_t stage_tile_bytes() const { return dkdv() ? q_bytes() : kv_tile_bytes(); }
  std::int64_t stat_bytes() const { return dkdv() ? std::int64_t(4) * Br : 0; }
  bool ds_in_smem() const { return kernel == SmemKernel::DkdvSmem || (kernel == SmemKernel::Dkdv && atomic_dq); }
  std::int64_t ds_bytes() const { return ds_in_smem() ? std::int64_t(elem_bytes) * Bc * Br : 0; }
  std::int64_t total_bytes() const {
    if (hopper()) {
      std::int64_t sum = 0;
      for (const auto& g : regions()) sum += g.bytes;
      return sum;
    }
    if (backward())
      return 2 * kept_tile_bytes() + stages * (2 * stage_tile_bytes() + 2 * stat_bytes()) + p_bytes() + ds_bytes();
    return q_bytes() + 2 * stages * kv_tile_bytes() + p_bytes();
  }
  // Rows [warp_row0(w), warp_row0(w) + rows_per_warp) of the kept tile are warp w's (Q's rows;
  // the dK/dV kernels: keys of K and V, from the CTA's first). The band_warps() warps of a row,
  // o = w / row_groups, split the rest: tc_dkdv_smem_kernel's warp w computes Sᵀ, dPᵀ for the
  // stage's queries [warp_query0(w), +warp_queries()) and accumulates dK, dV for the CTA's
  // columns [warp_col0(w), +warp_cols()); a kernel of one warp a row gives each warp all of them.
  int warp_row0(int w) const { return row_groups > 0 ? w % row_groups * rows_per_warp : 0; }
  int band_warps() const { return row_groups > 0 ? warps / row_groups : 0; }
  int warp_queries() const { return band_warps() > 0 ? Br / band_warps() : 0; }
  int warp_cols() const { return band_warps() > 0 ? cols() / band_warps() : 0; }
  int warp_query0(int w) const { return row_groups > 0 ? w / row_groups * warp_queries() : 0; }
  int warp_col0(int w) const { return row_groups > 0 ? w / row_groups * warp_cols() : 0; }
  // The stage tile t of a CTA's walk goes through.
  int stage_of(int t) const { return stages == 2 ? t & 1 : 0; }
  // The dK/dV kernel's columns of dK, dV (and dQ) a CTA accumulates, and the atomic variant's
  // share of dQ: warp w adds queries [16·T·(w % dq_row_groups()), +16·T) of the stage's tile
  // (T = dq_row_tiles) × dq_cols() columns from its first + (w / dq_row_groups())·dq_cols().
  int cols() const { return d / std::max(1, split); }
  int dq_row_groups() const { return std::max(1, Br / (16 * std::max(1, dq_row_tiles))); }
  int dq_col_groups() const { return std::max(1, warps / dq_row_groups()); }
  int dq_cols() const { return cols() / dq_col_groups(); }
  // The tensors of a stage (streamed), and of the tiles kept for the whole CTA.
  std::vector<tr::Tensor> stage_tensors() const;
  std::vector<tr::Tensor> kept_tensors() const;
  // Step 09: the regions in address order (alignment slack first, barriers last), summing to the
  // kernel's shared memory.
  std::vector<SmemRegion> regions() const;
};

// The layout of kernel `kernel`'s CTAs, or !valid: not a 16-bit (tensor-core) forward, dK/dV
// or dQ kernel, tiles or block that do not split into whole 16-row warp tiles, or a
// shared-memory size that fits no layout (or two, with no variant to decide).
// Step 09's kernels the same way, from the kernel's lanes (3: the copies and two consumers).
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
  int tile = -1;           // ordinal in the CTA's walk over K tiles (its t-th Load K event; dK/dV: Load Q)
  int key0 = 0, keys = 0;  // the keys of that tile: [key0, key0 + keys) (the dK/dV kernel: its queries)
  bool waited_on = false;  // Loading, and the CTA is stalled on it now (the Load K event in progress)
};

// The dK/dV kernels' dSᵀ tile (tc_dkdv_kernel: atomic variant only) and tc_dkdv_smem_kernel's
// (P ∘ Z)ᵀ tile.
enum class DsPhase : std::uint8_t {
  None,     // nothing written yet
  Writing,  // each warp writes its part: its keys' rows (tc_dkdv_kernel, during the dV, dK
            // products), its keys × queries block (tc_dkdv_smem_kernel, as it computes P and dS)
  Written,  // all in; not read yet (or, dSᵀ of the atomic variant, not read for dQ yet)
  Operand,  // tc_dkdv_smem_kernel: read by each warp's keys' rows, across every query (ldmatrix),
            // as the A operand of dV += (P ∘ Z)ᵀ dO and dK += dSᵀ Q
  Reading,  // read back by query columns (ldmatrix.trans) for dQ's share, which goes out by atomics
  Spent,    // read; its bytes stay until the next tile's
};

struct PipelineView {
  std::vector<StageView> stages;  // one per stage
  int tiles = 0;                  // K tiles the CTA visits (its Load K events; dK/dV: query tiles, Load Q)
  int computing = -1;             // ordinal of the tile computed now, or -1
  int in_flight = -1;             // ordinal of a prefetched tile (issued, not waited on yet), or -1
  bool q_loaded = false;          // the Load Q event is done
  // The forward's P through SRAM: the tile of P̃ the warps have written (its ordinal), and
  // whether they are writing and reading it back now (the P̃V event in progress).
  int p_tile = -1;
  bool p_live = false;
  // The backward. The tiles kept for the whole CTA (K, V; Q, dO): their rows in their tensor,
  // and whether they have landed (with the first stage: one cp.async wait takes both).
  int kept_row0 = 0, kept_rows = 0;
  bool kept_loaded = false;
  int col0 = 0;  // dK/dV: the first of the CTA's columns of dK, dV and dQ
  // dK/dV: the tile whose dSᵀ the SRAM holds and what is done with it (tc_dkdv_smem_kernel: its
  // (P ∘ Z)ᵀ too, written and read with it, in p_phase), and the tile whose share of dQ is being
  // added to dQacc (atomic: from its reading of dSᵀ to its Store dQacc), or -1.
  int ds_tile = -1, ds_row0 = 0;  // ds_row0: that tile's first query
  DsPhase ds_phase = DsPhase::None, p_phase = DsPhase::None;
  int dq_atomic_tile = -1;
  // Step 09. `stages` are the forward's K stages and the backward's Q/dO (LSE, D) stages; then the
  // forward's V stages (freed apart from K's), the tile kept (the forward's Q, for its work tile:
  // key0 its first row; the backward's K and V), and the buffers: the forward's O tile, a half a
  // consumer (its rows being written and stored); the backward's two dSᵀ (the query tile whose dSᵀ
  // each holds) and each consumer's dQ block (the query tile whose share it adds). A buffer is
  // Computing while written or read, Free once done with.
  std::vector<StageView> v_stages;
  StageView kept;
  std::vector<StageView> o_halves, ds_buffers, dq_blocks;
  int users = 0;  // consumers that record events at all (the others: rows or keys past N)
};

// The stages of CTA `track` at its cursor `tc`. The trace's events mark (flash_tc_forward.cuh):
// Load K of tile t ends when tile t has landed (after the cp.async wait and the barrier), and
// that event's span is the wait; the loads of tile t itself (one stage) or of tile t+1 (two
// stages; tile 0 with Q, before the loop) are issued where that span begins. A tile is computed
// from its landing to the next Load K (the last one: to the first store).
//
// The backward's kernels (flash_tc_backward.cuh) mark a tile's landing with Load Q (dK/dV) or
// Load K (dQ), likewise after the wait; but they issue tile t+1 after that wait (where that
// event ends: the stage it goes to held tile t−1 until every warp was done with it), and tile 0
// right after the kept tiles (where the first such span begins). The kept tiles land with tile
// 0. The atomic dK/dV kernel's dSᵀ is written during its AccumulateDV event (the loop that adds
// up dV and dK writes it) and read back, with dQ's share added to dQacc, during its Load dQacc
// event (AccumulateDQ and Store dQacc end right after). tc_dkdv_smem_kernel writes (P ∘ Z)ᵀ and
// dSᵀ during its ComputeDS event (the loop that computes them) and reads both as operands during
// its AccumulateDV event (AccumulateDK ends right after); dSᵀ is read for dQ as above.
PipelineView pipeline_at(const Replay& r, const SmemPipeline& layout, int track, const TrackCursor& tc);

// The same at a moment of the replay, for any of the CTA's tracks: step 09's CTAs record in lanes,
// and what a stage holds depends on all of them. The producer's Load of a tile (at issue: the copy
// lands later, unrecorded) begins its stage's tile, Loading until a consumer gets past its Wait
// for it (its product, for a tile with no Wait recorded); Computing while a consumer uses it;
// Free once each consumer that records has ended the event that releases it: K, its ComputeS;
// V, its AccumulateO (a work tile's j-th, which names no keys); the backward's stage, its
// AccumulateDK (the dV, dK and dQ products, one wait). waited_on: a consumer is in that Wait.
// The backward's dSᵀ buffer holds tile i from a consumer's ComputeDS to both consumers'
// AccumulateDK; a consumer's dQ block from its AccumulateDK to its Store dQacc (the reduce-add).
// The forward's O half from the consumer's Store O begin to its end.
PipelineView pipeline_at(const Replay& r, const SmemPipeline& layout, int track, Cursor c);

// What region g holds in view v (an alignment or barrier region: Empty).
StageView region_view(const SmemPipeline& layout, const PipelineView& v, const SmemRegion& g);

}  // namespace fs::viz
