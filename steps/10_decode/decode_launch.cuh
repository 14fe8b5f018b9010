// Step 10's launcher at one element type and head dimension: with k_new, the append kernel; the split kernel on grid (splits,
// K/V heads × row blocks, batch), for a contiguous or a paged cache, then, with more than one split,
// the combine. The translation units CMakeLists.txt generates from decode_instance.cu.in
// instantiate it, one per type and d; the emulated tests (tests/decode_emulated.cpp) include it
// themselves.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/recorder/launch.cuh"
#include "steps/10_decode/append.cuh"
#include "steps/10_decode/combine.cuh"
#include "steps/10_decode/decode.hpp"
#include "steps/10_decode/decode_configs.cuh"
#include "steps/10_decode/decode_io.hpp"
#include "steps/10_decode/flash_decode.cuh"

namespace fs::decoding {

// Traced twins are compiled at the traced head dimension alone (launch.cuh, kTracedAt).
template <int D>
inline constexpr bool kTraced = trace::kTracedAt<D>;

// The split kernel for one cache layout (Cache: kv_cache.cuh), causal or not.
template <class Kt, class Cache>
void launch_split(const DecodeParams& p, dim3 grid) {
  if (p.causal)
    trace::launch<kTraced<Kt::D>>(p.trace, "decode_split_kernel",
                                  [](auto tr) { return decode_split_kernel<Kt, true, Cache, tr>; }, grid, Kt::kThreads,
                                  Kt::kSmemBytes, p.stream, p);
  else
    trace::launch<kTraced<Kt::D>>(p.trace, "decode_split_kernel",
                                  [](auto tr) { return decode_split_kernel<Kt, false, Cache, tr>; }, grid,
                                  Kt::kThreads, Kt::kSmemBytes, p.stream, p);
}

template <typename E, int D>
void launch_decode(const DecodeParams& p) {
  using Kt = DecodeTraits<E, D>;
  static_assert(Kt::kBlockN == decode_tile_keys(D), "the IO model's tiles (decode_io.hpp) are the kernel's");
  const DecodeShape& s = p.shape;
  const dim3 grid(static_cast<unsigned>(p.num_splits), static_cast<unsigned>(s.heads_kv * s.row_blocks()),
                  static_cast<unsigned>(s.batch));
  const bool rotary = p.rotary_dim > 0;
  if (p.k_new) {  // the new tokens' K and V into the cache first (append.cuh), through the same row map
    const dim3 chunks(static_cast<unsigned>((append_chunks(s, rotary) + kAppendThreads - 1) / kAppendThreads));
    if (p.block_table)
      trace::launch<kTraced<D>>(p.trace, "decode_append_kernel",
                                [](auto tr) { return decode_append_kernel<E, PagedCache<E>, tr>; }, chunks,
                                kAppendThreads, 0, p.stream, p);
    else
      trace::launch<kTraced<D>>(p.trace, "decode_append_kernel",
                                [](auto tr) { return decode_append_kernel<E, ContiguousCache<E>, tr>; }, chunks,
                                kAppendThreads, 0, p.stream, p);
  }
  if (p.trace) p.trace->set_tiles(kRowsPerCta, Kt::kBlockN);
  DecodeParams ps = p;  // the split kernel's: with a rotary embedding, q is the turned copy the append wrote
  if (rotary) ps.q = reinterpret_cast<const unsigned char*>(p.workspace) + rotary_q_offset(s, p.num_splits);
  if (p.block_table)  // a paged cache (decode.hpp): keys found through the block table
    launch_split<Kt, PagedCache<E>>(ps, grid);
  else
    launch_split<Kt, ContiguousCache<E>>(ps, grid);
  if (p.num_splits > 1) {
    const dim3 rows(static_cast<unsigned>((s.rows() + kCombineWarps - 1) / kCombineWarps));
    // Launched as the split kernel's dependent: its CTAs start while the splits finish, and wait
    // (grid_dependency_wait) before they read the workspace. Traced, a plain launch: a traced
    // pass runs its kernels one after another anyway (sink.hpp).
    if (p.trace)
      trace::launch<kTraced<D>>(p.trace, "decode_combine_kernel",
                                [](auto tr) { return decode_combine_kernel<E, D, tr>; }, rows, 32 * kCombineWarps, 0,
                                p.stream, p);
    else
      trace::launch_dependent("decode_combine_kernel", decode_combine_kernel<E, D>, rows, 32 * kCombineWarps, 0,
                              p.stream, p, trace::Slices{});
  }
}

}  // namespace fs::decoding
