// Step 07's kernels on the CPU: their own source, compiled by the host compiler and run by the
// emulator (common/emulator: every CUDA thread a fiber, every barrier honoured), in the order
// schedule.cuh launches them on the GPU — with a host sort where the GPU runs CUB's. The outputs
// are held to what tests/test_smyrf_gpu.cpp holds the GPU's to: the clusters a sort of the fp64
// hashes, O, LSE, dQ, dK, dV the fp64 reference's of those clusters under the fp32 rule.
//
// This is no substitute for the GPU test (emulator.hpp says what the emulation cannot see); it
// runs on every machine, so that an index, a tile bound or a mask that is wrong fails here first.
#include "common/emulator/emulator.hpp"  // first: it defines threadIdx, __syncthreads, ... for the kernels

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "common/harness.hpp"
#include "common/smyrf.hpp"
#include "common/verify.hpp"
#include "steps/07_smyrf/schedule.cuh"
#include "tests/smyrf_checks.hpp"

namespace {

// The forward and the backward as smyrf.cu runs them, on host memory.
template <int D>
fs::testing::SmyrfOutputs run(const fs::Shape& s, const fs::HostProblem& p, const fs::SmyrfParams& c) {
  const std::size_t n = s.elems(), rows = s.rows();
  fs::testing::SmyrfOutputs out;
  out.o.assign(n, NAN);  // poisoned, as DeviceRun does: an output no thread writes fails the check
  out.lse.assign(rows, NAN);
  fs::FwdParams fp;
  fp.q = p.q.data();
  fp.k = p.k.data();
  fp.v = p.v.data();
  fp.o = out.o.data();
  fp.lse = out.lse.data();
  fp.shape = s;
  fp.scale = fs::default_scale(s.d);
  fp.smyrf = c;
  const std::size_t items = std::size_t(2) * s.heads() * c.hashes * s.N;
  std::vector<unsigned long long> norms(2 * s.heads(), 0);
  std::vector<float> keys(items);
  std::vector<std::int32_t> orders(items);
  fs::launch_hashes<D>(fp, norms.data(), keys.data(), orders.data());
  for (std::size_t at = 0; at < items; at += std::size_t(s.N)) {  // CUB's stable sort of each segment
    for (int i = 0; i < s.N; ++i) REQUIRE(orders[at + i] == i);
    std::stable_sort(orders.begin() + std::ptrdiff_t(at), orders.begin() + std::ptrdiff_t(at + s.N),
                     [&](std::int32_t a, std::int32_t b) { return keys[at + a] < keys[at + b]; });
  }
  fs::launch_forward_rounds<D>(fp, orders.data());

  out.dq.assign(n, NAN);
  out.dk.assign(n, 0.f);  // smyrf_backward's memsets
  out.dv.assign(n, 0.f);
  std::vector<float> delta(rows, NAN);
  fs::BwdParams bp;
  bp.q = p.q.data();
  bp.k = p.k.data();
  bp.v = p.v.data();
  bp.o = out.o.data();
  bp.lse = out.lse.data();
  bp.dout = p.dout.data();
  bp.dq = out.dq.data();
  bp.dk = out.dk.data();
  bp.dv = out.dv.data();
  bp.shape = s;
  bp.scale = fp.scale;
  bp.smyrf = c;
  fs::launch_backward_rounds<D>(bp, delta.data(), orders.data());

  out.clusters = fs::SmyrfClusters::sized(s, c);
  std::copy(orders.begin(), orders.begin() + std::ptrdiff_t(items / 2), out.clusters.q_order.begin());
  std::copy(orders.begin() + std::ptrdiff_t(items / 2), orders.end(), out.clusters.k_order.begin());
  return out;
}

fs::testing::SmyrfOutputs run_any(const fs::Shape& s, const fs::HostProblem& p, const fs::SmyrfParams& c) {
  return fs::dispatch_head_dim(s.d, [&](auto D) { return run<D>(s, p, c); });
}

}  // namespace

TEST_CASE("emulated SMYRF kernels: the clusters are a sort of the fp64 hashes, and O, LSE, dQ, dK, dV match the "
          "fp64 reference of those clusters",
          "[smyrf][emulated]") {
  const int N = GENERATE(1, 17, 100);
  const int d = GENERATE(16, 32, 64, 128);
  using fs::testing::clustering;
  for (const fs::SmyrfParams& c : {clustering(1, 32, 32), clustering(3, 24, 40), clustering(2, 100, 70),
                                   clustering(2, 16, 16), clustering(1, 70, 20)}) {
    const fs::Shape s{2, 2, N, d};
    DYNAMIC_SECTION("N=" << N << " d=" << d << " smyrf " << fs::smyrf_spec(c)) {
      const fs::HostProblem p = fs::random_problem(s, 31ull * N + d + 7ull * c.hashes, true);
      fs::testing::require_smyrf_reference(s, p, c, run_any(s, p, c));
    }
  }
}

TEST_CASE("the emulator honours __syncthreads and warp shuffles, and reports a barrier some threads never reach",
          "[emulated]") {
  // Thread t writes t to shared memory, waits, reads its neighbour's; then a warp sum by shuffles.
  std::vector<int> out(64, -1);
  auto kernel = +[](int* o) {
    int* s = fs::dynamic_smem<int>();
    s[threadIdx.x] = int(threadIdx.x);
    __syncthreads();
    int v = s[(threadIdx.x + 1) % 64];
    for (int m = 16; m > 0; m /= 2) v += __shfl_xor_sync(0xffffffffu, v, m);
    o[threadIdx.x] = v;
  };
  fs::emu::launch(kernel, dim3(1), dim3(64), 64 * sizeof(int), out.data());
  for (int t = 0; t < 64; ++t) {
    int want = 0;  // the sum over the warp of (lane + 1) mod 64, lanes of t's warp
    for (int l = t / 32 * 32; l < t / 32 * 32 + 32; ++l) want += (l + 1) % 64;
    REQUIRE(out[t] == want);
  }
  auto diverges = +[](int* o) {
    if (threadIdx.x < 8) __syncwarp();  // half of a warp at a warp barrier, the rest at the CTA's
    else __syncthreads();
    o[0] = 1;
  };
  REQUIRE_THROWS_WITH(fs::emu::launch(diverges, dim3(1), dim3(32), 0, out.data()), Catch::Contains("deadlock"));
}
