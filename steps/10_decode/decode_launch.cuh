// Step 10's launcher at one element type and head dimension: the split kernel on grid (splits,
// K/V heads × row blocks, batch), then, with more than one split, the combine. The translation
// units CMakeLists.txt generates from decode_instance.cu.in instantiate it, one per type and d;
// the emulated tests (tests/decode_emulated.cpp) include it themselves.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/recorder/launch.cuh"
#include "steps/10_decode/combine.cuh"
#include "steps/10_decode/decode.hpp"
#include "steps/10_decode/decode_configs.cuh"
#include "steps/10_decode/flash_decode.cuh"

namespace fs::decoding {

template <typename E, int D>
void launch_decode(const DecodeParams& p) {
  using Kt = DecodeTraits<E, D>;
  const DecodeShape& s = p.shape;
  const dim3 grid(static_cast<unsigned>(p.num_splits), static_cast<unsigned>(s.heads_kv * s.row_blocks()),
                  static_cast<unsigned>(s.batch));
  if (p.causal)
    trace::launch_untraced("decode_split_kernel", decode_split_kernel<Kt, true>, grid, Kt::kThreads, Kt::kSmemBytes,
                           p.stream, p);
  else
    trace::launch_untraced("decode_split_kernel", decode_split_kernel<Kt, false>, grid, Kt::kThreads, Kt::kSmemBytes,
                           p.stream, p);
  if (p.num_splits > 1) {
    const dim3 rows(static_cast<unsigned>((s.rows() + kCombineWarps - 1) / kCombineWarps));
    trace::launch_untraced("decode_combine_kernel", decode_combine_kernel<E, D>, rows, 32 * kCombineWarps, 0,
                           p.stream, p);
  }
}

}  // namespace fs::decoding
