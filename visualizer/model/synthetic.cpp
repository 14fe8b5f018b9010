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
};

struct Cta {
  std::vector<Op> ops;
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
  double normal() { return nrm_(rng_); }
  double uniform() { return uni_(rng_); }

 private:
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> uni_{0.0, 1.0};
  std::normal_distribution<double> nrm_{0.0, 1.0};
};

Op load_op(Timing& tm, Tensor t, int bh, int row0, int rows, int col0, int cols, bool cached) {
  const std::int64_t bytes = std::int64_t(rows) * cols * kFloat;
  return {Kind::Load, t, bh, row0, rows, col0, cols, bytes, cached, tm.load(bytes, cached)};
}
Op store_op(Timing& tm, Tensor t, int bh, int row0, int rows, int col0, int cols) {
  const std::int64_t bytes = std::int64_t(rows) * cols * kFloat;
  return {Kind::Store, t, bh, row0, rows, col0, cols, bytes, false, tm.store(bytes)};
}
Op compute_op(Kind k, Tensor t, int bh, int row0, int rows, int col0, int cols, double dur) {
  return {k, t, bh, row0, rows, col0, cols, 0, false, dur};
}

int ceil_div(int a, int b) { return (a + b - 1) / b; }

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
  sc.info = {"scores_kernel", {tn, tn, BH}, {kT, kT, 1}, 0, 0, 0};
  for (int bh = 0; bh < BH; ++bh)
    for (int by = 0; by < tn; ++by)
      for (int bx = 0; bx < tn; ++bx) {
        const int i0 = by * kT, j0 = bx * kT, ri = std::min(kT, N - i0), rj = std::min(kT, N - j0);
        Cta c;
        c.ops.push_back(load_op(tm, Tensor::Q, bh, i0, ri, 0, d, bx != 0));
        c.ops.push_back(load_op(tm, Tensor::K, bh, j0, rj, 0, d, by != 0));
        c.ops.push_back(compute_op(Kind::ComputeS, Tensor::S, bh, i0, ri, j0, rj,
                                   tm.compute(2.0 * ri * rj * d, 0.3)));
        c.ops.push_back(store_op(tm, Tensor::S, bh, i0, ri, j0, rj));
        sc.ctas.push_back(std::move(c));
      }

  auto& sm = plans[1];
  const int rows_ctas = ceil_div(N, kRowsPerSoftmaxCta);
  sm.info = {"softmax_kernel", {rows_ctas * BH, 1, 1}, {32 * kRowsPerSoftmaxCta, 1, 1}, 0, 0, 0};
  for (int bh = 0; bh < BH; ++bh)
    for (int b = 0; b < rows_ctas; ++b) {
      const int r0 = b * kRowsPerSoftmaxCta, r = std::min(kRowsPerSoftmaxCta, N - r0);
      Cta c;
      c.ops.push_back(load_op(tm, Tensor::S, bh, r0, r, 0, N, false));
      c.ops.push_back(compute_op(Kind::Softmax, Tensor::P, bh, r0, r, 0, N, tm.compute(8.0 * r * N, 0.25)));
      c.ops.push_back(store_op(tm, Tensor::P, bh, r0, r, 0, N));
      c.ops.push_back(store_op(tm, Tensor::LSE, bh, r0, r, 0, 1));
      sm.ctas.push_back(std::move(c));
    }

  auto& pv = plans[2];
  pv.info = {"pv_kernel", {td, tn, BH}, {kT, kT, 1}, 0, 0, 0};
  for (int bh = 0; bh < BH; ++bh)
    for (int by = 0; by < tn; ++by)
      for (int bx = 0; bx < td; ++bx) {
        const int i0 = by * kT, c0 = bx * kT, ri = std::min(kT, N - i0), rc = std::min(kT, d - c0);
        Cta c;
        c.ops.push_back(load_op(tm, Tensor::P, bh, i0, ri, 0, N, bx != 0));
        c.ops.push_back(load_op(tm, Tensor::V, bh, 0, N, c0, rc, by != 0));
        c.ops.push_back(compute_op(Kind::AccumulateO, Tensor::O, bh, i0, ri, c0, rc,
                                   tm.compute(2.0 * ri * rc * N, 0.3)));
        c.ops.push_back(store_op(tm, Tensor::O, bh, i0, ri, c0, rc));
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
  k.info = {"flash_forward_kernel", {Tr, BH, 1}, {128, 1, 1}, smem, 0, 0};
  k.ctas_per_sm = s.ctas_per_sm > 0 ? s.ctas_per_sm : 2;
  std::vector<double> scores(std::size_t(Bc), 0.0);
  for (int bh = 0; bh < BH; ++bh)
    for (int i = 0; i < Tr; ++i) {
      const int i0 = i * Br, ri = std::min(Br, N - i0);
      const int sample = i0 + std::min(ri - 1, 5);
      Cta c;
      c.ops.push_back(load_op(tm, Tensor::Q, bh, i0, ri, 0, d, false));
      double m = -std::numeric_limits<double>::infinity(), l = 0;
      for (int j = 0; j < Tc; ++j) {
        const int j0 = j * Bc, cj = std::min(Bc, N - j0);
        const bool masked_out = (s.causal && j0 > i0 + ri - 1) ||
                                (s.mask == BlockMask::Butterfly && !butterfly_keeps(i, j));
        if (masked_out) {
          c.ops.push_back(compute_op(Kind::Skip, Tensor::S, bh, i0, ri, j0, cj, 0));
          continue;
        }
        c.ops.push_back(load_op(tm, Tensor::K, bh, j0, cj, 0, d, false));
        c.ops.push_back(load_op(tm, Tensor::V, bh, j0, cj, 0, d, false));
        c.ops.push_back(compute_op(Kind::ComputeS, Tensor::S, bh, i0, ri, j0, cj,
                                   tm.compute(2.0 * ri * cj * d, 0.5)));
        // The sampled row's scores in this tile, and Alg. 1 l.10-11 for it.
        double mt = -std::numeric_limits<double>::infinity();
        for (int c2 = 0; c2 < cj; ++c2) {
          const int key = j0 + c2;
          // Noise, a slow rise along the keys (so the max keeps moving and rescales show),
          // and the row's neighbours standing out.
          const double trend = 3.0 * double(key) / double(N);
          const double local = 2.5 * std::exp(-std::abs(key - sample) / 24.0);
          scores[std::size_t(c2)] = (s.causal && key > sample) ? -std::numeric_limits<double>::infinity()
                                                               : tm.normal() + trend + local;
          mt = std::max(mt, scores[std::size_t(c2)]);
        }
        double lt = 0;
        // A tile whose every key is masked for this row has m̃ = -inf: it adds nothing, and
        // exp(-inf - (-inf)) would be NaN.
        if (mt > -std::numeric_limits<double>::infinity())
          for (int c2 = 0; c2 < cj; ++c2) lt += std::exp(scores[std::size_t(c2)] - mt);
        const double m_new = std::max(m, mt);
        const double l_new = (l > 0 ? std::exp(m - m_new) * l : 0.0) + (lt > 0 ? std::exp(mt - m_new) * lt : 0.0);
        m = m_new;
        l = l_new;
        Op sm = compute_op(Kind::Softmax, Tensor::P, bh, i0, ri, j0, cj, tm.compute(8.0 * ri * cj, 0.25));
        Op rs = compute_op(Kind::Rescale, Tensor::O, bh, i0, ri, 0, d, tm.compute(2.0 * ri * d, 0.25));
        for (Op* op : {&sm, &rs}) {
          op->m = float(m);
          op->l = float(l);
          op->sample_row = sample;
        }
        c.ops.push_back(sm);
        c.ops.push_back(rs);
        c.ops.push_back(compute_op(Kind::AccumulateO, Tensor::O, bh, i0, ri, 0, d,
                                   tm.compute(2.0 * ri * cj * d, 0.5)));
      }
      c.ops.push_back(store_op(tm, Tensor::O, bh, i0, ri, 0, d));
      c.ops.push_back(store_op(tm, Tensor::LSE, bh, i0, ri, 0, 1));
      k.ctas.push_back(std::move(c));
    }
  return plans;
}

