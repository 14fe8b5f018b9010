#include "common/smyrf.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/parallel.hpp"
#include "common/philox.hpp"
#include "common/random.hpp"

namespace fs {

namespace {

constexpr std::uint64_t kAlphaStream = 0x5A17;  // fill_normal's stream for α
constexpr std::uint32_t kBetaTag = 0xB37A;      // Philox counter word for β

int ceil_div(int a, int b) { return (a + b - 1) / b; }

// The max row norm of one head's (N, d) rows.
double max_norm(const float* x, int N, int d) {
  double m = 0;
  for (int i = 0; i < N; ++i) {
    double n2 = 0;
    for (int c = 0; c < d; ++c) n2 += double(x[std::int64_t(i) * d + c]) * x[std::int64_t(i) * d + c];
    m = std::max(m, std::sqrt(n2));
  }
  return m;
}

// position[round · N + i] of query (or key) i in the sorted order of each round of head bh.
std::vector<std::int32_t> positions(const std::int32_t* (SmyrfClusters::*order)(std::int64_t, int) const,
                                    const SmyrfClusters& c, std::int64_t bh, std::int64_t slots) {
  std::vector<std::int32_t> pos(std::size_t(c.hashes) * c.N, -1);
  for (int r = 0; r < c.hashes; ++r) {
    const std::int32_t* o = (c.*order)(bh, r);
    for (std::int64_t slot = 0; slot < slots; ++slot)
      if (o[slot] >= 0) pos[std::size_t(r) * c.N + o[slot]] = static_cast<std::int32_t>(slot);
  }
  return pos;
}

// The keys query i met over all rounds, each with the number of rounds it met it in (c_ij),
// ascending by key.
std::vector<std::pair<std::int32_t, int>> met_keys(const SmyrfClusters& c, std::int64_t bh,
                                                   const std::vector<std::int32_t>& q_pos, int i) {
  std::vector<std::int32_t> all;
  all.reserve(std::size_t(c.hashes) * c.k_cluster);
  for (int r = 0; r < c.hashes; ++r) {
    const int cluster = q_pos[std::size_t(r) * c.N + i] / c.q_cluster;
    const std::int32_t* keys = c.keys(bh, r) + std::int64_t(cluster) * c.k_cluster;
    for (int s = 0; s < c.k_cluster; ++s)
      if (keys[s] >= 0) all.push_back(keys[s]);
  }
  std::sort(all.begin(), all.end());
  std::vector<std::pair<std::int32_t, int>> out;
  for (std::size_t a = 0; a < all.size();) {
    std::size_t b = a;
    while (b < all.size() && all[b] == all[a]) ++b;
    out.emplace_back(all[a], int(b - a));
    a = b;
  }
  return out;
}

template <typename T>
T dot(const float* a, const float* b, int d) {
  T acc = 0;
  for (int c = 0; c < d; ++c) acc += T(a[c]) * T(b[c]);
  return acc;
}

// One query row: the keys it met, their scores, LSE and O (in T).
template <typename T>
struct Row {
  std::vector<std::pair<std::int32_t, int>> keys;
  std::vector<T> s;  // τ q·k of each met key
  T lse = -std::numeric_limits<T>::infinity();
};

template <typename T>
Row<T> forward_row(const Shape& s, const float* qh, const float* kh, const float* vh, float scale,
                   const SmyrfClusters& c, std::int64_t bh, const std::vector<std::int32_t>& q_pos, int i, T* o) {
  const int d = s.d;
  Row<T> row;
  row.keys = met_keys(c, bh, q_pos, i);
  for (int x = 0; x < d; ++x) o[x] = 0;
  if (row.keys.empty()) return row;
  T m = -std::numeric_limits<T>::infinity();
  for (const auto& [j, n] : row.keys) {
    row.s.push_back(T(scale) * dot<T>(qh + std::int64_t(i) * d, kh + std::int64_t(j) * d, d));
    m = std::max(m, row.s.back());
  }
  T l = 0;
  for (std::size_t a = 0; a < row.keys.size(); ++a) {
    const T p = T(row.keys[a].second) * std::exp(row.s[a] - m);
    l += p;
    const float* vj = vh + std::int64_t(row.keys[a].first) * d;
    for (int x = 0; x < d; ++x) o[x] += p * T(vj[x]);
  }
  for (int x = 0; x < d; ++x) o[x] /= l;
  row.lse = m + std::log(l);
  return row;
}

}  // namespace

int SmyrfParams::clusters(int N) const { return std::max(ceil_div(N, q_cluster), ceil_div(N, k_cluster)); }

std::string smyrf_params_error(const Shape& s, const SmyrfParams& p) {
  if (p.hashes < 1) return "--hashes must be at least 1";
  if (p.q_cluster < 1 || p.k_cluster < 1) return "cluster sizes must be at least 1";
  if (!(p.r > 0.f) || !std::isfinite(p.r)) return "--r (the E2LSH width) must be a positive number";
  if (s.N < 1 || s.d < 1) return "N and d must be at least 1";
  return {};
}

SmyrfProjections smyrf_projections(const SmyrfParams& p, int d) {
  SmyrfProjections proj;
  proj.hashes = p.hashes;
  proj.dim = d + 2;
  proj.alpha.resize(std::size_t(p.hashes) * proj.dim);
  fill_normal(proj.alpha, p.seed, kAlphaStream);
  proj.beta.resize(p.hashes);
  for (int r = 0; r < p.hashes; ++r) {
    const Philox4x32 x = philox4x32_10({{static_cast<std::uint32_t>(r), kBetaTag, 0u, 0u}},
                                       static_cast<std::uint32_t>(p.seed), static_cast<std::uint32_t>(p.seed >> 32));
    proj.beta[r] = static_cast<float>(double(p.r) * (double(x.v[0]) / 4294967296.0));
  }
  return proj;
}

std::string SmyrfClusters::error() const {
  for (std::int64_t bh = 0; bh < heads; ++bh)
    for (int r = 0; r < hashes; ++r)
      for (int which = 0; which < 2; ++which) {
        const std::int32_t* o = which ? keys(bh, r) : queries(bh, r);
        const std::int64_t slots = which ? k_slots() : q_slots();
        std::vector<char> seen(N, 0);
        bool padding = false;
        for (std::int64_t slot = 0; slot < slots; ++slot) {
          const std::int32_t x = o[slot];
          const std::string where = std::string(which ? "key" : "query") + " order of head " + std::to_string(bh) +
                                    ", round " + std::to_string(r) + ", slot " + std::to_string(slot);
          if (x < 0) {
            padding = true;
            continue;
          }
          if (padding) return "the " + where + " holds an index after padding";
          if (x >= N || seen[x]) return "the " + where + " holds " + std::to_string(x) + ", out of range or twice";
          seen[x] = 1;
        }
        if (std::count(seen.begin(), seen.end(), 1) != N)
          return std::string("a ") + (which ? "key" : "query") + " order of head " + std::to_string(bh) + " misses an index";
      }
  return {};
}

std::vector<double> xbox_plus(const float* x, int N, int d, double mq, double mk, bool query) {
  std::vector<double> out(std::size_t(N) * (d + 2));
  for (int i = 0; i < N; ++i) {
    double n2 = 0;
    double* y = &out[std::size_t(i) * (d + 2)];
    for (int c = 0; c < d; ++c) {
      y[c] = x[std::int64_t(i) * d + c];
      n2 += y[c] * y[c];
    }
    const double ext = std::sqrt(std::max(0.0, mq * mq + mk * mk - n2));
    y[d] = query ? 0.0 : ext;
    y[d + 1] = query ? ext : 0.0;
  }
  return out;
}

std::vector<double> smyrf_hashes(const std::vector<double>& xt, int N, const SmyrfProjections& proj, int round) {
  std::vector<double> h(N);
  const float* a = &proj.alpha[std::size_t(round) * proj.dim];
  for (int i = 0; i < N; ++i) {
    double acc = 0;
    for (int c = 0; c < proj.dim; ++c) acc += double(a[c]) * xt[std::size_t(i) * proj.dim + c];
    h[i] = acc + proj.beta[round];
  }
  return h;
}

SmyrfClusters smyrf_cluster(const Shape& s, const float* q, const float* k, const SmyrfParams& p) {
  const SmyrfProjections proj = smyrf_projections(p, s.d);
  SmyrfClusters c;
  c.hashes = p.hashes;
  c.n_clusters = p.clusters(s.N);
  c.q_cluster = p.q_cluster;
  c.k_cluster = p.k_cluster;
  c.N = s.N;
  c.heads = s.heads();
  c.q_order.assign(std::size_t(c.heads * c.hashes * c.q_slots()), -1);
  c.k_order.assign(std::size_t(c.heads * c.hashes * c.k_slots()), -1);
  const std::int64_t head = std::int64_t(s.N) * s.d;
  parallel_for(c.heads, [&](std::int64_t bh) {
    const float* qh = q + bh * head;
    const float* kh = k + bh * head;
    const double mq = max_norm(qh, s.N, s.d), mk = max_norm(kh, s.N, s.d);
    const std::vector<double> xq = xbox_plus(qh, s.N, s.d, mq, mk, true);
    const std::vector<double> xk = xbox_plus(kh, s.N, s.d, mq, mk, false);
    for (int r = 0; r < c.hashes; ++r)
      for (int which = 0; which < 2; ++which) {
        const std::vector<double> h = smyrf_hashes(which ? xk : xq, s.N, proj, r);
        std::vector<std::int32_t> order(s.N);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) { return h[a] < h[b]; });
        std::int32_t* dst = which ? &c.k_order[(bh * c.hashes + r) * c.k_slots()]
                                  : &c.q_order[(bh * c.hashes + r) * c.q_slots()];
        std::copy(order.begin(), order.end(), dst);  // the padding slots after them stay −1
      }
  });
  return c;
}

