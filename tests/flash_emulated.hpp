// Steps 04, 05 and 06's kernels run by the CPU emulation, for test_flash_emulated: each head
// dimension's in a unit of its own (flash_emulated_pass.cpp, compiled once per D into
// fa_flash_emulated), so that no unit takes long and the test includes no kernel it runs.
#pragma once

#include "common/problem.hpp"

namespace fs::testing {

// The forward of fp (step 04's fa2; step 05's with dropout) and then the backward of bp (step 05's,
// dQ by atomics or deterministic), through the instantiations the steps' launchers choose:
// FlashFeatures with a softcap, FlashFeaturesNoCap with other score mods, K/V of their own shape
// or packed sequences, NoFeatures otherwise.
template <int D>
void flash_emulated_pass(const FwdParams& fp, const BwdParams& bp, bool atomic_dq, float* delta);

// Step 06's: the forward and the backward walking fp.sparse's block lists (no dropout, no features),
// as block_sparse.cu launches them.
template <int D>
void flash_emulated_block_sparse(const FwdParams& fp, const BwdParams& bp, bool atomic_dq, float* delta);

#define FS_FLASH_EMULATED_AT(D)                                                                          \
  extern template void flash_emulated_pass<D>(const FwdParams&, const BwdParams&, bool, float*);         \
  extern template void flash_emulated_block_sparse<D>(const FwdParams&, const BwdParams&, bool, float*);
FS_FLASH_EMULATED_AT(16)
FS_FLASH_EMULATED_AT(32)
FS_FLASH_EMULATED_AT(64)
FS_FLASH_EMULATED_AT(128)
#undef FS_FLASH_EMULATED_AT

}  // namespace fs::testing
