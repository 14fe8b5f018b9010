// Step 09 on the CPU: the Hopper forward (hopper_forward_kernel), its own source compiled by the
// host compiler and run by the emulator (common/emulator), with the mbarriers, TMA and wgmma of
// steps/09_hopper/hopper_emu.hpp. Each variant's configuration against the fp64 reference under
// the 16-bit rule (as tests/test_hopper_gpu.cpp holds the GPU's outputs), and the ladder's rungs
// against fa3 bit for bit, on shapes whose N is not a multiple of the 128-row tiles, on a grid of
// one CTA per work tile and on a persistent grid of two or three CTAs (the work-tile loop, and the
// ring's stages and phases running on across work tiles).
//
// No substitute for test_hopper_gpu: the emulation sums each wgmma's products in its own order,
// completes every copy and product when it is issued, and sees nothing of timing, the async
// proxy's ordering or races (emulator.hpp, hopper_emu.hpp). What it does see, on any machine: a
// descriptor, swizzle or fragment index, a ring's stage or phase, a barrier's count, a tail or a
// mask that is wrong — before a kernel change reaches an H200.
#include "common/emulator/emulator.hpp"  // first: it defines threadIdx, __syncthreads, ... for the kernels

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "common/harness.hpp"
#include "common/reference.hpp"
#include "common/verify.hpp"
#include "steps/09_hopper/configs.cuh"
#include "tests/flash_checks.hpp"