template <typename T>
void smyrf_reference_forward(const Shape& s, const float* q, const float* k, const float* v, float scale,
                             const SmyrfClusters& c, const std::vector<std::int64_t>& rows, std::vector<T>& o,
                             std::vector<T>& lse) {
  const int d = s.d;
  o.assign(rows.size() * d, T(0));
  lse.assign(rows.size(), T(0));
  // Rows grouped by head, so that each head's positions are found once.
  std::vector<std::size_t> idx(rows.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return rows[a] / s.N < rows[b] / s.N; });
  for (std::size_t a = 0; a < idx.size();) {
    const std::int64_t bh = rows[idx[a]] / s.N;
    std::size_t b = a;
    while (b < idx.size() && rows[idx[b]] / s.N == bh) ++b;
    const std::vector<std::int32_t> q_pos = positions(&SmyrfClusters::queries, c, bh, c.q_slots());
    const std::int64_t base = bh * s.N * std::int64_t(d);
    parallel_for(std::int64_t(b - a), [&](std::int64_t x) {
      const std::size_t r = idx[a + x];
      const int i = static_cast<int>(rows[r] % s.N);
      lse[r] = forward_row<T>(s, q + base, k + base, v + base, scale, c, bh, q_pos, i, &o[r * d]).lse;
    });
    a = b;
  }
}

