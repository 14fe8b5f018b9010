// The forward's epilogue: O = O / ℓ, rounded to EO, and LSE = τ m + ln ℓ, as step 08's
// tc_finish_rows computes them, for a consumer warp's 16 rows of the work tile.
//
// kTmaStore (d ≤ 128): O goes into shared memory in TMA's swizzled layout, and one thread of the
// warpgroup stores its 64 rows with TMA stores; the consumers go on to the next work tile while
// the copy engine writes O out. Otherwise (d = 256, where O's tile does not fit beside the
// others) each thread stores its words of O. Either way columns past the run's d ≤ D are not
// stored (TMA's store clips its box there).
#pragma once

#include <cstdint>

#include "common/problem.hpp"
#include "common/recorder/device.cuh"
#include "steps/08_tensor_cores/tc_softmax.cuh"
#include "steps/09_hopper/hopper.cuh"
#include "steps/09_hopper/traits.cuh"

namespace fs::hopper {

template <typename Cfg, bool kTrace>
struct ForwardEpilogue {
  using T = ForwardTraits<Cfg>;
  using EO = typename T::EO;
  static constexpr int D = T::D, BM = T::kBlockM, DT = D / 8;
  const TmaMaps& maps;
  const ForwardSmem<Cfg>& sm;
  const FwdParams& p;
  const ConsumerThread& th;
  const int N, H;

  // O and LSE of work tile wk; softmax.finish first (the fp8 forward's units).
  template <typename Softmax>
  __device__ __forceinline__ void store(float (&o)[1][DT][4], Softmax& softmax, const Work& wk,
                                        const ConsumerNotes<kTrace, T::kBlockN, D>& notes) const {
    const int cw = th.cw, t4 = th.t4;
    const std::int64_t ld_o = p.o_strides.row;
    EO* gO = as<EO>(p.o) + p.o_strides.of_head(wk.bh, H);
    float* gLse = p.lse + std::int64_t(wk.bh) * N;
    float lse_scale = p.scale;
    softmax.finish(o, lse_scale);
    if constexpr (Cfg::kTmaStore) {
      // Into shared memory in TMA's swizzled layout (column c of row r of a 64-column box at
      // byte r·128 + 16((c / 8) xor (r mod 8)) + 2(c mod 8)), then one thread stores the
      // warpgroup's 64 rows. Rows past N are written nowhere: TMA clips the box.
      const bool issuer = threadIdx.x % 128 == 0;
      if (issuer) bulk_wait_read<0>();  // the previous work tile's store has read sO
      named_sync(3 + cw, 128);          // ... before any thread of the warpgroup writes sO
      tc::tc_finish_rows(o, softmax.m, softmax.l, wk.row0 + th.wrow0, N, lse_scale, gLse,
                         [&](int row, int dt, float x0, float x1) {
                           const int r = row - wk.row0, c = 8 * dt + 2 * t4, box = c / 64, cc = c % 64;
                           unsigned char* at = reinterpret_cast<unsigned char*>(sm.sO + box * BM * 64) + r * 128 +
                                               16 * ((cc / 8) ^ (r % 8)) + 2 * (cc % 8);
                           *reinterpret_cast<std::uint32_t*>(at) = tc::Element<EO>::pack(x0, x1);
                         });
      fence_async_shared();     // the threads' writes, visible to the copy engine
      named_sync(3 + cw, 128);  // every thread's words of O are in sO before the store reads it
      if (issuer) {
#pragma unroll
        for (int c = 0; c < D / 64; ++c)  // O's boxes: 64 columns of EO
          tma_store_4d(&maps.o, sm.sO + c * BM * 64 + cw * 64 * 64, 64 * c, wk.row0 + 64 * cw, wk.h, wk.b);
        bulk_commit();
      }
    } else {
      const int d = p.shape.d;  // ≤ D: O's columns past d are zero (V's are), and not stored
      tc::tc_finish_rows(o, softmax.m, softmax.l, wk.row0 + th.wrow0, N, lse_scale, gLse,
                         [&](int row, int dt, float x0, float x1) {
                           const int c = 8 * dt + 2 * t4;  // d is a multiple of 8: the pair is whole
                           if (c < d)
                             *reinterpret_cast<std::uint32_t*>(gO + row * ld_o + c) = tc::Element<EO>::pack(x0, x1);
                         });
    }
    notes.note(trace::Kind::Store, trace::Tensor::O, 0, D, std::int64_t(notes.rows) * D * std::int64_t(sizeof(EO)));
    notes.note(trace::Kind::Store, trace::Tensor::LSE, 0, 1, std::int64_t(notes.rows) * std::int64_t(sizeof(float)));
  }

  // After the CTA's last work tile: its last stores have landed before the CTA ends.
  __device__ __forceinline__ void tail() const {
    if constexpr (Cfg::kTmaStore)
      if (threadIdx.x % 128 == 0) bulk_wait<0>();
  }
};

}  // namespace fs::hopper
