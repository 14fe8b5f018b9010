// What step 07 adds to the tile machinery of common/flash_tile.cuh: tiles whose rows are not
// consecutive in HBM but come through a round's order (slot → row), the rows a cluster holds.
// The kernels read Q, K, V where they are — no permuted copy is ever written — at the price of a
// 4-byte index per row and of rows that land in HBM wherever the sort put them (each row is
// still d·4 bytes in one piece, so a warp's loads stay whole 32-byte sectors for d ≥ 8).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda_utils.cuh"

namespace fs {

// Slots [slot0, slot0 + kRows) of an order, gathered: row order[slot] of gmem (rows × kD) into
// smem (kRows, kD), by all kThreads threads in 16-byte pieces; slots at or past `end` are
// zero-filled. Asynchronous (cp.async): commit and wait before reading.
template <int kRows, int kD, int kThreads>
__device__ __forceinline__ void gather_rows_async(float* smem, const float* gmem, const std::int32_t* order, int slot0,
                                                  int end) {
  static_assert(kD % 4 == 0, "rows are copied in 16-byte (4-float) pieces");
  constexpr int kPieces = kRows * kD / 4;
  for (int p = threadIdx.x; p < kPieces; p += kThreads) {
    const int r = p / (kD / 4), c = (p % (kD / 4)) * 4;
    const bool valid = slot0 + r < end;
    const std::int64_t row = valid ? order[slot0 + r] : 0;
    cp_async_16(smem + r * kD + c, gmem + row * kD + c, valid);
  }
}

// The R rows of slots [slot, slot + R) into registers, each thread its DC columns (part), scaled
// by `scale`; row[r] is the index a slot holds, −1 at or past `end` (those rows are zeros).
template <int D, int R, int DC>
__device__ __forceinline__ void gather_rows(const float* gmem, const std::int32_t* order, int slot, int end, int part,
                                            float scale, float (&x)[R][DC], int (&row)[R]) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    row[r] = slot + r < end ? order[slot + r] : -1;
    const float4* src = reinterpret_cast<const float4*>(gmem + std::int64_t(row[r] < 0 ? 0 : row[r]) * D + part * DC);
#pragma unroll
    for (int c = 0; c < DC; c += 4) {
      const float4 v = row[r] >= 0 ? src[c / 4] : make_float4(0.f, 0.f, 0.f, 0.f);
      x[r][c] = v.x * scale;
      x[r][c + 1] = v.y * scale;
      x[r][c + 2] = v.z * scale;
      x[r][c + 3] = v.w * scale;
    }
  }
}

}  // namespace fs
