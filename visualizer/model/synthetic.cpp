#include "visualizer/model/synthetic.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <queue>
#include <random>
#include <stdexcept>
#include <tuple>

#include "common/io_model.hpp"
#include "common/problem.hpp"
#include "common/smyrf.hpp"
#include "common/trace/names.hpp"
#include "visualizer/model/labels.hpp"

namespace fs::viz {

namespace tr = fs::trace;

namespace {

using tr::Kind;
using tr::Tensor;

// A simple model of one H200 SM: its share of HBM bandwidth, L2 for re-reads, FP32 rate.
constexpr double kHbmBytesPerNs = 4.8e3 / 132;  // 4.8 TB/s over 132 SMs
constexpr double kL2BytesPerNs = 2.5 * kHbmBytesPerNs;
constexpr double kHbmLatencyNs = 600, kL2LatencyNs = 250, kStoreLatencyNs = 400;
constexpr double kFlopsPerNs = 507;  // 128 FMA/clk × 2 × 1.98 GHz
constexpr double kTensorFlopsPerNs = 989e3 / 132;  // bf16 tensor cores: 989 TFLOP/s over 132 SMs
constexpr double kSfuPerNs = 3.9e3 / 132;          // exp and the like: 3.9 T/s (FlashAttention-3, §3)
constexpr double kTimerStepNs = 32;  // %globaltimer resolution
constexpr int kFloat = 4;

struct Op {
  Kind kind;
  Tensor tensor;
  std::int32_t bh, row0, rows, col0, cols;
  std::int64_t bytes;
  bool cached;
  double dur;
  float m = std::numeric_limits<float>::quiet_NaN();
  float l = std::numeric_limits<float>::quiet_NaN();
  std::int32_t sample_row = -1;
  std::int32_t round = -1;  // Smyrf: the round whose slots the rows are
};

// A CTA's events, one list per lane (tr::Kernel::lanes), each from the CTA's start: one lane but
// in step 09's warpgroups.
struct Cta {
  std::vector<std::vector<Op>> lanes{1};
  std::vector<Op>& ops() { return lanes.front(); }
  double duration() const {
    double longest = 0;
    for (const auto& lane : lanes) {
      double d = 0;
      for (const auto& op : lane) d += op.dur;
      longest = std::max(longest, d);
    }
    return longest;
  }
};

struct KernelPlan {
  tr::Kernel info;
  int ctas_per_sm = 1;
  std::vector<Cta> ctas;
};

class Timing {
 public:
  explicit Timing(std::uint64_t seed) : rng_(seed) {}
  double jitter() { return 0.9 + 0.2 * uni_(rng_); }
  double load(std::int64_t bytes, bool cached) {
    return (cached ? kL2LatencyNs + double(bytes) / kL2BytesPerNs : kHbmLatencyNs + double(bytes) / kHbmBytesPerNs) *
           jitter();
  }
  double store(std::int64_t bytes) { return (kStoreLatencyNs + double(bytes) / kHbmBytesPerNs) * jitter(); }
  double compute(double flops, double efficiency) { return flops / (kFlopsPerNs * efficiency) * jitter(); }
  double tensor(double flops) { return flops / kTensorFlopsPerNs * jitter(); }
  double special(double ops) { return ops / kSfuPerNs * jitter(); }
  double normal() { return nrm_(rng_); }
  double uniform() { return uni_(rng_); }

