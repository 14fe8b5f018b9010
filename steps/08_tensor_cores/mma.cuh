// The tensor-core building blocks of step 08, each a few lines of PTX with the plain loop it
// stands for: the mma.sync m16n8k16 instruction (and m16n8k8 for TF32, below), ldmatrix, and a
// swizzled shared-memory layout.
//
// The operands' layout in the lanes is written above Element, the instruction's wrapper.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

namespace fs::tc {

#ifdef FS_EMULATION
// The CPU emulation (common/emulator) of the warp-wide instructions below: each lane gathers the
// warp's operands (emu::warp_gather) and computes its own part of the result in the layouts the
// comment above gives, so that a wrong fragment index or a swizzle that sends two rows to one
// place fails on any machine. The products of 16-bit inputs are exact in fp32 and are summed in
// k order: the tensor cores' order and rounding of the sum are not modelled.
namespace emu_mma {
// The 16-bit element `i` (0 low, 1 high) of register r, as a float.
template <typename E>
float element(std::uint32_t r, int i) {
  const std::uint16_t h = static_cast<std::uint16_t>(i ? r >> 16 : r & 0xffffu);
  if constexpr (std::is_same_v<E, __half>) {
    __half_raw raw;
    raw.x = h;
    return __half2float(__half(raw));
  } else {
    const std::uint32_t bits = std::uint32_t(h) << 16;  // a bf16 is a float's upper half
    float x;
    std::memcpy(&x, &bits, sizeof x);
    return x;
  }
}
// Every lane's registers of an mma's A (4) and B (2), gathered from the warp.
struct Operands {
  std::uint32_t a[4], b[2];
};
inline void gather_operands(const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1, Operands (&all)[32]) {
  const Operands mine{{a[0], a[1], a[2], a[3]}, {b0, b1}};
  fs::emu::warp_gather(&mine, sizeof mine, all);
}
// d += A·B for this lane's fragment of D, from every lane's fragments of A and B.
template <typename E>
void mma(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
  Operands all[32];
  gather_operands(a, b0, b1, all);
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    for (int i = 0; i < 2; ++i) {
      A[g][2 * t + i] = element<E>(all[l].a[0], i);
      A[g + 8][2 * t + i] = element<E>(all[l].a[1], i);
      A[g][2 * t + 8 + i] = element<E>(all[l].a[2], i);
      A[g + 8][2 * t + 8 + i] = element<E>(all[l].a[3], i);
      B[2 * t + i][g] = element<E>(all[l].b[0], i);
      B[2 * t + 8 + i][g] = element<E>(all[l].b[1], i);
    }
  }
  const int lane = static_cast<int>(threadIdx.x % 32), g = lane / 4, t = lane % 4;
  for (int e = 0; e < 4; ++e) {
    const int row = g + 8 * (e / 2), col = 2 * t + e % 2;
    float sum = d[e];
    for (int k = 0; k < 16; ++k) sum += A[row][k] * B[k][col];
    d[e] = sum;
  }
}
// A TF32 operand register as the tensor cores read it: its upper 19 bits (sign, exponent, 10 bits
// of mantissa), the low 13 ignored.
inline float tf32_element(std::uint32_t r) {
  const std::uint32_t bits = r & 0xffffe000u;
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}
// d += A·B, m16n8k8 with TF32 inputs: A (16×8) a0 = A[g][t], a1 = A[g+8][t], a2 = A[g][t+4],
// a3 = A[g+8][t+4]; B (8×8) b0 = B[t][g], b1 = B[t+4][g]; D as for m16n8k16. The products of two
// TF32 values are exact (11 × 11 significant bits); they and the accumulator are summed exactly
// (in double) and the sum rounded toward zero, as the H200's tensor cores round it. Rounded to
// nearest here instead, 3xtf32's error at d = 64, N = 1025 was 6.7e-7 against the GPU's 3.1e-6
// (which failed the fp32 rule there); truncated, it is 2.9e-6.
// Truncation, unlike rounding to nearest, errs the same way every time, so its error grows
// with the number of products accumulated in one register (flash_tc_forward_f32.cuh, mma_3x).
inline void mma_tf32(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
  Operands all[32];
  gather_operands(a, b0, b1, all);
  float A[16][8], B[8][8];
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    A[g][t] = tf32_element(all[l].a[0]);
    A[g + 8][t] = tf32_element(all[l].a[1]);
    A[g][t + 4] = tf32_element(all[l].a[2]);
    A[g + 8][t + 4] = tf32_element(all[l].a[3]);
    B[t][g] = tf32_element(all[l].b[0]);
    B[t + 4][g] = tf32_element(all[l].b[1]);
  }
  const int lane = static_cast<int>(threadIdx.x % 32), g = lane / 4, t = lane % 4;
  for (int e = 0; e < 4; ++e) {
    const int row = g + 8 * (e / 2), col = 2 * t + e % 2;
    double sum = d[e];
    for (int k = 0; k < 8; ++k) sum += double(A[row][k]) * double(B[k][col]);
    float f = static_cast<float>(sum);
    if (std::fabs(double(f)) > std::fabs(sum)) f = std::nextafter(f, 0.f);  // toward zero
    d[e] = f;
  }
}
// A LaneAddress::at call outside the identity it relies on (below): a kernel bug.
[[noreturn]] inline void bad_address(int R, int C) {
  std::fprintf(stderr,
               "LaneAddress::at(R = %d, C = %d): R must be a multiple of 8, C's bits clear in the lane's chunk, "
               "the tile 128-byte aligned\n",
               R, C);
  std::abort();
}
// ldmatrix.x4 (.trans): register m of this lane from matrix m, whose rows lanes 8m .. 8m+7 point at.
inline void ldmatrix(std::uint32_t (&r)[4], const void* row, bool trans) {
  const std::uint16_t* mine = static_cast<const std::uint16_t*>(row);
  const std::uint16_t* rows[32];
  fs::emu::warp_gather(&mine, sizeof mine, rows);
  const int lane = static_cast<int>(threadIdx.x % 32), g = lane / 4, t = lane % 4;
  for (int m = 0; m < 4; ++m) {
    const std::uint16_t lo = trans ? rows[8 * m + 2 * t][g] : rows[8 * m + g][2 * t];
    const std::uint16_t hi = trans ? rows[8 * m + 2 * t + 1][g] : rows[8 * m + g][2 * t + 1];
    r[m] = lo | std::uint32_t(hi) << 16;
  }
}
}  // namespace emu_mma
#endif

