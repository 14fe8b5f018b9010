// smyrf_quality: how close SMYRF's attention comes to exact attention on the queries, keys and
// values of a real model (steps/07_smyrf/README.md, "Quality on a real model"), computed by the
// host reference (common/smyrf.hpp) in fp64 — the function step 07's kernels are tested against.
//
//   smyrf_quality table --dir DIR --csv OUT [--hashes "1 2 4 8"] [--clusters "32 64 128"] [--seed S]
//       DIR holds layer<L>_{q,k,v}.npy, each (H, N, d) float32, for L = 0, 1, ... (as
//       steps/07_smyrf/quality/minilm.py extract writes them). One CSV row per layer and method:
//       the relative L2 error ‖O_approx − O‖ / ‖O‖ over the layer's heads, the mean over rows
//       of cos(O_approx, O), and `mass`: the mean over queries of the exact attention probability
//       on the keys the query met in some round (uniform: 1, every key). Methods: smyrf (rounds × cluster size); random, the same rounds and
//       clusters with the queries and keys assigned at random (what the hashing must beat);
//       uniform, every key weighted 1/N (the floor any approximation must beat).
//   smyrf_quality attend --q Q --k K --v V --out O [--hashes h] [--cluster c] [--seed S]
//       SMYRF attention of (H, N, d) tensors, O written as (H, N, d): what minilm.py's `embed`
//       calls in place of every layer's attention.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "common/files.hpp"
#include "common/npy.hpp"
#include "common/reference.hpp"
#include "common/smyrf.hpp"

