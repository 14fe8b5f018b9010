// Step 09's fp8 variant, before its forward kernel runs: Q, K and V quantized to e4m3.
//
// e4m3 (FP8: a sign, 4 exponent bits, 3 mantissa bits) holds ±448 at most, and 8 values per
// binade: a relative rounding error of up to 2⁻⁴, where bf16's is 2⁻⁸. So that a tensor's largest
// values use that range, each block of rows of a head is divided by its own scale, its largest
// |x| / 448, and the scale is kept beside it: the kernel multiplies S by the two scales of its Q
// and K blocks, and O by V's (per-block scaling, as in FlashAttention-3's FP8). The blocks are
// the forward's tiles — 128 rows of Q, 224 of K and V — so that each tile has one scale.
// common/e4m3.hpp defines the rounding and the scales, for this kernel and for the check's
// reference alike.
//
// V is written transposed. wgmma reads 8-bit operands only K-major (k along the 128-byte rows),
// and in O += P̃V the k index is the key: Vᵀ has d rows of keys. Within each group of 32 keys the
// keys are also written in the order in which a thread holds P̃ (fp8_slot), so that S's
// accumulators, rounded to e4m3, are P̃V's A operand where they lie, as in the 16-bit kernels: no
// byte moves between threads.
//
// The workspace (StepInfo::fwd_workspace_bytes, fp8_layout): Q and K as (B, H, N, d) bytes, Vᵀ as
// (B, H, d, N rounded up to 224) bytes with zeros past N, then the scales, float32: Q's (B·H,
// blocks_q), K's and V's (B·H, blocks_kv) each.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "common/e4m3.hpp"
#include "common/problem.hpp"

