// SMYRF on the host (common/smyrf.hpp): the transform's identity, the clusters' geometry,
// balanced and sorted clusters, the check a GPU's clusters are held to, and the reference
// against independent computations — dense attention (one cluster), dense attention masked to
// the clusters (one round), one softmax over the keys met in every round (several rounds) — and
// its gradients against finite differences; the cluster files.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <numeric>

#include "common/errors.hpp"
#include "common/harness.hpp"
#include "common/npy.hpp"
#include "common/reference.hpp"
#include "common/smyrf.hpp"
#include "common/verify.hpp"

namespace {

using fs::Shape;
using fs::SmyrfClusters;
using fs::SmyrfGeometry;
using fs::SmyrfParams;

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

SmyrfParams params(int hashes, int q_cluster, int k_cluster, std::uint64_t seed = 3) {
  SmyrfParams p;
  p.hashes = hashes;
  p.q_cluster = q_cluster;
  p.k_cluster = k_cluster;
  p.seed = seed;
  return p;
}

// Softmax attention of query row i of head bh over keys j, each weighted by its count
// (e^{s_ij} · count), in double: one cluster's attention when every count is 1.
void weighted_row(const Shape& s, const fs::HostProblem& p, float scale, std::int64_t bh, int i,
                  const std::map<int, int>& keys, double* o, double* lse) {
  const int d = s.d;
  const std::int64_t base = bh * s.N * std::int64_t(d);
  double m = -std::numeric_limits<double>::infinity();
  std::vector<double> sc;
  for (const auto& [j, n] : keys) {
    double acc = 0;
    for (int x = 0; x < d; ++x) acc += double(p.q[base + std::int64_t(i) * d + x]) * p.k[base + std::int64_t(j) * d + x];
    sc.push_back(scale * acc);
    m = std::max(m, sc.back());
  }
  for (int x = 0; x < d; ++x) o[x] = 0;
  double l = 0;
  std::size_t a = 0;
  for (const auto& [j, n] : keys) {
    const double w = n * std::exp(sc[a++] - m);
    l += w;
    for (int x = 0; x < d; ++x) o[x] += w * p.v[base + std::int64_t(j) * d + x];
  }
  for (int x = 0; x < d; ++x) o[x] /= l;
  *lse = m + std::log(l);
}

// The keys of query i's cluster in round r of head bh (each once).
std::map<int, int> cluster_keys(const SmyrfClusters& c, std::int64_t bh, int r, int i) {
  const std::int32_t* qo = c.queries(bh, r);
  const int slot = static_cast<int>(std::find(qo, qo + c.N, i) - qo);
  const int cluster = slot / c.geo.q_cluster;
  std::map<int, int> keys;
  for (int x = c.geo.key_begin(cluster); x < c.geo.key_end(cluster); ++x) keys[c.keys(bh, r)[x]] = 1;
  return keys;
}

// The hashes of head bh's queries (which = 0) or keys (1) in round r, in double.
std::vector<double> head_hashes(const Shape& s, const fs::HostProblem& p, const SmyrfParams& prm, std::int64_t bh,
                                int r, int which) {
  const float* qh = p.q.data() + bh * s.N * s.d;
  const float* kh = p.k.data() + bh * s.N * s.d;
  const double mq = fs::smyrf_max_norm(qh, s.N, s.d), mk = fs::smyrf_max_norm(kh, s.N, s.d);
  const auto xt = fs::xbox_plus(which ? kh : qh, s.N, s.d, mq, mk, which == 0);
  return fs::smyrf_hashes(xt, s.N, fs::smyrf_projections(prm, s.d), r);
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

TEST_CASE("cluster geometry: query chunks cover the order once, every cluster has keys, key windows move forward",
          "[smyrf]") {
  const int N = GENERATE(1, 5, 31, 64, 100, 257);
  const auto [cq, ck] = GENERATE(std::pair{16, 16}, std::pair{32, 32}, std::pair{16, 48}, std::pair{32, 8},
                                 std::pair{7, 10}, std::pair{10, 7}, std::pair{300, 300});
  INFO("N=" << N << " q_cluster=" << cq << " k_cluster=" << ck);
  const SmyrfGeometry g{N, cq, ck};
  REQUIRE(g.clusters() == (N + cq - 1) / cq);
  std::vector<int> q_hits(N, 0), k_hits(N, 0);
  for (int c = 0; c < g.clusters(); ++c) {
    for (int x = g.query_begin(c); x < g.query_end(c); ++x) ++q_hits[x];
    REQUIRE(g.key_begin(c) >= 0);
    REQUIRE(g.key_end(c) <= N);
    REQUIRE(g.key_end(c) - g.key_begin(c) == (ck == cq ? g.query_end(c) - g.query_begin(c) : std::min(ck, N)));
    if (c > 0) {
      REQUIRE(g.key_begin(c) >= g.key_begin(c - 1));
      REQUIRE(g.key_end(c) >= g.key_end(c - 1));
    }
    for (int x = g.key_begin(c); x < g.key_end(c); ++x) ++k_hits[x];
  }
  REQUIRE(std::all_of(q_hits.begin(), q_hits.end(), [](int h) { return h == 1; }));
  if (ck == cq) REQUIRE(std::all_of(k_hits.begin(), k_hits.end(), [](int h) { return h == 1; }));  // the paper's chunks
  // clusters_of_keys: exactly the clusters whose keys meet [j0, j1).
  for (int j0 = 0; j0 < N; j0 += 3)
    for (int j1 = j0 + 1; j1 <= N; j1 += 5) {
      int first = 0, last = 0;
      g.clusters_of_keys(j0, j1, &first, &last);
      for (int c = 0; c < g.clusters(); ++c) {
        const bool meets = g.key_begin(c) < j1 && g.key_end(c) > j0;
        REQUIRE(meets == (c >= first && c <= last));
      }
    }
}

TEST_CASE("SMYRF clusters are permutations sorted by hash, and reproducible from the seed", "[smyrf]") {
  const int N = GENERATE(1, 31, 64, 100);
  const Shape s{2, 3, N, 32};
  const fs::HostProblem p = fs::random_problem(s, 17 + N, false);
  const SmyrfParams prm = params(3, 16, 16, 4);
  const SmyrfClusters c = fs::smyrf_cluster(s, p.q.data(), p.k.data(), prm);
  INFO(c.error());
  REQUIRE(c.error().empty());
  for (std::int64_t bh = 0; bh < s.heads(); ++bh)
    for (int r = 0; r < prm.hashes; ++r)
      for (int which = 0; which < 2; ++which) {
        const auto h = head_hashes(s, p, prm, bh, r, which);
        const std::int32_t* o = which ? c.keys(bh, r) : c.queries(bh, r);
        for (int x = 1; x < N; ++x) REQUIRE(h[o[x - 1]] <= h[o[x]]);
      }
  REQUIRE(fs::smyrf_cluster(s, p.q.data(), p.k.data(), prm).q_order == c.q_order);
  if (N >= 64) REQUIRE(fs::smyrf_cluster(s, p.q.data(), p.k.data(), params(3, 16, 16, 5)).q_order != c.q_order);
  if (N > 1) {  // a broken order is reported
    SmyrfClusters bad = c;
    bad.k_order[1] = bad.k_order[0];
    REQUIRE_FALSE(bad.error().empty());
  }
}

TEST_CASE("the order check passes a sort of float keys and fails a sort that is wrong", "[smyrf]") {
  const Shape s{1, 2, 300, 64};
  const fs::HostProblem p = fs::random_problem(s, 8, false);
  const SmyrfParams prm = params(2, 32, 32, 6);
  SmyrfClusters c = fs::smyrf_cluster(s, p.q.data(), p.k.data(), prm);
  fs::OrderCheck ok = fs::smyrf_check_orders(s, p.q.data(), p.k.data(), prm, c);
  REQUIRE(ok.broken == 0);
  REQUIRE(ok.worst == 0.0);  // the host's own sort of the double hashes
  REQUIRE(ok.pairs == 2 * 2 * 2 * (s.N - 1));
  // What a GPU does: sort float keys, ties by index.
  for (std::int64_t bh = 0; bh < s.heads(); ++bh)
    for (int r = 0; r < prm.hashes; ++r) {
      const auto h = head_hashes(s, p, prm, bh, r, 0);
      std::int32_t* o = &c.q_order[(bh * prm.hashes + r) * s.N];
      std::iota(o, o + s.N, 0);
      std::stable_sort(o, o + s.N, [&](int a, int b) { return float(h[a]) < float(h[b]); });
    }
  ok = fs::smyrf_check_orders(s, p.q.data(), p.k.data(), prm, c);
  REQUIRE(ok.broken == 0);
  REQUIRE(ok.worst <= 1.0);
  // Two neighbours swapped whose hashes differ by more than float rounding.
  SmyrfClusters swapped = c;
  const auto h = head_hashes(s, p, prm, 1, 1, 1);
  std::int32_t* o = &swapped.k_order[(1 * prm.hashes + 1) * s.N];
  int at = 1;
  while (std::abs(h[o[at]] - h[o[at - 1]]) < 1e-3 * std::abs(h[o[at]])) ++at;
  std::swap(o[at - 1], o[at]);
  const fs::OrderCheck bad = fs::smyrf_check_orders(s, p.q.data(), p.k.data(), prm, swapped);
  REQUIRE(bad.worst > 1.0);
  REQUIRE_FALSE(fs::judge_orders(bad).pass());
  REQUIRE(fs::judge_orders(ok).pass());
  // In a report the order is no error against fp64 values: the outputs' max error leaves it out.
  fs::CheckReport report;
  report.tensors = {fs::judge_orders(bad), fs::TensorCheck{"O", 1e-6, 1e-6, 1e-5, 0}};
  REQUIRE(report.max_err() == 1e-6);
  REQUIRE_FALSE(report.pass());
  REQUIRE_THAT(report.summary(), Catch::Contains("order worst pair out of order") && Catch::Contains("FAIL"));
  // An order that is no permutation.
  SmyrfClusters twice = c;
  twice.q_order[5] = twice.q_order[6];
  REQUIRE(fs::smyrf_check_orders(s, p.q.data(), p.k.data(), prm, twice).broken == 1);
}

TEST_CASE("SMYRF with one cluster of every key is dense attention, forward and backward", "[smyrf]") {
  const int hashes = GENERATE(1, 3);
  const Shape s{1, 2, 50, 16};
  const fs::HostProblem p = fs::random_problem(s, 23, true);
  const float scale = fs::default_scale(s.d);
  const SmyrfClusters c = fs::smyrf_cluster(s, p.q.data(), p.k.data(), params(hashes, 64, 64));  // ≥ N: one cluster
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

TEST_CASE("one SMYRF round is dense attention restricted to the clusters", "[smyrf]") {
  const int N = GENERATE(64, 77);
  const auto [cq, ck] = GENERATE(std::pair{16, 16}, std::pair{16, 24}, std::pair{24, 16});
  const Shape s{1, 2, N, 16};
  const fs::HostProblem p = fs::random_problem(s, 31 + N, false);
  const float scale = fs::default_scale(s.d);
  const SmyrfClusters c = fs::smyrf_cluster(s, p.q.data(), p.k.data(), params(1, cq, ck, 9));
  std::vector<double> o, lse;
  fs::smyrf_reference_forward<double>(s, p.q.data(), p.k.data(), p.v.data(), scale, c, fs::all_indices(s.rows()), o, lse);
  for (std::int64_t bh = 0; bh < s.heads(); ++bh)
    for (int i = 0; i < N; ++i) {
      std::vector<double> om(s.d);
      double lm;
      weighted_row(s, p, scale, bh, i, cluster_keys(c, bh, 0, i), om.data(), &lm);
      REQUIRE(std::abs(lm - lse[bh * N + i]) < 1e-12);
      for (int x = 0; x < s.d; ++x) REQUIRE(std::abs(om[x] - o[(bh * N + i) * s.d + x]) < 1e-12);
    }
}

TEST_CASE("merged SMYRF rounds are one softmax over the keys met in every round, counted", "[smyrf]") {
  const auto [cq, ck] = GENERATE(std::pair{16, 16}, std::pair{8, 20});
  const Shape s{1, 2, 77, 16};
  const fs::HostProblem p = fs::random_problem(s, 3, false);
  const float scale = fs::default_scale(s.d);
  const SmyrfParams prm = params(4, cq, ck, 11);
  const SmyrfClusters c = fs::smyrf_cluster(s, p.q.data(), p.k.data(), prm);
  std::vector<double> o, lse;
  fs::smyrf_reference_forward<double>(s, p.q.data(), p.k.data(), p.v.data(), scale, c, fs::all_indices(s.rows()), o, lse);
  double worst_o = 0, worst_l = 0;
  for (std::int64_t bh = 0; bh < s.heads(); ++bh)
    for (int i = 0; i < s.N; ++i) {
      std::map<int, int> met;  // key → rounds in which query i's cluster holds it (c_ij)
      for (int r = 0; r < prm.hashes; ++r)
        for (const auto& [j, one] : cluster_keys(c, bh, r, i)) met[j] += one;
      std::vector<double> om(s.d);
      double lm;
      weighted_row(s, p, scale, bh, i, met, om.data(), &lm);
      worst_l = std::max(worst_l, std::abs(lm - lse[bh * s.N + i]));
      for (int x = 0; x < s.d; ++x) worst_o = std::max(worst_o, std::abs(om[x] - o[(bh * s.N + i) * s.d + x]));
    }
  REQUIRE(worst_o < 1e-12);
  REQUIRE(worst_l < 1e-12);
  // The float32 implementation of the same rounds stays close to it.
  std::vector<float> o32, lse32;
  fs::smyrf_reference_forward<float>(s, p.q.data(), p.k.data(), p.v.data(), scale, c, fs::all_indices(s.rows()), o32,
                                     lse32);
  for (std::size_t x = 0; x < o.size(); ++x) REQUIRE(std::abs(o32[x] - o[x]) < 1e-5);
}

TEST_CASE("SMYRF gradients through fixed clusters match finite differences", "[smyrf]") {
  const auto [cq, ck] = GENERATE(std::pair{8, 8}, std::pair{6, 10}, std::pair{10, 4});
  const Shape s{1, 1, 24, 8};
  fs::HostProblem p = fs::random_problem(s, 41, true);
  const float scale = fs::default_scale(s.d);
  const SmyrfClusters c = fs::smyrf_cluster(s, p.q.data(), p.k.data(), params(2, cq, ck, 2));
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

TEST_CASE("saved clusters read back as they were, and bad cluster files are refused with the file named", "[smyrf]") {
  const auto dir = std::filesystem::temp_directory_path() / "flashsteps_test_smyrf_files";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const Shape s{2, 3, 45, 16};
  const fs::HostProblem p = fs::random_problem(s, 12, false);
  const SmyrfClusters c = fs::smyrf_cluster(s, p.q.data(), p.k.data(), params(3, 16, 8));
  REQUIRE_FALSE(fs::has_smyrf_clusters(dir.string()));
  fs::write_smyrf_clusters(dir.string(), s, c);
  REQUIRE(fs::has_smyrf_clusters(dir.string()));
  const SmyrfClusters back = fs::read_smyrf_clusters(dir.string(), s);
  REQUIRE(back.q_order == c.q_order);
  REQUIRE(back.k_order == c.k_order);
  REQUIRE(back.hashes == 3);
  REQUIRE(back.geo.q_cluster == 16);
  REQUIRE(back.geo.k_cluster == 8);
  // Another shape, an order that repeats an index, sizes out of range.
  REQUIRE_THROWS_WITH(fs::read_smyrf_clusters(dir.string(), {2, 3, 46, 16}), Catch::Contains("q_order.npy: shape"));
  std::vector<std::int32_t> k = c.k_order;
  k[3] = k[4];
  fs::write_npy_i32((dir / "k_order.npy").string(), k.data(), {2, 3, 3, 45});
  REQUIRE_THROWS_WITH(fs::read_smyrf_clusters(dir.string(), s), Catch::Contains("out of range or twice"));
  const std::int32_t sizes[3] = {0, 16, 8};
  fs::write_npy_i32((dir / "clusters.npy").string(), sizes, {3});
  REQUIRE_THROWS_AS(fs::read_smyrf_clusters(dir.string(), s), fs::InputError);
  std::filesystem::remove_all(dir);
}
