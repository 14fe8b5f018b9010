// Do the MUFU unit and the tensor cores work at the same time? (bin/hopper_overlap_probe)
//
// Step 09's fp8 kernel takes about as long as its tensor cores' work and its exponentials' would
// one after the other. This program asks the hardware directly, without the kernel's
// dependencies: one CTA per SM, two warpgroups, four kinds of run.
//   tensor  warpgroup 0 issues `rounds` times the four wgmma.m64n224k32 (e4m3) of one S tile of
//           the fp8 kernel, from shared memory; warpgroup 1 waits at the end.
//   mufu    warpgroup 1 computes `rounds` times 112 exponentials a thread (one S tile's softmax:
//           an FMA and an ex2.approx each, in 16 independent chains); warpgroup 0 waits.
//   split   both at once: warpgroup 0's products while warpgroup 1 computes its exponentials.
//   inline  each warpgroup does half the rounds of both: it issues a round's products, computes a
//           round's exponentials while they run, then waits for them (the intra-warpgroup
//           overlap, with no data passing between the two).
// If the two units overlap, split takes about max(tensor, mufu); if they take turns, about
// tensor + mufu. The times are CUDA-event medians; the SM clock is cycles (clock64, the longer of
// CTA 0's two warpgroups) over time.
#include <CLI/CLI.hpp>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "common/check.hpp"
#include "steps/08_tensor_cores/tc_softmax.cuh"
#include "steps/09_hopper/hopper.cuh"

namespace fs::hopper {
namespace {

using E = __nv_fp8_e4m3;
constexpr int kKeys = 224, kD = 128;                  // the fp8 kernel's S tile: 64 rows × 224 keys, k = 128
constexpr int kABytes = 64 * kD, kBBytes = kKeys * kD;  // e4m3: a byte an element
constexpr int kSmem = 1024 + kABytes + kBBytes;
constexpr int kChains = 16, kExpPerRound = 112;         // 112 = 64 × 224 / 128: a tile's per thread

enum Mode : int { kTensor = 0, kMufu, kSplit, kInline, kModes };
const char* const kModeNames[kModes] = {"tensor", "mufu", "split", "inline"};

struct Out {
  float sink;                 // keeps the results alive
  unsigned long long cycles;  // CTA 0: the longer of its two warpgroups' work, in clock64 cycles
};

// One round of products: S (64 × 224, float) += A (64 × 128) · Bᵀ (224 × 128), four k-steps of 32.
// Every round adds to the same accumulators (zeroed first): a round that overwrote them would make
// the one before it dead, and ptxas drops such products.
__device__ __forceinline__ void issue_products(float (&acc)[kKeys / 8][4], std::uint64_t a0, std::uint64_t b0) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kD / 32; ++kk) wgmma_ss<E, kKeys>(acc, desc_add(a0, 32 * kk), desc_add(b0, 32 * kk), 1);
  wgmma_commit();
}

// One round of exponentials: 112 a thread, each an FMA and an ex2 (the fp8 softmax's per element),
// in kChains chains that do not wait on each other; the values stay near 1.
__device__ __forceinline__ void exponentials(float (&v)[kChains]) {
#pragma unroll
  for (int i = 0; i < kExpPerRound / kChains; ++i)
#pragma unroll
    for (int j = 0; j < kChains; ++j) v[j] = tc::exp2_fast(fmaf(v[j], -0.5f, 0.25f));
}

// A kernel per mode: with both code paths in one, ptxas finds too few registers for the products
// in flight and serializes them (C7511).
template <int kMode>
__global__ void __launch_bounds__(256, 1) overlap_kernel(int rounds, Out* out) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* sA = reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(smem_raw) + 1023) & ~std::uintptr_t(1023));
  unsigned char* sB = sA + kABytes;
    // e4m3 0.5 everywhere (0x30): each round adds 128 · 0.25 = 32 to every element, whatever the swizzle.
  for (int i = threadIdx.x; i < (kABytes + kBBytes) / 4; i += blockDim.x) reinterpret_cast<std::uint32_t*>(sA)[i] = 0x30303030u;
  fence_async_shared();
  __syncthreads();
  long long t0;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(t0)::"memory");
  const int wg = threadIdx.x / 128;
  const std::uint64_t a0 = make_desc(sA, 16, 1024), b0 = make_desc(sB, 16, 1024);
  float acc[kKeys / 8][4];
#pragma unroll
  for (int i = 0; i < kKeys / 8; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[i][e] = 0.f;
  float v[kChains];
#pragma unroll
  for (int j = 0; j < kChains; ++j) v[j] = 0.001f * float(threadIdx.x % 32 + j);
  const bool products = (kMode == kTensor || kMode == kSplit) ? wg == 0 : kMode == kInline;
  const bool exps = (kMode == kMufu || kMode == kSplit) ? wg == 1 : kMode == kInline;
  if constexpr (kMode == kInline) {
    for (int r = 0; r < rounds / 2; ++r) {
      issue_products(acc, a0, b0);
      exponentials(v);
      wgmma_wait<0>();
      fence_operands(acc);
    }
  } else if (products) {
    // Rounds back to back on the same accumulators (a second group in flight behind the first
    // would need a second set: ptxas serializes otherwise), waited for every other round.
    for (int r = 0; r < rounds; r += 2) {
      issue_products(acc, a0, b0);
      issue_products(acc, a0, b0);
      wgmma_wait<0>();
      fence_operands(acc);
    }
  } else if (exps) {
    for (int r = 0; r < rounds; ++r) exponentials(v);
  }
  float sink = 0.f;
  if (products) sink += acc[0][0] + acc[kKeys / 8 - 1][3];
#pragma unroll
  for (int j = 0; j < kChains; ++j) sink += v[j];
  // The clock after the work: the read takes the results as an input, so that it cannot move
  // before them. Each warpgroup's first thread of CTA 0 offers its time; the longer stays.
  long long t1;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(t1) : "f"(sink) : "memory");
  if (blockIdx.x == 0 && threadIdx.x % 128 == 0) atomicMax(&out->cycles, static_cast<unsigned long long>(t1 - t0));
  if (sink == 12345.f) out->sink = sink;  // never true in practice; the compiler cannot know
}

