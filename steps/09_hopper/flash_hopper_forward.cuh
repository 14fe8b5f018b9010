// Step 09's forward: step 08's FlashAttention-2 forward rebuilt on Hopper's machinery, the
// techniques of FlashAttention-3 (Shah et al. 2024), in roles, each in a header of its own:
//
//   the config         configs.cuh (fa3's, and the ladder's rungs), traits.cuh (what it implies)
//   the scheduler      tile_scheduler.cuh: the work tiles a CTA walks (persistent; causal's order)
//   the producer       forward_producer.cuh: warpgroup 0's one thread issues every copy, by TMA —
//                      Q once a work tile, each key tile's K and V into a ring of kStages stages
//   the consumers      forward_consumer.cuh: warpgroups 1 and 2, 64 query rows each, S = QKᵀ and
//                      O += P̃V by wgmma, one product at a time or FlashAttention-3's overlap and
//                      ping-pong; softmax.cuh and mask.cuh on the accumulators in between
//   the epilogue       forward_epilogue.cuh: O / ℓ and LSE out, O by TMA store
//
// The kernel below only sets up shared memory and the barriers and hands each warpgroup its role.
// The ladder's rungs are configs of this kernel (configs.cuh), the wgmma rung's copies in a consumer
// a policy its config names (rung_wgmma.cuh); the fp8 forward is a kernel of its own over the same
// roles (flash_hopper_fp8.cuh).
//
// The tiles a CTA reads and the HBM bytes are step 08's (io_flash2_forward with these tiles);
// what changes is who moves them (TMA, not the cp.async of step 08's 128 threads) and how the
// products are issued (a warpgroup's 64 × N × 16 at a time, asynchronously, not a warp's 16 × 8 × 16).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <type_traits>

#include "common/problem.hpp"
#include "common/recorder/device.cuh"
#include "common/recorder/launch.cuh"
#include "steps/09_hopper/forward_consumer.cuh"
#include "steps/09_hopper/forward_epilogue.cuh"
#include "steps/09_hopper/forward_producer.cuh"
#include "steps/09_hopper/hopper.cuh"
#include "steps/09_hopper/mask.cuh"
#include "steps/09_hopper/softmax.cuh"
#include "steps/09_hopper/tile_scheduler.cuh"
#include "steps/09_hopper/traits.cuh"

namespace fs::hopper {

// One CTA of the forward: configuration Cfg (configs.cuh), its softmax (Softmax: softmax.cuh's
// ForwardSoftmax, or fp8_softmax.cuh's) and the way V lies in shared memory (VTile). The 16-bit
// forward's kernel is this with ForwardSoftmax and V's rows (hopper_forward_kernel, below), the fp8
// forward's with its own (flash_hopper_fp8.cuh).
template <typename Cfg, bool kCausal, bool kTrace, typename Softmax, typename VTile>
__device__ __forceinline__ void forward_cta(const TmaMaps& maps, const FwdParams& p, trace::Slices slices) {
  using T = ForwardTraits<Cfg>;
  using Consumer = ForwardConsumer<Cfg, kTrace, VTile>;
  constexpr int BM = T::kBlockM, BN = T::kBlockN, D = T::D, KN = Consumer::KN;
  // Traced (kTrace), each warpgroup records its own lane (launch_forward names them): lane 0 the
  // copies — the waits for free stages and the copies — and lanes 1 and 2 the consumers' first
  // threads — their waits, products, softmax and stores.
  trace::CtaTracer<kTrace> tr(slices);
  extern __shared__ unsigned char smem_raw[];
  const ForwardSmem<Cfg> sm(smem_raw);
  const int N = p.shape.N, H = p.shape.H;
  const ForwardScheduler<kCausal, BM, BN> sched(p.shape, N, H);

  if (threadIdx.x == 0) sm.init_barriers();
  __syncthreads();  // the barriers are initialised before any thread waits on one or a copy names it

  const int wg = threadIdx.x / 128;
  if (Cfg::kProducer && wg == 0) {
    // ---- the producer (forward_producer.cuh) ----
    setmaxnreg_dec<T::kProducerRegs>();
    if (threadIdx.x == 0) ForwardProducer<Cfg, kTrace, VTile>{maps, sm, p.shape, N, tr}.load(sched);
  } else {
    // ---- the consumers (forward_consumer.cuh), and the epilogue (forward_epilogue.cuh) ----
    if constexpr (Cfg::kProducer) setmaxnreg_inc<T::kConsumerRegs>();
    const int cw = wg - (Cfg::kProducer ? 1 : 0);  // consumer warpgroup 0 or 1
    trace::CtaTracer<kTrace> ctr(slices, 1 + cw, threadIdx.x % 128 == 0);
    // The copies: the producer's, or (the wgmma rung) consumer 0's first thread's.
    typename Cfg::template Copies<Cfg, kTrace> copies(maps, sm, p.shape, N, tr);
    const ConsumerThread th(cw);
    const ForwardEpilogue<Cfg, kTrace> epilogue{maps, sm, p, th, N, H};
    const Consumer mma(sm, th);
    float o[1][D / 8][4];    // [1]: one 16-row tile per warp, in tc_finish_rows' shape
    float m[1][2], l[1][2];  // the softmax's running max and sum of the thread's two rows
    Softmax softmax(m, l, maps, p, th);
    int g = 0, k = 0;        // the ring's position (tile_scheduler.cuh)
    for (int w = blockIdx.x; w < sched.n_work; w += gridDim.x, ++k) {
      const Work wk = sched.work(w);
      const int n_tiles = wk.n_tiles;
      const ForwardMask<kCausal, BN> mask{wk.row0, th.wrow0, N};
      const ConsumerNotes<kTrace, BN, D> notes(ctr, wk, cw, N);
      mma.begin(o, softmax, copies, wk, g, k);
      // The loops over the key tiles are the kernel's, each key tile's registers declared in its
      // iteration (Consumer::Tile), as O, m and ℓ are above, in this order: held in a role's
      // function, or declared in another order, the same code compiled to other PTX than the kernel
      // had before it was split into roles (common/recorder/same_ptx.py).
      if constexpr (Cfg::kOverlap) {
        std::uint32_t pf[KN][4];  // P̃_{t−1}, whose product is issued beside S_t's
        {
          typename Consumer::Tile tile(0);
          mma.overlap_first(tile, pf, softmax, mask, wk, g, notes);
        }
        for (int t = 1; t < n_tiles; ++t) {
          typename Consumer::Tile tile(t);
          mma.overlap(tile, o, pf, softmax, mask, wk, g, notes);
        }
        mma.overlap_last(o, pf, g, n_tiles, notes);
      } else {
        for (int t = 0; t < n_tiles; ++t) {
          typename Consumer::Tile tile(t);
          mma.sequential(tile, o, softmax, mask, copies, wk, g, notes);
        }
      }
      epilogue.store(o, softmax, wk, notes);
      g += n_tiles;
    }
    epilogue.tail();
  }
}

template <typename Cfg, bool kCausal, bool kTrace>
__global__ void __launch_bounds__(ForwardTraits<Cfg>::kThreads, 1)
    hopper_forward_kernel(const __grid_constant__ TmaMaps maps, const FwdParams p, trace::Slices slices) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(FS_EMULATION)  // and the CPU emulation (hopper_emu.hpp)
  forward_cta<Cfg, kCausal, kTrace, ForwardSoftmax<typename Cfg::E>, VRows>(maps, p, slices);
#else
  __trap();  // compiled for another architecture than sm_90a: step 09 refuses other GPUs first
#endif
}