double quantize(double t) { return std::floor(t / kTimerStepNs) * kTimerStepNs; }

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

tr::Trace make_synthetic_trace(const SyntheticSpec& s) {
  if (s.B < 1 || s.H < 1 || s.N < 1 || s.d < 1 || s.Br < 1 || s.Bc < 1 || s.sms < 1)
    throw std::invalid_argument("synthetic trace: B, H, N, d, Br, Bc and sms must be at least 1");
  Timing tm(s.seed);
  std::vector<KernelPlan> plans = s.step == SyntheticStep::Naive ? plan_naive(s, tm) : plan_flash(s, tm);

  tr::Trace t;
  auto& m = t.meta;
  m.gpu = "synthetic (H200 timing model)";
  m.driver = "none";
  m.commit = "synthetic";
  m.date = "1970-01-01";
  m.step = s.step == SyntheticStep::Naive ? "01_naive" : "04_online_softmax";
  m.variant = s.step == SyntheticStep::Naive ? "naive" : "fa2";
  m.pass = "fwd";
  m.B = s.B;
  m.H = s.H;
  m.N = s.N;
  m.d = s.d;
  m.causal = s.causal;
  m.scale = 1.0f / std::sqrt(float(s.d));
  m.Br = s.step == SyntheticStep::Naive ? 0 : s.Br;
  m.Bc = s.step == SyntheticStep::Naive ? 0 : s.Bc;
  m.sram_budget_bytes = 232448;  // H200: 227 KB per CTA (opt-in)
  const std::int64_t BH = std::int64_t(s.B) * s.H, Nd = std::int64_t(s.N) * s.d;
  auto tensor = [&](Tensor id, std::vector<std::int64_t> shape) {
    std::int64_t e = 1;
    for (auto x : shape) e *= x;
    m.tensors.push_back({id, std::move(shape), e * kFloat});
  };
  for (Tensor id : {Tensor::Q, Tensor::K, Tensor::V, Tensor::O}) tensor(id, {s.B, s.H, s.N, s.d});
  tensor(Tensor::LSE, {s.B, s.H, s.N});
  if (s.step == SyntheticStep::Naive) {
    tensor(Tensor::S, {s.B, s.H, s.N, s.N});
    tensor(Tensor::P, {s.B, s.H, s.N, s.N});
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
      double dur = 0;
      for (const auto& op : plan.ctas[c].ops) dur += op.dur;
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
  for (const auto& p : placed) {
    const auto n = std::int64_t(plans[std::size_t(p.kernel)].ctas[std::size_t(p.cta)].ops.size());
    total += n;
    cap = std::max(cap, n);
  }
  t.events.reserve(std::size_t(total));
  for (std::size_t ti = 0; ti < placed.size(); ++ti) {
    const auto& p = placed[ti];
    t.tracks.push_back({p.kernel, p.cta, p.sm, 0});
    double at = p.begin;
    for (const auto& op : plans[std::size_t(p.kernel)].ctas[std::size_t(p.cta)].ops) {
      tr::Event e;
      e.track = int(ti);
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
      at += op.dur;
      t.events.push_back(e);
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
    // The flash schedule is the IO model (io_formulas.hpp checks the two agree).
    for (const auto& e : t.events) {
      if (e.kind == Kind::Load && !e.cached) m.io_read_bytes += e.bytes;
      if (e.kind == Kind::Store) m.io_write_bytes += e.bytes;
    }
  }
  for (const auto& b : m.tensors) t.buffers.push_back({tensor_label(b.id), 0x7f0000000000ull + t.buffers.size() * 0x10000000ull, std::uint64_t(b.bytes)});
  return t;
}

}  // namespace fs::viz
