// Step 07: SMYRF (Daras et al., NeurIPS 2020) — approximate attention inside balanced clusters
// found by asymmetric LSH, forward and backward, on the GPU (common/smyrf.hpp restates the
// algorithm and holds the host reference the tests hold it to).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/problem.hpp"

namespace fs {

// The forward: cluster (or take p.smyrf_orders), then one launch per round, each merged into O
// and LSE. Its workspace keeps the clusters for the backward.
void smyrf_forward(const FwdParams& p);
// The backward through the forward's clusters: D, then per round dK/dV and dQ. Deterministic.
void smyrf_backward(const BwdParams& p);

// The forward's workspace, in bytes from its start (each region 256-byte aligned). The orders
// come first: (2, B·H, hashes, N) int32, the clusters the backward and --save read.
struct SmyrfWorkspace {
  std::size_t orders = 0, norms = 0, keys0 = 0, keys1 = 0, values1 = 0, offsets = 0, temp = 0;
  std::size_t temp_bytes = 0, total = 0;
  std::int64_t segments = 0;  // 2·B·H·hashes sorts of N keys each
  int batch = 0;              // segments per call of the sort (its item count is an int)
};
SmyrfWorkspace smyrf_workspace(const Shape& s, const SmyrfParams& p);

// The kernels' tiles at head dimension d for these clusters.
struct SmyrfTiles {
  int fwd_rows = 0, fwd_keys = 0;  // forward CTA: query slots of one cluster; keys per tile
  int dkdv_keys = 0;               // dK/dV CTA: key slots
  int dq_rows = 0;                 // dQ CTA: query slots of one cluster
  int stage = 0;                   // backward: rows per pipeline stage
};
SmyrfTiles smyrf_tiles(int d, const SmyrfParams& p);

// HBM traffic, kernel by kernel as the kernels move it: the clustering (norms, hashes, the sort
// counted as what any sort must move: its keys and values read once and written once — CUB's
// passes move more, which Nsight Compute shows), then per round each CTA's gathered rows, their
// indices, and the merge's read and write of O and LSE (round 0 only writes). With given
// clusters (--load) the clustering is a copy of the given orders into the workspace instead.
IoCount io_smyrf_forward(const Shape& s, const SmyrfParams& p, bool given_orders = false);
IoCount io_smyrf_backward(const Shape& s, const SmyrfParams& p);

StepInfo step07_info();

}  // namespace fs
