// Tiles into shared memory (cp.async) and fragments out of it (ldmatrix), for every 16-bit kernel of
// step 08, and the two-stage pipeline they all stream their tiles through.
#pragma once

#include <cstdint>

#include "common/cuda_utils.cuh"
#include "common/problem.hpp"
#include "steps/08_tensor_cores/mma.cuh"

namespace fs::tc {

// Where load_tile checks that a row lies before n_rows: once per tile, in a branch of its own for
// the tile that runs past n_rows (the forward's K and V); or at every chunk (the backward's tiles).
enum class RowChecks { kPerTile, kPerChunk };

// The columns of a head that a kernel moves: its tiles' D, or with FlashFeatures (kAnyHeadDim) the
// run's d ≤ D. A head dimension the kernels are not compiled at runs in the next one's kernels
// (tc_compiled_head_dim, launchers.cuh): their tiles hold the d columns and zeros past them, which
// add nothing to a product over d (S = QKᵀ, dP = dO Vᵀ) and make zero columns of the products that
// give d columns (O, dQ, dK, dV), which are not stored (store_pair). NoFeatures' kernels, the
// plain problem's, take their D alone, and cols is then the constant D.
template <int D, class Features>
__device__ __forceinline__ int head_cols(const Shape& s) {
  if constexpr (Features::kAnyHeadDim)
    return s.d;
  else
    return D;
}

// load_tile of rows that have only `cols` < Tile::kCols columns, the tile's columns past them zero.
// With cols a multiple of 8, each row's chunks are whole or absent (cp.async, zero-filled past
// cols): rows start on 16-byte boundaries there, as for every head dimension the kernels are
// compiled at (row_aligned_strides). Otherwise rows start anywhere (an odd d packs them 2 bytes
// apart), and each element is loaded alone and the chunk stored to shared memory whole: no
// cp.async, so such a tile arrives before the kernel moves on, and the pipeline's second stage
// overlaps nothing — the price of a head dimension no kernel is compiled near.
// Columns [c0, c0 + 8) of a row into a 16-byte chunk of shared memory, those at or past cols zero:
// one element at a time (load_tile_cols' path for rows that may start anywhere). Not inlined: a
// slow path, kept out of the kernels' unrolled code.
template <typename E>
__device__ FS_NOINLINE void load_chunk_elements(E* dst, const E* row, int c0, int cols) {
  const auto* src = reinterpret_cast<const std::uint16_t*>(row);
  std::uint16_t e[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) e[j] = c0 + j < cols ? src[c0 + j] : std::uint16_t(0);
  uint4 chunk;
  chunk.x = e[0] | std::uint32_t(e[1]) << 16;
  chunk.y = e[2] | std::uint32_t(e[3]) << 16;
  chunk.z = e[4] | std::uint32_t(e[5]) << 16;
  chunk.w = e[6] | std::uint32_t(e[7]) << 16;
  *reinterpret_cast<uint4*>(dst) = chunk;
}

template <typename Tile, int kThreads, typename E>
__device__ __forceinline__ void load_tile_cols(E* s, const E* g, std::int64_t ld, int row0, int n_rows, int cols) {
  constexpr int kChunks = Tile::kChunks, kPerThread = Tile::kElems / 8 / kThreads;
  const bool whole_chunks = cols % 8 == 0;
#pragma unroll 1
  for (int k = 0; k < kPerThread; ++k) {
    const int i = threadIdx.x + k * kThreads, r = i / kChunks, c = i % kChunks;
    const bool row_valid = row0 + r < n_rows;
    const E* row = g + (row_valid ? row0 + r : 0) * ld;
    if (whole_chunks) {
      const bool valid = row_valid && 8 * c < cols;
      cp_async_16(s + Tile::offset(r, c), valid ? row + 8 * c : g, valid);
    } else {
      load_chunk_elements(s + Tile::offset(r, c), row, 8 * c, row_valid ? cols : 0);
    }
  }
}

// Two elements of a row at dst, its columns col and col + 1 (col even), rounded to E: one 4-byte
// store, or with cols < D (head_cols) those of the two that lie before cols — the pair whole when
// cols is a multiple of 8 (rows 16-byte aligned), else each element alone (rows may start anywhere).
// dst is the kernels' own address expression, so that with cols = D nothing changes but the call.
template <int D, typename E>
__device__ __forceinline__ void store_pair(E* dst, int col, float x0, float x1, int cols) {
  if (cols == D || (cols % 8 == 0 && col < cols)) {
    *reinterpret_cast<std::uint32_t*>(dst) = Element<E>::pack(x0, x1);
  } else if (cols % 8 != 0) {
    const std::uint32_t v = Element<E>::pack(x0, x1);
    auto* e = reinterpret_cast<std::uint16_t*>(dst);
    if (col < cols) e[0] = static_cast<std::uint16_t>(v & 0xffffu);
    if (col + 1 < cols) e[1] = static_cast<std::uint16_t>(v >> 16);
  }
}

// Rows [row0, row0 + kRows) of an (n_rows, kCols) matrix whose rows are `ld` elements apart
// (kCols when the tensor is (B, H, N, d) contiguous; FwdParams::q_strides and the others say) into
// a tile, 16 bytes per cp.async, all threads; rows at or past n_rows are zero-filled. Commit and
// wait before use. Thread i copies chunks i, i + kThreads, ... of the tile: chunk i is chunk
// i mod kChunks of the tile's row i / kChunks.
//
// kPerTile (the forward's K and V): when kThreads is a multiple of a row's chunks, a thread's
// chunks are chunk c = i mod kChunks of rows r0 = i / kChunks, r0 + kStep, ..., so its addresses,
// global and (the swizzle repeating every 8 rows) shared, are one of each plus constants; and only
// a tile that runs past n_rows (the last, when N is not a multiple of the tile) checks rows, in a
// branch of its own. Written as one index i per chunk with a check in every copy, the same loop
// made ptxas keep a pointer per chunk across the key loop and spill them (the lesson, "Against
// PyTorch on the same GPU", has the profiles). kPerChunk (the backward's tiles): that form, which
// measured faster there (docs/benchmarks/experiments/h200_tc_bwd_candidates.csv).
//
// cols: the columns the rows have, Tile::kCols, or fewer (head_cols: a head dimension the kernels are
// not compiled at runs in the next one's tiles, load_tile_cols). Left at its default, or the
// constant kCols that head_cols returns without FlashFeatures, the check folds away.
template <typename Tile, int kThreads, RowChecks kChecks = RowChecks::kPerTile, typename E>
__device__ __forceinline__ void load_tile(E* s, const E* g, std::int64_t ld, int row0, int n_rows,
                                          int cols = Tile::kCols) {
  constexpr int kChunks = Tile::kChunks, kPerThread = Tile::kElems / 8 / kThreads;
  static_assert(Tile::kElems / 8 % kThreads == 0, "every thread copies the same number of chunks");
  if (cols < Tile::kCols) {
    load_tile_cols<Tile, kThreads>(s, g, ld, row0, n_rows, cols);
  } else if constexpr (kChecks == RowChecks::kPerChunk || kThreads % kChunks != 0) {
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int i = threadIdx.x + k * kThreads, r = i / kChunks, c = i % kChunks;
      const bool valid = row0 + r < n_rows;
      cp_async_16(s + Tile::offset(r, c), g + (valid ? row0 + r : 0) * ld + 8 * c, valid);
    }
  } else {
    constexpr int kStep = kThreads / kChunks;  // rows between a thread's chunks
    const int r0 = threadIdx.x / kChunks, c = threadIdx.x % kChunks;
    const E* src = g + (row0 + r0) * ld + 8 * c;
    const std::int64_t step = kStep * ld;  // between a thread's chunks
    if (row0 + Tile::kRows <= n_rows) {
#pragma unroll
      for (int k = 0; k < kPerThread; ++k) cp_async_16(s + Tile::offset(r0 + k * kStep, c), src + k * step, true);
    } else {
#pragma unroll
      for (int k = 0; k < kPerThread; ++k) {
        const bool valid = row0 + r0 + k * kStep < n_rows;  // else zero-filled, from an address that is valid
        cp_async_16(s + Tile::offset(r0 + k * kStep, c), valid ? src + k * step : g, valid);
      }
    }
  }
}

