#include "common/smyrf.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <numeric>

#include "common/errors.hpp"
#include "common/npy.hpp"
#include "common/parallel.hpp"
#include "common/philox.hpp"
#include "common/random.hpp"

namespace fs {

namespace {

constexpr std::uint64_t kAlphaStream = 0x5A17;  // fill_normal's stream for α
constexpr std::uint32_t kBetaTag = 0xB37A;      // Philox counter word for β

// position[round · N + i] of query i in the sorted order of each round of head bh.
std::vector<std::int32_t> query_positions(const SmyrfClusters& c, std::int64_t bh) {
  std::vector<std::int32_t> pos(std::size_t(c.hashes) * c.N, -1);
  for (int r = 0; r < c.hashes; ++r) {
    const std::int32_t* o = c.queries(bh, r);
    for (int slot = 0; slot < c.N; ++slot) pos[std::size_t(r) * c.N + o[slot]] = slot;
  }
  return pos;
}

template <typename T>
T dot(const float* a, const float* b, int d) {
  T acc = 0;
  for (int x = 0; x < d; ++x) acc += T(a[x]) * T(b[x]);
  return acc;
}

// log(e^a + e^b), with −inf on either side.
template <typename T>
T log_add_exp(T a, T b) {
  const T m = std::max(a, b);
  if (m == -std::numeric_limits<T>::infinity()) return m;
  return m + std::log1p(std::exp(-std::abs(a - b)));
}

// One query row of one head: its O and LSE, round by round, merged by the LSE rule.
template <typename T>
T forward_row(const Shape& s, const float* qh, const float* kh, const float* vh, float scale, const SmyrfClusters& c,
              std::int64_t bh, const std::vector<std::int32_t>& q_pos, int i, T* o) {
  const int d = s.d;
  T lse = -std::numeric_limits<T>::infinity();
  for (int x = 0; x < d; ++x) o[x] = 0;
  std::vector<T> sc, o_r(d);
  for (int r = 0; r < c.hashes; ++r) {
    const int cluster = q_pos[std::size_t(r) * c.N + i] / c.geo.q_cluster;
    const std::int32_t* keys = c.keys(bh, r);
    const int j0 = c.geo.key_begin(cluster), j1 = c.geo.key_end(cluster);
    sc.clear();
    T m = -std::numeric_limits<T>::infinity();
    for (int slot = j0; slot < j1; ++slot) {
      sc.push_back(T(scale) * dot<T>(qh + std::int64_t(i) * d, kh + std::int64_t(keys[slot]) * d, d));
      m = std::max(m, sc.back());
    }
    T l = 0;
    std::fill(o_r.begin(), o_r.end(), T(0));
    for (int slot = j0; slot < j1; ++slot) {
      const T p = std::exp(sc[std::size_t(slot - j0)] - m);
      l += p;
      const float* vj = vh + std::int64_t(keys[slot]) * d;
      for (int x = 0; x < d; ++x) o_r[x] += p * T(vj[x]);
    }
    const T lse_r = m + std::log(l);  // every cluster has a key: l ≥ 1
    const T merged = log_add_exp(lse, lse_r);
    const T w_acc = r == 0 ? T(0) : std::exp(lse - merged), w_r = std::exp(lse_r - merged) / l;
    for (int x = 0; x < d; ++x) o[x] = w_acc * o[x] + w_r * o_r[x];
    lse = merged;
  }
  return lse;
}

}  // namespace

std::string smyrf_spec(const SmyrfParams& p) {
  return std::to_string(p.hashes) + "x" + std::to_string(p.q_cluster) +
         (p.k_cluster != p.q_cluster ? "x" + std::to_string(p.k_cluster) : std::string());
}

std::optional<SmyrfParams> parse_smyrf_spec(const std::string& spec) {
  std::vector<int> parts;
  std::size_t at = 0;
  while (at <= spec.size()) {
    const std::size_t x = std::min(spec.find('x', at), spec.size());
    const std::string digits = spec.substr(at, x - at);
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) return {};
    parts.push_back(std::stoi(digits));
    at = x + 1;
  }
  if (parts.size() < 2 || parts.size() > 3) return {};
  SmyrfParams p = kSmyrfDefault;
  p.hashes = parts[0];
  p.q_cluster = parts[1];
  p.k_cluster = parts.size() == 3 ? parts[2] : parts[1];
  return p;
}

