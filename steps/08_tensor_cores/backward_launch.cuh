// The backward's launchers (launchers.cuh declares them), one per kernel: the preprocess and the
// convert (preprocess_convert.cuh), the dK/dV kernels by the family their traits name
// (tc_dkdv_kernel.cuh, flash_tc_backward.cuh, flash_tc_backward_f32.cuh), the deterministic dQ
// kernel (tc_dq_kernel.cuh). A unit that instantiates a dK/dV or dQ launcher includes the kernel it
// launches. A
// pass of no CTAs is skipped (a launch of none is an error): packed sequences may have no query or
// no key at all, and then dK, dV are still written (zeros) and dQ has no rows.
#pragma once

#include <cstdint>

#include "common/problem.hpp"
#include "common/recorder/launch.cuh"
#include "steps/08_tensor_cores/launchers.cuh"
#include "steps/08_tensor_cores/preprocess_convert.cuh"

namespace fs::tc {

// dK/dV: kSplit CTAs per tile of keys of each K/V head. Packed sequences: the tiles of the longest
// sequence's keys, for each sequence (z).
template <class Kt, bool kDropout, bool kAtomicDQ, class Features>
void launch_tc_dkdv(const BwdParams& p, const float* delta, float* dq_acc) {
  using Family = typename Kt::Family;
  const Shape& s = p.shape;
  const Packed& pk = p.packed;
  if (p.trace) p.trace->set_tiles(Kt::kQueries, Kt::kKeys);
  const int keys = pk.on() ? pk.max_k : s.keys();
  const dim3 grid(static_cast<unsigned>((keys + Kt::kKeys - 1) / Kt::kKeys * Kt::kSplit),
                  static_cast<unsigned>(std::int64_t(s.B) * s.kv_heads()), pk.on() ? pk.count : 1);
  constexpr bool kTraced = trace::kTracedAt<Kt::D>;  // traced twins at the traced runs' head dimension only
  if (grid.x > 0)
    trace::launch<kTraced>(
        p.trace, Family::kName,
        [](auto tr) { return Family::template kernel<Kt, kDropout, kAtomicDQ, Features, tr>; }, grid, Kt::kThreads,
        Kt::smem_bytes(kAtomicDQ), p.stream, p, delta, dq_acc);
}

// dQ (deterministic): a CTA per tile of query rows of each head; packed, of the longest sequence's.
template <class Kt, bool kDropout, class Features>
void launch_tc_dq(const BwdParams& p, const float* delta) {
  using Family = typename Kt::Family;
  const Packed& pk = p.packed;
  const int rows = pk.on() ? pk.max_q : p.shape.N;
  const dim3 grid(static_cast<unsigned>((rows + Kt::kRows - 1) / Kt::kRows), static_cast<unsigned>(p.shape.heads()),
                  pk.on() ? pk.count : 1);
  constexpr bool kTraced = trace::kTracedAt<Kt::D>;
  if (grid.x > 0)
    trace::launch<kTraced>(
        p.trace, Family::kName, [](auto tr) { return Family::template kernel<Kt, kDropout, Features, tr>; }, grid,
        Kt::kThreads, Kt::kSmemBytes, p.stream, p, delta);
}

// The preprocess, kTcPreprocessRows rows of all B·H·N per CTA; kTraced: its traced twin compiled
// (where the dK/dV kernel's is).
template <typename E, bool kZeroDQ, bool kTraced>
void launch_tc_bwd_preprocess(const BwdParams& p, float* delta, float* dq_acc) {
  const unsigned grid = static_cast<unsigned>((p.shape.rows() + kTcPreprocessRows - 1) / kTcPreprocessRows);
  if (grid > 0)
    trace::launch<kTraced>(
        p.trace, "tc_bwd_preprocess_kernel", [](auto tr) { return tc_bwd_preprocess_kernel<E, kZeroDQ, tr>; },
        dim3(grid), kTcPreprocessWarps * 32, 0, p.stream, p, delta, dq_acc);
}

// The convert, 8 elements per thread.
template <typename E, bool kTraced>
void launch_tc_dq_convert(const BwdParams& p, const float* dq_acc) {
  const unsigned grid = tc_dq_convert_blocks(p.shape);
  if (grid > 0)
    trace::launch<kTraced>(
        p.trace, "tc_dq_convert_kernel", [](auto tr) { return tc_dq_convert_kernel<E, tr>; }, dim3(grid),
        kTcConvertThreads, 0, p.stream, p, dq_acc);
}

}  // namespace fs::tc