void launch(int mode, int sms, int rounds, Out* out) {
  switch (mode) {
    case kTensor: overlap_kernel<kTensor><<<sms, 256, kSmem>>>(rounds, out); break;
    case kMufu: overlap_kernel<kMufu><<<sms, 256, kSmem>>>(rounds, out); break;
    case kSplit: overlap_kernel<kSplit><<<sms, 256, kSmem>>>(rounds, out); break;
    default: overlap_kernel<kInline><<<sms, 256, kSmem>>>(rounds, out); break;
  }
  FS_CUDA_CHECK(cudaGetLastError());
}

}  // namespace
}  // namespace fs::hopper

int run(int rounds, int reps, const char* argv0);

// The same options and errors as the project's other programs (CLI11): bad input is one line and
// exit code 2.
int main(int argc, char** argv) {
  int rounds = 4000, reps = 10;
  CLI::App app{"Times step 09's fp8 tile work split between the tensor cores (wgmma) and the MUFU unit (ex2): each\n"
               "alone, both at once in two warpgroups, and both in each warpgroup (overlap_probe.cu's header)."};
  app.add_option("--rounds", rounds, "S tiles' worth of each (rounded up to even)")->capture_default_str()->check(CLI::Range(1, 1000000));
  app.add_option("--reps", reps, "timed launches per run, median reported")->capture_default_str()->check(CLI::Range(1, 1000));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 2;
  }
  rounds += rounds % 2;  // inline does half the rounds of each in each warpgroup
  try {
    return run(rounds, reps, argv[0]);
  } catch (const std::exception& e) {  // no GPU, or a CUDA error: one line, not an abort
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 1;
  }
}

int run(int rounds, int reps, const char* argv0) {
  using namespace fs::hopper;
  cudaDeviceProp prop{};
  FS_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  if (prop.major != 9) {
    std::fprintf(stderr, "%s: needs a Hopper GPU (sm_90), found %s (sm_%d%d)\n", argv0, prop.name, prop.major, prop.minor);
    return 1;
  }
  FS_CUDA_CHECK(cudaFuncSetAttribute(overlap_kernel<kTensor>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  FS_CUDA_CHECK(cudaFuncSetAttribute(overlap_kernel<kMufu>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  FS_CUDA_CHECK(cudaFuncSetAttribute(overlap_kernel<kSplit>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  FS_CUDA_CHECK(cudaFuncSetAttribute(overlap_kernel<kInline>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  Out* out = nullptr;
  FS_CUDA_CHECK(cudaMalloc(&out, sizeof(Out)));
  cudaEvent_t start, stop;
  FS_CUDA_CHECK(cudaEventCreate(&start));
  FS_CUDA_CHECK(cudaEventCreate(&stop));
  std::printf("# %s, %d SMs: one CTA per SM, %d rounds (an S tile of the fp8 kernel each: 4 wgmma.m64n224k32 e4m3, or 112\n"
              "# FMA + ex2.approx a thread), median of %d launches\n",
              prop.name, prop.multiProcessorCount, rounds, reps);
  std::printf("mode,median_ms,sm_mhz,tensor_tflops\n");
  double ms_of[kModes] = {};
  for (int mode = 0; mode < kModes; ++mode) {
    launch(mode, prop.multiProcessorCount, rounds, out);  // warm-up
    std::vector<float> ms(reps);
    Out o{};
    for (int r = 0; r < reps; ++r) {
      FS_CUDA_CHECK(cudaMemset(out, 0, sizeof(Out)));
      FS_CUDA_CHECK(cudaEventRecord(start));
      launch(mode, prop.multiProcessorCount, rounds, out);
      FS_CUDA_CHECK(cudaEventRecord(stop));
      FS_CUDA_CHECK(cudaEventSynchronize(stop));
      FS_CUDA_CHECK(cudaEventElapsedTime(&ms[r], start, stop));
      FS_CUDA_CHECK(cudaMemcpy(&o, out, sizeof o, cudaMemcpyDeviceToHost));
    }
    std::sort(ms.begin(), ms.end());
    const double med = ms[reps / 2];
    ms_of[mode] = med;
    // The products' rate where a run has them: every round's 2 · 64 · 224 · 128 per SM.
    const double flops = (mode == kMufu ? 0.0 : 2.0 * 64 * kKeys * kD * rounds) * prop.multiProcessorCount;
    std::printf("%s,%.4f,%.0f,%.1f\n", kModeNames[mode], med, double(o.cycles) / (med * 1e3), flops / (med * 1e-3) / 1e12);
  }
  const double sum = ms_of[kTensor] + ms_of[kMufu], mx = std::max(ms_of[kTensor], ms_of[kMufu]);
  std::printf("# split: %.3f of tensor + mufu, %.3f of max(tensor, mufu); inline: %.3f of the sum, %.3f of the max\n",
              ms_of[kSplit] / sum, ms_of[kSplit] / mx, ms_of[kInline] / sum, ms_of[kInline] / mx);
  FS_CUDA_CHECK(cudaFree(out));
  return 0;
}