namespace {

using fs::DType;
namespace hp = fs::hopper;

struct Outputs {
  std::vector<float> o, lse;
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Configuration Cfg's forward on host memory, O and LSE poisoned with NaN first, as
// launch_hopper_forward would launch it but with the emulation's tensor maps, on `ctas` CTAs
// (0: one per work tile).
template <typename Cfg>
Outputs run(const fs::Shape& s, const fs::HostProblem& p, bool causal, int ctas) {
  using E = typename Cfg::E;
  auto to_16bit = [](const std::vector<float>& x) {
    std::vector<E> out(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) out[i] = E(x[i]);  // exact: the inputs are the dtype's values
    return out;
  };
  const auto q = to_16bit(p.q), k = to_16bit(p.k), v = to_16bit(p.v);
  std::vector<E> o(s.elems(), E(NAN));
  std::vector<float> lse(s.rows(), NAN);
  fs::FwdParams fp = fs::testing::forward_params(s, q.data(), k.data(), v.data(), o.data(), lse.data(), causal);
  fp.dtype = std::is_same_v<E, __nv_bfloat16> ? DType::bf16 : DType::fp16;
  auto map = [&](const void* t, const fs::Strides& st, int box_rows) {
    return hp::emu_hopper::make_tensor_map(t, fp.dtype, st, s.d, s.N, s.H, s.B, box_rows);
  };
  const hp::TmaMaps maps{map(fp.q, fp.q_strides, Cfg::kBlockM), map(fp.k, fp.k_strides, Cfg::kBlockN),
                         map(fp.v, fp.v_strides, Cfg::kBlockN), map(fp.o, fp.o_strides, 64)};
  const int work = (s.N + Cfg::kBlockM - 1) / Cfg::kBlockM * s.heads();
  const dim3 grid(static_cast<unsigned>(ctas > 0 ? std::min(ctas, work) : work));
  if (causal)
    fs::emu::launch(hp::hopper_forward_kernel<Cfg, true, false>, grid, dim3(Cfg::kThreads), Cfg::kSmemBytes, maps, fp,
                    fs::trace::Slices{});
  else
    fs::emu::launch(hp::hopper_forward_kernel<Cfg, false, false>, grid, dim3(Cfg::kThreads), Cfg::kSmemBytes, maps,
                    fp, fs::trace::Slices{});
  Outputs out{std::vector<float>(o.size()), lse};
  for (std::size_t i = 0; i < o.size(); ++i) out.o[i] = static_cast<float>(o[i]);
  return out;
}

void require_reference(const fs::Shape& s, const fs::HostProblem& p, bool causal, DType dtype, const Outputs& got) {
  const fs::AttnOptions attn{fs::default_scale(s.d), causal, {}, nullptr, dtype};
  fs::testing::require_reference(s, attn, p, got.o.data(), got.lse.data());
}

// fa3 against the reference on both grids (one CTA per work tile, and `ctas` persistent ones),
// which must agree bit for bit; then each rung of Rungs against fa3's bits.
template <typename Fa3, typename... Rungs>
void check(DType dtype, const fs::Shape& s, bool causal, int ctas) {
  const fs::HostProblem p = fs::random_problem(s, 909 + s.N + s.d + s.B * s.H, false, dtype);
  DYNAMIC_SECTION(fs::dtype_name(dtype) << " d=" << s.d << " N=" << s.N << " B=" << s.B << " H=" << s.H
                                        << (causal ? " causal" : "")) {
    const Outputs want = run<Fa3>(s, p, causal, 0);
    require_reference(s, p, causal, dtype, want);
    const Outputs persistent = run<Fa3>(s, p, causal, ctas);
    CHECK(same_bits(persistent.o, want.o));
    CHECK(same_bits(persistent.lse, want.lse));
    const Outputs rungs[] = {run<Rungs>(s, p, causal, ctas)...};
    for (const Outputs& got : rungs) {
      CHECK(same_bits(got.o, want.o));
      CHECK(same_bits(got.lse, want.lse));
    }
  }
}

}  // namespace

// The ladder at d = 128 (where it is compiled): fa3 (2 stages, persistent, ping-pong), ws (no
// overlap: one product at a time), ws_overlap, ws_pingpong. N = 1 (one row, one key), 97 (one
// short tile), 200 and 300 (tails of 72 and 44 rows and keys).
TEST_CASE("step 09 on the CPU: the ladder at d = 128 matches the reference and fa3's bits", "[emulated][hopper]") {
  using E = __nv_bfloat16;
  for (bool causal : {false, true})
    for (int N : {1, 97, 200, 300})
      check<hp::Fa3<E, 128>::Cfg, hp::Ws<E, 128>, hp::WsOverlap<E, 128>, hp::WsPingPong<E, 128>>(
          DType::bf16, fs::Shape{1, 2, N, 128}, causal, 2);
}

// d = 64: fa3's 4 stages (the ring wraps within a work tile at N = 300), ws's 2, O through TMA
// stores of one box; three heads over two batches on three CTAs.
TEST_CASE("step 09 on the CPU: d = 64 matches the reference and fa3's bits", "[emulated][hopper]") {
  using E = __nv_bfloat16;
  for (bool causal : {false, true})
    for (int N : {1, 97, 300})
      check<hp::Fa3<E, 64>::Cfg, hp::Ws<E, 64>>(DType::bf16, fs::Shape{1, 3, N, 64}, causal, 3);
  check<hp::Fa3<E, 64>::Cfg, hp::Ws<E, 64>>(DType::bf16, fs::Shape{2, 1, 200, 64}, true, 3);
}

// d = 256: 64-key tiles, O stored by the threads (no room for a TMA store's tile); and fp16.
TEST_CASE("step 09 on the CPU: d = 256, and fp16", "[emulated][hopper]") {
  for (bool causal : {false, true}) {
    check<hp::Fa3<__nv_bfloat16, 256>::Cfg>(DType::bf16, fs::Shape{1, 2, 200, 256}, causal, 2);
    check<hp::Fa3<__half, 128>::Cfg>(DType::fp16, fs::Shape{1, 2, 300, 128}, causal, 2);
  }
  check<hp::Fa3<__half, 64>::Cfg>(DType::fp16, fs::Shape{1, 2, 97, 64}, true, 2);
}

// The emulator's waits: a phase that can never complete (two arrivals expected, one made) is a
// deadlock, reported, not a hang; and a named barrier short of its count likewise.
namespace {
void stuck_mbarrier_kernel() {
  auto* bar = reinterpret_cast<std::uint64_t*>(fs::emu::dynamic_smem());
  if (threadIdx.x == 0) hp::mbar_init(bar, 2);
  __syncthreads();
  if (threadIdx.x == 0) hp::mbar_arrive(bar);
  hp::mbar_wait(bar, 0);
}
void stuck_named_barrier_kernel() {
  if (threadIdx.x < 64) hp::named_sync(1, 128);
}
}  // namespace

TEST_CASE("step 09 on the CPU: a wait that can never end is reported as a deadlock", "[emulated][hopper]") {
  CHECK_THROWS_WITH(fs::emu::launch(stuck_mbarrier_kernel, dim3(1), dim3(64), 64), Catch::Contains("deadlock"));
  CHECK_THROWS_WITH(fs::emu::launch(stuck_named_barrier_kernel, dim3(1), dim3(128), 0), Catch::Contains("deadlock"));
}
