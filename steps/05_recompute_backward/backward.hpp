// Step 05: the recomputation backward — dQ, dK, dV from Q, K, V, O, dO and the forward's LSE
// alone, the N×N matrices recomputed tile by tile on chip (docs/notation.md, Algorithm 4), and
// dropout in both passes from a counter-based generator (Algorithms 2 and 4).
#pragma once

#include <cstdint>
#include <functional>

#include "common/problem.hpp"

namespace fs {

enum Step05Variant : int { kAtomicDQ = 0, kDeterministicDQ = 1 };

void recompute_forward(const FwdParams& p);   // step 04's fa2 kernel, with dropout when p.dropout is on
void recompute_backward(const BwdParams& p);  // p.variant: atomic or deterministic dQ
// The same at one head dimension (launch.cuh; a translation unit each, backward_instance.cu.in).
void recompute_forward_d16(const FwdParams& p);
void recompute_forward_d32(const FwdParams& p);
void recompute_forward_d64(const FwdParams& p);
void recompute_forward_d128(const FwdParams& p);
void recompute_backward_d16(const BwdParams& p);
void recompute_backward_d32(const BwdParams& p);
void recompute_backward_d64(const BwdParams& p);
void recompute_backward_d128(const BwdParams& p);

// The tiles of the backward: each dK/dV CTA owns `keys` keys and streams queries `stage` at a
// time; each deterministic-dQ CTA owns `keys` query rows and streams keys `stage` at a time.
// Each thread holds rows_per_thread of the CTA's keys (rows), split over threads_per_row threads.
struct BwdTiles {
  int keys = 0, stage = 0;
  int rows_per_thread = 0, threads_per_row = 0;
};
BwdTiles backward_tiles(int d);

// HBM traffic of the backward, tile by tile as the kernels move it (a traced run shows each
// move): the preprocess reads O, dO and writes D (and zeroes dQ for atomic dQ); each dK/dV CTA
// reads its K_j, V_j once and Q_i, dO_i, LSE_i, D_i per query tile it visits (atomic dQ: also
// reads and writes dQ_i there), and writes dK_j, dV_j; the deterministic dQ kernel reads Q_i,
// dO_i, LSE_i, D_i once and every K_j, V_j it visits, and writes dQ_i. A window (ScoreMods;
// −1: unbounded) leaves out the tiles it does not reach.
IoCount io_recompute_backward(const Shape& s, bool causal, bool atomic_dq, int window_left = -1,
                              int window_right = -1);

// The same count over any visiting order: query_tiles(key0, visit) calls visit(i0) for each
// query tile the dK/dV CTA at key0 visits, key_tiles(row0, visit) visit(j0) for each key tile
// the dQ CTA at row0 visits (step 06 lists them from its block mask).
using TileVisit = std::function<void(int start)>;
using TileLister = std::function<void(int cta_start, const TileVisit& visit)>;
IoCount io_backward_walk(const Shape& s, bool atomic_dq, const BwdTiles& t, const TileLister& query_tiles,
                         const TileLister& key_tiles);

StepInfo step05_info();

}  // namespace fs
