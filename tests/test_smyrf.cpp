// SMYRF on the host (common/smyrf.hpp): the transform's identity, balanced and sorted clusters,
// and the reference against three independent computations — dense attention (one cluster),
// dense attention masked to the clusters (one round), the round-by-round LSE merge (several
// rounds) — and its gradients against finite differences.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <set>

#include "common/harness.hpp"
#include "common/reference.hpp"
#include "common/smyrf.hpp"

namespace {

using fs::Shape;
using fs::SmyrfClusters;
using fs::SmyrfParams;

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// Softmax attention of query row i of head bh over the keys `keys` (each listed once), in double.
void masked_row(const Shape& s, const fs::HostProblem& p, float scale, std::int64_t bh, int i,
                const std::set<int>& keys, double* o, double* lse) {
  const int d = s.d;
  const std::int64_t base = bh * s.N * std::int64_t(d);
  double m = -std::numeric_limits<double>::infinity();
  std::vector<double> sc;
  for (int j : keys) {
    double acc = 0;
    for (int x = 0; x < d; ++x) acc += double(p.q[base + std::int64_t(i) * d + x]) * p.k[base + std::int64_t(j) * d + x];
    sc.push_back(scale * acc);
    m = std::max(m, sc.back());
  }
  for (int x = 0; x < d; ++x) o[x] = 0;
  double l = 0;
  std::size_t a = 0;
  for (int j : keys) {
    const double w = std::exp(sc[a++] - m);
    l += w;
    for (int x = 0; x < d; ++x) o[x] += w * p.v[base + std::int64_t(j) * d + x];
  }
  for (int x = 0; x < d; ++x) o[x] /= l;
  *lse = m + std::log(l);
}

// The keys sharing query i's cluster in round r of head bh.
std::set<int> cluster_keys(const SmyrfClusters& c, std::int64_t bh, int r, int i) {
  const std::int32_t* qo = c.queries(bh, r);
  std::int64_t slot = 0;
  while (qo[slot] != i) ++slot;
  const std::int64_t cluster = slot / c.q_cluster;
  std::set<int> keys;
  for (int x = 0; x < c.k_cluster; ++x) {
    const std::int32_t j = c.keys(bh, r)[cluster * c.k_cluster + x];
    if (j >= 0) keys.insert(j);
  }
  return keys;
}

}  // namespace

TEST_CASE("XBOX+ turns the largest inner product into the nearest neighbour", "[smyrf]") {
  const Shape s{1, 1, 40, 16};
  const fs::HostProblem p = fs::random_problem(s, 5, false);
  const double mq = 7.5, mk = 9.0;  // at least the rows' norms (about 4)
  const auto xq = fs::xbox_plus(p.q.data(), s.N, s.d, mq, mk, true);
  const auto xk = fs::xbox_plus(p.k.data(), s.N, s.d, mq, mk, false);
  for (int i = 0; i < s.N; ++i)
    for (int j = 0; j < s.N; ++j) {
      double dist2 = 0, ip = 0;
      for (int x = 0; x < s.d + 2; ++x) dist2 += std::pow(xq[i * (s.d + 2) + x] - xk[j * (s.d + 2) + x], 2);
      for (int x = 0; x < s.d; ++x) ip += double(p.q[i * s.d + x]) * p.k[j * s.d + x];
      REQUIRE(dist2 == Approx(2 * (mq * mq + mk * mk) - 2 * ip).epsilon(1e-12));
    }
}