 private:
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> uni_{0.0, 1.0};
  std::normal_distribution<double> nrm_{0.0, 1.0};
};

// Every tensor is float32 (or int32, the orders), but the sort keys (a float and an index), and
// step 09's, of its dtype (tile_bytes).
std::int64_t tile_bytes(Tensor t, int rows, int cols, const char* dtype = "fp32") {
  return std::int64_t(rows) * cols * tr::element_bytes(t, dtype);
}
Op load_op(Timing& tm, Tensor t, int bh, int row0, int rows, int col0, int cols, bool cached) {
  const std::int64_t bytes = tile_bytes(t, rows, cols);
  return {Kind::Load, t, bh, row0, rows, col0, cols, bytes, cached, tm.load(bytes, cached)};
}
Op store_op(Timing& tm, Tensor t, int bh, int row0, int rows, int col0, int cols) {
  const std::int64_t bytes = tile_bytes(t, rows, cols);
  return {Kind::Store, t, bh, row0, rows, col0, cols, bytes, false, tm.store(bytes)};
}
Op compute_op(Kind k, Tensor t, int bh, int row0, int rows, int col0, int cols, double dur) {
  return {k, t, bh, row0, rows, col0, cols, 0, false, dur};
}

int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Alg. 1 l.10-11 for a CTA's sampled row over one more tile of keys [j0, j0 + cj): m and ℓ after
// it. The row's scores are noise, a slow rise along the keys (so that m keeps moving and the
// rescale factor shows) and the row's neighbours standing out; causal masks the keys after it.
void sample_row_tile(Timing& tm, int j0, int cj, int sample, int N, bool causal, double& m, double& l) {
  std::vector<double> scores(static_cast<std::size_t>(cj));
  double mt = -std::numeric_limits<double>::infinity();
  for (int c2 = 0; c2 < cj; ++c2) {
    const int key = j0 + c2;
    const double trend = 3.0 * double(key) / double(N);
    const double local = 2.5 * std::exp(-std::abs(key - sample) / 24.0);
    scores[std::size_t(c2)] = (causal && key > sample) ? -std::numeric_limits<double>::infinity() : tm.normal() + trend + local;
    mt = std::max(mt, scores[std::size_t(c2)]);
  }
  double lt = 0;
  // A tile whose every key is masked for this row has m̃ = -inf: it adds nothing, and
  // exp(-inf - (-inf)) would be NaN.
  if (mt > -std::numeric_limits<double>::infinity())
    for (int c2 = 0; c2 < cj; ++c2) lt += std::exp(scores[std::size_t(c2)] - mt);
  const double m_new = std::max(m, mt);
  l = (l > 0 ? std::exp(m - m_new) * l : 0.0) + (lt > 0 ? std::exp(mt - m_new) * lt : 0.0);
  m = m_new;
}

// The softmax and rescale events after a tile, carrying the sampled row's m and ℓ.
void push_stats_ops(Cta& c, Timing& tm, int bh, int row0, int rows, int j0, int cj, int d, double m, double l,
                    int sample, int round) {
  Op sm = compute_op(Kind::Softmax, Tensor::P, bh, row0, rows, j0, cj, tm.compute(8.0 * rows * cj, 0.25));
  Op rs = compute_op(Kind::Rescale, Tensor::O, bh, row0, rows, 0, d, tm.compute(2.0 * rows * d, 0.25));
  for (Op* op : {&sm, &rs}) {
    op->m = float(m);
    op->l = float(l);
    op->sample_row = sample;
    op->round = round;
  }
  c.ops().push_back(sm);
  c.ops().push_back(rs);
}

// Step 01's forward: three kernels, every N×N matrix through HBM. Re-reads that L2 serves
// (a Q row read by every CTA of its block row) are marked cached, so that the non-cached
// bytes are exactly io_standard_forward's count.
std::vector<KernelPlan> plan_naive(const SyntheticSpec& s, Timing& tm) {
  constexpr int kT = 16;  // the kernels' 16×16 thread blocks
  constexpr int kRowsPerSoftmaxCta = 8;  // 256 threads, one warp per row
  const int BH = s.B * s.H, N = s.N, d = s.d;
  const int tn = ceil_div(N, kT), td = ceil_div(d, kT);
  std::vector<KernelPlan> plans(3);

  auto& sc = plans[0];
  sc.info = {"scores_kernel", {tn, tn, BH}, {kT, kT, 1}, 0, 0, 0, 1, {}};
  for (int bh = 0; bh < BH; ++bh)
    for (int by = 0; by < tn; ++by)
      for (int bx = 0; bx < tn; ++bx) {
        const int i0 = by * kT, j0 = bx * kT, ri = std::min(kT, N - i0), rj = std::min(kT, N - j0);
        Cta c;
        c.ops().push_back(load_op(tm, Tensor::Q, bh, i0, ri, 0, d, bx != 0));
        c.ops().push_back(load_op(tm, Tensor::K, bh, j0, rj, 0, d, by != 0));
        c.ops().push_back(compute_op(Kind::ComputeS, Tensor::S, bh, i0, ri, j0, rj,
                                   tm.compute(2.0 * ri * rj * d, 0.3)));
        c.ops().push_back(store_op(tm, Tensor::S, bh, i0, ri, j0, rj));
        sc.ctas.push_back(std::move(c));
      }

  auto& sm = plans[1];
  const int rows_ctas = ceil_div(N, kRowsPerSoftmaxCta);
  sm.info = {"softmax_kernel", {rows_ctas * BH, 1, 1}, {32 * kRowsPerSoftmaxCta, 1, 1}, 0, 0, 0, 1, {}};
  for (int bh = 0; bh < BH; ++bh)
    for (int b = 0; b < rows_ctas; ++b) {
      const int r0 = b * kRowsPerSoftmaxCta, r = std::min(kRowsPerSoftmaxCta, N - r0);
      Cta c;
      c.ops().push_back(load_op(tm, Tensor::S, bh, r0, r, 0, N, false));
      c.ops().push_back(compute_op(Kind::Softmax, Tensor::P, bh, r0, r, 0, N, tm.compute(8.0 * r * N, 0.25)));
      c.ops().push_back(store_op(tm, Tensor::P, bh, r0, r, 0, N));
      c.ops().push_back(store_op(tm, Tensor::LSE, bh, r0, r, 0, 1));
      sm.ctas.push_back(std::move(c));
    }

  auto& pv = plans[2];
  pv.info = {"pv_kernel", {td, tn, BH}, {kT, kT, 1}, 0, 0, 0, 1, {}};
  for (int bh = 0; bh < BH; ++bh)
    for (int by = 0; by < tn; ++by)
      for (int bx = 0; bx < td; ++bx) {
        const int i0 = by * kT, c0 = bx * kT, ri = std::min(kT, N - i0), rc = std::min(kT, d - c0);
        Cta c;
        c.ops().push_back(load_op(tm, Tensor::P, bh, i0, ri, 0, N, bx != 0));
        c.ops().push_back(load_op(tm, Tensor::V, bh, 0, N, c0, rc, by != 0));
        c.ops().push_back(compute_op(Kind::AccumulateO, Tensor::O, bh, i0, ri, c0, rc,
                                   tm.compute(2.0 * ri * rc * N, 0.3)));
        c.ops().push_back(store_op(tm, Tensor::O, bh, i0, ri, c0, rc));
        pv.ctas.push_back(std::move(c));
      }
  for (auto& p : plans) p.ctas_per_sm = s.ctas_per_sm > 0 ? s.ctas_per_sm : 8;
  return plans;
}

bool butterfly_keeps(int i, int j) {
  const unsigned x = unsigned(i ^ j);
  return x == 0 || (x & (x - 1)) == 0;
}

// Step 04's forward in FlashAttention-2's loop order: one CTA per (head, query tile Q_i)
// streams every K_j, V_j through shared memory and keeps S_ij, P̃_ij, O_i, m, ℓ on chip; O_i
// and its LSE are written once. The sampled row's scores are random (with a slow rise along
// the keys, so that m keeps moving and the rescale factor shows), its m and ℓ exact for them.
std::vector<KernelPlan> plan_flash(const SyntheticSpec& s, Timing& tm) {
  const int BH = s.B * s.H, N = s.N, d = s.d, Br = s.Br, Bc = s.Bc;
  const int Tr = ceil_div(N, Br), Tc = ceil_div(N, Bc);
  std::vector<KernelPlan> plans(1);
  auto& k = plans[0];
  const std::int64_t smem = std::int64_t(Br + 2 * Bc) * d * kFloat;  // Q_i, K_j, V_j
  k.info = {"flash_forward_kernel", {Tr, BH, 1}, {128, 1, 1}, smem, 0, 0, 1, {}};
  k.ctas_per_sm = s.ctas_per_sm > 0 ? s.ctas_per_sm : 2;
  for (int bh = 0; bh < BH; ++bh)
    for (int i = 0; i < Tr; ++i) {
      const int i0 = i * Br, ri = std::min(Br, N - i0);
      const int sample = i0 + std::min(ri - 1, 5);
      Cta c;
      c.ops().push_back(load_op(tm, Tensor::Q, bh, i0, ri, 0, d, false));
      double m = -std::numeric_limits<double>::infinity(), l = 0;
      for (int j = 0; j < Tc; ++j) {
        const int j0 = j * Bc, cj = std::min(Bc, N - j0);
        const bool masked_out = (s.causal && j0 > i0 + ri - 1) ||
                                (s.mask == BlockMask::Butterfly && !butterfly_keeps(i, j));
        if (masked_out) {
          c.ops().push_back(compute_op(Kind::Skip, Tensor::S, bh, i0, ri, j0, cj, 0));
          continue;
        }
        c.ops().push_back(load_op(tm, Tensor::K, bh, j0, cj, 0, d, false));
        c.ops().push_back(load_op(tm, Tensor::V, bh, j0, cj, 0, d, false));
        c.ops().push_back(compute_op(Kind::ComputeS, Tensor::S, bh, i0, ri, j0, cj,
                                   tm.compute(2.0 * ri * cj * d, 0.5)));
        sample_row_tile(tm, j0, cj, sample, N, s.causal, m, l);
        push_stats_ops(c, tm, bh, i0, ri, j0, cj, d, m, l, sample, -1);
        c.ops().push_back(compute_op(Kind::AccumulateO, Tensor::O, bh, i0, ri, 0, d,
                                   tm.compute(2.0 * ri * cj * d, 0.5)));
      }
      c.ops().push_back(store_op(tm, Tensor::O, bh, i0, ri, 0, d));
      c.ops().push_back(store_op(tm, Tensor::LSE, bh, i0, ri, 0, 1));
      k.ctas.push_back(std::move(c));
    }
  return plans;
}

// Step 09's forward (steps/09_hopper, FlashAttention-3) in bf16: one CTA per (head, query tile of
// 128 rows) in three lanes. The producer warpgroup (lane 0) issues TMA copies of Q and, per key
// tile, of K and V into two stages, each once the consumers have freed the stage (its waits); its
// events are the issues, short, since a copy lands later, on its own. Each consumer warpgroup
// (lanes 1, 2) owns 64 of the rows: per tile it waits for K, computes S = QKᵀ and its softmax,
// rescales O, waits for V and accumulates P̃V. The two consumers share the tensor cores, one
// product at a time, so that one's softmax runs under the other's products: the ping-pong of the
// FlashAttention-3 paper (§3.1), which this schedule shows as the lanes' events. Each consumer
// then stores its rows of O and LSE, as the kernel does (hopper_forward_kernel's consumer lanes).
std::vector<KernelPlan> plan_hopper(const SyntheticSpec& s, Timing& tm) {
  constexpr int kBlockM = 128, kBlockN = 128, kStages = 2, kConsumers = 2, kRows = kBlockM / kConsumers;
  constexpr const char* kDtype = "bf16";
  const int BH = s.B * s.H, N = s.N, d = s.d, Tr = ceil_div(N, kBlockM), Tc = ceil_div(N, kBlockN);
  std::vector<KernelPlan> plans(1);
  auto& k = plans[0];
  const std::int64_t smem = tile_bytes(Tensor::Q, kBlockM, d, kDtype) + 2 * kStages * tile_bytes(Tensor::K, kBlockN, d, kDtype);
  k.info = {"hopper_forward_kernel", {Tr * BH, 1, 1}, {128 * (1 + kConsumers), 1, 1}, smem, 0, 0,
            1 + kConsumers, {"producer", "consumer 0", "consumer 1"}};
  k.ctas_per_sm = 1;
  auto gemm = [&](int rows, int cols) { return tm.tensor(2.0 * rows * cols * d); };
  // K and V tiles land at L2's rate: every query tile's CTA of a head reads them, and L2 serves
  // all but the first (the IO model counts each read, as the trace does).
  auto copy = [&](std::int64_t bytes) { return (kL2LatencyNs + double(bytes) / kL2BytesPerNs) * tm.jitter(); };
  constexpr double kIssueNs = 40;  // a TMA copy's issue by one thread
  for (int bh = 0; bh < BH; ++bh)
    for (int i = 0; i < Tr; ++i) {
      const int i0 = i * kBlockM, ri = std::min(kBlockM, N - i0);
      // Causal: no key tile past the last row's diagonal.
      const int tiles = s.causal ? ceil_div(i0 + ri, kBlockN) : Tc;
      Cta c;
      c.lanes.resize(1 + kConsumers);
      // Each lane's ops are placed at absolute times (from the CTA's start); a gap before an op is
      // the lane waiting, recorded as a Wait of its own.
      std::vector<double> clock(c.lanes.size(), 0.0);
      auto at = [&](int lane, double begin, Op op) {
        if (begin > clock[std::size_t(lane)])
          c.lanes[std::size_t(lane)].push_back(
              compute_op(Kind::Wait, Tensor::None, bh, op.row0, op.rows, 0, 0, begin - clock[std::size_t(lane)]));
        clock[std::size_t(lane)] = std::max(begin, clock[std::size_t(lane)]) + op.dur;
        c.lanes[std::size_t(lane)].push_back(op);
        return clock[std::size_t(lane)];
      };
      auto issue = [&](Tensor t, int row0, int rows, double not_before) {
        const std::int64_t bytes = tile_bytes(t, rows, d, kDtype);
        const double issued = at(0, not_before, {Kind::Load, t, bh, row0, rows, 0, d, bytes, false, kIssueNs});
        return issued + copy(bytes);  // when it lands
      };
      const double q_lands = issue(Tensor::Q, i0, ri, 0);
      const std::size_t n = std::size_t(tiles);
      std::vector<double> k_lands(n, 0.0), v_lands(n, 0.0), k_freed(n, 0.0), v_freed(n, 0.0);
      double tensor_cores = 0;  // when the tensor cores take the next product
      for (int t = 0; t < tiles; ++t) {
        const int j0 = t * kBlockN, cj = std::min(kBlockN, N - j0);
        // A stage is free once both consumers are done with the tile it held kStages tiles ago.
        k_lands[std::size_t(t)] = issue(Tensor::K, j0, cj, t >= kStages ? k_freed[std::size_t(t - kStages)] : 0);
        v_lands[std::size_t(t)] = issue(Tensor::V, j0, cj, t >= kStages ? v_freed[std::size_t(t - kStages)] : 0);
        // The consumers take the tensor cores in turn: S of one, S of the other, then P̃V likewise.
        for (int w = 0; w < kConsumers; ++w) {
          const int lane = 1 + w, r0 = i0 + w * kRows, rows = std::max(0, std::min(kRows, N - r0));
          if (rows == 0) continue;
          const double ready = std::max({tensor_cores, k_lands[std::size_t(t)], q_lands});
          tensor_cores = at(lane, ready, compute_op(Kind::ComputeS, Tensor::S, bh, r0, rows, j0, cj, gemm(rows, cj)));
          k_freed[std::size_t(t)] = std::max(k_freed[std::size_t(t)], tensor_cores);
          // An exp per score on the special-function units (and the row max and sum): the slow
          // part that FlashAttention-3 hides under the other consumer's products.
          at(lane, clock[std::size_t(lane)],
             compute_op(Kind::Softmax, Tensor::P, bh, r0, rows, j0, cj, tm.special(2.0 * rows * cj)));
          at(lane, clock[std::size_t(lane)], compute_op(Kind::Rescale, Tensor::O, bh, r0, rows, 0, d, tm.compute(2.0 * rows * d, 0.25)));
        }
        for (int w = 0; w < kConsumers; ++w) {
          const int lane = 1 + w, r0 = i0 + w * kRows, rows = std::max(0, std::min(kRows, N - r0));
          if (rows == 0) continue;
          const double ready = std::max({tensor_cores, v_lands[std::size_t(t)], clock[std::size_t(lane)]});
          tensor_cores = at(lane, ready, compute_op(Kind::AccumulateO, Tensor::O, bh, r0, rows, 0, d, gemm(rows, cj)));
          v_freed[std::size_t(t)] = std::max(v_freed[std::size_t(t)], tensor_cores);
        }
      }
      if (tiles < Tc) {
        const int j0 = tiles * kBlockN;
        at(0, clock[0], compute_op(Kind::Skip, Tensor::S, bh, i0, ri, j0, N - j0, 0));
      }
      // Each consumer's rows of O and LSE, once its last P̃V has landed.
      for (int w = 0; w < kConsumers; ++w) {
        const int lane = 1 + w, r0 = i0 + w * kRows, rows = std::max(0, std::min(kRows, N - r0));
        if (rows == 0) continue;
        const std::int64_t o_bytes = tile_bytes(Tensor::O, rows, d, kDtype), lse_bytes = tile_bytes(Tensor::LSE, rows, 1, kDtype);
        at(lane, clock[std::size_t(lane)], {Kind::Store, Tensor::O, bh, r0, rows, 0, d, o_bytes, false, tm.store(o_bytes)});
        at(lane, clock[std::size_t(lane)], {Kind::Store, Tensor::LSE, bh, r0, rows, 0, 1, lse_bytes, false, tm.store(lse_bytes)});
      }
      k.ctas.push_back(std::move(c));
    }
  return plans;
}

// Step 07's forward (SMYRF, steps/07_smyrf) with the clusters `cl`: the norms kernel and the
// hash kernel read Q and K (the hash kernel stores every row's sort keys), CUB sorts them (no
// event: Meta::untraced), then one kernel per round with a CTA per cluster. It loads its query
// slots' indices from `order` and gathers their rows of Q through them; per key tile, the key
// slots' indices, then K and V rows; it computes the cluster's block of S (in slot space: on the
// diagonal), skips the rest, merges into O and LSE (read back after round 0) and stores them.
std::vector<KernelPlan> plan_smyrf(const SyntheticSpec& s, const tr::Clustering& cl, Timing& tm) {
  constexpr int kNormRows = 64, kHashRows = 128, kKeyTile = 16;  // step 07's at d ≤ 64
  const int BH = s.B * s.H, N = s.N, d = s.d, R = cl.hashes;
  const SmyrfGeometry g{N, cl.q_cluster, cl.k_cluster};
  std::vector<KernelPlan> plans;
  // Grid (row blocks, 2·B·H): the queries of head y, then the keys of head y − B·H.
  for (const bool hash : {false, true}) {
    KernelPlan k;
    const int rows_per_cta = hash ? kHashRows : kNormRows;
    k.info = {hash ? "smyrf_hash_kernel" : "smyrf_norms_kernel", {ceil_div(N, rows_per_cta), 2 * BH, 1},
              {hash ? kHashRows : 256, 1, 1}, hash ? std::int64_t(kHashRows) * (d + 1) * kFloat : 64, 0, 0, 1, {}};
    k.ctas_per_sm = s.ctas_per_sm > 0 ? s.ctas_per_sm : 4;
    for (int y = 0; y < 2 * BH; ++y)
      for (int row0 = 0; row0 < N; row0 += rows_per_cta) {
        const bool keys = y >= BH;
        const int bh = keys ? y - BH : y, rows = std::min(rows_per_cta, N - row0);
        Cta c;
        c.ops().push_back(load_op(tm, keys ? Tensor::K : Tensor::Q, bh, row0, rows, 0, d, false));
        if (hash) c.ops().push_back(store_op(tm, Tensor::SortKey, bh, row0, rows, keys ? R : 0, R));
        k.ctas.push_back(std::move(c));
      }
    plans.push_back(std::move(k));
  }
  for (int round = 0; round < R; ++round) {
    KernelPlan k;
    k.info = {"smyrf_round_forward_kernel", {g.clusters(), BH, 1}, {128, 1, 1},
              std::int64_t(4) * kKeyTile * d * kFloat, 0, 0, 1, {}};  // 2 stages of K and V tiles
    k.ctas_per_sm = s.ctas_per_sm > 0 ? s.ctas_per_sm : 4;
    auto in_round = [&](Op op) {
      op.round = round;
      return op;
    };
    for (int bh = 0; bh < BH; ++bh)
      for (int c = 0; c < g.clusters(); ++c) {
        const int q0 = g.query_begin(c), rows = g.query_end(c) - q0, k0 = g.key_begin(c), k1 = g.key_end(c);
        Cta cta;
        cta.ops().push_back(load_op(tm, Tensor::Order, bh, q0, rows, round, 1, false));
        cta.ops().push_back(in_round(load_op(tm, Tensor::Q, bh, q0, rows, 0, d, false)));
        double m = -std::numeric_limits<double>::infinity(), l = 0;
        for (int j0 = k0; j0 < k1; j0 += kKeyTile) {
          const int cj = std::min(kKeyTile, k1 - j0);
          cta.ops().push_back(load_op(tm, Tensor::Order, bh, j0, cj, R + round, 1, false));
          cta.ops().push_back(in_round(load_op(tm, Tensor::K, bh, j0, cj, 0, d, false)));
          cta.ops().push_back(in_round(load_op(tm, Tensor::V, bh, j0, cj, 0, d, false)));
          cta.ops().push_back(in_round(compute_op(Kind::ComputeS, Tensor::S, bh, q0, rows, j0, cj,
                                                tm.compute(2.0 * rows * cj * d, 0.5))));
          sample_row_tile(tm, j0, cj, q0, N, false, m, l);
          push_stats_ops(cta, tm, bh, q0, rows, j0, cj, d, m, l, q0, round);
          cta.ops().push_back(in_round(compute_op(Kind::AccumulateO, Tensor::O, bh, q0, rows, 0, d,
                                                tm.compute(2.0 * rows * cj * d, 0.5))));
        }
        if (k0 > 0) cta.ops().push_back(in_round(compute_op(Kind::Skip, Tensor::S, bh, q0, rows, 0, k0, 0)));
        if (k1 < N) cta.ops().push_back(in_round(compute_op(Kind::Skip, Tensor::S, bh, q0, rows, k1, N - k1, 0)));
        if (round > 0) {  // the merge with the rounds before
          cta.ops().push_back(in_round(load_op(tm, Tensor::O, bh, q0, rows, 0, d, false)));
          cta.ops().push_back(in_round(load_op(tm, Tensor::LSE, bh, q0, rows, 0, 1, false)));
        }
        cta.ops().push_back(in_round(store_op(tm, Tensor::O, bh, q0, rows, 0, d)));
        cta.ops().push_back(in_round(store_op(tm, Tensor::LSE, bh, q0, rows, 0, 1)));
        k.ctas.push_back(std::move(cta));
      }
    plans.push_back(std::move(k));
  }
  return plans;
}

// Step 10's KV cache for a decode spec, as steps/10_decode's program lays it out: a contiguous cache
// of seqlen_cache slots per sequence, or ⌈seqlen_cache / page_size⌉ pages per sequence and one spare
// page (paged_layout), the block table drawn without repeats from all of them in shuffled order.
// seqlen_cache is the longest sequence's room: its keys, and the new tokens with an append.
tr::KvCache decode_cache(const SyntheticSpec& s) {
  tr::KvCache c;
  c.heads_kv = s.heads_kv;
  c.splits = s.splits;
  c.append = s.append;
  c.page_size = s.page_size;
  int room = 1;
  for (int b = 0; b < s.B; ++b) {
    const int before = s.keys[std::size_t(std::min<int>(b, int(s.keys.size()) - 1))];
    c.lengths.push_back(before + (s.append ? s.new_tokens : 0));
    room = std::max(room, c.lengths.back());
  }
  c.seqlen_cache = room;
  if (s.page_size == 0) {
    c.slots = s.B * room;
    return c;
  }
  const int per = ceil_div(room, s.page_size), pages = s.B * per + 1;
  std::vector<std::int32_t> order(static_cast<std::size_t>(pages));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(s.seed ^ 0xdec0deull);
  std::shuffle(order.begin(), order.end(), rng);
  c.block_table.assign(order.begin(), order.begin() + std::ptrdiff_t(s.B) * per);
  c.slots = pages * s.page_size;
  return c;
}

// Step 10's forward (steps/10_decode) in bf16, as decode_trace.cuh records it, without a window or
// causal mask (every row of a sequence sees all its keys):
//   append   (with new tokens to add) per row of k_new and v_new its chunks of 8 columns, loaded and
//            stored at the key's slot, kAppendThreads = 256 chunks a CTA, K's rows before V's
//   split    grid (splits, K/V heads × row blocks, batch): per tile of 128 keys of its split, Q's
//            rows with the first tile (one load per run of one head's tokens), K's and V's rows one
//            load per run of consecutive slots (a page, paged), the scores and P̃V; then O and LSE
//            with one split, else a partial O and LSE per row (o_part, lse_part, float32)
//   combine  (more than one split) four rows (b, h, t) of LSE's order a CTA: each row's LSEs of its
//            splits, their partial O's, its O and LSE
// Loads take a page's bytes at the SM's share of the bandwidth, after one latency per tile (the
// kernel keeps tiles in flight); the products run at the tensor cores' rate. The CTA's Q rows, its
// results and the combine's rows after the first go out or come in together: one latency for all.
std::vector<KernelPlan> plan_decode(const SyntheticSpec& s, const tr::KvCache& c, Timing& tm) {
  constexpr int kRows = 16, kCombineRows = 4, kAppendChunks = 256;
  constexpr const char* kDtype = "bf16";
  constexpr int kE = 2;  // bf16
  const int B = s.B, H = s.H, Hkv = s.heads_kv, n = s.new_tokens, d = s.d, g = H / Hkv, splits = s.splits;
  const int tile = d == 64 ? 128 : 64, stages = d == 256 ? 2 : 3;  // decode_configs.cuh
  const int group_rows = g * n, blocks = ceil_div(group_rows, kRows);
  auto run_load = [&](std::int64_t bytes, bool first) {
    return ((first ? kHbmLatencyNs : 40.0) + double(bytes) / kHbmBytesPerNs) * tm.jitter();
  };
  auto run_store = [&](std::int64_t bytes, bool first) {
    return ((first ? kStoreLatencyNs : 40.0) + double(bytes) / kHbmBytesPerNs) * tm.jitter();
  };
  std::vector<KernelPlan> plans;

  if (s.append) {
    KernelPlan k;
    const int chunks = d / 8;
    const std::int64_t half = std::int64_t(B) * n * Hkv * chunks, total = 2 * half;
    k.info = {"decode_append_kernel", {int((total + kAppendChunks - 1) / kAppendChunks), 1, 1}, {kAppendChunks, 1, 1}, 0, 0, 0, 1, {}};
    k.ctas_per_sm = s.ctas_per_sm > 0 ? s.ctas_per_sm : 8;
    for (std::int64_t c0 = 0; c0 < total; c0 += kAppendChunks) {
      Cta cta;
      for (std::int64_t ch = c0; ch < std::min(total, c0 + kAppendChunks);) {
        const bool is_v = ch >= half;
        const std::int64_t i = is_v ? ch - half : ch, row = i / chunks;  // (b, t, hk)
        const int chunk = int(i % chunks);
        const std::int64_t end = std::min({c0 + kAppendChunks, is_v ? total : half});
        const int m = int(std::min<std::int64_t>(end - ch, chunks - chunk));
        const int hk = int(row % Hkv), t = int(row / Hkv % n), b = int(row / Hkv / n);
        const int key = c.lengths[std::size_t(b)] - n + t;
        ch += m;
        const std::int64_t bytes = std::int64_t(m) * 8 * kE;
        // Every thread copies its chunk at once: the CTA's first copy takes the latencies.
        const bool first = cta.ops().empty();
        cta.ops().push_back({Kind::Load, is_v ? Tensor::VNew : Tensor::KNew, b * Hkv + hk, t, 1, 8 * chunk, 8 * m, bytes,
                             false, run_load(bytes, first)});
        cta.ops().push_back({Kind::Store, is_v ? Tensor::V : Tensor::K, hk, int(c.slot(b, key)), 1, 8 * chunk, 8 * m,
                             bytes, false, run_store(bytes, first)});
      }
      k.ctas.push_back(std::move(cta));
    }
    plans.push_back(std::move(k));
  }

  KernelPlan sk;
  const std::int64_t smem = std::int64_t(kE) * (kRows * d + 2 * stages * tile * d);
  sk.info = {"decode_split_kernel", {splits, Hkv * blocks, B}, {128, 1, 1}, smem, 0, 0, 1, {}};
  sk.ctas_per_sm = s.ctas_per_sm > 0 ? s.ctas_per_sm : 2;
  // CTAs in the grid's linear order: split fastest, then K/V head and row block, then sequence.
  for (int b = 0; b < B; ++b)
    for (int y = 0; y < Hkv * blocks; ++y)
      for (int split = 0; split < splits; ++split) {
        const int hk = y / blocks, rb = y % blocks, rows = std::min(kRows, group_rows - rb * kRows);
        const int L = c.lengths[std::size_t(b)];
        const int tiles = ceil_div(L, tile), per = ceil_div(tiles, splits);
        const int first = split * per, count = std::max(0, std::min(first + per, tiles) - first);
        const int S_bh = b * Hkv + hk;
        Cta cta;
        auto token = [&](int r) { return (rb * kRows + r) / g; };
        auto head = [&](int r) { return hk * g + (rb * kRows + r) % g; };
        auto load_q = [&] {  // runs of one head's consecutive tokens
          for (int r = 0; r < rows;) {
            int end = r + 1;
            while (end < rows && head(end) == head(r) && token(end) == token(end - 1) + 1) ++end;
            const std::int64_t bytes = std::int64_t(end - r) * d * kE;
            cta.ops().push_back({Kind::Load, Tensor::Q, b * H + head(r), token(r), end - r, 0, d, bytes, false, run_load(bytes, r == 0)});
            r = end;
          }
        };
        for (int t = 0; t < count; ++t) {
          const int j0 = (first + t) * tile, keys = std::min(tile, L - j0);
          if (t == 0) load_q();
          for (Tensor kv : {Tensor::K, Tensor::V}) {
            bool first_run = kv == Tensor::K;
            for (int k = 0; k < keys;) {  // a run of consecutive slots
              const std::int64_t slot0 = c.slot(b, j0 + k);
              int m = 1;
              while (k + m < keys && c.slot(b, j0 + k + m) == slot0 + m) ++m;
              const std::int64_t bytes = std::int64_t(m) * d * kE;
              cta.ops().push_back({Kind::Load, kv, hk, int(slot0), m, 0, d, bytes, false, run_load(bytes, first_run)});
              first_run = false;
              k += m;
            }
          }
          cta.ops().push_back(compute_op(Kind::ComputeS, Tensor::S, S_bh, rb * kRows, rows, j0, keys, tm.tensor(2.0 * rows * keys * d)));
          cta.ops().push_back(compute_op(Kind::AccumulateO, Tensor::None, S_bh, rb * kRows, rows, 0, d, tm.tensor(2.0 * rows * keys * d)));
        }
        if (count == 0) load_q();  // a split with no keys loads Q all the same
        if (splits == 1) {
          for (int r = 0; r < rows;) {
            int end = r + 1;
            while (end < rows && head(end) == head(r) && token(end) == token(end - 1) + 1) ++end;
            const int bh = b * H + head(r), m = end - r;
            const std::int64_t o_bytes = tile_bytes(Tensor::O, m, d, kDtype), lse_bytes = tile_bytes(Tensor::LSE, m, 1);
            cta.ops().push_back({Kind::Store, Tensor::O, bh, token(r), m, 0, d, o_bytes, false, run_store(o_bytes, r == 0)});
            cta.ops().push_back({Kind::Store, Tensor::LSE, bh, token(r), m, 0, 1, lse_bytes, false, run_store(lse_bytes, false)});
            r = end;
          }
        } else {
          for (int r = 0; r < rows; ++r) {
            const int bh = b * H + head(r), row = token(r) * splits + split;
            const std::int64_t o_bytes = tile_bytes(Tensor::OPart, 1, d), lse_bytes = tile_bytes(Tensor::LSEPart, 1, 1);
            cta.ops().push_back({Kind::Store, Tensor::OPart, bh, row, 1, 0, d, o_bytes, false, run_store(o_bytes, r == 0)});
            cta.ops().push_back({Kind::Store, Tensor::LSEPart, bh, row, 1, 0, 1, lse_bytes, false, run_store(lse_bytes, false)});
          }
        }
        sk.ctas.push_back(std::move(cta));
      }
  plans.push_back(std::move(sk));

  if (splits > 1) {
    KernelPlan k;
    const std::int64_t rows = std::int64_t(B) * H * n;
    k.info = {"decode_combine_kernel", {int((rows + kCombineRows - 1) / kCombineRows), 1, 1}, {32 * kCombineRows, 1, 1}, 0, 0, 0, 1, {}};
    k.ctas_per_sm = s.ctas_per_sm > 0 ? s.ctas_per_sm : 8;
    for (std::int64_t r0 = 0; r0 < rows; r0 += kCombineRows) {
      Cta cta;
      for (std::int64_t row = r0; row < std::min(rows, r0 + kCombineRows); ++row) {
        // One warp a row, all at once: the first row's events take the latencies, the others' are
        // recorded right after it.
        const int bh = int(row / n), t = int(row % n), b = bh / H;
        const bool first = row == r0;
        const std::int64_t lse_in = tile_bytes(Tensor::LSEPart, splits, 1), o_in = tile_bytes(Tensor::OPart, splits, d);
        cta.ops().push_back({Kind::Load, Tensor::LSEPart, bh, t * splits, splits, 0, 1, lse_in, false, run_load(lse_in, first)});
        if (c.lengths[std::size_t(b)] > 0)  // a row that saw no key reads no partial O (its LSE is −inf)
          cta.ops().push_back({Kind::Load, Tensor::OPart, bh, t * splits, splits, 0, d, o_in, false, run_load(o_in, first)});
        const std::int64_t o_bytes = tile_bytes(Tensor::O, 1, d, kDtype), lse_bytes = tile_bytes(Tensor::LSE, 1, 1);
        cta.ops().push_back({Kind::Store, Tensor::O, bh, t, 1, 0, d, o_bytes, false, run_store(o_bytes, first)});
        cta.ops().push_back({Kind::Store, Tensor::LSE, bh, t, 1, 0, 1, lse_bytes, false, run_store(lse_bytes, false)});
      }
      k.ctas.push_back(std::move(cta));
    }
    plans.push_back(std::move(k));
  }
  return plans;
}

// Random clusters, as the hashes of random inputs give: each round's query and key orders a
// permutation of the rows.
tr::Clustering random_clustering(const SyntheticSpec& s) {
  tr::Clustering cl;
  cl.hashes = s.hashes;
  cl.q_cluster = cl.k_cluster = s.cluster;
  std::mt19937_64 rng(s.seed ^ 0x5eed5eedull);
  std::vector<std::int32_t> rows(std::size_t(s.N));
  for (auto* order : {&cl.q_order, &cl.k_order})
    for (int seg = 0; seg < s.B * s.H * s.hashes; ++seg) {
      std::iota(rows.begin(), rows.end(), 0);
      std::shuffle(rows.begin(), rows.end(), rng);
      order->insert(order->end(), rows.begin(), rows.end());
    }
  return cl;
}

double quantize(double t) { return std::floor(t / kTimerStepNs) * kTimerStepNs; }

// One lane's ops as the events of `track`, back to back from `at`, on the timer's steps.
void append_events(tr::Trace& t, int track, const std::vector<Op>& ops, double at) {
  for (const auto& op : ops) {
    tr::Event e;
    e.track = track;
    e.kind = op.kind;
    e.tensor = op.tensor;
    e.bh = op.bh;
    e.row0 = op.row0;
    e.rows = op.rows;
    e.col0 = op.col0;
    e.cols = op.cols;
    e.bytes = op.bytes;
    e.cached = op.cached;
    e.ts_ns = quantize(at);
    e.dur_ns = quantize(at + op.dur) - e.ts_ns;
    e.m = op.m;
    e.l = op.l;
    e.sample_row = op.sample_row;
    e.round = op.round;
    at += op.dur;
    t.events.push_back(e);
  }
}

}  // namespace

bool parse_synthetic_step(const std::string& s, SyntheticStep& out) {
  if (s == "naive" || s == "01" || s == "1" || s == "01_naive") {
    out = SyntheticStep::Naive;
    return true;
  }
  if (s == "flash" || s == "04" || s == "4" || s == "04_online_softmax") {
    out = SyntheticStep::Flash;
    return true;
  }
  if (s == "smyrf" || s == "07" || s == "7" || s == "07_smyrf") {
    out = SyntheticStep::Smyrf;
    return true;
  }
  if (s == "hopper" || s == "09" || s == "9" || s == "09_hopper") {
    out = SyntheticStep::Hopper;
    return true;
  }
  if (s == "decode" || s == "10" || s == "10_decode") {
    out = SyntheticStep::Decode;
    return true;
  }
  return false;
}

SyntheticSpec spec_for_event_count(std::int64_t events) {
  SyntheticSpec s;
  s.step = SyntheticStep::Flash;
  s.N = 8192;
  const std::int64_t Tr = s.N / s.Br, Tc = s.N / s.Bc;
  const std::int64_t per_head = Tr * (1 + 6 * Tc + 2);
  s.H = int(std::max<std::int64_t>(1, (events + per_head - 1) / per_head));
  return s;
}

SyntheticSpec decode_spec(bool paged) {
  SyntheticSpec s;
  s.step = SyntheticStep::Decode;
  s.B = 2;
  s.H = 8;
  s.heads_kv = 2;
  s.new_tokens = 1;
  s.d = 64;
  s.keys = {700};
  s.page_size = paged ? 16 : 0;
  s.splits = 3;
  return s;
}

tr::Trace make_synthetic_trace(const SyntheticSpec& s) {
  if (s.B < 1 || s.H < 1 || s.N < 1 || s.d < 1 || s.Br < 1 || s.Bc < 1 || s.sms < 1)
    throw std::invalid_argument("synthetic trace: B, H, N, d, Br, Bc and sms must be at least 1");
  const bool decode = s.step == SyntheticStep::Decode;
  if (decode && (s.heads_kv < 1 || s.H % s.heads_kv != 0 || s.new_tokens < 1 || s.splits < 1 || s.page_size < 0 ||
                 s.d % 8 != 0 || s.keys.empty() ||
                 std::any_of(s.keys.begin(), s.keys.end(), [](int k) { return k < 0 || k > (1 << 24); })))
    throw std::invalid_argument("synthetic decoding trace: H a multiple of heads_kv, at least one new token and split, "
                                "d a multiple of 8, 0 to 2^24 keys a sequence, a page size of 0 (contiguous) or more");
  const bool smyrf = s.step == SyntheticStep::Smyrf;
  if (smyrf && (s.hashes < 1 || s.hashes > tr::kMaxRounds || s.cluster < 1 || s.cluster > s.N))
    throw std::invalid_argument("synthetic SMYRF trace: 1 to " + std::to_string(tr::kMaxRounds) +
                                " rounds, clusters of 1 to N queries");
  Timing tm(s.seed);
  const tr::Clustering clusters = smyrf ? random_clustering(s) : tr::Clustering{};
  const bool hopper = s.step == SyntheticStep::Hopper;
  const tr::KvCache cache = decode ? decode_cache(s) : tr::KvCache{};
  std::vector<KernelPlan> plans = s.step == SyntheticStep::Naive ? plan_naive(s, tm)
                                  : smyrf                        ? plan_smyrf(s, clusters, tm)
                                  : hopper                       ? plan_hopper(s, tm)
                                  : decode                       ? plan_decode(s, cache, tm)
                                                                 : plan_flash(s, tm);

  tr::Trace t;
  auto& m = t.meta;
  m.gpu = "synthetic (H200 timing model)";
  m.driver = "none";
  m.commit = "synthetic";
  m.date = "1970-01-01";
  m.step = s.step == SyntheticStep::Naive ? "01_naive"
           : smyrf                        ? "07_smyrf"
           : hopper                       ? "09_hopper"
           : decode                       ? "10_decode"
                                          : "04_online_softmax";
  m.variant = s.step == SyntheticStep::Naive ? "naive"
              : smyrf                        ? "clusters"
              : hopper                       ? "fa3"
              : decode                       ? (s.page_size > 0 ? "paged" : "contiguous")
                                             : "fa2";
  if (hopper || decode) m.dtype = "bf16";
  m.pass = "fwd";
  m.B = s.B;
  m.H = s.H;
  m.N = decode ? s.new_tokens : s.N;  // decoding: the new tokens (KvCache)
  m.d = s.d;
  m.causal = s.causal && !decode;
  m.scale = 1.0f / std::sqrt(float(s.d));
  m.Br = s.step == SyntheticStep::Naive ? 0 : smyrf ? s.cluster : hopper ? 128 : decode ? 16 : s.Br;
  m.Bc = s.step == SyntheticStep::Naive ? 0 : smyrf ? std::min(16, s.cluster) : hopper ? 128 : decode ? (s.d == 64 ? 128 : 64) : s.Bc;
  m.sram_budget_bytes = 232448;  // H200: 227 KB per CTA (opt-in)
  m.cache = cache;
  m.clusters = clusters;
  const std::int64_t BH = std::int64_t(s.B) * s.H, Nd = std::int64_t(m.N) * s.d;
  std::vector<Tensor> ids = {Tensor::Q, Tensor::K, Tensor::V, Tensor::O, Tensor::LSE};
  if (s.step == SyntheticStep::Naive) ids.insert(ids.end(), {Tensor::S, Tensor::P});
  if (smyrf) ids.insert(ids.end(), {Tensor::Order, Tensor::SortKey});
  // Step 10's program lists its inputs and outputs and every tensor an event names (traced_run.cpp,
  // list_tensors): the scores S, the splits' partials.
  if (decode && s.append) ids.insert(ids.end(), {Tensor::KNew, Tensor::VNew});
  if (decode) ids.push_back(Tensor::S);
  if (decode && s.splits > 1) ids.insert(ids.end(), {Tensor::OPart, Tensor::LSEPart});
  for (Tensor id : ids) {
    auto shape = tr::tensor_shape(id, m);
    const std::int64_t bytes = tr::shape_elems(shape) * tr::element_bytes(id, m.dtype);
    m.tensors.push_back({id, std::move(shape), bytes});
  }
  if (smyrf) {
    // CUB's segmented sort of every round's queries and keys: it reads each key and index, writes
    // the orders (as step 07's IO model counts it).
    const std::int64_t items = 2 * std::int64_t(clusters.hashes) * s.N * BH;
    m.untraced.push_back({"cub::DeviceSegmentedRadixSort::SortPairs", items * (kFloat + 4), items * 4, {Tensor::Order}});
  }

  // Host side: allocate, copy the inputs, launch (one range per kernel), synchronise, check.
  const double copy_ns = double(3 * BH * Nd * kFloat) / 25.0;  // ~25 GB/s over PCIe
  t.ranges.push_back({"allocate", 0, 18000, 0});
  t.ranges.push_back({"copy Q, K, V to device", 18000, copy_ns, 0});
  double clock = 18000 + copy_ns + 2000;
  const double forward_begin = clock;

  // Device side: each kernel's CTAs go to the SM slot that frees first (the first wave
  // spreads over the SMs), then run their events back to back.
  struct PlacedCta {
    int kernel, cta, sm;
    double begin;
  };
  std::vector<PlacedCta> placed;
  for (std::size_t k = 0; k < plans.size(); ++k) {
    auto& plan = plans[k];
    const double kbegin = clock + 3000;
    using Slot = std::tuple<double, int, int>;  // free at, slot index, SM
    std::priority_queue<Slot, std::vector<Slot>, std::greater<>> slots;
    for (int slot = 0; slot < plan.ctas_per_sm; ++slot)
      for (int sm = 0; sm < s.sms; ++sm) slots.emplace(0.0, slot, sm);
    double kend = 0;
    for (std::size_t c = 0; c < plan.ctas.size(); ++c) {
      auto [free_at, slot, sm] = slots.top();
      slots.pop();
      const double dur = plan.ctas[c].duration();
      placed.push_back({int(k), int(c), sm, kbegin + free_at});
      kend = std::max(kend, free_at + dur);
      slots.emplace(free_at + dur + 200 * tm.jitter(), slot, sm);
    }
    plan.info.ts_ns = kbegin;
    plan.info.dur_ns = quantize(kbegin + kend) - kbegin + kTimerStepNs;
    t.ranges.push_back({plan.info.name, kbegin - 2000, plan.info.dur_ns + 2000, 1});
    clock = kbegin + plan.info.dur_ns + 1000;
    t.kernels.push_back(plan.info);
  }
  t.ranges.push_back({"forward", forward_begin, clock - forward_begin, 0});
  t.ranges.push_back({"synchronize", clock, 4000, 0});
  clock += 4000;
  t.ranges.push_back({"check against the fp64 reference", clock, 250000, 0});
  t.marks.push_back({"forward done", clock - 4000});

  // Tracks ordered by SM (as the file orders them), then events by time.
  std::sort(placed.begin(), placed.end(), [](const PlacedCta& a, const PlacedCta& b) {
    return std::tie(a.sm, a.begin, a.kernel, a.cta) < std::tie(b.sm, b.begin, b.kernel, b.cta);
  });
  std::int64_t total = 0, cap = 0;
  for (const auto& p : placed)
    for (const auto& lane : plans[std::size_t(p.kernel)].ctas[std::size_t(p.cta)].lanes) {
      total += std::int64_t(lane.size());
      cap = std::max(cap, std::int64_t(lane.size()));
    }
  t.events.reserve(std::size_t(total));
  for (const auto& p : placed) {
    const auto& lanes = plans[std::size_t(p.kernel)].ctas[std::size_t(p.cta)].lanes;
    for (std::size_t lane = 0; lane < lanes.size(); ++lane) {
      if (lanes[lane].empty()) continue;  // as the decoder: a lane that recorded nothing has no track
      tr::Track track;
      track.kernel = p.kernel;
      track.cta = p.cta;
      track.lane = int(lane);
      track.sm = p.sm;
      t.tracks.push_back(track);
      append_events(t, int(t.tracks.size()) - 1, lanes[lane], p.begin);
    }
  }
  // seq: by begin time; ties (a 32 ns step holds several events) by track, then by position
  // on the track, which is the order the events were appended.
  std::vector<int> order(t.events.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const auto &ea = t.events[std::size_t(a)], &eb = t.events[std::size_t(b)];
    return ea.ts_ns != eb.ts_ns ? ea.ts_ns < eb.ts_ns : ea.track < eb.track;
  });
  std::vector<tr::Event> sorted;
  sorted.reserve(order.size());
  for (std::size_t k = 0; k < order.size(); ++k) {
    sorted.push_back(t.events[std::size_t(order[k])]);
    sorted.back().seq = std::int64_t(k);
  }
  t.events = std::move(sorted);

  const std::int64_t smem = t.kernels.empty() ? 0 : t.kernels.front().smem_bytes;
  m.smem_per_cta_bytes = smem;
  m.event_cap = cap;
  m.events_dropped = 0;
  if (s.step == SyntheticStep::Naive) {
    const IoCount io = io_standard_forward(Shape{s.B, s.H, s.N, s.d});
    m.io_read_bytes = io.read_bytes;
    m.io_write_bytes = io.write_bytes;
  } else {
    // The flash, SMYRF and Hopper schedules are their IO models (io_formulas.hpp checks flash's), with
    // the sort's traffic that no event records.
    for (const auto& e : t.events) {
      if (e.kind == Kind::Load && !e.cached) m.io_read_bytes += e.bytes;
      if (e.kind == Kind::Store) m.io_write_bytes += e.bytes;
    }
    for (const auto& u : m.untraced) {
      m.io_read_bytes += u.read_bytes;
      m.io_write_bytes += u.write_bytes;
    }
  }
  for (const auto& b : m.tensors) t.buffers.push_back({tensor_label(b.id), 0x7f0000000000ull + t.buffers.size() * 0x10000000ull, std::uint64_t(b.bytes)});
  return t;
}

}  // namespace fs::viz