// The fragment reads of step 08, each in two parts: the lane's address in a tile, made once
// (mma.cuh, LaneAddress), and the loads, each that address with a constant. The HMMA instruction
// takes an A operand as 4 consecutive registers and a B operand as 2, so the four matrices of an
// ldmatrix.x4 must come in the order the products use them: A fragments and V's B fragments
// (transposed) in one lane pattern, K's B fragments in another.
//
// A fragments, and V's: lane l points at row l mod 16, chunk c0 + l / 16 of a 16-row block, the
// matrices (rows 0-7, chunk 0), (rows 8-15, 0), (rows 0-7, 1), (rows 8-15, 1).
template <typename Tile, bool kH = true>
__device__ __forceinline__ LaneAddress<Tile, kH> a_address(const void* tile, int c0 = 0) {
  const int lane = threadIdx.x % 32;
  return LaneAddress<Tile, kH>(tile, lane & 15, c0 + (lane >> 4));
}
// K's B fragments: lane l points at row l mod 8 + 8·(l / 16), chunk (l / 8) mod 2, the matrices
// (keys 0-7, chunk 0), (keys 0-7, 1), (keys 8-15, 0), (keys 8-15, 1).
template <typename Tile, bool kH = true>
__device__ __forceinline__ LaneAddress<Tile, kH> b_k_address(const void* tile, int c0 = 0) {
  const int lane = threadIdx.x % 32;
  return LaneAddress<Tile, kH>(tile, (lane & 7) + ((lane >> 4) << 3), c0 + ((lane >> 3) & 1));
}

