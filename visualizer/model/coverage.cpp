#include "visualizer/model/coverage.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "common/host_memory.hpp"
#include "common/trace/names.hpp"

namespace fs::viz {

namespace {

// The smallest extent events give a tensor along one axis, but no finer than kMaxCells
// cells: tiles stay whole cells where they can, and a grid stays drawable.
int cell_size(int extent, int smallest_tile) {
  const int floor_size = int((std::int64_t(extent) + Coverage::kMaxCells - 1) / Coverage::kMaxCells);
  const int s = smallest_tile > 0 ? smallest_tile : extent;
  return std::clamp(std::max(s, floor_size), 1, std::max(1, extent));
}

// A cell size along an axis of `unit`-sized blocks (a cache's pages, S's key tiles) that keeps them
// whole: the smallest divisor of the unit at least cell_size's floor, or whole units, several a cell,
// when the unit is below it; the floor itself where that would be far coarser (a unit with no
// divisor near the floor, such as a contiguous cache's room of 701 keys).
int aligned_cell(int extent, int unit) {
  const int floor_size = std::max(1, int((std::int64_t(extent) + Coverage::kMaxCells - 1) / Coverage::kMaxCells));
  int c = 0;
  if (unit >= floor_size) {
    for (int k = floor_size; k <= unit && c == 0; ++k)
      if (unit % k == 0) c = k;
  } else if (unit > 0) {
    c = unit * ((floor_size + unit - 1) / unit);
  }
  if (c <= 0 || c > 4 * floor_size) return cell_size(extent, 1);
  return std::clamp(c, 1, std::max(1, extent));
}

// The cells an event's elements fall into along one axis, as (cell, elements) pairs: a range of
// rows covers its cells in part or whole; a range of slots, mapped through its round's order,
// lands wherever the rows it stands for lie (all in [0, extent): usable_clustering). A grid has
// at most kMaxCells cells a side, so neither needs the heap.
struct AxisCells {
  std::array<std::pair<int, int>, Coverage::kMaxCells> cells;
  int n = 0;
  const std::pair<int, int>* begin() const { return cells.data(); }
  const std::pair<int, int>* end() const { return cells.data() + n; }
};
void axis_cells(int begin, int end, int cell, const std::int32_t* order, AxisCells& out) {
  out.n = 0;
  if (!order) {
    for (int c = begin / cell; c <= (end - 1) / cell; ++c)
      out.cells[std::size_t(out.n++)] = {c, int(std::min<std::int64_t>(end, std::int64_t(c + 1) * cell) -
                                                std::max<std::int64_t>(begin, std::int64_t(c) * cell))};
    return;
  }
  std::array<int, Coverage::kMaxCells> count{};
  for (int s = begin; s < end; ++s) ++count[std::size_t(order[s] / cell)];
  for (int c = 0; c < Coverage::kMaxCells; ++c)
    if (count[std::size_t(c)] > 0) out.cells[std::size_t(out.n++)] = {c, count[std::size_t(c)]};
}

// Adds `sign` × the elements of rows [r0, r1) × columns [c0, c1) of head bh (through `orders`
// where they are slots) to `field` of the cells they fall into.
// 64-bit ends: row0 + rows may pass INT_MAX in a damaged file.
void add_elements(TensorGrid& g, int bh, std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1,
                  SlotOrders orders, std::int64_t CellCounts::*field, int sign) {
  if (bh < 0 || bh >= g.heads) return;
  CellCounts* head = g.head_cells(bh);
  r0 = std::max<std::int64_t>(0, r0), r1 = std::min<std::int64_t>(g.rows, r1);
  c0 = std::max<std::int64_t>(0, c0), c1 = std::min<std::int64_t>(g.cols, c1);
  if (!head || r0 >= r1 || c0 >= c1) return;
  AxisCells rows, cols;
  axis_cells(int(r0), int(r1), g.cell_rows, orders.rows, rows);
  axis_cells(int(c0), int(c1), g.cell_cols, orders.cols, cols);
  for (const auto& [gr, h] : rows) {
    auto* row = head + std::size_t(gr) * std::size_t(g.grid_cols);
    for (const auto& [gc, w] : cols) row[gc].*field += sign * std::int64_t(h) * w;
  }
}

}  // namespace

const CellCounts& TensorGrid::at(int bh, int r, int c) const {
  static const CellCounts zero;
  const auto it = std::lower_bound(touched.begin(), touched.end(), bh);
  if (it == touched.end() || *it != bh) return zero;
  const std::size_t slot = std::size_t(it - touched.begin());
  return cells[(slot * std::size_t(grid_rows) + std::size_t(r)) * std::size_t(grid_cols) + std::size_t(c)];
}

CellCounts* TensorGrid::head_cells(int bh) {
  const auto it = std::lower_bound(touched.begin(), touched.end(), bh);
  if (it == touched.end() || *it != bh) return nullptr;
  return &cells[std::size_t(it - touched.begin()) * std::size_t(grid_rows) * std::size_t(grid_cols)];
}

std::int64_t TensorGrid::cell_area(int r, int c) const {
  const std::int64_t h = std::min<std::int64_t>(cell_rows, rows - std::int64_t(r) * cell_rows);
  const std::int64_t w = std::min<std::int64_t>(cell_cols, cols - std::int64_t(c) * cell_cols);
  return std::max<std::int64_t>(0, h) * std::max<std::int64_t>(0, w);
}

Coverage::Coverage(const Replay& replay) {
  const auto& meta = replay.meta();
  std::fill(std::begin(grid_of_), std::end(grid_of_), -1);
  // The smallest tile along each axis, per tensor, from the events that touch it.
  int min_rows[tr::kTensorCount], min_cols[tr::kTensorCount];
  std::fill(std::begin(min_rows), std::end(min_rows), 0);
  std::fill(std::begin(min_cols), std::end(min_cols), 0);
  for (const auto& e : replay.trace().events) {
    const bool touches = e.kind == tr::Kind::Load || e.kind == tr::Kind::Store || e.kind == tr::Kind::ComputeS ||
                         e.kind == tr::Kind::Skip;
    if (!touches || e.rows <= 0 || e.cols <= 0) continue;
    const tr::Tensor t = (e.kind == tr::Kind::ComputeS || e.kind == tr::Kind::Skip) ? tr::Tensor::S : e.tensor;
    auto& r = min_rows[int(t)];
    auto& c = min_cols[int(t)];
    r = r == 0 ? e.rows : std::min(r, e.rows);
    c = c == 0 ? e.cols : std::min(c, e.cols);
  }
  int common_rows = 0;
  for (int r : min_rows)
    if (r > 0) common_rows = common_rows == 0 ? r : std::min(common_rows, r);
  // A clustered trace's tiles are slots: in the original order their rows lie anywhere, and the
  // finest cells show where (a tile of rows would blur a gather into its whole block).
  const bool clustered = replay.clustered();
  if (clustered) common_rows = 1;
  // A decoding trace's tensors have shapes of their own (trace::tensor_shape): K and V are the
  // cache's slots of each K/V head, S one K/V head's group of query rows against a sequence's keys,
  // o_part a row per split. Their rows are not one axis, so each is cut by its own tiles.
  const CacheGeometry& cache = replay.cache();
  const int N = std::max(1, meta.N), d = std::max(1, meta.d);
  const std::int64_t heads = head_count(meta);
  // The heads each tensor's events touch (what the file can hold); each grid keeps those it has.
  std::vector<int> touched[tr::kTensorCount];
  for (const auto& e : replay.trace().events) {
    const tr::Tensor t = (e.kind == tr::Kind::ComputeS || e.kind == tr::Kind::Skip) ? tr::Tensor::S : e.tensor;
    if (t != tr::Tensor::None && e.bh >= 0) touched[int(t)].push_back(e.bh);
  }
  for (auto& list : touched) {
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
  }
  auto add = [&](tr::Tensor t, bool in_hbm) {
    TensorGrid g;
    g.tensor = t;
    g.in_hbm = in_hbm;
    g.heads = heads;
    g.rows = N;
    const auto* info = find_tensor(meta, t);
    if (cache.on()) {
      // (B·H or 1·H_kv heads, rows, cols): the layout's, whatever a damaged file lists.
      const auto shape = tr::tensor_shape(t, meta);
      auto dim = [&](std::size_t i) { return i < shape.size() ? std::clamp<std::int64_t>(shape[i], 1, INT32_MAX) : 1; };
      g.heads = std::max<std::int64_t>(1, dim(0) * dim(1));
      g.rows = int(dim(2));
      g.cols = shape.size() >= 4 ? int(dim(3)) : 1;
    } else if (score_like(t))
      g.cols = N;
    else if (info && info->shape.size() == 4)
      g.cols = int(info->shape[3]);
    else if (info && info->shape.size() == 3)
      g.cols = 1;
    else
      g.cols = (t == tr::Tensor::LSE || t == tr::Tensor::D || t == tr::Tensor::M || t == tr::Tensor::L) ? 1 : d;
    if (cache.on()) {
      // The cache's rows in whole pages where they fit (a page is what the block table moves); S's
      // keys in whole tiles (a ComputeS event is one), so that the splits' bounds, between tiles,
      // fall between cells too.
      const bool kv = t == tr::Tensor::K || t == tr::Tensor::V;
      g.cell_rows = kv ? aligned_cell(g.rows, cache.page_rows()) : cell_size(g.rows, min_rows[int(t)]);
      const int tiles_floor = std::max(1, (g.cols + kMaxCells - 1) / kMaxCells);
      g.cell_cols = t == tr::Tensor::S && meta.Bc > 0 ? std::min(g.cols, meta.Bc * ((tiles_floor + meta.Bc - 1) / meta.Bc))
                                                      : cell_size(g.cols, min_cols[int(t)]);
    } else {
      // Rows of every tensor share one partition where the tiles allow, so that Q_i, O_i and
      // row i of S line up across the grids.
      g.cell_rows = cell_size(g.rows, common_rows);
      g.cell_cols = cell_size(g.cols, clustered && score_like(t) ? 1 : min_cols[int(t)]);
    }
    g.grid_rows = int((std::int64_t(g.rows) + g.cell_rows - 1) / g.cell_rows);
    g.grid_cols = int((std::int64_t(g.cols) + g.cell_cols - 1) / g.cell_cols);
    for (int bh : touched[int(t)])
      if (bh < g.heads) g.touched.push_back(bh);
    grid_of_[int(t)] = int(grids_.size());
    grids_.push_back(std::move(g));
  };
  // A tensor is in HBM for the picture when the pass moves it: a step's trace may list S and
  // P (the pass's full signature) and never store them, and then S is the ghost, P absent.
  bool moved[tr::kTensorCount] = {};
  for (const auto& e : replay.trace().events)
    if ((e.kind == tr::Kind::Load || e.kind == tr::Kind::Store) && e.tensor != tr::Tensor::None) moved[int(e.tensor)] = true;
  for (const auto& ti : meta.tensors)
    if (ti.id != tr::Tensor::None && grid_of_[int(ti.id)] < 0) add(ti.id, moved[int(ti.id)]);
  if (grid_of_[int(tr::Tensor::S)] < 0) add(tr::Tensor::S, false);
  // Tensors that events name but Meta::tensors left out still get a grid.
  for (const auto& e : replay.trace().events)
    if ((e.kind == tr::Kind::Load || e.kind == tr::Kind::Store) && e.tensor != tr::Tensor::None &&
        grid_of_[int(e.tensor)] < 0)
      add(e.tensor, true);
  // Each round's scores: in its slot space cut as its tiles are (the clusters' blocks stay
  // whole cells), in the original order as finely as S.
  if (clustered) {
    int slot_rows = 0, slot_cols = 0;
    for (const auto& e : replay.trace().events) {
      if ((e.kind != tr::Kind::ComputeS && e.kind != tr::Kind::Skip) || e.round < 0 || e.rows <= 0 || e.cols <= 0) continue;
      slot_rows = slot_rows == 0 ? e.rows : std::min(slot_rows, e.rows);
      slot_cols = slot_cols == 0 ? e.cols : std::min(slot_cols, e.cols);
    }
    TensorGrid sorted = grids_[std::size_t(grid_of_[int(tr::Tensor::S)])];
    sorted.cell_rows = cell_size(N, slot_rows);
    sorted.cell_cols = cell_size(N, slot_cols);
    sorted.grid_rows = (N + sorted.cell_rows - 1) / sorted.cell_rows;
    sorted.grid_cols = (N + sorted.cell_cols - 1) / sorted.cell_cols;
    round_sorted_.assign(std::size_t(replay.rounds()), sorted);
    round_original_.assign(std::size_t(replay.rounds()), grids_[std::size_t(grid_of_[int(tr::Tensor::S)])]);
  }
  // Everything is sized; check what the cells need before allocating them.
  std::uint64_t cells = 0;
  auto each_grid = [&](auto&& f) {
    for (auto* list : {&grids_, &round_sorted_, &round_original_})
      for (auto& g : *list) f(g);
  };
  each_grid([&](TensorGrid& g) {
    cells += std::uint64_t(g.touched.size()) * std::uint64_t(g.grid_rows) * std::uint64_t(g.grid_cols);
  });
  // A decoding trace's cache slot by slot, where it is small enough to (what a person can look at).
  const std::int64_t slot_total = cache.on() ? cache.slots() * cache.heads_kv() : 0;
  const bool per_slot = slot_total > 0 && slot_total <= kMaxSlotCounts;
  require_host_memory(cells * sizeof(CellCounts) + (per_slot ? 2 * std::uint64_t(slot_total) * sizeof(SlotCounts) : 0),
                      "the coverage of this trace's " + std::to_string(heads) + " heads");
  each_grid([](TensorGrid& g) { g.cells.assign(g.touched.size() * std::size_t(g.grid_rows) * std::size_t(g.grid_cols), {}); });
  if (per_slot) {
    slots_ = cache.slots();
    slot_heads_ = cache.heads_kv();
    for (auto& v : slot_counts_) v.assign(std::size_t(slot_total), SlotCounts{});
  }
}

const TensorGrid* Coverage::round_scores(int round, bool sorted) const {
  const auto& list = sorted ? round_sorted_ : round_original_;
  return round >= 0 && round < int(list.size()) ? &list[std::size_t(round)] : nullptr;
}

const TensorGrid* Coverage::grid(tr::Tensor t) const {
  const int i = grid_of_[int(t)];
  return i < 0 ? nullptr : &grids_[std::size_t(i)];
}

const SlotCounts* Coverage::slot_counts(tr::Tensor t, int hk) const {
  const int i = t == tr::Tensor::K ? 0 : t == tr::Tensor::V ? 1 : -1;
  if (i < 0 || slot_counts_[i].empty() || hk < 0 || hk >= slot_heads_) return nullptr;
  return slot_counts_[i].data() + std::size_t(hk) * std::size_t(slots_);
}

void Coverage::reset() {
  for (auto* list : {&grids_, &round_sorted_, &round_original_})
    for (auto& g : *list) std::fill(g.cells.begin(), g.cells.end(), CellCounts{});
  for (auto& v : slot_counts_) std::fill(v.begin(), v.end(), SlotCounts{});
  applied_ = 0;
}

void Coverage::apply(const Replay& replay, int e, int sign) {
  const auto& ev = replay.trace().events[std::size_t(e)];
  tr::Tensor t = ev.tensor;
  std::int64_t CellCounts::*field = nullptr;
  switch (ev.kind) {
    case tr::Kind::Load: field = ev.cached ? &CellCounts::cached : &CellCounts::read; break;
    case tr::Kind::Store: field = &CellCounts::written; break;
    case tr::Kind::ComputeS:
      t = tr::Tensor::S;
      field = &CellCounts::computed;
      break;
    case tr::Kind::Skip:
      t = tr::Tensor::S;
      field = &CellCounts::skipped;
      break;
    default: return;
  }
  const int gi = t == tr::Tensor::None ? -1 : grid_of_[int(t)];
  if (gi < 0) return;
  const std::int64_t r0 = ev.row0, r1 = std::int64_t(ev.row0) + ev.rows;
  const std::int64_t c0 = ev.col0, c1 = std::int64_t(ev.col0) + ev.cols;
  // The cache slot by slot: a load or store of K or V counts each of its rows once.
  const int kv = t == tr::Tensor::K ? 0 : t == tr::Tensor::V ? 1 : -1;
  if (kv >= 0 && !slot_counts_[kv].empty() && ev.bh >= 0 && ev.bh < slot_heads_ && (ev.kind == tr::Kind::Load || ev.kind == tr::Kind::Store)) {
    std::int32_t SlotCounts::*f = ev.kind == tr::Kind::Store ? &SlotCounts::written : ev.cached ? &SlotCounts::cached : &SlotCounts::read;
    SlotCounts* head = slot_counts_[kv].data() + std::size_t(ev.bh) * std::size_t(slots_);
    for (std::int64_t r = std::max<std::int64_t>(0, r0); r < std::min(r1, slots_); ++r) head[r].*f += sign;
  }
  if (ev.round < 0) {
    add_elements(grids_[std::size_t(gi)], ev.bh, r0, r1, c0, c1, {}, field, sign);
    return;
  }
  // Slots of a round: placed through its orders, nowhere when the trace's cannot place them.
  if (!replay.placeable(t, ev.bh, ev.round)) return;
  const SlotOrders orders = replay.slot_orders(t, ev.bh, ev.round);
  if (t == tr::Tensor::S) {
    add_elements(round_sorted_[std::size_t(ev.round)], ev.bh, r0, r1, c0, c1, {}, field, sign);
    add_elements(round_original_[std::size_t(ev.round)], ev.bh, r0, r1, c0, c1, orders, field, sign);
    if (field == &CellCounts::skipped) return;
  }
  add_elements(grids_[std::size_t(gi)], ev.bh, r0, r1, c0, c1, orders, field, sign);
}

void Coverage::seek(const Replay& replay, Cursor c) {
  const std::int64_t k = replay.done_count(c);
  if (c.order != order_) {
    reset();
    order_ = c.order;
  }
  if (k < applied_ && k < applied_ - k) reset();
  for (; applied_ < k; ++applied_) apply(replay, replay.event_in_order(order_, applied_), +1);
  for (; applied_ > k; --applied_) apply(replay, replay.event_in_order(order_, applied_ - 1), -1);
}

}  // namespace fs::viz
