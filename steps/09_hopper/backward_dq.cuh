// The backward's dQ: each consumer warpgroup's 64 × 64 block of dQ_i's share (backward_consumer.cuh)
// goes into shared memory, and one thread adds it to dQacc (float32, step 08's workspace) with a
// TMA reduce-add (cp.reduce.async.bulk.tensor .add): the copy engine does the read-modify-write in
// L2, where step 08's warps issued an atomic per pair of elements (float2 atomicAdd on sm_90).
// tc_dq_convert_kernel (step 08's) then writes dQ = τ dQacc in the run's element type.
//
// kDeterministic: the reduce-adds into each block of dQacc happen in the order of the key tiles (a
// counter per block of dQacc and consumer warpgroup that the CTA of key tile j waits to read j
// before adding, then raises), so that runs are bit-identical; the CTAs wait for each other, which
// costs time.
#pragma once

#include <cstdint>

#include "common/recorder/device.cuh"
#include "steps/09_hopper/backward_consumer.cuh"
#include "steps/09_hopper/backward_traits.cuh"
#include "steps/09_hopper/hopper.cuh"

namespace fs::hopper {

template <typename Cfg, bool kCausal, bool kTrace>
struct DqAdd {
  using T = BackwardTraits<Cfg>;
  static constexpr int BM = T::kBlockM, BN = T::kBlockN;
  static constexpr std::int64_t kF = sizeof(float);
  const BwdMaps& maps;
  const BackwardSmem<Cfg>& sm;
  const BackwardThread<BM, T::D>& th;
  const KeyTile<kCausal, BM, BN>& kt;
  int* const dq_order;  // kDeterministic's counters: [B·H][query tiles][kConsumers]
  const int N;

  // dQ's block of iteration it (query tile q0) to shared memory (two boxes of 32 floats × 64 rows,
  // the 128-byte swizzle: chunk c of row r at c xor (r mod 8)), then one thread adds it to dQacc.
  template <typename Notes>
  __device__ __forceinline__ void add(const float (&dq)[8][4], int it, int q0, int n_q, bool issuer,
                                      const Notes& notes) const {
    const int cw = th.cw, dq_row = th.dq_row, dq_col = th.dq_col;
    float* my_dq = sm.sdQ + cw * T::kDqFloats;
    if (issuer) bulk_wait_read<0>();  // the last reduce has read the buffer
    named_sync(3 + cw, 128);          // ... before any thread of the warpgroup writes it
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int r = 16 * th.warp + th.g + 8 * hh, c = 8 * i + 2 * th.t4, box = c / 32, cc = c % 32;
        unsigned char* at = reinterpret_cast<unsigned char*>(my_dq + box * 64 * 32) + r * 128 +
                            16 * ((cc / 4) ^ (r % 8)) + 4 * (cc % 4);
        *reinterpret_cast<float2*>(at) = make_float2(dq[i][2 * hh], dq[i][2 * hh + 1]);
      }
    fence_async_shared();     // the threads' writes, visible to the copy engine
    named_sync(3 + cw, 128);  // every thread's part of the block is in before the add reads it
    if (issuer) {
      int* order = nullptr;
      if constexpr (Cfg::kDeterministic) {
        // Key tile n_block adds after tiles 0 .. n_block − 1 have (every CTA that adds to this
        // block of dQacc has a smaller n_block, causal or not).
        order = dq_order + (std::int64_t(kt.bh) * kt.m_end + kt.m_of(it)) * T::kConsumers + cw;
        while (ld_acquire(order) != kt.n_block) {
        }
        fence_proxy_async_global();
      }
      if constexpr (Cfg::kDeterministic) notes.note(trace::Kind::Wait, trace::Tensor::None, q0, n_q);  // its turn
#pragma unroll
      for (int box = 0; box < 2; ++box)
        tma_reduce_add_4d(&maps.dq_acc, my_dq + box * 64 * 32, dq_col + 32 * box, q0 + dq_row, kt.h, kt.b);
      bulk_commit();
      // The reduce-add reads and writes this block of dQacc in L2 (the IO model's atomics).
      const int dq_rows = max(0, min(64, N - q0 - dq_row));
      if (dq_rows > 0) {
        notes.ctr.event(trace::Kind::Load, trace::Tensor::dQacc, kt.bh, q0 + dq_row, dq_rows, dq_col, 64,
                        std::int64_t(dq_rows) * 64 * kF);
        notes.ctr.event(trace::Kind::AccumulateDQ, trace::Tensor::dQacc, kt.bh, q0 + dq_row, dq_rows, dq_col, 64, 0);
        notes.ctr.event(trace::Kind::Store, trace::Tensor::dQacc, kt.bh, q0 + dq_row, dq_rows, dq_col, 64,
                        std::int64_t(dq_rows) * 64 * kF);
      }
      if constexpr (Cfg::kDeterministic) {
        bulk_wait<0>();  // the adds have landed before the next tile may add
        fence_proxy_async_global();
        red_release_add(order, 1);
      }
    }
  }
};

}  // namespace fs::hopper
