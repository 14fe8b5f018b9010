// Step 08's dK/dV kernels by hand, for the tests: what tc_dkdv_kernel (steps/08_tensor_cores/
// flash_tc_backward.cuh) records, at any head dimension and split, or tc_dkdv_smem_kernel, its
// FlashAttention-2 layout, at any tile (it records the same events). A CTA per key tile and part
// of d (grid ceil(N / Bc)·split): Load K, Load V; per query tile Load Q, dO, LSE, D, compute S,
// dP, dS, accumulate dV, dK on the CTA's columns and (atomic) Load dQacc, accumulate dQ, Store
// dQacc; then skip (none here: not causal) and Store dK, dV. Shared memory and block as the
// kernel's smem_bytes() and kThreads give them; 100 ns an event, CTAs one after another.
#pragma once

#include <algorithm>
#include <string>

#include "common/trace/names.hpp"
#include "common/trace/trace.hpp"
#include "visualizer/tests/trace_events.hpp"

namespace fs::viz::test {

struct TcBwdSpec {
  int N = 256, d = 64;
  int queries = 64, warps = 4, split = 1;  // Br, kWarps (Bc = 16·kWarps), kSplit
  int keys = 0;  // tc_dkdv_smem_kernel's kKeys (Bc); 0: tc_dkdv_kernel
  bool atomic = true;
  std::string step = "08_tensor_cores", variant = "fa2";
};

inline fs::trace::Trace tc_dkdv_trace(const TcBwdSpec& s) {
  namespace tr = fs::trace;
  tr::Trace t;
  auto& m = t.meta;
  m.step = s.step;
  m.variant = s.variant;
  m.pass = "bwd";
  m.dtype = "bf16";
  m.B = m.H = 1;
  m.N = s.N;
  m.d = s.d;
  m.scale = 0.125f;
  const bool smem_pds = s.keys > 0;
  const int Br = s.queries, Bc = smem_pds ? s.keys : 16 * s.warps, cols = s.d / s.split;
  m.Br = Br;
  m.Bc = Bc;
  // P's and dS's tiles: tc_dkdv_smem_kernel's both, tc_dkdv_kernel's dS for the atomic dQ.
  const int pds_tiles = smem_pds ? 2 : s.atomic ? 1 : 0;
  m.smem_per_cta_bytes = 2 * (2 * Bc * s.d + 4 * Br * s.d + pds_tiles * Bc * Br) + 4 * 4 * Br;
  m.sram_budget_bytes = 232448;
  for (tr::Tensor id : {tr::Tensor::Q, tr::Tensor::K, tr::Tensor::V, tr::Tensor::O, tr::Tensor::LSE, tr::Tensor::dO,
                        tr::Tensor::dQ, tr::Tensor::dK, tr::Tensor::dV, tr::Tensor::D, tr::Tensor::dQacc}) {
    if (id == tr::Tensor::dQacc && !s.atomic) continue;
    auto shape = tr::tensor_shape(id, 1, 1, s.N, s.d);
    const std::int64_t bytes = tr::shape_elems(shape) * tr::element_bytes(id, m.dtype);
    m.tensors.push_back({id, std::move(shape), bytes});
  }
  tr::Kernel k;
  k.name = smem_pds ? "tc_dkdv_smem_kernel" : "tc_dkdv_kernel";
  k.grid[0] = (s.N + Bc - 1) / Bc * s.split;
  k.block[0] = 32 * s.warps;
  k.smem_bytes = m.smem_per_cta_bytes;
  t.kernels.push_back(k);
  double now = 1000;
  for (int cta = 0; cta < k.grid[0]; ++cta) {
    const int track = int(t.tracks.size());
    t.tracks.push_back(tr::Track{0, cta, 0, cta, 0});
    const int key0 = cta / s.split * Bc, c0 = cta % s.split * cols, n_keys = std::min(Bc, s.N - key0);
    auto add = [&](tr::Kind kind, tr::Tensor tensor, int row0, int rows, int col0, int ncols) {
      append_event(t, track, kind, tensor, row0, rows, col0, ncols, now, 100);
    };
    add(tr::Kind::Load, tr::Tensor::K, key0, n_keys, 0, s.d);
    add(tr::Kind::Load, tr::Tensor::V, key0, n_keys, 0, s.d);
    for (int i0 = 0; i0 < s.N; i0 += Br) {
      const int n_q = std::min(Br, s.N - i0);
      add(tr::Kind::Load, tr::Tensor::Q, i0, n_q, 0, s.d);
      add(tr::Kind::Load, tr::Tensor::dO, i0, n_q, 0, s.d);
      add(tr::Kind::Load, tr::Tensor::LSE, i0, n_q, 0, 1);
      add(tr::Kind::Load, tr::Tensor::D, i0, n_q, 0, 1);
      add(tr::Kind::ComputeS, tr::Tensor::S, i0, n_q, key0, n_keys);
      add(tr::Kind::ComputeDP, tr::Tensor::dP, i0, n_q, key0, n_keys);
      add(tr::Kind::ComputeDS, tr::Tensor::dS, i0, n_q, key0, n_keys);
      add(tr::Kind::AccumulateDV, tr::Tensor::dV, key0, n_keys, c0, cols);
      add(tr::Kind::AccumulateDK, tr::Tensor::dK, key0, n_keys, c0, cols);
      if (s.atomic) {
        add(tr::Kind::Load, tr::Tensor::dQacc, i0, n_q, c0, cols);
        add(tr::Kind::AccumulateDQ, tr::Tensor::dQacc, i0, n_q, c0, cols);
        add(tr::Kind::Store, tr::Tensor::dQacc, i0, n_q, c0, cols);
      }
    }
    add(tr::Kind::Store, tr::Tensor::dK, key0, n_keys, c0, cols);
    add(tr::Kind::Store, tr::Tensor::dV, key0, n_keys, c0, cols);
  }
  t.kernels[0].ts_ns = 900;  // its launch range holds every event
  t.kernels[0].dur_ns = now - 900 + 100;
  return t;
}

}  // namespace fs::viz::test