template <typename T>
void smyrf_reference_backward_head(const Shape& s, const float* q, const float* k, const float* v,
                                   const float* dout, float scale, const SmyrfClusters& c, std::int64_t bh,
                                   std::vector<T>& dq, std::vector<T>& dk, std::vector<T>& dv) {
  const int N = s.N, d = s.d;
  const std::int64_t base = bh * N * std::int64_t(d);
  const float *qh = q + base, *kh = k + base, *vh = v + base, *doh = dout + base;
  const std::vector<std::int32_t> q_pos = positions(&SmyrfClusters::queries, c, bh, c.q_slots());
  dq.assign(std::size_t(N) * d, T(0));
  dk.assign(std::size_t(N) * d, T(0));
  dv.assign(std::size_t(N) * d, T(0));
  // Per query: P_ij = c_ij e^{s_ij − LSE_i} and dS_ij = P_ij (dO_i·v_j − D_i), and dQ_i.
  std::vector<Row<T>> rows(N);
  std::vector<std::vector<T>> p(N), ds(N);
  parallel_for(N, [&](std::int64_t i) {
    std::vector<T> o(d);
    rows[i] = forward_row<T>(s, qh, kh, vh, scale, c, bh, q_pos, static_cast<int>(i), o.data());
    T D = 0;
    for (int x = 0; x < d; ++x) D += T(doh[i * d + x]) * o[x];
    const auto& keys = rows[i].keys;
    p[i].resize(keys.size());
    ds[i].resize(keys.size());
    for (std::size_t a = 0; a < keys.size(); ++a) {
      const std::int32_t j = keys[a].first;
      p[i][a] = T(keys[a].second) * std::exp(rows[i].s[a] - rows[i].lse);
      ds[i][a] = p[i][a] * (dot<T>(doh + i * d, vh + std::int64_t(j) * d, d) - D);
      for (int x = 0; x < d; ++x) dq[i * d + x] += T(scale) * ds[i][a] * T(kh[std::int64_t(j) * d + x]);
    }
  });
  // dK_j = τ Σ_i dS_ij q_i, dV_j = Σ_i P_ij dO_i: serial over i, a fixed order.
  for (int i = 0; i < N; ++i)
    for (std::size_t a = 0; a < rows[i].keys.size(); ++a) {
      const std::int64_t j = rows[i].keys[a].first;
      for (int x = 0; x < d; ++x) {
        dk[j * d + x] += T(scale) * ds[i][a] * T(qh[std::int64_t(i) * d + x]);
        dv[j * d + x] += p[i][a] * T(doh[std::int64_t(i) * d + x]);
      }
    }
}

template void smyrf_reference_forward<double>(const Shape&, const float*, const float*, const float*, float,
                                               const SmyrfClusters&, const std::vector<std::int64_t>&,
                                               std::vector<double>&, std::vector<double>&);
template void smyrf_reference_forward<float>(const Shape&, const float*, const float*, const float*, float,
                                              const SmyrfClusters&, const std::vector<std::int64_t>&,
                                              std::vector<float>&, std::vector<float>&);
template void smyrf_reference_backward_head<double>(const Shape&, const float*, const float*, const float*,
                                                    const float*, float, const SmyrfClusters&, std::int64_t,
                                                    std::vector<double>&, std::vector<double>&, std::vector<double>&);
template void smyrf_reference_backward_head<float>(const Shape&, const float*, const float*, const float*,
                                                   const float*, float, const SmyrfClusters&, std::int64_t,
                                                   std::vector<float>&, std::vector<float>&, std::vector<float>&);

}  // namespace fs
