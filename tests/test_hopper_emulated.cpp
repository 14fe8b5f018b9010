// Step 09 on the CPU: the Hopper forward (hopper_forward_kernel) and backward
// (hopper_backward_kernel), their own source compiled by the host compiler and run by the emulator
// (common/emulator), with the mbarriers, TMA copies and reduce-adds and wgmma of
// steps/09_hopper/hopper_emu.hpp. The forward: each variant's configuration against the fp64
// reference under the 16-bit rule (as tests/test_hopper_gpu.cpp holds the GPU's outputs), and the
// ladder's rungs against fa3 bit for bit, on shapes whose N is not a multiple of the 128-row tiles,
// on a grid of one CTA per work tile and on a persistent grid of two or three CTAs (the work-tile
// loop, and the ring's stages and phases running on across work tiles). The backward: both
// configurations (fa3's reduce-adds, deterministic's ordered ones) at d = 64 and 128 against the
// fp64 reference at the tiles' edges, and deterministic's dK, dV against fa3's bit for bit.
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
#include "steps/09_hopper/flash_hopper_backward.cuh"
#include "tests/flash_checks.hpp"
#include "tests/host_convert.hpp"

namespace {

using fs::DType;
namespace hp = fs::hopper;

struct Outputs {
  std::vector<float> o, lse;
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

using fs::testing::to_16bit;
using fs::testing::to_float;

// Configuration Cfg's forward on host memory, O and LSE poisoned with NaN first, as
// launch_hopper_forward would launch it but with the emulation's tensor maps, on `ctas` CTAs
// (0: one per work tile).
template <typename Cfg>
Outputs run(const fs::Shape& s, const fs::HostProblem& p, bool causal, int ctas) {
  using E = typename Cfg::E;
  const auto q = to_16bit<E>(p.q), k = to_16bit<E>(p.k), v = to_16bit<E>(p.v);
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
  return {to_float(o), lse};
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

// ---- the backward ----

namespace {

struct Grads {
  std::vector<float> dq, dk, dv;
};

// Configuration Cfg's backward (HopperBwdConfig) on host memory, given the forward's O and LSE:
// launch_hopper_backward's three kernels (step 08's preprocess, hopper_backward_kernel, step 08's
// convert) with the emulation's tensor maps, the gradients and the workspace poisoned with NaN
// first (the counters zeroed, as launch_hopper_backward does).
template <typename Cfg>
Grads run_backward(const fs::Shape& s, const fs::HostProblem& p, bool causal, const Outputs& fwd) {
  using E = typename Cfg::E;
  namespace tc = fs::tc;
  const auto q = to_16bit<E>(p.q), k = to_16bit<E>(p.k), v = to_16bit<E>(p.v), dout = to_16bit<E>(p.dout);
  std::vector<E> o = to_16bit<E>(fwd.o);  // exact: the forward's O, in E
  std::vector<float> lse = fwd.lse;
  std::vector<E> dq(s.elems(), E(NAN)), dk(s.elems(), E(NAN)), dv(s.elems(), E(NAN));
  const std::size_t order_bytes = hp::hopper_order_bytes(s, Cfg::kBlockM);
  std::vector<float> workspace((tc::tc_bwd_workspace_bytes(s) + order_bytes) / sizeof(float), NAN);
  float* delta = workspace.data();
  float* dq_acc = delta + tc::tc_delta_bytes(s) / sizeof(float);
  int* order = reinterpret_cast<int*>(dq_acc + s.elems());
  if (Cfg::kDeterministic) std::memset(order, 0, order_bytes);

  fs::FwdParams fp = fs::testing::forward_params(s, q.data(), k.data(), v.data(), o.data(), lse.data(), causal);
  fp.dtype = std::is_same_v<E, __nv_bfloat16> ? DType::bf16 : DType::fp16;
  fs::BwdParams bp = fs::testing::backward_params(fp, dout.data(), dq.data(), dk.data(), dv.data());
  bp.dtype = fp.dtype;
  bp.workspace = workspace.data();
  auto map = [&](const void* t, const fs::Strides& st, int box_rows) {
    return hp::emu_hopper::make_tensor_map(t, bp.dtype, st, s.d, s.N, s.H, s.B, box_rows);
  };
  const hp::BwdMaps maps{map(bp.q, bp.q_strides, Cfg::kBlockM), map(bp.k, bp.k_strides, Cfg::kBlockN),
                         map(bp.v, bp.v_strides, Cfg::kBlockN), map(bp.dout, bp.dout_strides, Cfg::kBlockM),
                         hp::emu_hopper::make_dq_acc_map(dq_acc, s)};
  const auto pre_grid = static_cast<unsigned>((s.rows() + tc::kTcPreprocessRows - 1) / tc::kTcPreprocessRows);
  fs::emu::launch(tc::tc_bwd_preprocess_kernel<E, true, false>, dim3(pre_grid), dim3(tc::kTcPreprocessWarps * 32), 0,
                  bp, delta, dq_acc, fs::trace::Slices{});
  const dim3 grid(static_cast<unsigned>((s.N + Cfg::kBlockN - 1) / Cfg::kBlockN), static_cast<unsigned>(s.heads()));
  const float* cdelta = delta;
  if (causal)
    fs::emu::launch(hp::hopper_backward_kernel<Cfg, true, false>, grid, dim3(Cfg::kThreads), Cfg::kSmemBytes, maps, bp,
                    cdelta, order, fs::trace::Slices{});
  else
    fs::emu::launch(hp::hopper_backward_kernel<Cfg, false, false>, grid, dim3(Cfg::kThreads), Cfg::kSmemBytes, maps,
                    bp, cdelta, order, fs::trace::Slices{});
  const auto cvt_grid = static_cast<unsigned>((s.elems() / 8 + 255) / 256);
  fs::emu::launch(tc::tc_dq_convert_kernel<E, false>, dim3(cvt_grid), dim3(256), 0, bp,
                  static_cast<const float*>(dq_acc), fs::trace::Slices{});
  return {to_float(dq), to_float(dk), to_float(dv)};
}

// fa3's forward (O, LSE), then both backward configurations: each against the fp64 reference, and
// deterministic's gradients against fa3's bit for bit. dK and dV sum in registers in one order in
// both, as on the GPU; dQ's reduce-adds land in the key tiles' order in both here, where the CTAs
// run one at a time in blockIdx order (on the GPU, fa3's land in whatever order the CTAs reach them).
template <typename E, int D>
void check_backward(DType dtype, const fs::Shape& s, bool causal) {
  const fs::HostProblem p = fs::random_problem(s, 919 + s.N + s.d + s.B * s.H + causal, true, dtype);
  DYNAMIC_SECTION("backward " << fs::dtype_name(dtype) << " d=" << s.d << " N=" << s.N << " B=" << s.B
                              << " H=" << s.H << (causal ? " causal" : "")) {
    const Outputs fwd = run<typename hp::Fa3<E, D>::Cfg>(s, p, causal, 0);
    const Grads fa3 = run_backward<hp::HopperBwdConfig<E, D, false>>(s, p, causal, fwd);
    const Grads det = run_backward<hp::HopperBwdConfig<E, D, true>>(s, p, causal, fwd);
    const fs::AttnOptions attn{fs::default_scale(s.d), causal, {}, nullptr, dtype};
    for (const Grads* g : {&fa3, &det}) {
      const auto report = fs::verify_backward(s, attn, p.q.data(), p.k.data(), p.v.data(), p.dout.data(), g->dq.data(),
                                              g->dk.data(), g->dv.data(), 7);
      INFO((g == &fa3 ? "fa3" : "deterministic") << "\n" << report.summary());
      CHECK(report.coverage.rfind("all ", 0) == 0);
      CHECK(report.pass());
    }
    CHECK(same_bits(det.dk, fa3.dk));
    CHECK(same_bits(det.dv, fa3.dv));
    CHECK(same_bits(det.dq, fa3.dq));
  }
}

}  // namespace

// N = 1 (one key, one query), 65 (a consumer warpgroup's keys past the first; at d = 128 a second
// 64-query tile one row long), 130 (a second key tile of 2 keys, which the causal walk starts at
// query tile 1 or 2) and 200 (72 keys; a query tile of 8 or 72 rows). Two heads, or two batches of
// one (the tensor maps' fourth coordinate).
TEST_CASE("step 09 on the CPU: the backward matches the reference, and deterministic's gradients are fa3's",
          "[emulated][hopper][backward]") {
  using E = __nv_bfloat16;
  for (bool causal : {false, true})
    for (int N : {1, 65, 130, 200}) {
      const fs::Shape s = N % 2 == 0 ? fs::Shape{1, 2, N, 0} : fs::Shape{2, 1, N, 0};
      check_backward<E, 64>(DType::bf16, {s.B, s.H, N, 64}, causal);
      check_backward<E, 128>(DType::bf16, {s.B, s.H, N, 128}, causal);
    }
  check_backward<__half, 128>(DType::fp16, fs::Shape{1, 2, 200, 128}, true);
  check_backward<__half, 64>(DType::fp16, fs::Shape{2, 1, 130, 64}, false);
}

// The deterministic backward's wait on a counter that no CTA before it raised is a deadlock,
// reported (hopper_emu.hpp, ld_acquire), not a hang.
namespace {
int counter = 0;
void stuck_counter_kernel() {
  if (threadIdx.x == 0)
    while (hp::ld_acquire(&counter) != 1) {
    }
}
}  // namespace

TEST_CASE("step 09 on the CPU: a spin on a counter that nothing raises is reported as a deadlock",
          "[emulated][hopper][backward]") {
  CHECK_THROWS_WITH(fs::emu::launch(stuck_counter_kernel, dim3(1), dim3(32), 0), Catch::Contains("deadlock"));
}
