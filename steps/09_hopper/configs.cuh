// The forward's configurations, one named struct per variant (variants.hpp), each next to the
// variant that runs it; traits.cuh derives what each implies (threads, shared memory, boxes).
//
// fa3 is the production config; each rung of the ladder is the one above it less one technique,
// so that a rung's struct is what it changes:
//   fa3 → ws_pingpong (not persistent) → ws_overlap (no ping-pong) → ws (no overlap)
//       → wgmma (no producer warpgroup: rung_wgmma.cuh, beside the copies it moves into a consumer).
#pragma once

#include <type_traits>

#include "steps/09_hopper/flash_hopper_forward.cuh"
#include "steps/09_hopper/forward_producer.cuh"
#include "steps/09_hopper/variants.hpp"

namespace fs::hopper {

// fa3 (variant 0; deterministic's forward too): every technique, tiles per d, as shared memory
// allows (227 KiB a CTA):
//   d = 64:  Q 16 KiB + 4 stages × (K, V: 16 + 16 KiB)
//   d = 128: Q 32 KiB + 2 stages × (32 + 32 KiB) + O 32 KiB
//   d = 256: Q 64 KiB + 2 stages × 64 keys × (32 + 32 KiB), O stored by the threads
template <typename E_, int D_>
struct Fa3Config {
  using E = E_;
  using EO = E_;  // O's elements
  static constexpr int D = D_;
  static constexpr int kBlockM = 128;                  // query rows per CTA
  static constexpr int kBlockN = D == 256 ? 64 : 128;  // keys per tile
  static constexpr int kStages = D == 64 ? 4 : 2;      // the ring's stages of K and V
  static constexpr bool kProducer = true;              // a producer warpgroup issues the copies
  static constexpr bool kOverlap = true;               // S_{t+1} issued with P̃_t V_t
  static constexpr bool kPingPong = true;              // the consumers take turns at the tensor cores
  static constexpr bool kPersistent = true;            // one CTA per SM walks the work tiles (not causal)
  static constexpr bool kTmaStore = D <= 128;          // O out by TMA store, where its tile fits
  template <typename Cfg, bool kTrace>
  using Copies = ProducerCopies<Cfg, kTrace>;  // nothing for the consumers to copy (forward_producer.cuh)
};

// ws_pingpong: fa3 on one CTA per work tile, the next work tile's copies waiting for a CTA of
// their own.
template <typename E, int D>
struct WsPingPongConfig : Fa3Config<E, D> {
  static constexpr bool kPersistent = false;
};

// ws_overlap: the consumer warpgroups issue their products without taking turns.
template <typename E, int D>
struct WsOverlapConfig : WsPingPongConfig<E, D> {
  static constexpr bool kPingPong = false;
};

// ws: one product at a time (S_t, its softmax, P̃_tV_t: the tensor cores idle while the
// exponentials run), the producer warpgroup beside.
template <typename E, int D>
struct WsConfig : WsOverlapConfig<E, D> {
  static constexpr bool kOverlap = false;
};

// wgmma: ws without the producer warpgroup — in a file of its own with the copies it moves into a
// consumer (rung_wgmma.cuh, which the translation units that dispatch include).
template <typename E, int D>
struct WgmmaConfig;

// f(Cfg{}) with the forward config of `variant` at (E, D): the one place a variant meets its
// config. The rungs are compiled for bf16 at d = 128 only (elsewhere the step refuses them); fp8 has
// a translation unit of its own (fp8_instance.cu.in).
template <typename E, int D, typename F>
decltype(auto) with_forward_config(int variant, F&& f) {
  if constexpr (D == kLadderHeadDim && std::is_same_v<E, __nv_bfloat16>) {
    switch (variant) {
      case kWgmma: return f(WgmmaConfig<E, D>{});
      case kWs: return f(WsConfig<E, D>{});
      case kWsOverlap: return f(WsOverlapConfig<E, D>{});
      case kWsPingPong: return f(WsPingPongConfig<E, D>{});
      default: break;
    }
  }
  return f(Fa3Config<E, D>{});  // fa3, deterministic
}

template <typename E, int D>
void forward_dispatch(const FwdParams& p) {
  with_forward_config<E, D>(p.variant, [&](auto cfg) { launch_hopper_forward<decltype(cfg)>(p); });
}

}  // namespace fs::hopper