namespace {

struct Head3 {
  fs::NpyArray q, k, v;
  fs::Shape shape;
};

Head3 load(const std::string& q, const std::string& k, const std::string& v) {
  Head3 t{fs::read_npy(q), fs::read_npy(k), fs::read_npy(v), {}};
  if (t.q.shape.size() != 3) throw fs::InputError(q + ": expected shape (H, N, d), got " + fs::shape_string(t.q.shape));
  if (t.k.shape != t.q.shape || t.v.shape != t.q.shape)
    throw fs::InputError("q, k and v must have one shape; got " + fs::shape_string(t.q.shape) + ", " +
                         fs::shape_string(t.k.shape) + ", " + fs::shape_string(t.v.shape));
  t.shape = {1, static_cast<int>(t.q.shape[0]), static_cast<int>(t.q.shape[1]), static_cast<int>(t.q.shape[2])};
  return t;
}

fs::SmyrfParams params(int hashes, int cluster, std::uint64_t seed) {
  fs::SmyrfParams p = fs::kSmyrfDefault;
  p.hashes = hashes;
  p.q_cluster = p.k_cluster = cluster;
  p.seed = seed;
  return p;
}

std::vector<double> attend(const Head3& t, const fs::SmyrfClusters& c) {
  std::vector<double> o, lse;
  fs::smyrf_reference_forward<double>(t.shape, t.q.data.data(), t.k.data.data(), t.v.data.data(),
                                      fs::default_scale(t.shape.d), c, fs::all_indices(t.shape.rows()), o, lse);
  return o;
}

fs::SmyrfClusters smyrf_clusters(const Head3& t, const fs::SmyrfParams& p) {
  if (const std::string e = fs::smyrf_params_error(t.shape, p); !e.empty()) throw fs::InputError(e);
  return fs::smyrf_cluster(t.shape, t.q.data.data(), t.k.data.data(), p);
}

// The same rounds and cluster sizes, every order a random permutation.
fs::SmyrfClusters random_clusters(const Head3& t, const fs::SmyrfParams& p) {
  fs::SmyrfClusters c = smyrf_clusters(t, p);
  std::mt19937_64 gen(p.seed ^ 0x9E3779B97F4A7C15ull);
  for (auto* orders : {&c.q_order, &c.k_order})
    for (std::size_t at = 0; at < orders->size(); at += std::size_t(c.N))
      std::shuffle(orders->begin() + std::ptrdiff_t(at), orders->begin() + std::ptrdiff_t(at + c.N), gen);
  return c;
}

// The mean over queries of the exact attention probability on the keys the query met in at least
// one round: how much of what dense attention looks at the clusters keep.
double captured_mass(const Head3& t, const fs::SmyrfClusters& c) {
  const fs::Shape& s = t.shape;
  const double scale = fs::default_scale(s.d);
  double total = 0;
  std::vector<double> sc(s.N);
  std::vector<char> met(s.N);
  for (int h = 0; h < s.H; ++h) {
    const float* qh = t.q.data.data() + std::int64_t(h) * s.N * s.d;
    const float* kh = t.k.data.data() + std::int64_t(h) * s.N * s.d;
    std::vector<int> slot(std::size_t(c.hashes) * s.N);
    for (int r = 0; r < c.hashes; ++r)
      for (int x = 0; x < s.N; ++x) slot[std::size_t(r) * s.N + c.queries(h, r)[x]] = x;
    for (int i = 0; i < s.N; ++i) {
      double m = -INFINITY, l = 0, kept = 0;
      for (int j = 0; j < s.N; ++j) {
        double acc = 0;
        for (int x = 0; x < s.d; ++x) acc += double(qh[std::int64_t(i) * s.d + x]) * kh[std::int64_t(j) * s.d + x];
        sc[j] = scale * acc;
        m = std::max(m, sc[j]);
      }
      std::fill(met.begin(), met.end(), 0);
      for (int r = 0; r < c.hashes; ++r) {
        const int cluster = slot[std::size_t(r) * s.N + i] / c.geo.q_cluster;
        for (int x = c.geo.key_begin(cluster); x < c.geo.key_end(cluster); ++x) met[c.keys(h, r)[x]] = 1;
      }
      for (int j = 0; j < s.N; ++j) {
        const double p = std::exp(sc[j] - m);
        l += p;
        if (met[j]) kept += p;
      }
      total += kept / l;
    }
  }
  return total / double(s.rows());
}

// ‖a − b‖ / ‖b‖ over everything, and the mean over rows of cos(a_row, b_row).
std::pair<double, double> compare(const std::vector<double>& a, const std::vector<double>& b, int d) {
  double diff = 0, norm = 0, cos_sum = 0;
  const std::size_t rows = b.size() / d;
  for (std::size_t r = 0; r < rows; ++r) {
    double ab = 0, aa = 0, bb = 0;
    for (int x = 0; x < d; ++x) {
      const double u = a[r * d + x], w = b[r * d + x];
      diff += (u - w) * (u - w);
      norm += w * w;
      ab += u * w, aa += u * u, bb += w * w;
    }
    cos_sum += aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0.0;
  }
  return {std::sqrt(diff / norm), cos_sum / double(rows)};
}

int table(const std::string& dir, const std::vector<int>& hashes, const std::vector<int>& clusters, std::uint64_t seed,
          const std::string& csv) {
  std::ostringstream out;
  out << "layer,method,hashes,cluster,N,H,d,rel_l2,mean_cos,mass\n";
  int layers = 0;
  for (;; ++layers) {
    const std::string base = dir + "/layer" + std::to_string(layers) + "_";
    if (!std::ifstream(base + "q.npy")) break;
    const Head3 t = load(base + "q.npy", base + "k.npy", base + "v.npy");
    const fs::Shape& s = t.shape;
    std::vector<double> exact, lse;
    fs::reference_forward<double>(s, t.q.data.data(), t.k.data.data(), t.v.data.data(), {fs::default_scale(s.d)},
                                  fs::all_indices(s.rows()), exact, lse);
    auto row = [&](const char* method, int h, int c, std::pair<double, double> r, double mass) {
      char buf[192];
      std::snprintf(buf, sizeof buf, "%d,%s,%d,%d,%d,%d,%d,%.6f,%.6f,%.6f\n", layers, method, h, c, s.N, s.H, s.d,
                    r.first, r.second, mass);
      out << buf;
    };
    // Uniform attention: every row the mean of its head's values.
    std::vector<double> uniform(exact.size());
    for (int h = 0; h < s.H; ++h)
      for (int x = 0; x < s.d; ++x) {
        double m = 0;
        for (int j = 0; j < s.N; ++j) m += t.v.data[(std::int64_t(h) * s.N + j) * s.d + x];
        for (int i = 0; i < s.N; ++i) uniform[(std::int64_t(h) * s.N + i) * s.d + x] = m / s.N;
      }
    row("uniform", 0, 0, compare(uniform, exact, s.d), 1.0);
    for (int h : hashes)
      for (int c : clusters) {
        const fs::SmyrfParams p = params(h, c, seed);
        const fs::SmyrfClusters sm = smyrf_clusters(t, p), rnd = random_clusters(t, p);
        row("smyrf", h, c, compare(attend(t, sm), exact, s.d), captured_mass(t, sm));
        row("random", h, c, compare(attend(t, rnd), exact, s.d), captured_mass(t, rnd));
      }
    std::fprintf(stderr, "layer %d done\n", layers);
  }
  if (layers == 0)
    throw fs::InputError(dir + ": no layer0_q.npy there (run steps/07_smyrf/quality/minilm.py extract first)");
  fs::write_file_atomic(csv, out.str());
  std::printf("%d layers; rows in %s\n", layers, csv.c_str());
  return 0;
}

std::vector<int> positive_ints(const std::string& list, const char* what) {
  std::vector<int> r;
  std::istringstream in(list);
  for (std::string w; in >> w;) {
    if (w.empty() || w.size() > 9 || w.find_first_not_of("0123456789") != std::string::npos || std::stoi(w) < 1)
      throw fs::InputError(std::string(what) + ": '" + w + "' is not a positive integer");
    r.push_back(std::stoi(w));
  }
  if (r.empty()) throw fs::InputError(std::string(what) + " is empty");
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"SMYRF's attention against exact attention, on tensors from a real model (host reference, fp64)"};
  app.require_subcommand(1);
  std::string dir, csv, q, k, v, out;
  std::string hashes_arg = "1 2 4 8", clusters_arg = "32 64 128";
  int hashes = fs::kSmyrfDefault.hashes, cluster = fs::kSmyrfDefault.q_cluster;
  std::uint64_t seed = 1;
  auto* tab = app.add_subcommand("table", "errors of SMYRF, random clusters and uniform attention, per layer, as CSV");
  tab->add_option("--dir", dir, "directory of layer<L>_{q,k,v}.npy, each (H, N, d)")->required();
  tab->add_option("--hashes", hashes_arg, "rounds to try")->capture_default_str();
  tab->add_option("--clusters", clusters_arg, "cluster sizes to try (queries = keys)")->capture_default_str();
  tab->add_option("--seed", seed, "draws the projections (and the random clusters)")->capture_default_str();
  tab->add_option("--csv", csv, "write the rows here")->required();
  auto* att = app.add_subcommand("attend", "SMYRF attention of (H, N, d) tensors");
  att->add_option("--q", q, "queries .npy, (H, N, d)")->required();
  att->add_option("--k", k, "keys .npy, (H, N, d)")->required();
  att->add_option("--v", v, "values .npy, (H, N, d)")->required();
  att->add_option("--out", out, "output .npy, (H, N, d)")->required();
  att->add_option("--hashes", hashes, "rounds")->capture_default_str();
  att->add_option("--cluster", cluster, "queries (= keys) per cluster")->capture_default_str();
  att->add_option("--seed", seed, "draws the projections")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {  // one line and exit code 2, as every program's
    std::fprintf(stderr, "smyrf_quality: error: %s\n", e.what());
    return 2;
  }
  try {
    if (*tab) return table(dir, positive_ints(hashes_arg, "--hashes"), positive_ints(clusters_arg, "--clusters"), seed, csv);
    const Head3 t = load(q, k, v);
    const std::vector<double> o = attend(t, smyrf_clusters(t, params(hashes, cluster, seed)));
    const std::vector<float> of(o.begin(), o.end());
    fs::write_npy(out, of.data(), t.q.shape);
    return 0;
  } catch (const fs::InputError& e) {
    std::fprintf(stderr, "smyrf_quality: %s\n", e.what());
    return 2;
  }
}
