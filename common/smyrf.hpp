// SMYRF (Daras et al., NeurIPS 2020): approximate attention inside balanced clusters found by
// asymmetric locality-sensitive hashing, on the host — the clustering, the geometry of the
// clusters that the GPU kernels share (step 07), and an exact reference of the attention the
// clusters define.
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
//   3. Balanced clusters: sort the queries by h_ρ(q') and the keys by h_ρ(k') (ties by index).
//      A round's order of queries is cut into chunks of C_q: cluster c holds the queries in
//      slots [c·C_q, (c + 1)·C_q) of it (SmyrfGeometry). With C_k = C_q its keys are the same
//      chunk of the key order — the paper's clusters; where N is not a multiple of the cluster
//      size the last chunk is short (the paper's padding, which sorts last, holds no key).
//      With C_k ≠ C_q, cluster c's keys are the C_k consecutive slots of the key order centred
//      on its queries' slots, moved inside [0, N).
//   4. Dense softmax attention of each cluster's queries over that cluster's keys: (O_ρ, LSE_ρ).
//   5. The rounds merged per query by the LSE rule:
//        LSE = log(e^{LSE_acc} + e^{LSE_ρ}),  O = e^{LSE_acc − LSE} O_acc + e^{LSE_ρ − LSE} O_ρ.
//
// Steps 4-5 together are one softmax over the multiset of keys a query met in all its rounds:
// with c_ij the number of rounds in which key j is among query i's cluster's keys,
//   P_ij = c_ij e^{s_ij} / Σ_j' c_ij' e^{s_ij'},   O_i = Σ_j P_ij v_j,   LSE_i = log Σ_j c_ij e^{s_ij},
// so the gradients, for fixed clusters (the hash is piecewise constant), are dense attention's
// with these P: dV = Pᵀ dO, dS = P ∘ (dO Vᵀ − D), dQ = τ dS K, dK = τ dSᵀ Q — round by round,
// each round's P^ρ_ij = e^{s_ij − LSE_i} with the merged LSE.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/problem.hpp"

namespace fs {

// Where a round's clusters lie in its sorted orders (slots 0 .. N − 1 of the queries and of
// the keys). Shared by the host and the kernels.
struct SmyrfGeometry {
  int N = 0, q_cluster = 1, k_cluster = 1;

  __host__ __device__ static int lo(int a, int b) { return a < b ? a : b; }
  __host__ __device__ static int hi(int a, int b) { return a < b ? b : a; }

  __host__ __device__ int clusters() const { return (N + q_cluster - 1) / q_cluster; }
  // Cluster c's queries: slots [query_begin(c), query_end(c)) of the query order.
  __host__ __device__ int query_begin(int c) const { return c * q_cluster; }
  __host__ __device__ int query_end(int c) const { return lo(N, (c + 1) * q_cluster); }
  // Cluster c's keys: slots [key_begin(c), key_end(c)) of the key order. Never empty; both ends
  // never decrease with c.
  __host__ __device__ int key_begin(int c) const {
    if (k_cluster == q_cluster) return c * q_cluster;  // the paper's: the same chunk of both orders
    const int diff = q_cluster - k_cluster;            // centred on the queries' chunk (floor of diff / 2)
    const int centred = c * q_cluster + (diff >= 0 ? diff / 2 : -((1 - diff) / 2));
    return hi(0, lo(centred, hi(0, N - k_cluster)));
  }
  __host__ __device__ int key_end(int c) const { return lo(N, key_begin(c) + k_cluster); }
  // The clusters whose keys meet slots [j0, j1): c in [*first, *last]; none when *first > *last
  // (with C_k < C_q some keys are in no cluster).
  __host__ __device__ void clusters_of_keys(int j0, int j1, int* first, int* last) const {
    int a = 0, b = clusters();  // first c with key_end(c) > j0
    while (a < b) {
      const int m = (a + b) / 2;
      if (key_end(m) > j0) b = m;
      else a = m + 1;
    }
    *first = a;
    a = 0;
    b = clusters();  // first c with key_begin(c) >= j1; the last cluster meeting is the one before it
    while (a < b) {
      const int m = (a + b) / 2;
      if (key_begin(m) >= j1) b = m;
      else a = m + 1;
    }
    *last = a - 1;
  }
};

inline SmyrfGeometry smyrf_geometry(int N, const SmyrfParams& p) { return {N, p.q_cluster, p.k_cluster}; }

// The largest number of rounds the kernels take (their projections travel as kernel parameters).
constexpr int kSmyrfMaxHashes = 16;

// The paper's setting for language models: 8 rounds of clusters of 32, E2LSH width 4.
constexpr SmyrfParams kSmyrfDefault{8, 32, 32, 4.f, 0};

// "8x32" (rounds × cluster size) or "8x32x64" (rounds × queries × keys per cluster), as the
// CSV's mask column and bench's --smyrf write it; parse_smyrf_spec gives nullopt for anything else
// (the other fields are kSmyrfDefault's).
std::string smyrf_spec(const SmyrfParams& p);
std::optional<SmyrfParams> parse_smyrf_spec(const std::string& spec);

// Empty when the parameters make sense for this shape; otherwise why not, in one line.
std::string smyrf_params_error(const Shape& s, const SmyrfParams& p);

// α (hashes × (d + 2), row-major) and β (hashes) of every round, from the seed.
struct SmyrfProjections {
  int hashes = 0, dim = 0;  // dim = d + 2
  std::vector<float> alpha, beta;
};
SmyrfProjections smyrf_projections(const SmyrfParams& p, int d);

// The clusters of every (batch, head) and round, as the sorted orders: for (bh, round), N slots,
// each the index of the query (or key) sorted into it; the geometry says which slots form which
// cluster. The layout of the kernels' workspace and of --save's q_order.npy, k_order.npy.
struct SmyrfClusters {
  int hashes = 0, N = 0;
  std::int64_t heads = 0;
  SmyrfGeometry geo;
  std::vector<std::int32_t> q_order, k_order;  // (heads, hashes, N)

