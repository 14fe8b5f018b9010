#include "common/reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/e4m3.hpp"
#include "common/parallel.hpp"
#include "common/philox.hpp"
#include "common/smyrf.hpp"

namespace fs {

namespace {

template <typename T>
T dot(const float* a, const float* b, int d) {
  T acc = 0;
  for (int c = 0; c < d; ++c) acc += T(a[c]) * T(b[c]);
  return acc;
}

// S's dot product: in the float reference of an FP8 kernel (AttnOptions::e4m3_mma_bits), as its
// tensor core adds, 32 products at a time into the accumulator; otherwise dot.
template <typename T>
T score_dot(const AttnOptions& opt, const float* a, const float* b, int d) {
  if constexpr (std::is_same_v<T, float>) {
    if (opt.e4m3_mma_bits > 0) {
      double acc = 0;
      for (int c = 0; c < d; c += kE4m3MmaK)
        acc = e4m3_mma_sum(acc, a + c, b + c, std::min(kE4m3MmaK, d - c), opt.e4m3_mma_bits);
      return T(acc);
    }
  }
  return dot<T>(a, b, d);
}

// The sequence query row i of a head belongs to (the row within the head): with packed
// sequences (AttnOptions::cu_seqlens_q/k) the one whose tokens hold it, else the whole head.
struct Sequence {
  std::int64_t q0 = 0, q1 = 0;  // its queries [q0, q1)
  std::int64_t k0 = 0, k1 = 0;  // its keys [k0, k1)
  std::int64_t index = 0;       // which sequence it is (0: the whole head)
  std::int64_t delta() const { return (k1 - k0) - (q1 - q0); }  // aligns the masks bottom-right
};
Sequence sequence_at(const AttnOptions& opt, const std::vector<std::int32_t>* cu, std::int64_t x, int n_q, int n_k) {
  if (!opt.cu_seqlens_q) return {0, n_q, 0, n_k};
  const auto b = std::upper_bound(cu->begin(), cu->end(), std::int32_t(x)) - cu->begin() - 1;
  return {(*opt.cu_seqlens_q)[b], (*opt.cu_seqlens_q)[b + 1], (*opt.cu_seqlens_k)[b], (*opt.cu_seqlens_k)[b + 1], b};
}
Sequence sequence_of_query(const Shape& s, const AttnOptions& opt, std::int64_t i) {
  return sequence_at(opt, opt.cu_seqlens_q, i, s.N, opt.keys(s));
}
Sequence sequence_of_key(const Shape& s, const AttnOptions& opt, std::int64_t j) {
  return sequence_at(opt, opt.cu_seqlens_k, j, s.N, opt.keys(s));
}

// Query row i's keys: those of its sequence, keys [k0, k0 + n) of the head, named here by their
// index j in the sequence, with the query's own index i in it.
struct RowKeys {
  std::int64_t row = 0;    // the query's row in the head (the block mask's and dropout's index)
  std::int64_t i = 0;      // its index in its sequence
  std::int64_t k0 = 0;     // the sequence's first key
  int n = 0;               // the sequence's keys
  std::int64_t delta = 0;  // keys − queries of the sequence
  std::int64_t seq = 0;    // the sequence's index (Sequence::index)
  // Keys row i may see are below end(): j ≤ i + δ under the causal mask, j ≤ i + δ + R under a
  // window, all n otherwise; a block mask and the window's left side hide more (visible()).
  int end(const AttnOptions& opt) const {
    std::int64_t e = opt.causal ? i + delta + 1 : n;
    if (opt.window_right >= 0) e = std::min(e, i + delta + opt.window_right + 1);
    return static_cast<int>(std::clamp<std::int64_t>(e, 0, n));
  }
  bool visible(const AttnOptions& opt, std::int64_t j) const {
    const std::int64_t at = i + delta;  // the key on query i's diagonal
    return (!opt.causal || j <= at) && (opt.window_left < 0 || j >= at - opt.window_left) &&
           (opt.window_right < 0 || j <= at + opt.window_right) && (!opt.mask || opt.mask->visible(row, k0 + j));
  }
  std::int64_t distance(std::int64_t j) const { return std::abs(i + delta - j); }  // ALiBi's |i + δ − j|
};
RowKeys row_keys(const Shape& s, const AttnOptions& opt, std::int64_t row) {
  const Sequence q = sequence_of_query(s, opt, row);
  return {row, row - q.q0, q.k0, static_cast<int>(q.k1 - q.k0), q.delta(), q.index};
}

// The K/V head query head bh reads: bh = b·H + h reads b·H_kv + h / (H / H_kv).
std::int64_t kv_head(const Shape& s, const AttnOptions& opt, std::int64_t bh) {
  const int hkv = opt.kv_heads_of(s);
  return bh / s.H * hkv + bh % s.H / (s.H / hkv);
}

// What the reference cannot compute: heads that do not group, SMYRF's clusters over unequal
// lengths or grouped heads. A caller's error, not an input's (the programs check their options).
void require_layout(const Shape& s, const AttnOptions& opt) {
  const int hkv = opt.kv_heads_of(s);
  if (hkv < 1 || s.H % hkv != 0)
    throw std::invalid_argument("reference: H = " + std::to_string(s.H) + " is not a multiple of kv_heads = " +
                                std::to_string(hkv));
  if (opt.clusters && (hkv != s.H || opt.keys(s) != s.N || opt.cu_seqlens_q))
    throw std::invalid_argument("reference: SMYRF's clusters are for N_q = N_k, H_kv = H, one sequence");
  if (!opt.cu_seqlens_q != !opt.cu_seqlens_k) throw std::invalid_argument("reference: cu_seqlens_q and _k go together");
  if (!opt.cu_seqlens_q) return;
  const auto &cq = *opt.cu_seqlens_q, &ck = *opt.cu_seqlens_k;
  bool ok = s.B == 1 && cq.size() >= 2 && cq.size() == ck.size() && cq.front() == 0 && ck.front() == 0 &&
            cq.back() == s.N && ck.back() == opt.keys(s);
  for (std::size_t b = 1; ok && b < cq.size(); ++b) ok = cq[b] >= cq[b - 1] && ck[b] >= ck[b - 1];
  if (!ok)
    throw std::invalid_argument("reference: packed sequences need B = 1 and cu_seqlens of equal length, from 0, "
                                "non-decreasing, ending at N and kv_len");
}

// ALiBi's slope of query head bh = b·H + h: slope h of batch b's row, or with packed sequences
// (B = 1) of the row's sequence; (H) slopes have one row, which every batch reads.
float alibi_slope(const Shape& s, const AttnOptions& opt, const RowKeys& rk, std::int64_t bh) {
  const std::int64_t batch = opt.cu_seqlens_q ? rk.seq : bh / s.H;
  return opt.alibi_slopes[batch * opt.alibi_batch_stride + bh % s.H];
}

// S_ij from raw = τ q_i·k_j: softcapped, then ALiBi's bias (the masks are visible()'s).
template <typename T>
T score(const Shape& s, const AttnOptions& opt, const RowKeys& rk, std::int64_t bh, std::int64_t j, T raw) {
  if (opt.softcap > 0) raw = T(opt.softcap) * std::tanh(raw / T(opt.softcap));
  if (opt.alibi_slopes) raw -= T(alibi_slope(s, opt, rk, bh)) * T(rk.distance(j));
  return raw;
}
// dS_raw / dS: the softcap's derivative 1 − tanh²(raw / softcap) (1 without one).
template <typename T>
T score_slope(const AttnOptions& opt, T raw) {
  if (opt.softcap <= 0) return T(1);
  const T t = std::tanh(raw / T(opt.softcap));
  return T(1) - t * t;
}

// Z_ij of the dropout mask: 1/(1 − p) where score (i, j) of head bh is kept, 0 where dropped.
template <typename T>
struct DropoutMask {
  explicit DropoutMask(const Dropout& d)
      : seed(d.seed), threshold(dropout_threshold(d.p)), on(d.on()), scale(T(1) / (T(1) - T(d.p))) {}
  T operator()(std::int64_t bh, std::int64_t i, std::int64_t j) const {
    if (!on) return T(1);
    return dropout_keep(seed, threshold, std::uint64_t(bh), std::uint32_t(i), std::uint32_t(j)) ? scale : T(0);
  }
  std::uint64_t seed;
  std::uint32_t threshold;
  bool on;
  T scale;
};

// Rounding to the run's dtype where a 16-bit kernel must round: in the float32 implementation
// of a 16-bit run only. The double reference never rounds.
template <typename T>
T rounded(const AttnOptions& opt, T x) {
  if constexpr (std::is_same_v<T, float>) return round_to(opt.dtype, x);
  return x;
}

// Row `row` = bh·N + i's scores S_ij over the keys of its sequence that may be visible (the
// first rk.end() of them; −∞ where masked), and their max (−∞ when every one is masked).
template <typename T>
T row_scores(const Shape& s, const float* q, const float* k, const AttnOptions& opt, std::int64_t row, const RowKeys& rk,
             std::vector<T>& srow) {
  const std::int64_t bh = row / s.N;
  const int d = s.d;
  const float* qi = q + row * d;                                                   // (d)
  const float* kh = k + (kv_head(s, opt, bh) * opt.keys(s) + rk.k0) * std::int64_t(d);  // (n, d): the sequence's keys
  const T neg_inf = -std::numeric_limits<T>::infinity();
  srow.assign(std::size_t(rk.end(opt)), neg_inf);
  T m = neg_inf;
  for (std::size_t j = 0; j < srow.size(); ++j) {
    if (rk.visible(opt, std::int64_t(j)))
      srow[j] = score(s, opt, rk, bh, std::int64_t(j), T(opt.scale) * score_dot<T>(opt, qi, kh + std::int64_t(j) * d, d));
    m = std::max(m, srow[j]);
  }
  return m;
}

}  // namespace

std::vector<float> alibi_slopes(int H) {
  // Slope h of n heads, n a power of 2. The powers of 2 in 64 bits: `below * 2` in int overflowed
  // for H ≥ 2^30, and the loop never ended (issue 52).
  auto slope = [](std::int64_t h, std::int64_t n) { return static_cast<float>(std::exp2(-8.0 * double(h + 1) / double(n))); };
  std::int64_t below = 1;
  while (below * 2 <= H) below *= 2;
  std::vector<float> out;
  out.reserve(std::size_t(std::max(H, 0)));
  for (std::int64_t h = 0; h < below && h < H; ++h) out.push_back(slope(h, below));
  // Then every other slope of 2·below heads.
  for (std::int64_t h = 0; std::int64_t(out.size()) < H; h += 2) out.push_back(slope(h, 2 * below));
  return out;
}

std::vector<std::int64_t> all_indices(std::int64_t n) {
  std::vector<std::int64_t> out(n);
  for (std::int64_t i = 0; i < n; ++i) out[i] = i;
  return out;
}

template <typename T>
void reference_forward_row(const Shape& s, const float* q, const float* k, const float* v,
                           const AttnOptions& opt, std::int64_t row, T* o_row, T* lse) {
  require_layout(s, opt);
  const std::int64_t bh = row / s.N, i = row % s.N;
  const int d = s.d;
  const RowKeys rk = row_keys(s, opt, i);
  const float* vh = v + (kv_head(s, opt, bh) * opt.keys(s) + rk.k0) * std::int64_t(d);  // (n, d)
  const DropoutMask<T> z(opt.dropout);

  for (int c = 0; c < d; ++c) o_row[c] = 0;
  // S_i = τ q_i Kᵀ, m = rowmax, P̃ = exp(S - m), ℓ = rowsum(P̃), O = (P̃ ∘ Z) V / ℓ.
  // Masked keys get -inf; a row with no visible key (or every score -inf, as an additive -inf
  // mask makes it) gets O = 0, LSE = -inf, never exp(-inf - -inf) = NaN.
  const T neg_inf = -std::numeric_limits<T>::infinity();
  std::vector<T> srow;  // (N)
  const T m = row_scores<T>(s, q, k, opt, row, rk, srow);
  if (m == neg_inf) {
    *lse = m;
    return;
  }
  const int n_keys = int(srow.size());
  T l = 0;
  for (int j = 0; j < n_keys; ++j) {
    if (srow[j] == neg_inf) continue;
    const T p = std::exp(srow[j] - m);
    l += p;
    const T pz = rounded(opt, p * z(bh, i, rk.k0 + j));  // P̃ ∘ Z, as P·V reads it
    const float* vj = vh + std::int64_t(j) * d;
    for (int c = 0; c < d; ++c) o_row[c] += pz * T(vj[c]);
  }
  for (int c = 0; c < d; ++c) o_row[c] = rounded(opt, o_row[c] / l);
  *lse = m + std::log(l);
}

template <typename T>
void reference_probs_row(const Shape& s, const float* q, const float* k, const AttnOptions& opt, std::int64_t row,
                         std::vector<T>& p) {
  require_layout(s, opt);
  if (opt.clusters) throw std::invalid_argument("reference: the probabilities are dense attention's, not SMYRF's");
  const std::int64_t bh = row / s.N, i = row % s.N;
  const RowKeys rk = row_keys(s, opt, i);
  const T neg_inf = -std::numeric_limits<T>::infinity();
  std::vector<T> srow;
  const T m = row_scores<T>(s, q, k, opt, row, rk, srow);
  T l = 0;
  for (const T x : srow)
    if (x != neg_inf) l += std::exp(x - m);
  const T lse = m + std::log(l);  // as reference_forward_row's
  p.assign(std::size_t(rk.n), T(0));
  const DropoutMask<T> z(opt.dropout);
  for (int j = 0; j < rk.n; ++j) {
    if (j < int(srow.size()) && srow[j] != neg_inf) p[j] = std::exp(srow[j] - lse);
    if (z(bh, i, rk.k0 + j) == T(0)) p[j] = -p[j];  // dropped: negative (−0 where P is 0)
  }
}

template <typename T>
void reference_forward(const Shape& s, const float* q, const float* k, const float* v,
                       const AttnOptions& opt, const std::vector<std::int64_t>& rows,
                       std::vector<T>& o, std::vector<T>& lse) {
  require_layout(s, opt);
  if (opt.clusters) return smyrf_reference_forward<T>(s, q, k, v, opt.scale, *opt.clusters, rows, o, lse);
  o.assign(rows.size() * s.d, T(0));
  lse.assign(rows.size(), T(0));
  parallel_for(static_cast<std::int64_t>(rows.size()), [&](std::int64_t r) {
    reference_forward_row<T>(s, q, k, v, opt, rows[r], &o[r * s.d], &lse[r]);
  });
}

template <typename T>
void reference_backward_head(const Shape& s, const float* q, const float* k, const float* v,
                             const float* dout, const AttnOptions& opt, std::int64_t bh,
                             const std::vector<std::int64_t>& q_rows,
                             const std::vector<std::int64_t>& kv_rows, std::vector<T>& dq,
                             std::vector<T>& dk, std::vector<T>& dv) {
  require_layout(s, opt);
  if (opt.clusters) {  // SMYRF: every row of the head, then the rows asked for
    std::vector<T> g[3];
    smyrf_reference_backward_head<T>(s, q, k, v, dout, opt.scale, *opt.clusters, bh, g[0], g[1], g[2]);
    auto pick = [&](const std::vector<T>& all, const std::vector<std::int64_t>& rows, std::vector<T>& out) {
      out.resize(rows.size() * s.d);
      for (std::size_t r = 0; r < rows.size(); ++r)
        std::copy_n(&all[std::size_t(rows[r]) * s.d], s.d, &out[r * s.d]);
    };
    pick(g[0], q_rows, dq);
    pick(g[1], kv_rows, dk);
    pick(g[2], kv_rows, dv);
    return;
  }
  const int N = s.N, d = s.d;
  const std::int64_t base = bh * N * std::int64_t(d), kv_base = kv_head(s, opt, bh) * opt.keys(s) * std::int64_t(d);
  const float* qh = q + base;        // (N, d)
  const float* kh = k + kv_base;     // (N_k, d)
  const float* vh = v + kv_base;     // (N_k, d)
  const float* doh = dout + base;    // (N, d)
  const T neg_inf = -std::numeric_limits<T>::infinity();

  // LSE_i and D_i = rowsum(dO_i ∘ O_i) for every query row of the head.
  std::vector<T> lse(N), D(N);  // (N)
  parallel_for(N, [&](std::int64_t i) {
    std::vector<T> o_row(d);
    reference_forward_row<T>(s, q, k, v, opt, bh * N + i, o_row.data(), &lse[i]);
    T acc = 0;
    for (int c = 0; c < d; ++c) acc += T(doh[i * d + c]) * o_row[c];  // O as the forward stored it
    D[i] = acc;
  });

  // P_ij = exp(S_ij − LSE_i); with dropout Z_ij: dP_ij = (dO_i·v_j) Z_ij,
  // dS_ij = P_ij (dP_ij − D_i), and dV takes (P ∘ Z)ᵀ dO (Algorithm 4). pz = P_ij Z_ij. A softcap
  // multiplies dS by its derivative, so that dQ, dK below take the gradient of τ q_i·k_j.
  const DropoutMask<T> z(opt.dropout);
  // Query i (a row of the head) and the key at index jl of its sequence (row j of the head).
  auto grad_entry = [&](std::int64_t i, const RowKeys& rk, std::int64_t jl, T& pz, T& ds) {
    const std::int64_t j = rk.k0 + jl;
    const T raw = T(opt.scale) * dot<T>(qh + i * d, kh + j * d, d);
    const T p = std::exp(score(s, opt, rk, bh, jl, raw) - lse[i]);
    const T zij = z(bh, i, j);
    pz = rounded(opt, p * zij);                                          // for dV = (P ∘ Z)ᵀ dO
    ds = rounded(opt, p * (dot<T>(doh + i * d, vh + j * d, d) * zij - D[i]) * score_slope(opt, raw));  // dQ, dK
  };

  // dQ_i = τ Σ_j dS_ij k_j
  dq.assign(q_rows.size() * d, T(0));
  parallel_for(static_cast<std::int64_t>(q_rows.size()), [&](std::int64_t r) {
    const std::int64_t i = q_rows[r];
    if (lse[i] == neg_inf) return;  // fully masked row: P = 0, so dQ_i = 0
    T* out = &dq[r * d];
    const RowKeys rk = row_keys(s, opt, i);
    for (std::int64_t jl = 0; jl < rk.end(opt); ++jl) {
      if (!rk.visible(opt, jl)) continue;
      T p, ds;
      grad_entry(i, rk, jl, p, ds);
      for (int c = 0; c < d; ++c) out[c] += ds * T(kh[(rk.k0 + jl) * d + c]);
    }
    for (int c = 0; c < d; ++c) out[c] = rounded(opt, out[c] * T(opt.scale));
  });

  // dV_j = Σ_i P_ij dO_i;  dK_j = τ Σ_i dS_ij q_i
  dk.assign(kv_rows.size() * d, T(0));
  dv.assign(kv_rows.size() * d, T(0));
  parallel_for(static_cast<std::int64_t>(kv_rows.size()), [&](std::int64_t r) {
    const std::int64_t j = kv_rows[r];
    T* dk_out = &dk[r * d];
    T* dv_out = &dv[r * d];
    // The queries of key j's sequence; causal: none before the one whose diagonal it is.
    const Sequence seq = sequence_of_key(s, opt, j);
    const std::int64_t jl = j - seq.k0;
    for (std::int64_t i = seq.q0 + (opt.causal ? std::max<std::int64_t>(0, jl - seq.delta()) : 0); i < seq.q1; ++i) {
      const RowKeys rk = row_keys(s, opt, i);
      if (lse[i] == neg_inf || !rk.visible(opt, jl)) continue;
      T p, ds;
      grad_entry(i, rk, jl, p, ds);
      for (int c = 0; c < d; ++c) {
        dv_out[c] += p * T(doh[i * d + c]);
        dk_out[c] += ds * T(qh[i * d + c]);
      }
    }
    for (int c = 0; c < d; ++c) {
      dk_out[c] = rounded(opt, dk_out[c] * T(opt.scale));
      dv_out[c] = rounded(opt, dv_out[c]);
    }
  });
}

#define FS_INSTANTIATE_REFERENCE(T)                                                          \
  template void reference_forward_row<T>(const Shape&, const float*, const float*,           \
                                         const float*, const AttnOptions&, std::int64_t, T*, \
                                         T*);                                                \
  template void reference_probs_row<T>(const Shape&, const float*, const float*, const AttnOptions&, \
                                       std::int64_t, std::vector<T>&);                       \
  template void reference_forward<T>(const Shape&, const float*, const float*, const float*, \
                                     const AttnOptions&, const std::vector<std::int64_t>&,   \
                                     std::vector<T>&, std::vector<T>&);                      \
  template void reference_backward_head<T>(                                                  \
      const Shape&, const float*, const float*, const float*, const float*,                  \
      const AttnOptions&, std::int64_t, const std::vector<std::int64_t>&,                    \
      const std::vector<std::int64_t>&, std::vector<T>&, std::vector<T>&, std::vector<T>&);

FS_INSTANTIATE_REFERENCE(float)
FS_INSTANTIATE_REFERENCE(double)
#undef FS_INSTANTIATE_REFERENCE

}  // namespace fs
