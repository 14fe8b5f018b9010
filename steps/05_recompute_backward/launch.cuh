// Step 05's passes at one head dimension D, as the step's launchers choose their kernels: the
// forward with dropout (step 04's fa2 kernel with PhiloxDropout), and the backward with dropout on
// or off, plain or with FlashAttention's features (common/flash_features.cuh). Each D is compiled in
// a translation unit of its own (backward_instance.cu.in), so that the four compile in parallel.
#pragma once

#include <type_traits>

#include "common/flash_features.cuh"
#include "common/flash_tile.cuh"
#include "steps/04_online_softmax/flash2_forward.cuh"
#include "steps/05_recompute_backward/backward.cuh"

namespace fs {

// The forward with dropout on (without it the forward is step 04's fa2 itself).
template <int D>
void recompute_forward_at(const FwdParams& p) {
  if (p.mods.softcap > 0.f)  // FlashAttention's interface features (common/flash_features.cuh)
    launch_flash2<D, Flash2Tile<D>, DenseWalk, PhiloxDropout, FlashFeatures>(p);
  else if (p.mods.on() || !p.shape.square() || p.packed.on())  // a window, ALiBi; Nk ≠ N, GQA; packed sequences
    launch_flash2<D, Flash2Tile<D>, DenseWalk, PhiloxDropout, FlashFeaturesNoCap>(p);
  else
    launch_flash2<D, Flash2Tile<D>, DenseWalk, PhiloxDropout>(p);
}

// The backward: the plain problem over every tile (run_backward), or with the features.
template <int D>
void recompute_backward_at(const BwdParams& p) {
  float* delta = static_cast<float*>(p.workspace);  // (B, H, N)
  const bool atomic = p.variant == kAtomicDQ;
  if (!p.mods.on() && p.shape.square() && !p.packed.on()) {
    if (p.dropout.on())
      launch_backward<D, DenseWalk, PhiloxDropout>(p, atomic, delta);
    else
      launch_backward<D, DenseWalk, NoDropout>(p, atomic, delta);
    return;
  }
  auto launch = [&](auto* features) {  // FlashFeatures, or FlashFeaturesNoCap without a softcap (a null of its type)
    using F = std::remove_pointer_t<decltype(features)>;
    if (p.dropout.on())
      launch_backward<D, DenseWalk, PhiloxDropout, F>(p, atomic, delta);
    else
      launch_backward<D, DenseWalk, NoDropout, F>(p, atomic, delta);
  };
  if (p.mods.softcap > 0.f)
    launch(static_cast<FlashFeatures*>(nullptr));
  else
    launch(static_cast<FlashFeaturesNoCap*>(nullptr));
}

}  // namespace fs