// d += a·b by one mma.sync instruction `op` (its shape and types), D in the accumulator C: every
// product of step 08 has this operand list, A in 4 registers, B in 2, C and D 4 floats.
#define FS_TC_MMA_ASM(op)                                                                                  \
  asm volatile(op " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"                    \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                            \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))

// What differs between bf16 and fp16: the conversions (below) and the instruction's type suffix.
template <typename E>
struct ElementPair;
template <>
struct ElementPair<__nv_bfloat16> {
  using Pair = __nv_bfloat162;
  static __device__ __forceinline__ Pair of(float lo, float hi) { return __floats2bfloat162_rn(lo, hi); }
  static __device__ __forceinline__ float2 floats(Pair v) { return __bfloat1622float2(v); }
};
template <>
struct ElementPair<__half> {
  using Pair = __half2;
  static __device__ __forceinline__ Pair of(float lo, float hi) { return __floats2half2_rn(lo, hi); }
  static __device__ __forceinline__ float2 floats(Pair v) { return __half22float2(v); }
};

// mma.sync.m16n8k16 (bf16 or fp16 in, fp32 accumulate): one warp computes D = A·B + C for
// A (16×16), B (16×8), C and D (16×8). Every operand lives in the registers of the 32 lanes,
// spread in a fixed pattern. With g = lane / 4 (the "group", 0..7) and t = lane % 4:
//
//   A, 4 registers of 2 elements:  a0 = A[g][2t, 2t+1]     a1 = A[g+8][2t, 2t+1]
//                                  a2 = A[g][2t+8, 2t+9]   a3 = A[g+8][2t+8, 2t+9]
//   B, 2 registers of 2 elements:  b0 = B[2t, 2t+1][g]     b1 = B[2t+8, 2t+9][g]
//   C, D, 4 floats:                c0, c1 = C[g][2t, 2t+1]  c2, c3 = C[g+8][2t, 2t+1]
//
// The element with the smaller column (A) or row (B) sits in the low 16 bits of a register.
// Note that D's pattern, two consecutive columns of rows g and g+8, is A's pattern for one
// 8-column half: the accumulator of S = QKᵀ can be fed straight back as the A operand of
// P·V (FlashAttention-2 keeps P in registers this way).
//
// ldmatrix.x4: the warp loads four 8×8 matrices of 16-bit elements from shared memory; lanes
// 0-7 give the addresses of matrix 0's eight rows (16 bytes each), lanes 8-15 matrix 1's, and
// so on, and register i of every lane receives matrix i in the pattern above: lane l holds row
// l/4, columns 2(l%4) and 2(l%4)+1. With .trans it receives the transposed matrix instead,
// which is how a row-major V becomes the B operand of P·V.
//
// A 16-bit element type E (bf16 or fp16) on the tensor cores.
template <typename E>
struct Element {
  using Pair = typename ElementPair<E>::Pair;
  // Two floats rounded to one register: lo in the low half (the smaller column).
  static __device__ __forceinline__ std::uint32_t pack(float lo, float hi) {
    const Pair v = ElementPair<E>::of(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&v);
  }
  // The two elements of a register, as floats (exact).
  static __device__ __forceinline__ float2 unpack(std::uint32_t r) {
    return ElementPair<E>::floats(*reinterpret_cast<const Pair*>(&r));
  }
  // d += a · b on the tensor cores.
  static __device__ __forceinline__ void mma(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                             std::uint32_t b1) {
#ifndef FS_EMULATION
    if constexpr (std::is_same_v<E, __half>)
      FS_TC_MMA_ASM("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32");
    else
      FS_TC_MMA_ASM("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32");
#else
    emu_mma::mma<E>(d, a, b0, b1);
#endif
  }
};

