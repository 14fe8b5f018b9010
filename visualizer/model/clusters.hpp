// Clustered traces (step 07, SMYRF): an event of round ρ names its rows by their slots in that
// round's sorted orders (trace.hpp, Event::round). The panels draw such a tile twice: in HBM
// where its rows really are (the gather's scattered stripes), and in the round's slot space,
// where cluster c is the block of query slots × key slots on the diagonal (common/smyrf.hpp,
// SmyrfGeometry). This is the part of that which needs no replay.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "common/trace/trace.hpp"

namespace fs::viz {

// The orders that place one clustered tile: slot s of its rows is row rows[s], slot s of its
// columns (S-like tensors: key slots) is key cols[s]; nullptr where the indices are rows already.
struct SlotOrders {
  const std::int32_t* rows = nullptr;
  const std::int32_t* cols = nullptr;
  bool mapped() const { return rows || cols; }
};

// Whether a trace's clustering can place its round events: 1 to kMaxRounds rounds, cluster sizes
// in [1, N], orders of B·H·hashes·N entries, each a row in [0, N). (Whether each order is a
// permutation is the validator's to say; its finding is in the title bar.)
bool usable_clustering(const fs::trace::Meta& meta);

// The orders of head `bh`, round `round` for a tile of tensor `t` (−1 or a round past the
// clustering: none). Key-side tensors (K, V, dK, dV) go through the key order, S-like ones through
// both, the order and the sort keys through none (their rows are slots already), the rest through
// the query order. The clustering must be usable.
SlotOrders slot_orders(const fs::trace::Meta& meta, fs::trace::Tensor t, int bh, int round);

// The rows slots [slot0, slot0 + count) stand for, as runs [first, last) of consecutive rows in
// ascending order; without an order, the slots' own range.
std::vector<std::pair<int, int>> row_runs(const std::int32_t* order, int slot0, int count);

// Cluster c of every round: query slots [q0, q1) × key slots [k0, k1).
struct ClusterBox {
  int q0 = 0, q1 = 0, k0 = 0, k1 = 0;
};
std::vector<ClusterBox> cluster_boxes(const fs::trace::Meta& meta);

// The share of the N×N scores one round computes: Σ_c |queries of c|·|keys of c| / N².
double round_score_share(const fs::trace::Meta& meta);

}  // namespace fs::viz
