// One head dimension's kernels of steps 04, 05 and 06 for the CPU emulation (tests/flash_emulated.hpp):
// compiled once per D (FS_FLASH_EMULATED_D, tests/CMakeLists.txt) into fa_flash_emulated.
#include "common/emulator/emulator.hpp"  // first: it defines threadIdx, __syncthreads, ... for the kernels

#include "tests/flash_emulated.hpp"

#include "common/flash_features.cuh"
#include "steps/04_online_softmax/flash2_forward.cuh"
#include "steps/05_recompute_backward/backward.cuh"
#include "steps/06_block_sparse/block_list_walk.cuh"

namespace fs::testing {

namespace {

template <int D, class Mod>
void forward(const FwdParams& fp) {
  if (fp.dropout.on())
    launch_flash2<D, Flash2Tile<D>, DenseWalk, PhiloxDropout, Mod>(fp);
  else
    launch_flash2<D, Flash2Tile<D>, DenseWalk, NoDropout, Mod>(fp);
}

template <int D, class Mod>
void backward(const BwdParams& bp, bool atomic_dq, float* delta) {
  if (bp.dropout.on())
    launch_backward<D, DenseWalk, PhiloxDropout, Mod>(bp, atomic_dq, delta);
  else
    launch_backward<D, DenseWalk, NoDropout, Mod>(bp, atomic_dq, delta);
}

}  // namespace

template <int D>
void flash_emulated_pass(const FwdParams& fp, const BwdParams& bp, bool atomic_dq, float* delta) {
  if (fp.mods.softcap > 0.f) {
    forward<D, FlashFeatures>(fp);
    backward<D, FlashFeatures>(bp, atomic_dq, delta);
  } else if (fp.mods.on() || !fp.shape.square() || fp.packed.on()) {
    forward<D, FlashFeaturesNoCap>(fp);
    backward<D, FlashFeaturesNoCap>(bp, atomic_dq, delta);
  } else {
    forward<D, NoFeatures>(fp);
    backward<D, NoFeatures>(bp, atomic_dq, delta);
  }
}

template <int D>
void flash_emulated_block_sparse(const FwdParams& fp, const BwdParams& bp, bool atomic_dq, float* delta) {
  launch_flash2<D, Flash2Tile<D>, BlockListWalk, NoDropout>(fp);
  launch_backward<D, BlockListWalk, NoDropout>(bp, atomic_dq, delta);
}

template void flash_emulated_pass<FS_FLASH_EMULATED_D>(const FwdParams&, const BwdParams&, bool, float*);
template void flash_emulated_block_sparse<FS_FLASH_EMULATED_D>(const FwdParams&, const BwdParams&, bool, float*);

}  // namespace fs::testing