// Q, K or V of p as TMA's 4-D tensor: (d, rows, heads, batches), boxes of 64 columns × box_rows
// rows, swizzled by 128 bytes (hopper.cu).
CUtensorMap make_tensor_map(const void* base, DType dtype, const Strides& strides, int d, int rows, int heads,
                            int batches, int box_rows);

// Kernel(causal, tr) names the kernel's instantiation (a generic lambda, as trace::launch takes it).
// The trace names the launch hopper_forward_kernel and its lanes by who issues the copies.
template <typename Cfg, typename Kernel>
void launch_forward(const FwdParams& p, const TmaMaps& maps, Kernel kernel) {
  using T = ForwardTraits<Cfg>;
  const unsigned grid = forward_grid(p.shape, T::kBlockM, Cfg::kPersistent && !p.causal);
  if (grid == 0) return;
  if (p.trace) {
    p.trace->set_tiles(T::kBlockM, T::kBlockN);
    if constexpr (Cfg::kProducer) p.trace->set_lanes({"producer", "consumer 0", "consumer 1"});
    else p.trace->set_lanes({"copies (consumer 0's thread 0)", "consumer 0", "consumer 1"});
  }
  static_assert(T::kConsumers == 2, "the lanes' names: the copies and two consumers");
  if (p.causal)
    trace::launch(p.trace, "hopper_forward_kernel", [&](auto tr) { return kernel(std::true_type{}, tr); }, dim3(grid),
                  T::kThreads, T::kSmemBytes, p.stream, maps, p);
  else
    trace::launch(p.trace, "hopper_forward_kernel", [&](auto tr) { return kernel(std::false_type{}, tr); }, dim3(grid),
                  T::kThreads, T::kSmemBytes, p.stream, maps, p);
}

template <typename Cfg>
void launch_hopper_forward(const FwdParams& p) {
  const Shape& s = p.shape;
  const int Hkv = s.kv_heads();
  const TmaMaps maps{make_tensor_map(p.q, p.dtype, p.q_strides, s.d, s.N, s.H, s.B, Cfg::kBlockM),
                     make_tensor_map(p.k, p.dtype, p.k_strides, s.d, s.N, Hkv, s.B, Cfg::kBlockN),
                     make_tensor_map(p.v, p.dtype, p.v_strides, s.d, s.N, Hkv, s.B, Cfg::kBlockN),
                     make_tensor_map(p.o, p.dtype, p.o_strides, s.d, s.N, s.H, s.B, 64)};
  launch_forward<Cfg>(p, maps, [](auto causal, auto tr) { return hopper_forward_kernel<Cfg, causal, tr>; });
}

}  // namespace fs::hopper