  const std::int32_t* queries(std::int64_t bh, int round) const { return &q_order[(bh * hashes + round) * std::int64_t(N)]; }
  const std::int32_t* keys(std::int64_t bh, int round) const { return &k_order[(bh * hashes + round) * std::int64_t(N)]; }
  // Empty when every (bh, round) order holds each index 0 .. N − 1 exactly once.
  std::string error() const;

  // The clusters of p's rounds and sizes for shape s, every order sized (to be filled).
  static SmyrfClusters sized(const Shape& s, const SmyrfParams& p);
};

// The XBOX+ transform of one head's rows (N × d) into N × (d + 2) doubles; `query` picks the
// query form [x, 0, ext], else the key form [x, ext, 0]. mq, mk: the head's max norms.
std::vector<double> xbox_plus(const float* x, int N, int d, double mq, double mk, bool query);

// max_i ‖x_i‖ of one head's rows (N × d), in double.
double smyrf_max_norm(const float* x, int N, int d);

// The hashes of one head's transformed rows for one round: ⟨α_ρ, x'⟩ + β_ρ, in double.
std::vector<double> smyrf_hashes(const std::vector<double>& xt, int N, const SmyrfProjections& proj, int round);

// Steps 1-3 for every (batch, head): Q and K are (B, H, N, d) float32.
SmyrfClusters smyrf_cluster(const Shape& s, const float* q, const float* k, const SmyrfParams& p);

// Whether orders that a GPU made are a clustering of these inputs: each a permutation, and each
// a sort of the fp64 hashes up to what sorting float keys allows (a neighbour pair (a, b) may
// have h(a) > h(b) by their floats' rounding, half a float ulp each, and a little for a different
// order of the double sums). `worst` is the largest excess over that allowance, as a fraction of
// it: at most 1 passes.
struct OrderCheck {
  double worst = 0;
  std::int64_t broken = 0;  // orders that are no permutation
  std::int64_t pairs = 0;   // neighbour pairs checked
  std::string first_error;
};
OrderCheck smyrf_check_orders(const Shape& s, const float* q, const float* k, const SmyrfParams& p,
                              const SmyrfClusters& c);

// Steps 4-5 for rows `rows` (indices into the B·H·N rows): o is rows.size() × d, natural-log
// LSE. T = double is the reference; T = float the plain float32 implementation of the same math
// (rounds in order, merged as the kernels merge them) whose error sets the tolerance.
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

// --save and --load: the clusters as DIR/q_order.npy and DIR/k_order.npy, int32 (B, H, hashes,
// N), and DIR/clusters.npy, int32 (3,): hashes, q_cluster, k_cluster.
void write_smyrf_clusters(const std::string& dir, const Shape& s, const SmyrfClusters& c);
bool has_smyrf_clusters(const std::string& dir);
// Reads them for shape s; throws InputError naming the file and what is wrong.
SmyrfClusters read_smyrf_clusters(const std::string& dir, const Shape& s);

}  // namespace fs
