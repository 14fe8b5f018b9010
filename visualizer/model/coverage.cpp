#include "visualizer/model/coverage.hpp"

#include <algorithm>
#include <cmath>

#include "common/host_memory.hpp"

namespace fs::viz {

namespace {

bool score_like(tr::Tensor t) {
  return t == tr::Tensor::S || t == tr::Tensor::P || t == tr::Tensor::dP || t == tr::Tensor::dS;
}

// The smallest extent events give a tensor along one axis, but no finer than kMaxCells
// cells: tiles stay whole cells where they can, and a grid stays drawable.
int cell_size(int extent, int smallest_tile) {
  const int floor_size = int((std::int64_t(extent) + Coverage::kMaxCells - 1) / Coverage::kMaxCells);
  const int s = smallest_tile > 0 ? smallest_tile : extent;
  return std::clamp(std::max(s, floor_size), 1, std::max(1, extent));
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
  const int N = std::max(1, meta.N), d = std::max(1, meta.d);
  const std::int64_t heads = head_count(meta);
  // The heads each tensor's grid keeps: those its events touch (what the file can hold).
  std::vector<int> touched[tr::kTensorCount];
  for (const auto& e : replay.trace().events) {
    const tr::Tensor t = (e.kind == tr::Kind::ComputeS || e.kind == tr::Kind::Skip) ? tr::Tensor::S : e.tensor;
    if (t != tr::Tensor::None && e.bh >= 0 && e.bh < heads) touched[int(t)].push_back(e.bh);
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
    if (score_like(t))
      g.cols = N;
    else if (info && info->shape.size() == 4)
      g.cols = int(info->shape[3]);
    else if (info && info->shape.size() == 3)
      g.cols = 1;
    else
      g.cols = (t == tr::Tensor::LSE || t == tr::Tensor::D || t == tr::Tensor::M || t == tr::Tensor::L) ? 1 : d;
    // Rows of every tensor share one partition where the tiles allow, so that Q_i, O_i and
    // row i of S line up across the grids.
    g.cell_rows = cell_size(g.rows, common_rows);
    g.cell_cols = cell_size(g.cols, min_cols[int(t)]);
    g.grid_rows = int((std::int64_t(g.rows) + g.cell_rows - 1) / g.cell_rows);
    g.grid_cols = int((std::int64_t(g.cols) + g.cell_cols - 1) / g.cell_cols);
    g.touched = touched[int(t)];
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
  // Everything is sized; check what the cells need before allocating them.
  std::uint64_t cells = 0;
  for (const auto& g : grids_) cells += std::uint64_t(g.touched.size()) * std::uint64_t(g.grid_rows) * std::uint64_t(g.grid_cols);
  require_host_memory(cells * sizeof(CellCounts), "the coverage of this trace's " + std::to_string(heads) + " heads");
  for (auto& g : grids_) g.cells.assign(g.touched.size() * std::size_t(g.grid_rows) * std::size_t(g.grid_cols), {});
}

const TensorGrid* Coverage::grid(tr::Tensor t) const {
  const int i = grid_of_[int(t)];
  return i < 0 ? nullptr : &grids_[std::size_t(i)];
}

void Coverage::reset() {
  for (auto& g : grids_) std::fill(g.cells.begin(), g.cells.end(), CellCounts{});
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
  auto& g = grids_[std::size_t(gi)];
  if (ev.bh < 0 || ev.bh >= g.heads || ev.rows <= 0 || ev.cols <= 0) return;
  CellCounts* head = g.head_cells(ev.bh);
  if (!head) return;
  // 64-bit ends: row0 + rows may pass INT_MAX in a damaged file.
  const int r0 = std::max(0, ev.row0), r1 = int(std::min<std::int64_t>(g.rows, std::int64_t(ev.row0) + ev.rows));
  const int c0 = std::max(0, ev.col0), c1 = int(std::min<std::int64_t>(g.cols, std::int64_t(ev.col0) + ev.cols));
  if (r0 >= r1 || c0 >= c1) return;
  for (int gr = r0 / g.cell_rows; gr <= (r1 - 1) / g.cell_rows; ++gr) {
    const int h = int(std::min<std::int64_t>(r1, std::int64_t(gr + 1) * g.cell_rows) -
                      std::max<std::int64_t>(r0, std::int64_t(gr) * g.cell_rows));
    auto* row = head + std::size_t(gr) * std::size_t(g.grid_cols);
    for (int gc = c0 / g.cell_cols; gc <= (c1 - 1) / g.cell_cols; ++gc) {
      const int w = int(std::min<std::int64_t>(c1, std::int64_t(gc + 1) * g.cell_cols) -
                        std::max<std::int64_t>(c0, std::int64_t(gc) * g.cell_cols));
      row[gc].*field += sign * std::int64_t(h) * w;
    }
  }
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