// The A fragment of rows [R, R + 16) × columns [16kk, 16kk + 16) of a tile (Q, or P); at: a_address.
template <typename Tile, bool kH>
__device__ __forceinline__ void load_a(std::uint32_t (&a)[4], const LaneAddress<Tile, kH>& at, int R, int kk) {
  ldmatrix_x4(a, at.at(R, 2 * kk));
}

// B fragments of two 8-key tiles of K, keys [R, R + 16), × columns [16kk, 16kk + 16): b[0], b[1]
// for keys R.., b[2], b[3] for keys R + 8...; at: b_k_address.
template <typename Tile, bool kH>
__device__ __forceinline__ void load_b_k(std::uint32_t (&b)[4], const LaneAddress<Tile, kH>& at, int R, int kk) {
  ldmatrix_x4(b, at.at(R, 2 * kk));
}

// B fragments of V for keys [16kk, 16kk + 16) × two 8-column tiles of d from c (a multiple of 16
// past a_address' c0): b[0], b[1] for the first 8 columns, b[2], b[3] for the next 8, transposed
// on the way in.
template <typename Tile, bool kH>
__device__ __forceinline__ void load_b_v(std::uint32_t (&b)[4], const LaneAddress<Tile, kH>& at, int kk, int c) {
  ldmatrix_x4_trans(b, at.at(16 * kk, c / 8));
}

// The A fragments of the MT row tiles at k-step kk: kept in registers (kInRegs: Q where registers
// allow, P̃ packed from S's accumulators) or loaded from shared memory (load_a, row tile m at row 16m).
template <bool kInRegs, int MT, int RM, int RK, typename At>
__device__ __forceinline__ void a_fragments(std::uint32_t (&a)[MT][4], const std::uint32_t (&regs)[RM][RK][4],
                                            const At& at, int kk) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    if constexpr (kInRegs) {
#pragma unroll
      for (int i = 0; i < 4; ++i) a[mt][i] = regs[mt][kk][i];
    } else {
      load_a(a[mt], at, 16 * mt, kk);
    }
  }
}

// acc[m][c], acc[m][c + 1] += a[m] · the 16 × 16 block of B at columns 8c, for every row tile m and
// every even chunk c < NC: B's fragments for two 8-column chunks from one ldmatrix.x4 (load_b(b, c):
// load_b_k or load_b_v), each used by the MT row tiles. The products S = QKᵀ, O += P̃V, dQ += dS K.
template <typename E, int MT, int NC, typename LoadB>
__device__ __forceinline__ void mma_row_tiles(float (&acc)[MT][NC][4], const std::uint32_t (&a)[MT][4], LoadB&& load_b) {
#pragma unroll
  for (int c = 0; c < NC; c += 2) {
    std::uint32_t b[4];
    load_b(b, c);
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      Element<E>::mma(acc[m][c], a[m], b[0], b[1]);
      Element<E>::mma(acc[m][c + 1], a[m], b[2], b[3]);
    }
  }
}

// Two products over the same k-step kk, interleaved: acc0 += A0 · B0 and acc1 += A1 · B1, A0's and
// A1's fragments of the MT row tiles from shared memory (load_a), B0's and B1's for two chunks
// loaded together (load_b(b0, b1, c)). The backward's S and dP (the dQ kernel), and dV and dK.
template <typename E, int MT, int NC, typename A0, typename A1, typename LoadB>
__device__ __forceinline__ void mma_row_tiles_2(float (&acc0)[MT][NC][4], const A0& a0_at, float (&acc1)[MT][NC][4],
                                                const A1& a1_at, int kk, LoadB&& load_b) {
  std::uint32_t a0[MT][4], a1[MT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    load_a(a0[mt], a0_at, 16 * mt, kk);
    load_a(a1[mt], a1_at, 16 * mt, kk);
  }
#pragma unroll
  for (int c = 0; c < NC; c += 2) {
    std::uint32_t b0[4], b1[4];
    load_b(b0, b1, c);
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      Element<E>::mma(acc0[m][c], a0[m], b0[0], b0[1]);
      Element<E>::mma(acc0[m][c + 1], a0[m], b0[2], b0[3]);
      Element<E>::mma(acc1[m][c], a1[m], b1[0], b1[1]);
      Element<E>::mma(acc1[m][c + 1], a1[m], b1[2], b1[3]);
    }
  }
}

// The top of tile t of a walk streamed through two stages: every kernel of step 08 (the 16-bit
// forward's one-stage rungs aside) keeps tile t in stage t mod 2 while tile t + 1 arrives in the
// other. load(stage, start) issues a tile's copies, and commits them.
template <typename Walk, typename Load>
__device__ __forceinline__ void tc_next_stage(int t, int n_tiles, const Walk& walk, Load&& load) {
  cp_async_wait<0>();  // tile t (issued one tile ago, with what was committed before it) has landed for this thread,
  __syncthreads();     // for every warp; and every warp is done with tile t − 1's stage (and what went with it)
  if (t + 1 < n_tiles) load((t & 1) ^ 1, walk.start(t + 1));  // so tile t + 1 can go there, in flight while t is computed
}

}  // namespace fs::tc
