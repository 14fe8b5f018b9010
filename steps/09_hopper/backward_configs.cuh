// Which backward each variant of step 09 runs, and its tiles (flash_hopper_backward.cuh):
//
//   HopperBwdConfig<E, D, kDeterministic>
//
// The rungs (ws, ws_overlap, ws_pingpong) are schedules of the forward and run fa3's backward;
// deterministic adds dQ in the order of the key tiles.
#pragma once

#include "common/io_model.hpp"
#include "steps/09_hopper/configs.cuh"
#include "steps/09_hopper/flash_hopper_backward.cuh"

namespace fs::hopper {

template <typename E, int D>
void backward_dispatch(const BwdParams& p) {
  if (p.variant == kDeterministic)
    launch_hopper_backward<HopperBwdConfig<E, D, true>>(p);
  else
    launch_hopper_backward<HopperBwdConfig<E, D, false>>(p);
}

// The backward's tiles at d, every variant's: keys per CTA, queries per stage (the IO model's).
inline TcBwdTiles backward_tiles(int d) {
  using E = __nv_bfloat16;  // the tiles do not depend on the element type
  auto tiles = [](auto cfg) { return TcBwdTiles{decltype(cfg)::kBlockN, decltype(cfg)::kBlockM, 1, 0, 0}; };
  return d == 64 ? tiles(HopperBwdConfig<E, 64, false>{}) : tiles(HopperBwdConfig<E, 128, false>{});
}

}  // namespace fs::hopper
