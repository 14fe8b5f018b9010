// The backward's configurations, one named struct per backward (variants.hpp says which variant
// runs which); backward_traits.cuh derives what each implies.
#pragma once

#include "common/io_model.hpp"
#include "steps/09_hopper/flash_hopper_backward.cuh"
#include "steps/09_hopper/variants.hpp"

namespace fs::hopper {

// fa3's backward (fa3's variant, and the rungs': schedules of the forward): 128 keys per CTA, and
// the query tiles as registers allow — Sᵀ and dPᵀ of 64 keys × kBlockM queries beside dK and dV of
// 64 keys × d.
template <typename E_, int D_>
struct Fa3BwdConfig {
  using E = E_;
  static constexpr int D = D_;
  static constexpr int kBlockN = 128;                 // keys per CTA, 64 per consumer warpgroup
  static constexpr int kBlockM = D == 64 ? 128 : 64;  // queries per stage: Sᵀ is m64n128 or m64n64
  static constexpr int kStages = 2;                   // the ring's stages of Q, dO, LSE and D
  static constexpr bool kDeterministic = false;       // dQ's reduce-adds in whatever order they land
};

// deterministic: fa3's, with dQ's reduce-adds in the order of the key tiles (bit-identical runs).
template <typename E, int D>
struct DeterministicBwdConfig : Fa3BwdConfig<E, D> {
  static constexpr bool kDeterministic = true;
};

template <typename E, int D>
void backward_dispatch(const BwdParams& p) {
  if (hopper_variant(p.variant).backward == HopperBackward::kOrderedDq)
    launch_hopper_backward<DeterministicBwdConfig<E, D>>(p);
  else
    launch_hopper_backward<Fa3BwdConfig<E, D>>(p);
}

// The backward's tiles at d, every variant's: keys per CTA, queries per stage (the IO model's).
inline TcBwdTiles backward_tiles(int d) {
  using E = __nv_bfloat16;  // the tiles do not depend on the element type
  auto tiles = [](auto cfg) { return TcBwdTiles{decltype(cfg)::kBlockN, decltype(cfg)::kBlockM, 1, 0, 0}; };
  return compiled_head_dim(d) == 64 ? tiles(Fa3BwdConfig<E, 64>{}) : tiles(Fa3BwdConfig<E, 128>{});
}

}  // namespace fs::hopper
