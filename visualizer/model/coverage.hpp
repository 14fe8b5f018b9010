// Coverage: for every HBM tensor of a trace, which of its elements have been read, written,
// computed on chip (S) or skipped, up to the replay's cursor — the state the HBM tile grids
// and the ghost score matrix draw.
//
// Each tensor of each head is cut into cells of a few tiles (at most kMaxCells a side, so that
// a grid draws in a handful of rectangles); a cell counts elements, so an event that covers
// part of a cell counts its part. Cells are kept only for the heads that some event touches
// (the others read as zeros), so memory grows with what the file holds, not with the B·H it
// declares; what that still needs is checked against the memory available (InputError,
// "needs X GiB") before anything is allocated. Counts only add and subtract, so moving the cursor applies
// or takes back just the events in between: playing costs the events played, and a jump
// costs at most the shorter of "from here" and "from the start".
//
// A clustered trace (step 07) names a round's rows by their slots in that round's sorted orders:
// the grids above hold its tiles where their rows really are (cells as fine as kMaxCells allows,
// since a gathered tile's rows lie anywhere), and each round has two score grids of its own, in
// its slot space (where the clusters are blocks on the diagonal) and in the original order.
#pragma once

#include <cstdint>
#include <vector>

#include "visualizer/model/replay.hpp"

namespace fs::viz {

struct CellCounts {
  std::int64_t read = 0;      // elements loaded from HBM (counted by the IO model)
  std::int64_t cached = 0;    // re-reads served by L2
  std::int64_t written = 0;   // elements stored to HBM
  std::int64_t computed = 0;  // S only: score elements computed on chip
  std::int64_t skipped = 0;   // S only: score elements the algorithm skipped
};

struct TensorGrid {
  tr::Tensor tensor = tr::Tensor::None;
  bool in_hbm = true;         // false for a tensor the pass never moves (the ghost S of step 04)
  std::int64_t heads = 1;
  int rows = 1, cols = 1;            // elements of one head
  int cell_rows = 1, cell_cols = 1;  // elements of one cell
  int grid_rows = 1, grid_cols = 1;  // cells of one head
  std::vector<int> touched;          // the heads events touch, ascending: the heads `cells` holds
  std::vector<CellCounts> cells;     // [touched head][grid_row][grid_col]

  // Cell (r, c) of head bh (zeros for a head no event touches).
  const CellCounts& at(int bh, int r, int c) const;
  // The cells of head bh, or nullptr when no event touches it.
  CellCounts* head_cells(int bh);
  // Elements in cell (r, c): edge cells are smaller when a tile size does not divide N.
  std::int64_t cell_area(int r, int c) const;
};

// A decoding trace's cache, slot by slot: rows of K (or V) read from HBM, re-read, written.
struct SlotCounts {
  std::int32_t read = 0, cached = 0, written = 0;
};

class Coverage {
 public:
  static constexpr int kMaxCells = 128;
  // Slots of one cache tensor (K or V) over all its K/V heads counted one by one, at most.
  static constexpr std::int64_t kMaxSlotCounts = std::int64_t(1) << 21;

  explicit Coverage(const Replay& replay);

  // Brings the counts to the cursor: the events done at `c`, in c's order.
  void seek(const Replay& replay, Cursor c);

  const std::vector<TensorGrid>& grids() const { return grids_; }
  const TensorGrid* grid(tr::Tensor t) const;
  // Round ρ's scores of a clustered trace, computed and skipped: in its slot space (`sorted`;
  // rows are query slots, columns key slots) or in the original order (rows are queries, columns
  // keys); nullptr for a round the trace does not have. The grid of S holds every round's
  // computed scores in the original order (a round's skips say nothing of the other rounds').
  const TensorGrid* round_scores(int round, bool sorted) const;
  // A decoding trace's cache of K/V head hk, slot by slot (the grids of K and V are cut into whole
  // pages, a cell each): Replay::cache().slots() counts, or nullptr for a tensor other than K and V,
  // a trace without a cache, or a cache of more than kMaxSlotCounts slots over its heads.
  const SlotCounts* slot_counts(tr::Tensor t, int hk) const;

 private:
  void apply(const Replay& replay, int e, int sign);
  void reset();

  std::vector<TensorGrid> grids_;
  std::vector<TensorGrid> round_sorted_, round_original_;  // [round]
  std::vector<SlotCounts> slot_counts_[2];                 // K, V: [hk · slots + slot]
  std::int64_t slots_ = 0;
  int slot_heads_ = 0;
  int grid_of_[tr::kTensorCount];
  Order order_ = Order::Logical;
  std::int64_t applied_ = 0;
};

}  // namespace fs::viz