TEST_CASE("SMYRF clusters are balanced, sorted by hash, padded last, and reproducible", "[smyrf]") {
  const int N = GENERATE(1, 31, 64, 100);
  const Shape s{2, 3, N, 32};
  const fs::HostProblem p = fs::random_problem(s, 17 + N, false);
  SmyrfParams prm;
  prm.hashes = 3;
  prm.q_cluster = 16;
  prm.k_cluster = 16;
  prm.seed = 4;
  const SmyrfClusters c = fs::smyrf_cluster(s, p.q.data(), p.k.data(), prm);
  INFO(c.error());
  REQUIRE(c.error().empty());
  REQUIRE(c.n_clusters == (N + 15) / 16);
  // Sorted: along each order the hash never decreases (ties by index).
  const fs::SmyrfProjections proj = fs::smyrf_projections(prm, s.d);
  for (std::int64_t bh = 0; bh < s.heads(); ++bh) {
    const float* qh = p.q.data() + bh * N * s.d;
    const float* kh = p.k.data() + bh * N * s.d;
    double mq = 0, mk = 0;
    for (int i = 0; i < N; ++i) {
      double a = 0, b = 0;
      for (int x = 0; x < s.d; ++x) a += double(qh[i * s.d + x]) * qh[i * s.d + x], b += double(kh[i * s.d + x]) * kh[i * s.d + x];
      mq = std::max(mq, std::sqrt(a));
      mk = std::max(mk, std::sqrt(b));
    }
    for (int r = 0; r < prm.hashes; ++r) {
      const auto hq = fs::smyrf_hashes(fs::xbox_plus(qh, N, s.d, mq, mk, true), N, proj, r);
      const std::int32_t* o = c.queries(bh, r);
      for (int x = 1; x < N; ++x) REQUIRE(hq[o[x - 1]] <= hq[o[x]]);
    }
  }
  // Reproducible from the seed; another seed gives other clusters.
  REQUIRE(fs::smyrf_cluster(s, p.q.data(), p.k.data(), prm).q_order == c.q_order);
  if (N >= 64) {
    SmyrfParams other = prm;
    other.seed = 5;
    REQUIRE(fs::smyrf_cluster(s, p.q.data(), p.k.data(), other).q_order != c.q_order);
  }
  // A broken order is reported.
  SmyrfClusters bad = c;
  if (N > 1) {
    bad.q_order[1] = bad.q_order[0];
    REQUIRE_FALSE(bad.error().empty());
  }
}

TEST_CASE("SMYRF with one cluster of every key is dense attention, forward and backward", "[smyrf]") {
  const int hashes = GENERATE(1, 3);
  const Shape s{1, 2, 50, 16};
  const fs::HostProblem p = fs::random_problem(s, 23, true);
  const float scale = fs::default_scale(s.d);
  SmyrfParams prm;
  prm.hashes = hashes;
  prm.q_cluster = prm.k_cluster = 64;  // ≥ N: one cluster
  const SmyrfClusters c = fs::smyrf_cluster(s, p.q.data(), p.k.data(), prm);
  const auto rows = fs::all_indices(s.rows());
  std::vector<double> o, lse, o_ref, lse_ref;
  fs::smyrf_reference_forward<double>(s, p.q.data(), p.k.data(), p.v.data(), scale, c, rows, o, lse);
  fs::reference_forward<double>(s, p.q.data(), p.k.data(), p.v.data(), {scale}, rows, o_ref, lse_ref);
  REQUIRE(max_abs_diff(o, o_ref) < 1e-12);
  // Every key met in every round: the merge adds log(hashes) to the dense LSE.
  for (auto& x : lse_ref) x += std::log(double(hashes));
  REQUIRE(max_abs_diff(lse, lse_ref) < 1e-12);
  for (std::int64_t bh = 0; bh < s.heads(); ++bh) {
    std::vector<double> dq, dk, dv, dq_ref, dk_ref, dv_ref;
    fs::smyrf_reference_backward_head<double>(s, p.q.data(), p.k.data(), p.v.data(), p.dout.data(), scale, c, bh, dq,
                                              dk, dv);
    const auto all = fs::all_indices(s.N);
    fs::reference_backward_head<double>(s, p.q.data(), p.k.data(), p.v.data(), p.dout.data(), {scale}, bh, all, all,
                                        dq_ref, dk_ref, dv_ref);
    REQUIRE(max_abs_diff(dq, dq_ref) < 1e-11);
    REQUIRE(max_abs_diff(dk, dk_ref) < 1e-11);
    REQUIRE(max_abs_diff(dv, dv_ref) < 1e-11);
  }
}

