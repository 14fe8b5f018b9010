// Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011) and
// the dropout mask built on it. One implementation, compiled for the host and the device, so
// that the fp64 reference applies exactly the mask the kernels apply (docs/notation.md,
// Algorithm 2 line 14, Algorithm 4 line 14: the mask Z regenerated, never stored).
//
// A counter-based generator is a pure function of (counter, key): the element (i, j) of head bh
// gets its random bits from its own position, so the forward and the backward regenerate the
// same mask independently, in any order, in any thread, and nothing of size N×N is stored.
//
// Counter layout: one Philox call gives four 32-bit words, used for a 2 × 2 block of scores,
//   counter = (i / 2, j / 2, bh low 32 bits, bh high 32 bits),   key = (seed low, seed high),
//   word    = 2·(i mod 2) + (j mod 2).
// 2 × 2 and not 1 × 4 because the forward's threads own consecutive query rows and the
// backward's own consecutive keys: both use all four words of every call they make.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FS_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define FS_HOST_DEVICE inline
#endif

namespace fs {

struct Philox4x32 {
  std::uint32_t v[4];
};

namespace philox_detail {
constexpr std::uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
constexpr std::uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // key schedule (golden ratio, √3 − 1)

FS_HOST_DEVICE void mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t& hi, std::uint32_t& lo) {
#if defined(__CUDA_ARCH__)
  hi = __umulhi(a, b);
  lo = a * b;
#else
  const std::uint64_t p = std::uint64_t(a) * b;
  hi = static_cast<std::uint32_t>(p >> 32);
  lo = static_cast<std::uint32_t>(p);
#endif
}
}  // namespace philox_detail

// Ten rounds of Philox-4x32 on `ctr` under key (k0, k1).
FS_HOST_DEVICE Philox4x32 philox4x32_10(Philox4x32 ctr, std::uint32_t k0, std::uint32_t k1) {
  using namespace philox_detail;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {  // the key is bumped before every round but the first
      k0 += kW0;
      k1 += kW1;
    }
    std::uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kM0, ctr.v[0], hi0, lo0);
    mulhilo(kM1, ctr.v[2], hi1, lo1);
    ctr = {{hi1 ^ ctr.v[1] ^ k0, lo1, hi0 ^ ctr.v[3] ^ k1, lo0}};
  }
  return ctr;
}

// Dropout with probability p: an element is kept when its 32-bit word is at least
// dropout_threshold(p), i.e. with probability 1 − threshold/2³² ≈ 1 − p. Integer compares on
// both sides, so the CPU and the GPU agree bit for bit. Kept elements are scaled by 1/(1 − p).
FS_HOST_DEVICE std::uint32_t dropout_threshold(float p) {
  if (!(p > 0.f)) return 0u;
  const double t = static_cast<double>(p) * 4294967296.0;
  return t >= 4294967295.0 ? 4294967295u : static_cast<std::uint32_t>(t);
}

// The four words of the 2 × 2 block holding score (i, j) of head bh.
FS_HOST_DEVICE Philox4x32 dropout_bits(std::uint64_t seed, std::uint64_t bh, std::uint32_t i, std::uint32_t j) {
  return philox4x32_10({{i >> 1, j >> 1, static_cast<std::uint32_t>(bh), static_cast<std::uint32_t>(bh >> 32)}},
                       static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
}

// Whether score (i, j) of head bh survives dropout.
FS_HOST_DEVICE bool dropout_keep(std::uint64_t seed, std::uint32_t threshold, std::uint64_t bh, std::uint32_t i,
                                 std::uint32_t j) {
  return dropout_bits(seed, bh, i, j).v[2 * (i & 1) + (j & 1)] >= threshold;
}

}  // namespace fs