namespace fs::hopper {

constexpr int kFp8BlockQ = kE4m3BlockQ, kFp8BlockKV = kE4m3BlockKV;  // rows of a head per scale (common/e4m3.hpp)

// The slot of key j (0 .. 31) of a group of 32 in Vᵀ's rows. wgmma's 8-bit A operand gives the
// thread of lane 4g + t the k slots 4t .. 4t + 3 (and 16 + 4t .. 16 + 4t + 3) of its rows, while
// S's accumulators give it keys 8c + 2t, 8c + 2t + 1 of each 8-key chunk c. So slot 4t + i holds
// key 2t + i (i = 0, 1) and 8 + 2t + (i − 2) (i = 2, 3), and the same 16 keys on: the key with
// r = j mod 16 = 8·j1 + 2t + j0 goes to slot 16·(j / 16) + 4t + 2·j1 + j0.
__host__ __device__ constexpr int fp8_slot(int j) {
  const int r = j % 16;
  return 16 * (j / 16) + 4 * ((r % 8) / 2) + 2 * (r / 8) + r % 2;
}

struct Fp8Layout {
  int blocks_q = 0, blocks_kv = 0;  // scale blocks per head: ⌈N / 128⌉, ⌈N / 224⌉
  std::int64_t n_pad = 0;           // Vᵀ's row: N rounded up to 224 keys
  std::size_t q = 0, k = 0, vt = 0, scales = 0, bytes = 0;  // offsets in the workspace; its size
  // Where each tensor's scales start, in floats from `scales`.
  __host__ __device__ std::int64_t scale_offset(int which, std::int64_t heads) const {
    return which == 0 ? 0 : heads * (blocks_q + std::int64_t(which - 1) * blocks_kv);
  }
};
inline Fp8Layout fp8_layout(const Shape& s) {
  auto up = [](std::size_t x) { return (x + 255) & ~std::size_t(255); };
  Fp8Layout l;
  l.blocks_q = (s.N + kFp8BlockQ - 1) / kFp8BlockQ;
  l.blocks_kv = (s.N + kFp8BlockKV - 1) / kFp8BlockKV;
  l.n_pad = std::int64_t(l.blocks_kv) * kFp8BlockKV;
  const std::size_t heads = std::size_t(s.B) * s.H, qk = heads * s.N * s.d;
  l.q = 0;
  l.k = up(qk);
  l.vt = l.k + up(qk);
  l.scales = l.vt + up(heads * s.d * std::size_t(l.n_pad));
  l.bytes = l.scales + heads * (l.blocks_q + 2 * std::size_t(l.blocks_kv)) * sizeof(float);
  return l;
}

// One CTA per block (blockIdx.x) of one head (y) of Q, K or V (z = 0, 1, 2): the block's largest
// |x|, its scale, then its bytes. Q's blocks are 128 rows, K's and V's 224, so some CTAs have no
// block (Q has more). d = 128 (the fp8 forward's). The block is read once: each thread loads its
// chunks of 8 elements (16 bytes in, 8 out: rows start on 16-byte boundaries, as the forward
// requires of every tensor) into registers, all of them before it uses any, and rounds them from
// there once the block's scale is known. Dynamic shared memory (kQuantizeSmem bytes, as the CPU
// emulation takes it): V's block, transposed, in rows of kQuantizeRow bytes (224 keys and room to
// swizzle), then the warps' maxima. A warp writes Vᵀ's bytes for 8 keys × 4 chunks of 8 columns:
// 32 rows of Vᵀ, 4 per chunk; the 16-byte groups of row c are swizzled (within each 128 bytes,
// group x is stored at x xor (c / 8) mod 8) so that the 4 chunks' rows, 8 apart, fall in
// different banks.
constexpr int kQuantizeThreads = 256, kQuantizeRow = 256;
static_assert(kFp8BlockKV % 32 == 0 && kFp8BlockKV <= kQuantizeRow && kFp8BlockQ <= kQuantizeRow,
              "Vᵀ's block: whole groups of 32 keys (fp8_slot), in a row of shared memory");
static_assert(kFp8BlockQ <= kFp8BlockKV, "a thread holds at most a K or V block's share of chunks");
constexpr std::size_t kQuantizeSmem = 128 * kQuantizeRow + sizeof(float) * (kQuantizeThreads / 32);
inline dim3 fp8_quantize_grid(const Fp8Layout& l, int heads) {
  return dim3(unsigned(std::max(l.blocks_q, l.blocks_kv)), unsigned(heads), 3);
}
template <typename E>
__global__ void __launch_bounds__(kQuantizeThreads) quantize_fp8_kernel(const FwdParams p, unsigned char* ws,
                                                                        Fp8Layout l) {
  constexpr int D = 128, kThreads = kQuantizeThreads, kChunks = D / 8;  // 8-element chunks per row
  constexpr int kHeld = (kFp8BlockKV * kChunks + kThreads - 1) / kThreads;  // chunks per thread, at most
  constexpr int kKeyGroups = kFp8BlockKV / 8;                                 // V's, of 8 keys
  extern __shared__ unsigned char smem_raw[];
  auto vt = reinterpret_cast<std::uint8_t(*)[kQuantizeRow]>(smem_raw);  // [column of d][slot]
  float* warp_max = reinterpret_cast<float*>(smem_raw + D * kQuantizeRow);
  const Shape& s = p.shape;
  const int blk = blockIdx.x, bh = blockIdx.y, which = blockIdx.z, N = s.N;
  const int R = which == 0 ? kFp8BlockQ : kFp8BlockKV;  // the block's rows
  if (blk >= (which == 0 ? l.blocks_q : l.blocks_kv)) return;
  const Strides& st = which == 0 ? p.q_strides : which == 1 ? p.k_strides : p.v_strides;
  const E* src = as<E>(which == 0 ? p.q : which == 1 ? p.k : p.v) + st.of_head(bh, s.H);
  const int row0 = blk * R, rows = min(R, N - row0);
  // The chunk of index i = threadIdx.x + kThreads·h (h < kHeld): its row and its first column / 8.
  // Q, K: chunk i of the block in row-major order. V: keys 8 (group mod kKeyGroups) + lane / 4,
  // chunks 4 (group / kKeyGroups) + lane mod 4, with lane = i mod 32, group = i / 32: the order in
  // which a warp writes Vᵀ. Either way each chunk of the block is one thread's, once.
  auto place = [&](int i, int& r, int& ch) {
    if (which < 2) {
      r = i / kChunks, ch = i % kChunks;
    } else {
      const int lane = i % 32, group = i / 32;
      r = 8 * (group % kKeyGroups) + lane / 4, ch = 4 * (group / kKeyGroups) + lane % 4;
    }
  };
  auto floats = [](uint4 u, float (&x)[8]) {
    const E* e = reinterpret_cast<const E*>(&u);
#pragma unroll
    for (int k = 0; k < 8; ++k) x[k] = static_cast<float>(e[k]);
  };

  uint4 held[kHeld];  // zeros for chunks past the block or past N (Vᵀ's padding)
  float amax = 0.f;
#pragma unroll
  for (int h = 0; h < kHeld; ++h) {
    const int i = threadIdx.x + kThreads * h;
    int r, ch;
    place(i, r, ch);
    held[h] = make_uint4(0u, 0u, 0u, 0u);
    if (i < R * kChunks && r < rows)
      held[h] = *reinterpret_cast<const uint4*>(src + std::int64_t(row0 + r) * st.row + 8 * ch);
  }
#pragma unroll
  for (int h = 0; h < kHeld; ++h) {
    float x[8];
    floats(held[h], x);
#pragma unroll
    for (int k = 0; k < 8; ++k) amax = fmaxf(amax, fabsf(x[k]));
  }
#pragma unroll
  for (int x = 16; x >= 1; x /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, x));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = amax;
  __syncthreads();
  amax = 0.f;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) amax = fmaxf(amax, warp_max[w]);
  const float inv = e4m3_inverse(amax);
  float* scales = reinterpret_cast<float*>(ws + l.scales) + l.scale_offset(which, std::int64_t(s.B) * s.H) +
                  std::int64_t(bh) * (which == 0 ? l.blocks_q : l.blocks_kv);
  // V's block of zeros gets scale 0, not e4m3_scale's 1 (its values are 0 whatever the scale): an
  // arbitrary scale, larger than the other blocks', would become the head's largest V scale, which
  // the lazy softmax measures P̃ against. Q's and K's keep 1 (a 0 would make −∞ · 0 of masked keys).
  if (threadIdx.x == 0) scales[blk] = which == 2 && !(amax > 0.f) ? 0.f : e4m3_scale(amax);

  if (which < 2) {  // Q, K: (B, H, N, d), rows past N not written (TMA reads them as zeros)
    std::uint8_t* out = ws + (which == 0 ? l.q : l.k) + (std::size_t(bh) * N + row0) * D;
#pragma unroll
    for (int h = 0; h < kHeld; ++h) {
      const int i = threadIdx.x + kThreads * h;
      if (i >= rows * kChunks) break;
      float x[8];
      floats(held[h], x);
      std::uint8_t b[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) b[k] = to_e4m3(x[k] * inv);
      *reinterpret_cast<uint2*>(out + 8 * i) = *reinterpret_cast<const uint2*>(b);
    }
    return;
  }
  // Vᵀ: row c of head bh holds column c of V, key 32a + j in slot 32a + fp8_slot(j); zeros past N.
  auto swizzled = [](int c, int slot) { return (slot & ~127) | (slot & 15) | (((slot >> 4) ^ (c >> 3)) & 7) << 4; };
#pragma unroll
  for (int h = 0; h < kHeld; ++h) {
    const int i = threadIdx.x + kThreads * h;
    if (i >= kFp8BlockKV * kChunks) break;
    int r, ch;
    place(i, r, ch);
    const int c = 8 * ch, slot = 32 * (r / 32) + fp8_slot(r % 32);
    float x[8];
    floats(held[h], x);
#pragma unroll
    for (int k = 0; k < 8; ++k) vt[c + k][swizzled(c + k, slot)] = to_e4m3(x[k] * inv);
  }
  __syncthreads();
  std::uint8_t* out = ws + l.vt + std::size_t(bh) * D * l.n_pad + row0;
  for (int i = threadIdx.x; i < D * (kFp8BlockKV / 16); i += kThreads) {  // 16 bytes at a time
    const int c = i / (kFp8BlockKV / 16), q = 16 * (i % (kFp8BlockKV / 16));
    *reinterpret_cast<uint4*>(out + c * l.n_pad + q) = *reinterpret_cast<const uint4*>(&vt[c][swizzled(c, q)]);
  }
}

}  // namespace fs::hopper