// The A fragment of columns [16k, 16k + 16) from the accumulators of its two 8-column tiles, lo
// (columns 16k..) and hi (16k + 8..), rounded to E: D's pattern is A's (above), so no data moves.
// FlashAttention-2's "P stays in registers", and the backward's dS likewise.
template <typename E>
__device__ __forceinline__ void pack_a(std::uint32_t (&a)[4], const float (&lo)[4], const float (&hi)[4]) {
  a[0] = Element<E>::pack(lo[0], lo[1]);  // row g,   columns 2t, 2t + 1
  a[1] = Element<E>::pack(lo[2], lo[3]);  // row g + 8
  a[2] = Element<E>::pack(hi[0], hi[1]);  // row g,   columns 8 + 2t, 8 + 2t + 1
  a[3] = Element<E>::pack(hi[2], hi[3]);  // row g + 8
}

// fp32 on the tensor cores, as TF32 (sign, 8 exponent bits, 10 of mantissa: fp32's range, 11
// significant bits against fp32's 24). mma.sync.m16n8k8 with TF32 inputs and fp32 accumulate:
//
//   A, 4 registers of 1 element:  a0 = A[g][t]   a1 = A[g+8][t]   a2 = A[g][t+4]   a3 = A[g+8][t+4]
//   B, 2 registers of 1 element:  b0 = B[t][g]   b1 = B[t+4][g]
//   C, D: as m16n8k16's (above)
//
// One TF32 product keeps 11 bits of each operand: a relative error near 2^-11 where fp32 has
// 2^-24. 3×TF32 splits each operand x into a TF32 head and the TF32 of what is left,
//   x ≈ hi + lo,  hi = tf32(x),  lo = tf32(x − hi)   (x − hi is exact in fp32, |x − hi| ≤ 2^-11 |x|)
// and takes three products, a·b ≈ hi_a·hi_b + hi_a·lo_b + lo_a·hi_b, each exact in fp32: the term
// left out, lo_a·lo_b, and what lo loses to its own rounding are each at most 2^-22 of a·b, a few
// units of fp32's own rounding (2^-24). (Left unrounded, lo would be truncated by the tensor cores,
// which read a TF32 operand's top 19 bits: up to 2^-21, twice that.) The two small products go first into the accumulator, so
// that the large one does not swamp them before they add up.
struct Tf32 {
  // x rounded to TF32's 10 mantissa bits, to nearest (ties away from zero), low 13 bits clear.
  static __host__ __device__ __forceinline__ std::uint32_t round(float x) {
    std::uint32_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    return (bits + 0x1000u) & 0xffffe000u;
  }
  static __host__ __device__ __forceinline__ float as_float(std::uint32_t r) {
    float x;
    std::memcpy(&x, &r, sizeof x);
    return x;
  }
  // The head and the rest of x, both TF32. Where x is ±∞ the rest x − hi is NaN, 0x7fffffff on the
  // GPU, which round() turns into −0 (the add carries into the sign bit): the head alone carries
  // the infinity. Left unrounded, that NaN reached the products, and rows of −∞ scores came out NaN
  // on the H200 (docs/benchmarks/experiments/h200_tc_fp32_rawrest_failures.txt).
  static __host__ __device__ __forceinline__ void split(float x, std::uint32_t& hi, std::uint32_t& lo) {
    hi = round(x);
    lo = round(x - as_float(hi));
  }
  // d += a · b, one m16n8k8 product.
  static __device__ __forceinline__ void mma(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                             std::uint32_t b1) {
#ifndef FS_EMULATION
    FS_TC_MMA_ASM("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32");
#else
    emu_mma::mma_tf32(d, a, b0, b1);
#endif
  }
};

