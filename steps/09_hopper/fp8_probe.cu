// How many bits the FP8 tensor core keeps when it adds (hopper::probe_fp8_mma, hopper.hpp).
//
// One warpgroup issues one wgmma.m64n64k32 e4m3 × e4m3 + f32 with B all ones, so that row m of D
// is C_m + Σ_k A_mk: each of the 64 rows is an experiment of its own.
//   rows 0 .. 31, "sum":          C = 0, A_m0 = 2⁸, A_m1 = 2^(8−j) for j = m (0 for j > 17, past
//                                 e4m3's smallest subnormal, 2⁻⁹): exact, 2⁸ + 2^(8−j), while the
//                                 small product is within the bits kept below the large one.
//   rows 32 .. 63, "accumulator": C = 2^j (j = m − 32), A_m0 = 1: exact, 2^j + 1, while the
//                                 product is within the bits kept below the accumulator.
// In fp32 all of these are exact to j = 23: a plain FMA chain would keep them all.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "common/check.hpp"
#include "common/e4m3.hpp"
#include "steps/09_hopper/hopper.cuh"
#include "steps/09_hopper/hopper.hpp"

namespace fs::hopper {
namespace {

constexpr int kRows = 64, kK = 32;

__global__ void __launch_bounds__(128) fp8_mma_probe_kernel(const std::uint8_t* a, const float* c, float* out) {
  // B: 64 rows (n) of 128 bytes, all e4m3 1.0 (0x38); with every byte alike, its layout (the
  // 128-byte swizzle the descriptor names) cannot matter.
  __shared__ alignas(1024) std::uint8_t b[kRows * 128];
  for (int i = threadIdx.x; i < kRows * 128 / 4; i += blockDim.x) reinterpret_cast<std::uint32_t*>(b)[i] = 0x38383838u;
  fence_async_shared();  // the generic proxy's writes, then the tensor core's reads
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int r0 = 16 * warp + g, r1 = r0 + 8;
  // A in registers (hopper.cuh): row g's k = 4t .. 4t + 3, row g + 8's, then both at k + 16.
  auto word = [&](int row, int k0) { return *reinterpret_cast<const std::uint32_t*>(a + row * kK + k0); };
  const std::uint32_t ra[4] = {word(r0, 4 * t), word(r1, 4 * t), word(r0, 16 + 4 * t), word(r1, 16 + 4 * t)};
  float d[8][4];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    d[i][0] = d[i][1] = c[r0];
    d[i][2] = d[i][3] = c[r1];
  }
  wgmma_fence();
  wgmma_rs<__nv_fp8_e4m3, 64>(d, ra, make_desc(b, 16, 1024), 1);
  wgmma_commit();
  wgmma_wait<0>();
  fence_operands(d);
  if (t == 0) {  // column 0 of the thread's two rows
    out[r0] = d[0][0];
    out[r1] = d[0][2];
  }
}

}  // namespace

Fp8MmaProbe probe_fp8_mma() {
  std::vector<std::uint8_t> a(kRows * kK, 0);
  std::vector<float> c(kRows, 0.f), want(kRows);
  for (int j = 0; j < 32; ++j) {
    a[j * kK + 0] = to_e4m3(256.f);
    if (j <= 17) a[j * kK + 1] = to_e4m3(std::ldexp(1.f, 8 - j));
    want[j] = j <= 17 ? 256.f + std::ldexp(1.f, 8 - j) : 256.f;
    const int m = 32 + j;
    c[m] = std::ldexp(1.f, j);
    a[m * kK + 0] = to_e4m3(1.f);
    want[m] = j <= 23 ? std::ldexp(1.f, j) + 1.f : std::ldexp(1.f, j);  // fp32's own rounding past 2²³
  }
  std::uint8_t* da = nullptr;
  float *dc = nullptr, *dout = nullptr;
  FS_CUDA_CHECK(cudaMalloc(&da, a.size()));
  FS_CUDA_CHECK(cudaMalloc(&dc, sizeof(float) * kRows));
  FS_CUDA_CHECK(cudaMalloc(&dout, sizeof(float) * kRows));
  FS_CUDA_CHECK(cudaMemcpy(da, a.data(), a.size(), cudaMemcpyHostToDevice));
  FS_CUDA_CHECK(cudaMemcpy(dc, c.data(), sizeof(float) * kRows, cudaMemcpyHostToDevice));
  fp8_mma_probe_kernel<<<1, 128>>>(da, dc, dout);
  FS_CUDA_CHECK(cudaGetLastError());
  std::vector<float> got(kRows);
  FS_CUDA_CHECK(cudaMemcpy(got.data(), dout, sizeof(float) * kRows, cudaMemcpyDeviceToHost));
  FS_CUDA_CHECK(cudaFree(da));
  FS_CUDA_CHECK(cudaFree(dc));
  FS_CUDA_CHECK(cudaFree(dout));

  Fp8MmaProbe p;
  p.sum.assign(got.begin(), got.begin() + 32);
  p.acc.assign(got.begin() + 32, got.end());
  // The bits kept: the largest j with every experiment up to it exact (j = 0 always is).
  auto kept = [&](int first, int last) {
    int j = 0;
    while (j + 1 <= last && got[first + j + 1] == want[first + j + 1]) ++j;
    return j;
  };
  p.sum_bits = kept(0, 17);
  p.acc_bits = kept(32, 23);
  return p;
}

}  // namespace fs::hopper
