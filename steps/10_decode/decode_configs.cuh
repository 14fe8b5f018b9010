// The split kernel's configuration per head dimension, as named fields, and what it implies
// (DecodeTraits). First choices; the split rule was measured around them on an H100
// (docs/lab/10_decode.md), the tiles not yet:
//
//   kWarps        warps per CTA; each takes kBlockN / kWarps keys of every tile (its own keys, its
//                 own running max, ℓ and O), so all of them hold all 16 query rows
//   kBlockN       keys per tile, read once per CTA for its 16 rows
//   kStages       tiles in flight: a CTA keeps kStages − 1 tiles arriving while it computes one,
//                 since decoding has almost nothing to compute while it waits for the bytes
//   kQInRegs      Q's fragments loaded once into registers (where they fit beside O)
//   kLazyRescale  O rescaled by α only in the tiles where some row of the warp has a new max
//
// Shared memory: Q (16 × d) and kStages tiles of K and V (kBlockN × d each), 2-byte elements:
// about 98 KiB at d = 64 and 100 KiB at d = 128, two CTAs on an SM of the H100/H200 (228 KiB);
// at d = 256 two stages of 64 keys, 136 KiB, one CTA.
#pragma once

#include <cstddef>

#include "steps/08_tensor_cores/mma.cuh"
#include "steps/10_decode/decode.hpp"

namespace fs::decoding {

template <int D>
struct DecodeConfig;
template <>
struct DecodeConfig<64> {
  static constexpr int kWarps = 4;
  static constexpr int kBlockN = 128;  // 32 keys a warp
  static constexpr int kStages = 3;
  static constexpr bool kQInRegs = true;
  static constexpr bool kLazyRescale = true;
};
template <>
struct DecodeConfig<128> {
  static constexpr int kWarps = 4;
  static constexpr int kBlockN = 64;  // 16 keys a warp: one k-step of P̃V
  static constexpr int kStages = 3;
  static constexpr bool kQInRegs = true;
  static constexpr bool kLazyRescale = true;
};
template <>
struct DecodeConfig<256> {
  static constexpr int kWarps = 4;
  static constexpr int kBlockN = 64;
  static constexpr int kStages = 2;        // a third stage would not leave room for a second CTA either
  static constexpr bool kQInRegs = false;  // O alone is 128 registers a lane; Q is read from shared memory
  static constexpr bool kLazyRescale = true;
};

// A configuration at element type E (bf16 or fp16) and head dimension D.
template <typename E_, int D_, class Cfg = DecodeConfig<D_>>
struct DecodeTraits : Cfg {
  using E = E_;
  static constexpr int D = D_;
  static constexpr int kThreads = 32 * Cfg::kWarps;
  static constexpr int kWarpKeys = Cfg::kBlockN / Cfg::kWarps;  // keys of each warp in a tile
  static_assert(kWarpKeys % 16 == 0 && kWarpKeys * Cfg::kWarps == Cfg::kBlockN,
                "a warp's keys are whole k-steps of P̃V (16 keys)");
  static_assert(D % 16 == 0, "mma.sync m16n8k16 steps over 16 of d");
  static_assert(Cfg::kStages >= 2, "the loop waits for tile t while tile t + kStages − 1 is issued");
  using QTile = tc::SmemTile<kRowsPerCta, D, tc::kSwizzled>;     // the CTA's 16 query rows
  using KVTile = tc::SmemTile<Cfg::kBlockN, D, tc::kSwizzled>;  // K_j, V_j: one per stage each
  static constexpr std::size_t kSmemBytes = sizeof(E) * (QTile::kElems + 2 * Cfg::kStages * KVTile::kElems);
  // The merge of the warps (flash_decode.cuh, merge_warps) reuses the stages' bytes: each warp's
  // O (16 × D floats), and its max, ℓ and weight per row.
  static constexpr std::size_t kMergeBytes = sizeof(float) * Cfg::kWarps * kRowsPerCta * (D + 3);
  static_assert(kMergeBytes <= sizeof(E) * 2 * Cfg::kStages * KVTile::kElems, "the merge fits in the stages");
};

}  // namespace fs::decoding
