// Step 07's launches, in order, with their grids, blocks and shared memory: what smyrf.cu runs
// on the GPU and what tests/test_smyrf_emulated.cpp runs through the CPU emulation
// (common/emulator), one sequence for both. The steps between them that are no kernel of ours —
// the memsets and CUB's sort — are the callers'.
//
//   forward    launch_hashes (norms, then hashes: keys and indices to sort)
//              [the caller sorts each segment: the orders]
//              launch_forward_rounds (one round kernel per round, each merging into O and LSE)
//   backward   [the caller zeroes dK, dV]
//              launch_backward_rounds (step 05's preprocess: D, dQ = 0; then per round dK/dV and dQ)
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/recorder/launch.cuh"
#include "common/smyrf.hpp"
#include "steps/07_smyrf/cluster_backward.cuh"
#include "steps/07_smyrf/cluster_forward.cuh"
#include "steps/07_smyrf/hash.cuh"

namespace fs {

// Norms and hashes of p's queries and keys: keys[seg·N + i] the hash, orders[seg·N + i] = i, for
// segment seg = (which·B·H + bh)·hashes + ρ. max_norm2: 2·B·H zeros (the caller's memset).
template <int D>
void launch_hashes(const FwdParams& p, unsigned long long* max_norm2, float* keys, std::int32_t* orders) {
  const int BH = static_cast<int>(p.shape.heads()), N = p.shape.N;
  const SmyrfProjections proj = smyrf_projections(p.smyrf, D);  // α, β of every round, as a kernel parameter
  SmyrfProjParams<D> pp{};
  for (int r = 0; r < p.smyrf.hashes; ++r) {
    for (int c = 0; c < D + 2; ++c) pp.alpha[r][c] = proj.alpha[std::size_t(r) * (D + 2) + c];
    pp.beta[r] = proj.beta[r];
  }
  trace::launch<trace::kTracedAt<D>>(p.trace, "smyrf_norms_kernel", [](auto tr) { return smyrf_norms_kernel<D, tr>; },
                                     dim3((N + kNormRows - 1) / kNormRows, 2 * BH), kNormThreads, kNormSmemBytes,
                                     p.stream, as<float>(p.q), as<float>(p.k), N, BH, max_norm2);
  trace::launch<trace::kTracedAt<D>>(p.trace, "smyrf_hash_kernel", [](auto tr) { return smyrf_hash_kernel<D, tr>; },
                                     dim3((N + kHashRows<D> - 1) / kHashRows<D>, 2 * BH), kHashRows<D>,
                                     kHashSmemBytes<D>, p.stream, as<float>(p.q), as<float>(p.k), N, BH, p.smyrf.hashes,
                                     static_cast<const unsigned long long*>(max_norm2), pp, keys, orders);
}

template <int D, int kRows>
void launch_forward_rounds_of(const FwdParams& p, const std::int32_t* orders) {
  using T = SmyrfFwdTile<D, kRows>;
  static_assert(T::kBR == kRows, "the tile holds kRows query rows");
  const SmyrfGeometry g = smyrf_geometry(p.shape.N, p.smyrf);
  const int tiles = (p.smyrf.q_cluster + T::kBR - 1) / T::kBR;  // per cluster
  const dim3 grid(static_cast<unsigned>(std::int64_t(g.clusters()) * tiles), static_cast<unsigned>(p.shape.heads()));
  const std::size_t smem = 2 * 2 * T::kTileFloats * sizeof(float);  // 2 stages × (K, V)
  for (int round = 0; round < p.smyrf.hashes; ++round)
    trace::launch<trace::kTracedAt<D>>(p.trace, "smyrf_round_forward_kernel",
                                       [](auto tr) { return smyrf_round_forward_kernel<D, T, tr>; }, grid, T::kThreads,
                                       smem, p.stream, p, orders, round, tiles);
}

// Every round of the forward over the clusters in `orders` ((2, B·H, hashes, N)).
template <int D>
void launch_forward_rounds(const FwdParams& p, const std::int32_t* orders) {
  switch (smyrf_cta_rows(p.smyrf.q_cluster)) {
    case 32: return launch_forward_rounds_of<D, 32>(p, orders);
    case 64: return launch_forward_rounds_of<D, 64>(p, orders);
    default: return launch_forward_rounds_of<D, 128>(p, orders);
  }
}

// f(std::integral_constant<int, rows>) for the CTA rows smyrf_bwd_rows picks.
template <int D, typename F>
void dispatch_bwd_rows(int rows, F&& f) {
  if constexpr (D == 128) {
    if (rows == 32) return f(std::integral_constant<int, 32>{});
    return f(std::integral_constant<int, 64>{});
  } else {
    if (rows == 32) return f(std::integral_constant<int, 32>{});
    if (rows == 64) return f(std::integral_constant<int, 64>{});
    return f(std::integral_constant<int, 128>{});
  }
}

// The backward through the clusters in `orders`: D (B·H·N floats) and dQ = 0, then every round's
// dK/dV and dQ kernels. dK and dV must be zero (the caller's memset). The tensors are contiguous
// (smyrf_backward refuses others); step 05's preprocess reads each in its layout, which with_strides
// fills in as the contiguous one (flash_params.hpp).
template <int D>
void launch_backward_rounds(const BwdParams& params, float* delta, const std::int32_t* orders) {
  const BwdParams p = with_strides(params, "launch_backward_rounds");
  const Shape& s = p.shape;
  const unsigned pre_grid = static_cast<unsigned>((s.rows() + kPreprocessRows - 1) / kPreprocessRows);
  trace::launch<trace::kTracedAt<D>>(p.trace, "bwd_preprocess_kernel",
                                     [](auto tr) { return bwd_preprocess_kernel<true, tr>; }, pre_grid,
                                     kPreprocessRows * kWarpSize, 0, p.stream, p, delta);
  const SmyrfGeometry g = smyrf_geometry(s.N, p.smyrf);
  for (int round = 0; round < p.smyrf.hashes; ++round) {
    dispatch_bwd_rows<D>(smyrf_bwd_rows(p.smyrf.k_cluster, D), [&](auto keys) {
      using T = SmyrfBwdTile<D, decltype(keys)::value>;
      static_assert(T::kBR == decltype(keys)::value, "the tile holds that many keys");
      const dim3 grid(static_cast<unsigned>((s.N + T::kBR - 1) / T::kBR), static_cast<unsigned>(s.heads()));
      trace::launch<trace::kTracedAt<D>>(p.trace, "smyrf_round_dkdv_kernel",
                                         [](auto tr) { return smyrf_round_dkdv_kernel<D, T, tr>; }, grid, T::kThreads,
                                         DkdvSmem<D, T, false>::floats() * sizeof(float), p.stream, p,
                                         static_cast<const float*>(delta), orders, round);
    });
    dispatch_bwd_rows<D>(smyrf_bwd_rows(p.smyrf.q_cluster, D), [&](auto rows) {
      using T = SmyrfBwdTile<D, decltype(rows)::value>;
      static_assert(T::kBR == decltype(rows)::value, "the tile holds that many queries");
      const int tiles = (p.smyrf.q_cluster + T::kBR - 1) / T::kBR;
      const dim3 grid(static_cast<unsigned>(std::int64_t(g.clusters()) * tiles), static_cast<unsigned>(s.heads()));
      const std::size_t smem = 2 * 2 * kBwdStage * D * sizeof(float);  // 2 stages × (K, V)
      trace::launch<trace::kTracedAt<D>>(p.trace, "smyrf_round_dq_kernel",
                                         [](auto tr) { return smyrf_round_dq_kernel<D, T, tr>; }, grid, T::kThreads,
                                         smem, p.stream, p, static_cast<const float*>(delta), orders, round, tiles);
    });
  }
}

}  // namespace fs