std::string smyrf_params_error(const Shape& s, const SmyrfParams& p) {
  if (p.hashes < 1 || p.hashes > kSmyrfMaxHashes)
    return "--hashes must be in 1.." + std::to_string(kSmyrfMaxHashes) + " (got " + std::to_string(p.hashes) + ")";
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

SmyrfClusters SmyrfClusters::sized(const Shape& s, const SmyrfParams& p) {
  SmyrfClusters c;
  c.hashes = p.hashes;
  c.N = s.N;
  c.heads = s.heads();
  c.geo = smyrf_geometry(s.N, p);
  c.q_order.resize(std::size_t(c.heads * c.hashes) * s.N);
  c.k_order.resize(c.q_order.size());
  return c;
}

std::string SmyrfClusters::error() const {
  const std::int64_t orders = heads * hashes;
  if (q_order.size() != std::size_t(orders * N) || k_order.size() != std::size_t(orders * N))
    return "the orders hold " + std::to_string(q_order.size()) + " and " + std::to_string(k_order.size()) +
           " slots; (B·H, hashes, N) is " + std::to_string(orders * N);
  std::vector<char> seen(N);
  for (std::int64_t bh = 0; bh < heads; ++bh)
    for (int r = 0; r < hashes; ++r)
      for (int which = 0; which < 2; ++which) {
        const std::int32_t* o = which ? keys(bh, r) : queries(bh, r);
        std::fill(seen.begin(), seen.end(), 0);
        for (int slot = 0; slot < N; ++slot) {
          const std::int32_t x = o[slot];
          if (x < 0 || x >= N || seen[x])
            return std::string("the ") + (which ? "key" : "query") + " order of head " + std::to_string(bh) +
                   ", round " + std::to_string(r) + " holds " + std::to_string(x) + " at slot " +
                   std::to_string(slot) + ": out of range or twice";
          seen[x] = 1;
        }
      }
  return {};
}

double smyrf_max_norm(const float* x, int N, int d) {
  double m = 0;
  for (int i = 0; i < N; ++i) m = std::max(m, std::sqrt(dot<double>(x + std::int64_t(i) * d, x + std::int64_t(i) * d, d)));
  return m;
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

namespace {

// The transformed queries and keys of head bh: (N, d + 2) each.
std::pair<std::vector<double>, std::vector<double>> transformed(const Shape& s, const float* q, const float* k,
                                                                std::int64_t bh) {
  const std::int64_t head = std::int64_t(s.N) * s.d;
  const float *qh = q + bh * head, *kh = k + bh * head;
  const double mq = smyrf_max_norm(qh, s.N, s.d), mk = smyrf_max_norm(kh, s.N, s.d);
  return {xbox_plus(qh, s.N, s.d, mq, mk, true), xbox_plus(kh, s.N, s.d, mq, mk, false)};
}

}  // namespace

SmyrfClusters smyrf_cluster(const Shape& s, const float* q, const float* k, const SmyrfParams& p) {
  const SmyrfProjections proj = smyrf_projections(p, s.d);
  SmyrfClusters c = SmyrfClusters::sized(s, p);
  parallel_for(c.heads, [&](std::int64_t bh) {
    const auto [xq, xk] = transformed(s, q, k, bh);
    for (int r = 0; r < c.hashes; ++r)
      for (int which = 0; which < 2; ++which) {
        const std::vector<double> h = smyrf_hashes(which ? xk : xq, s.N, proj, r);
        std::int32_t* order = which ? &c.k_order[(bh * c.hashes + r) * s.N] : &c.q_order[(bh * c.hashes + r) * s.N];
        std::iota(order, order + s.N, 0);
        std::stable_sort(order, order + s.N, [&](std::int32_t a, std::int32_t b) { return h[a] < h[b]; });
      }
  });
  return c;
}

OrderCheck smyrf_check_orders(const Shape& s, const float* q, const float* k, const SmyrfParams& p,
                              const SmyrfClusters& c) {
  OrderCheck out;
  if (std::string e = c.error(); !e.empty()) {
    out.broken = 1;
    out.first_error = e;
    return out;
  }
  const SmyrfProjections proj = smyrf_projections(p, s.d);
  std::vector<double> worst(std::size_t(c.heads), 0.0);
  std::vector<std::int64_t> pairs(std::size_t(c.heads), 0);
  parallel_for(c.heads, [&](std::int64_t bh) {
    const auto [xq, xk] = transformed(s, q, k, bh);
    for (int r = 0; r < c.hashes; ++r)
      for (int which = 0; which < 2; ++which) {
        const std::vector<double>& xt = which ? xk : xq;
        const std::vector<double> h = smyrf_hashes(xt, s.N, proj, r);
        // Each hash's allowance: half a float ulp at its magnitude (the sort's keys are floats),
        // and 1e-12 of the sum of the magnitudes of its terms (another order of the double sum).
        const float* a = &proj.alpha[std::size_t(r) * proj.dim];
        auto allowance = [&](std::int32_t i) {
          double mag = std::abs(proj.beta[r]);
          for (int x = 0; x < proj.dim; ++x) mag += std::abs(double(a[x]) * xt[std::size_t(i) * proj.dim + x]);
          const float f = static_cast<float>(std::abs(h[i]));
          const double ulp = double(std::nextafter(f, std::numeric_limits<float>::infinity())) - double(f);
          return 0.5 * ulp + 1e-12 * mag;
        };
        const std::int32_t* o = which ? c.keys(bh, r) : c.queries(bh, r);
        for (int slot = 1; slot < s.N; ++slot) {
          const double excess = h[o[slot - 1]] - h[o[slot]];
          if (excess > 0) worst[bh] = std::max(worst[bh], excess / (allowance(o[slot - 1]) + allowance(o[slot])));
        }
        pairs[bh] += s.N - 1;
      }
  });
  for (std::int64_t bh = 0; bh < c.heads; ++bh) {
    out.worst = std::max(out.worst, worst[bh]);
    out.pairs += pairs[bh];
  }
  return out;
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
    const std::vector<std::int32_t> q_pos = query_positions(c, bh);
    const std::int64_t base = bh * s.N * std::int64_t(d);
    parallel_for(std::int64_t(b - a), [&](std::int64_t x) {
      const std::size_t r = idx[a + x];
      const int i = static_cast<int>(rows[r] % s.N);
      lse[r] = forward_row<T>(s, q + base, k + base, v + base, scale, c, bh, q_pos, i, &o[r * d]);
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
  const std::vector<std::int32_t> q_pos = query_positions(c, bh);
  dq.assign(std::size_t(N) * d, T(0));
  dk.assign(std::size_t(N) * d, T(0));
  dv.assign(std::size_t(N) * d, T(0));
  // The forward's LSE_i and D_i = dO_i · O_i of every query.
  std::vector<T> lse(N), delta(N);
  parallel_for(N, [&](std::int64_t i) {
    std::vector<T> o(d);
    lse[i] = forward_row<T>(s, qh, kh, vh, scale, c, bh, q_pos, static_cast<int>(i), o.data());
    T D = 0;
    for (int x = 0; x < d; ++x) D += T(doh[i * d + x]) * o[x];
    delta[i] = D;
  });
  // Per (query i, key j) of a round's cluster: P^ρ_ij = e^{s_ij − LSE_i}, dS^ρ_ij = P^ρ_ij (dO_i·v_j − D_i).
  const SmyrfGeometry& g = c.geo;
  auto pair = [&](std::int64_t i, std::int64_t j, T& p, T& ds) {
    p = std::exp(T(scale) * dot<T>(qh + i * d, kh + j * d, d) - lse[i]);
    ds = p * (dot<T>(doh + i * d, vh + j * d, d) - delta[i]);
  };
  // dQ_i = τ Σ_ρ Σ_j dS^ρ_ij k_j, a query at a time (its cluster's keys, round by round).
  parallel_for(N, [&](std::int64_t i) {
    for (int r = 0; r < c.hashes; ++r) {
      const int cl = q_pos[std::size_t(r) * N + i] / g.q_cluster;
      const std::int32_t* keys = c.keys(bh, r);
      for (int ks = g.key_begin(cl); ks < g.key_end(cl); ++ks) {
        const std::int64_t j = keys[ks];
        T p, ds;
        pair(i, j, p, ds);
        for (int x = 0; x < d; ++x) dq[i * d + x] += T(scale) * ds * T(kh[j * d + x]);
      }
    }
  });
  // dK_j = τ Σ dS^ρ_ij q_i and dV_j = Σ P^ρ_ij dO_i, a key at a time: in each round, over the queries
  // of every cluster whose keys hold it (with C_k > C_q, more than one).
  std::vector<std::int32_t> k_pos(std::size_t(c.hashes) * N);
  for (int r = 0; r < c.hashes; ++r)
    for (int slot = 0; slot < N; ++slot) k_pos[std::size_t(r) * N + c.keys(bh, r)[slot]] = slot;
  parallel_for(N, [&](std::int64_t j) {
    for (int r = 0; r < c.hashes; ++r) {
      const int slot = k_pos[std::size_t(r) * N + j];
      int first = 0, last = 0;
      g.clusters_of_keys(slot, slot + 1, &first, &last);
      const std::int32_t* queries = c.queries(bh, r);
      for (int cl = first; cl <= last; ++cl)
        for (int qs = g.query_begin(cl); qs < g.query_end(cl); ++qs) {
          const std::int64_t i = queries[qs];
          T p, ds;
          pair(i, j, p, ds);
          for (int x = 0; x < d; ++x) {
            dk[j * d + x] += T(scale) * ds * T(qh[i * d + x]);
            dv[j * d + x] += p * T(doh[i * d + x]);
          }
        }
    }
  });
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

// --- Files -------------------------------------------------------------------------------------

void write_smyrf_clusters(const std::string& dir, const Shape& s, const SmyrfClusters& c) {
  const std::vector<std::int64_t> shape{s.B, s.H, c.hashes, s.N};
  write_npy_i32(dir + "/q_order.npy", c.q_order.data(), shape);
  write_npy_i32(dir + "/k_order.npy", c.k_order.data(), shape);
  const std::int32_t sizes[3] = {c.hashes, c.geo.q_cluster, c.geo.k_cluster};
  write_npy_i32(dir + "/clusters.npy", sizes, {3});
}

bool has_smyrf_clusters(const std::string& dir) {
  return std::filesystem::exists(dir + "/q_order.npy") || std::filesystem::exists(dir + "/k_order.npy") ||
         std::filesystem::exists(dir + "/clusters.npy");
}

SmyrfClusters read_smyrf_clusters(const std::string& dir, const Shape& s) {
  const char* why = "is not int32 or int64; save it with arr.astype(np.int32)";
  const NpyRaw sizes = read_npy_raw(dir + "/clusters.npy", {"<i4", "<i8"}, why);
  if (sizes.shape != std::vector<std::int64_t>{3})
    throw InputError(dir + "/clusters.npy: shape " + shape_string(sizes.shape) +
                     " is not (3,): hashes, q_cluster, k_cluster");
  auto in = [](double v, double lo, double hi) { return v >= lo && v <= hi; };
  if (!in(sizes.value(0), 1, kSmyrfMaxHashes) || !in(sizes.value(1), 1, 2147483647.0) ||
      !in(sizes.value(2), 1, 2147483647.0))
    throw InputError(dir + "/clusters.npy: hashes must be in 1.." + std::to_string(kSmyrfMaxHashes) +
                     " and the cluster sizes at least 1");
  SmyrfParams p;
  p.hashes = static_cast<int>(sizes.value(0));
  p.q_cluster = static_cast<int>(sizes.value(1));
  p.k_cluster = static_cast<int>(sizes.value(2));
  SmyrfClusters c = SmyrfClusters::sized(s, p);
  const std::vector<std::int64_t> want{s.B, s.H, c.hashes, s.N};
  for (const char* name : {"q_order.npy", "k_order.npy"}) {
    const std::string path = dir + "/" + name;
    const NpyRaw raw = read_npy_raw(path, {"<i4", "<i8"}, why);
    if (raw.shape != want)
      throw InputError(path + ": shape " + shape_string(raw.shape) + " is not (B, H, hashes, N) = " +
                       shape_string(want));
    std::vector<std::int32_t>& into = name[0] == 'q' ? c.q_order : c.k_order;
    into.resize(std::size_t(raw.elements()));
    for (std::int64_t x = 0; x < raw.elements(); ++x) {
      const double v = raw.value(x);
      into[std::size_t(x)] = v >= 0 && v < s.N ? static_cast<std::int32_t>(v) : -1;
    }
  }
  if (std::string e = c.error(); !e.empty()) throw InputError(dir + ": " + e);
  return c;
}

}  // namespace fs
