// SMYRF (Daras et al., NeurIPS 2020): approximate attention inside balanced clusters found by
// asymmetric locality-sensitive hashing, on the host — the clustering and an exact reference of
// the attention it defines. (The GPU step that computes the same thing is step 07.)
//
// Per (batch, head), over the sequence, and per round ρ = 0 .. hashes − 1:
//
//   1. XBOX+, the asymmetric transform: with M_Q = max_i ‖q_i‖, M_K = max_j ‖k_j‖,
//        q' = [q, 0, √(M_Q² + M_K² − ‖q‖²)],   k' = [k, √(M_Q² + M_K² − ‖k‖²), 0],
//      so that ‖q' − k'‖² = 2(M_Q² + M_K²) − 2⟨q, k⟩: the nearest key in distance is the one
//      with the largest inner product.
//   2. E2LSH: h_ρ(x) = ⟨α_ρ, x⟩ + β_ρ, α_ρ ~ N(0, I_{d+2}), β_ρ ~ U(0, r). As in the authors'
//      code the projection is sorted, not bucketed — so β_ρ (and r) shift every hash of a round
//      alike and change no cluster; they are kept for fidelity.
//   3. Balanced clusters: sort the queries by h_ρ(q') and the keys by h_ρ(k') (ties by index);
//      cut the orders into n consecutive chunks of C_q queries and C_k keys. Padding slots,
//      where N is not a multiple of the cluster size, sort last.
//   4. Dense softmax attention of each cluster's queries over that cluster's keys: (O_ρ, LSE_ρ).
//   5. The rounds merged per query: LSE = log Σ_ρ e^{LSE_ρ}, O = Σ_ρ e^{LSE_ρ − LSE} O_ρ.
//
// Steps 4-5 together are one softmax over the multiset of keys a query met in all its rounds:
// with c_ij the number of rounds in which key j shares query i's cluster,
//   P_ij = c_ij e^{s_ij} / Σ_j' c_ij' e^{s_ij'},   O_i = Σ_j P_ij v_j,   LSE_i = log Σ_j c_ij e^{s_ij},
// so the gradients, for fixed clusters (the hash is piecewise constant), are dense attention's
// with these P: dV = Pᵀ dO, dS = P ∘ (dO Vᵀ − D), dQ = τ dS K, dK = τ dSᵀ Q. The reference uses
// that form; the tests check it against the round-by-round merge and finite differences.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/problem.hpp"

namespace fs {

struct SmyrfParams {
  int hashes = 1;          // rounds, merged by the LSE rule
  int q_cluster = 64;      // queries per cluster
  int k_cluster = 64;      // keys per cluster
  float r = 1.f;           // E2LSH width: β ~ U(0, r)
  std::uint64_t seed = 0;  // draws α and β

  // Clusters per (batch, head, round): enough for the queries and for the keys.
  int clusters(int N) const;
};

// Empty when the parameters make sense for this shape; otherwise why not, in one line.
std::string smyrf_params_error(const Shape& s, const SmyrfParams& p);

// α (hashes × (d + 2), row-major) and β (hashes) of every round, from the seed.
struct SmyrfProjections {
  int hashes = 0, dim = 0;  // dim = d + 2
  std::vector<float> alpha, beta;
};
SmyrfProjections smyrf_projections(const SmyrfParams& p, int d);

// The clusters of every (batch, head) and round, as the sorted orders: q_order holds, for
// (bh, round), n·C_q slots (cluster c: slots [c·C_q, (c + 1)·C_q)), each a query index in
// [0, N) or −1 for padding (always at the end); k_order likewise with C_k.
struct SmyrfClusters {
  int hashes = 0, n_clusters = 0, q_cluster = 0, k_cluster = 0, N = 0;
  std::int64_t heads = 0;
  std::vector<std::int32_t> q_order, k_order;

  std::int64_t q_slots() const { return std::int64_t(n_clusters) * q_cluster; }
  std::int64_t k_slots() const { return std::int64_t(n_clusters) * k_cluster; }
  const std::int32_t* queries(std::int64_t bh, int round) const { return &q_order[(bh * hashes + round) * q_slots()]; }
  const std::int32_t* keys(std::int64_t bh, int round) const { return &k_order[(bh * hashes + round) * k_slots()]; }
  // Empty when every (bh, round) holds each index exactly once with the padding last.
  std::string error() const;
};

// The XBOX+ transform of one head's rows (N × d) into N × (d + 2) doubles; `query` picks the
// query form [x, 0, ext], else the key form [x, ext, 0]. mq, mk: the head's max norms.
std::vector<double> xbox_plus(const float* x, int N, int d, double mq, double mk, bool query);

// The hashes of one head's transformed rows for one round: ⟨α_ρ, x'⟩ + β_ρ, in double.
std::vector<double> smyrf_hashes(const std::vector<double>& xt, int N, const SmyrfProjections& proj, int round);

// Steps 1-3 for every (batch, head): Q and K are (B, H, N, d) float32.
SmyrfClusters smyrf_cluster(const Shape& s, const float* q, const float* k, const SmyrfParams& p);

// Step 4-5 for rows `rows` (indices into the B·H·N rows): o is rows.size() × d, natural-log
// LSE. A row whose clusters hold no real key gets O = 0, LSE = −inf.
template <typename T>
void smyrf_reference_forward(const Shape& s, const float* q, const float* k, const float* v, float scale,
                             const SmyrfClusters& c, const std::vector<std::int64_t>& rows, std::vector<T>& o,
                             std::vector<T>& lse);

// Gradients of one head bh for the loss Σ O ∘ dO, through the fixed clusters: every row of dQ,
// dK and dV of the head (N × d each).
template <typename T>
void smyrf_reference_backward_head(const Shape& s, const float* q, const float* k, const float* v,
                                   const float* dout, float scale, const SmyrfClusters& c, std::int64_t bh,
                                   std::vector<T>& dq, std::vector<T>& dk, std::vector<T>& dv);

}  // namespace fs