#undef FS_TC_MMA_ASM

// 2^x in one special-function instruction (MUFU.EX2; inputs below -126 give 0). exp2f without
// --use_fast_math compiles (sm_90, nvcc 13.0) to a compare and two predicated multiplies around
// it, which keep denormal results: the softmax needs none of them, P is rounded to 8 or 11 bits
// next.
#ifndef FS_EMULATION
__device__ __forceinline__ float exp2_fast(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ std::uint32_t smem_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// 4 bytes global → shared without passing through registers, zero-filled when !valid (the address
// must still be a valid one). Commit and wait as for 16-byte copies (common/cuda_utils.cuh).
__device__ __forceinline__ void cp_async_4(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_address(smem)), "l"(gmem),
               "r"(valid ? 4 : 0));
}

// Four 8×8 matrices; this lane gives the (shared-memory byte) address of one row of one of them
// (see above).
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(row));
}
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(row));
}
// 4 bytes to shared memory at a shared-memory byte address.
__device__ __forceinline__ void st_shared_u32(std::uint32_t addr, std::uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
#else  // the CPU emulation: exp2 flushed to zero below the normal range, as ex2.approx.ftz
inline float exp2_fast(float x) {
  const float y = std::exp2(x);
  return y < 1.17549435e-38f ? 0.f : y;
}
inline void cp_async_4(void* smem, const void* gmem, bool valid) {
  if (valid) std::memcpy(smem, gmem, 4);
  else std::memset(smem, 0, 4);
}
// A shared-memory address is the byte offset into the CTA's dynamic shared memory.
inline std::uint32_t smem_address(const void* p) {
  return static_cast<std::uint32_t>(static_cast<const unsigned char*>(p) - fs::emu::dynamic_smem());
}
inline void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t row) {
  emu_mma::ldmatrix(r, fs::emu::dynamic_smem() + row, false);
}
inline void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t row) {
  emu_mma::ldmatrix(r, fs::emu::dynamic_smem() + row, true);
}
inline void st_shared_u32(std::uint32_t addr, std::uint32_t v) { std::memcpy(fs::emu::dynamic_smem() + addr, &v, 4); }
#endif

// A tile of kRows rows × kCols 16-bit elements in shared memory, row-major, moved in 16-byte
// chunks of 8 elements. ldmatrix reads one chunk from each of 8 consecutive rows at the same
// column; in plain row-major order with rows of 128 bytes or a multiple, those 8 chunks all
// fall in the same 4 of shared memory's 32 banks (an 8-way conflict: the read takes 8 times
// as long). The XOR swizzle stores chunk c of row r at chunk c ^ (r mod 8) instead — a
// permutation within each row, so every chunk still has one place — and the 8 rows' chunks
// land in 8 different bank groups:
//
//   plain     offset(r, c) = r·kCols + 8c
//   swizzled  offset(r, c) = r·kCols + 8·(c ^ (r & 7))          rows of 8·k chunks (d = 64, 128, 256)
//             offset(r, c) = r·kCols + 8·(c ^ ((r >> 1) & 3))    rows of 4·k chunks (d = 32, 96):
//             two rows fill 128 bytes, and pairs of rows take the 4 patterns
template <int kRows_, int kCols_, bool kSwizzle_>
struct SmemTile {
  static constexpr int kCols = kCols_;
  static constexpr bool kSwizzle = kSwizzle_;
  static constexpr int kChunks = kCols / 8;  // 16-byte chunks per row
  static_assert(kCols % 8 == 0, "rows move in 16-byte chunks");
  static_assert(!kSwizzle || kChunks % 4 == 0, "the swizzle permutes groups of 4 or 8 chunks");
  static constexpr int kRows = kRows_;
  static constexpr int kElems = kRows * kCols;

