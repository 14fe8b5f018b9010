// A small 16-bit backward, by hand, for the tests: what a tensor-core backward that adds dQ up
// in a float32 dQacc buffer with atomics would record. Kernel 0 (one CTA per K/V tile) loads
// K_j, V_j, then per query tile Q_i, dO_i, LSE_i, D_i, computes S, P, dP, dS, dV, dK, dQ on chip
// and adds its part of dQ_i into dQacc (a store, every query tile); it stores dK_j, dV_j at the
// end. Kernel 1 (one CTA per query tile) loads dQacc_i and stores it rounded into dQ_i. The
// bytes are the events' own sums: it passes the validator.
#pragma once

#include <string>

#include "common/trace/names.hpp"
#include "common/trace/trace.hpp"
#include "visualizer/tests/trace_events.hpp"

namespace fs::viz::test {

inline fs::trace::Trace dqacc_trace(int N = 64, int d = 16, int tile = 32) {
  namespace tr = fs::trace;
  tr::Trace t;
  auto& m = t.meta;
  m.step = "09_tc_backward";
  m.variant = "atomic";
  m.pass = "bwd";
  m.dtype = "bf16";
  m.B = m.H = 1;
  m.N = N;
  m.d = d;
  m.scale = 0.25f;
  m.Br = m.Bc = tile;
  for (tr::Tensor id : {tr::Tensor::Q, tr::Tensor::K, tr::Tensor::V, tr::Tensor::O, tr::Tensor::LSE, tr::Tensor::dO,
                        tr::Tensor::dQ, tr::Tensor::dK, tr::Tensor::dV, tr::Tensor::D, tr::Tensor::dQacc}) {
    auto shape = tr::tensor_shape(id, 1, 1, N, d);
    const std::int64_t bytes = tr::shape_elems(shape) * tr::element_bytes(id, m.dtype);
    m.tensors.push_back({id, std::move(shape), bytes});
  }
  const int tiles = (N + tile - 1) / tile;
  double now = 1000;
  auto add = [&](int track, tr::Kind kind, tr::Tensor tensor, int row0, int rows, int col0, int cols) {
    append_event(t, track, kind, tensor, row0, rows, col0, cols, now, 64);
  };
  for (int k = 0; k < 2; ++k) {
    tr::Kernel kern;
    kern.name = k == 0 ? "dkdv_atomic_dq_kernel" : "dq_round_kernel";
    kern.grid[0] = tiles;
    kern.block[0] = 128;
    t.kernels.push_back(kern);
  }
  for (int j = 0; j < tiles; ++j) {  // kernel 0: CTA j owns keys [j·tile, ...)
    const int track = int(t.tracks.size());
    t.tracks.push_back(tr::Track{0, j, 0, j, 0});
    const int k0 = j * tile;
    add(track, tr::Kind::Load, tr::Tensor::K, k0, tile, 0, d);
    add(track, tr::Kind::Load, tr::Tensor::V, k0, tile, 0, d);
    for (int i = 0; i < tiles; ++i) {
      const int q0 = i * tile;
      add(track, tr::Kind::Load, tr::Tensor::Q, q0, tile, 0, d);
      add(track, tr::Kind::Load, tr::Tensor::dO, q0, tile, 0, d);
      add(track, tr::Kind::Load, tr::Tensor::LSE, q0, tile, 0, 1);
      add(track, tr::Kind::Load, tr::Tensor::D, q0, tile, 0, 1);
      add(track, tr::Kind::ComputeS, tr::Tensor::S, q0, tile, k0, tile);
      add(track, tr::Kind::Softmax, tr::Tensor::P, q0, tile, k0, tile);
      add(track, tr::Kind::ComputeDP, tr::Tensor::dP, q0, tile, k0, tile);
      add(track, tr::Kind::ComputeDS, tr::Tensor::dS, q0, tile, k0, tile);
      add(track, tr::Kind::AccumulateDV, tr::Tensor::dV, k0, tile, 0, d);
      add(track, tr::Kind::AccumulateDK, tr::Tensor::dK, k0, tile, 0, d);
      add(track, tr::Kind::AccumulateDQ, tr::Tensor::dQ, q0, tile, 0, d);
      add(track, tr::Kind::Store, tr::Tensor::dQacc, q0, tile, 0, d);  // atomicAdd, float32
    }
    add(track, tr::Kind::Store, tr::Tensor::dK, k0, tile, 0, d);
    add(track, tr::Kind::Store, tr::Tensor::dV, k0, tile, 0, d);
  }
  for (int i = 0; i < tiles; ++i) {  // kernel 1: dQ_i = bf16(dQacc_i)
    const int track = int(t.tracks.size());
    t.tracks.push_back(tr::Track{1, i, 0, i, 0});
    add(track, tr::Kind::Load, tr::Tensor::dQacc, i * tile, tile, 0, d);
    add(track, tr::Kind::Store, tr::Tensor::dQ, i * tile, tile, 0, d);
  }
  t.kernels[0].ts_ns = 900;
  t.kernels[1].ts_ns = t.events[std::size_t(tiles) * std::size_t(2 + 12 * tiles + 2) - 1].ts_ns + 64;
  t.kernels[0].dur_ns = t.kernels[1].ts_ns - 900;
  t.kernels[1].dur_ns = now - t.kernels[1].ts_ns + 100;
  return t;
}

}  // namespace fs::viz::test