TEST_CASE("one SMYRF round is dense attention restricted to the clusters, and rounds merge by the LSE rule",
          "[smyrf]") {
  const int N = GENERATE(64, 77);
  const Shape s{1, 2, N, 16};
  const fs::HostProblem p = fs::random_problem(s, 31 + N, false);
  const float scale = fs::default_scale(s.d);
  SmyrfParams prm;
  prm.hashes = 3;
  prm.q_cluster = prm.k_cluster = 16;
  prm.seed = 9;
  const SmyrfClusters c = fs::smyrf_cluster(s, p.q.data(), p.k.data(), prm);
  const auto rows = fs::all_indices(s.rows());
  std::vector<double> o, lse;
  fs::smyrf_reference_forward<double>(s, p.q.data(), p.k.data(), p.v.data(), scale, c, rows, o, lse);
  double worst_o = 0, worst_l = 0;
  for (std::int64_t bh = 0; bh < s.heads(); ++bh)
    for (int i = 0; i < N; ++i) {
      // Each round on its own (masked dense attention), then merged: L = log Σ e^{L_r},
      // O = Σ e^{L_r − L} O_r.
      std::vector<double> o_r(prm.hashes * s.d), l_r(prm.hashes);
      for (int r = 0; r < prm.hashes; ++r)
        masked_row(s, p, scale, bh, i, cluster_keys(c, bh, r, i), &o_r[r * s.d], &l_r[r]);
      double m = -std::numeric_limits<double>::infinity(), sum = 0;
      for (double l : l_r) m = std::max(m, l);
      for (double l : l_r) sum += std::exp(l - m);
      const double L = m + std::log(sum);
      worst_l = std::max(worst_l, std::abs(L - lse[bh * N + i]));
      for (int x = 0; x < s.d; ++x) {
        double merged = 0;
        for (int r = 0; r < prm.hashes; ++r) merged += std::exp(l_r[r] - L) * o_r[r * s.d + x];
        worst_o = std::max(worst_o, std::abs(merged - o[(bh * N + i) * s.d + x]));
      }
    }
  REQUIRE(worst_o < 1e-12);
  REQUIRE(worst_l < 1e-12);
  // A single round: exactly the masked attention of that round.
  SmyrfParams one = prm;
  one.hashes = 1;
  const SmyrfClusters c1 = fs::smyrf_cluster(s, p.q.data(), p.k.data(), one);
  std::vector<double> o1, l1;
  fs::smyrf_reference_forward<double>(s, p.q.data(), p.k.data(), p.v.data(), scale, c1, rows, o1, l1);
  for (int i = 0; i < N; ++i) {
    std::vector<double> om(s.d);
    double lm;
    masked_row(s, p, scale, 1, i, cluster_keys(c1, 1, 0, i), om.data(), &lm);
    REQUIRE(std::abs(lm - l1[N + i]) < 1e-12);
    for (int x = 0; x < s.d; ++x) REQUIRE(std::abs(om[x] - o1[(N + i) * s.d + x]) < 1e-12);
  }
}

TEST_CASE("SMYRF gradients through fixed clusters match finite differences", "[smyrf]") {
  const Shape s{1, 1, 24, 8};
  fs::HostProblem p = fs::random_problem(s, 41, true);
  const float scale = fs::default_scale(s.d);
  SmyrfParams prm;
  prm.hashes = 2;
  prm.q_cluster = prm.k_cluster = 8;
  prm.seed = 2;
  const SmyrfClusters c = fs::smyrf_cluster(s, p.q.data(), p.k.data(), prm);
  const auto rows = fs::all_indices(s.rows());
  // loss = Σ O ∘ dO, with the clusters held fixed.
  auto loss = [&]() {
    std::vector<double> o, lse;
    fs::smyrf_reference_forward<double>(s, p.q.data(), p.k.data(), p.v.data(), scale, c, rows, o, lse);
    double acc = 0;
    for (std::size_t x = 0; x < o.size(); ++x) acc += o[x] * p.dout[x];
    return acc;
  };
  std::vector<double> dq, dk, dv;
  fs::smyrf_reference_backward_head<double>(s, p.q.data(), p.k.data(), p.v.data(), p.dout.data(), scale, c, 0, dq,
                                            dk, dv);
  const float h = 1e-2f;  // inputs are floats: a step that float represents well
  for (auto [t, g] : {std::pair{&p.q, &dq}, std::pair{&p.k, &dk}, std::pair{&p.v, &dv}})
    for (std::size_t x = 0; x < t->size(); x += 7) {
      const float keep = (*t)[x];
      (*t)[x] = keep + h;
      const double up = loss();
      (*t)[x] = keep - h;
      const double down = loss();
      (*t)[x] = keep;
      const double numeric = (up - down) / (double((keep + h) - (keep - h)));
      REQUIRE((*g)[x] == Approx(numeric).margin(2e-4).epsilon(1e-3));
    }
}