  // Element offset of chunk c (columns 8c .. 8c+7) of row r.
  static __device__ __forceinline__ int offset(int r, int c) {
    if constexpr (!kSwizzle)
      return r * kCols + 8 * c;
    else if constexpr (kChunks % 8 == 0)
      return r * kCols + 8 * (c ^ (r & 7));
    else
      return r * kCols + 8 * ((c & ~3) | ((c & 3) ^ ((r >> 1) & 3)));
  }
};

// SmemTile's kSwizzle, named where a tile's layout is fixed: the backward's tiles are all swizzled.
inline constexpr bool kSwizzled = true;

// A lane's shared-memory address in a tile, computed once instead of at every load. In a warp's
// run of loads (ldmatrix; or stores of P and dS), a lane points at row rl + R and chunk cl + C of
// the tile, where rl, cl are its own (they depend on the lane, the warp and the operand) and R, C
// are the same for the whole warp and known at compile time once the loops over the fragments
// unroll, R a multiple of 8. Adding 8 to a row leaves its low three bits, all the swizzle reads,
// as they are; and with the chunk split as C = 8q + c (c = C mod 8), the swizzle's XOR acts on
// the low bits alone:
//
//   offset(rl + R, cl + C) = (offset(rl, cl) ⊕ 8c) + R·kCols + 64q      (c's bits clear in cl)
//
// (C = 4q + c and 32q for the 4-chunk swizzle). In bytes, and with the tile at a multiple of 128
// bytes, that is one XOR of the lane's address with a constant and a constant offset, which
// ldmatrix takes in its address ([reg + imm]): a load costs at most one integer instruction, and
// loads that differ only in R share it. Written as Tile::offset at every load, the loads of the
// forward at d = 128 cost about five integer instructions each (an XOR, a shift, two ORs and the
// address), recomputed on every key tile. kHoisted = false keeps that form, for a lane whose
// chunk cl has bits that C's share (apart() says when; the CPU emulation checks every call).
template <typename Tile, bool kHoisted = true>
class LaneAddress {
 public:
  static constexpr int kWrap = !Tile::kSwizzle ? 0 : Tile::kChunks % 8 == 0 ? 8 : 4;  // chunks the XOR stays within
  static constexpr int kBytes = 2;  // bf16, fp16

  // Whether loads at chunks C < n_c of a lane whose chunk cl carries a multiple of `step` (the
  // warp's columns, say) keep to the identity above: C mod kWrap's bits must be clear in cl.
  __host__ __device__ static constexpr bool apart(int step, int n_c) {
    return kWrap == 0 || step % kWrap == 0 || ((step & (step - 1)) == 0 && n_c <= step);
  }

  // This lane's row rl, chunk cl of the tile at `tile` (128-byte aligned, in shared memory), and
  // element e of the chunk (0 for ldmatrix, whose rows are whole chunks).
  __device__ __forceinline__ LaneAddress(const void* tile, int rl, int cl, int e = 0)
      : a_(smem_address(tile) + kBytes * ((kHoisted ? Tile::offset(rl, cl) : 0) + e)), rl_(rl), cl_(cl), e_(e) {}
  // The same lane's address in a tile `bytes` further on (a stage; a multiple of 128).
  __device__ __forceinline__ LaneAddress operator+(int bytes) const {
    LaneAddress r = *this;
    r.a_ += bytes;
    return r;
  }
  // Byte address of chunk cl + C of row rl + R (element e of it). C odd: also right where C's bits
  // are clear in cl (the emulation checks).
  __device__ __forceinline__ std::uint32_t at(int R, int C) const {
    if constexpr (!kHoisted) {  // where the identity does not hold (apart, above): the offset at every load
      return a_ + kBytes * Tile::offset(rl_ + R, cl_ + C);
    } else {
      std::uint32_t a;
      if constexpr (kWrap == 0) {
        a = a_ + kBytes * (R * Tile::kCols + 8 * C);
      } else {
        const int c = C % kWrap;
        a = (a_ ^ (kBytes * 8 * c)) + kBytes * (R * Tile::kCols + 8 * (C - c));
      }
#ifdef FS_EMULATION  // the identity above, checked at every load the emulated kernels make
      const std::uint32_t tile = a_ - kBytes * (Tile::offset(rl_, cl_) + e_);
      if (R % 8 != 0 || C < 0 || tile % 128 != 0 || a != tile + kBytes * (Tile::offset(rl_ + R, cl_ + C) + e_))
        emu_mma::bad_address(R, C);
#endif
      return a;
    }
  }

 private:
  std::uint32_t a_;
  int rl_, cl_, e_;  // for !kHoisted and the emulation's check; dead otherwise
};

}  // namespace fs::tc
