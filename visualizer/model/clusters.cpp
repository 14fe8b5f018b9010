#include "visualizer/model/clusters.hpp"

#include <algorithm>

#include "common/smyrf.hpp"
#include "common/trace/names.hpp"
#include "visualizer/model/replay.hpp"

namespace fs::viz {

namespace tr = fs::trace;

namespace {

SmyrfGeometry geometry(const tr::Meta& meta) { return {meta.N, meta.clusters.q_cluster, meta.clusters.k_cluster}; }

}  // namespace

bool usable_clustering(const tr::Meta& meta) {
  const tr::Clustering& c = meta.clusters;
  if (!c.on() || c.hashes > tr::kMaxRounds || meta.N < 1) return false;
  if (c.q_cluster < 1 || c.q_cluster > meta.N || c.k_cluster < 1 || c.k_cluster > meta.N) return false;
  // By division: a damaged file may declare a B·H whose product with hashes·N overflows even 64
  // bits, while the orders hold only what the file held.
  const std::int64_t per_head = std::int64_t(c.hashes) * meta.N, n = std::int64_t(c.q_order.size());
  if (std::int64_t(c.k_order.size()) != n || n % per_head != 0 || n / per_head != head_count(meta)) return false;
  for (const auto* order : {&c.q_order, &c.k_order})
    if (std::any_of(order->begin(), order->end(), [&](std::int32_t row) { return row < 0 || row >= meta.N; }))
      return false;
  return true;
}

SlotOrders slot_orders(const tr::Meta& meta, tr::Tensor t, int bh, int round) {
  const tr::Clustering& c = meta.clusters;
  if (round < 0 || round >= c.hashes || bh < 0 || bh >= head_count(meta) || t == tr::Tensor::Order ||
      t == tr::Tensor::SortKey || t == tr::Tensor::None)
    return {};
  const std::size_t at = std::size_t((std::int64_t(bh) * c.hashes + round) * meta.N);
  if (score_like(t)) return {&c.q_order[at], &c.k_order[at]};
  return {tr::key_side(t) ? &c.k_order[at] : &c.q_order[at], nullptr};
}

std::vector<std::pair<int, int>> row_runs(const std::int32_t* order, int slot0, int count) {
  std::vector<std::pair<int, int>> runs;
  if (count <= 0) return runs;
  if (!order) return {{slot0, slot0 + count}};
  std::vector<int> rows(order + slot0, order + slot0 + count);
  std::sort(rows.begin(), rows.end());
  for (int row : rows) {
    if (!runs.empty() && runs.back().second >= row)
      runs.back().second = std::max(runs.back().second, row + 1);
    else
      runs.push_back({row, row + 1});
  }
  return runs;
}

std::vector<ClusterBox> cluster_boxes(const tr::Meta& meta) {
  std::vector<ClusterBox> out;
  if (!meta.clusters.on() || meta.clusters.q_cluster < 1 || meta.clusters.k_cluster < 1) return out;
  const SmyrfGeometry g = geometry(meta);
  for (int c = 0; c < g.clusters(); ++c) out.push_back({g.query_begin(c), g.query_end(c), g.key_begin(c), g.key_end(c)});
  return out;
}

double round_score_share(const tr::Meta& meta) {
  if (meta.N < 1) return 0;
  double scores = 0;
  for (const auto& b : cluster_boxes(meta)) scores += double(b.q1 - b.q0) * double(b.k1 - b.k0);
  return scores / (double(meta.N) * meta.N);
}

}  // namespace fs::viz
