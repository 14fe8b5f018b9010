// Step 09 on the CPU: the Hopper forwards (hopper_forward_kernel, and fp8's
// hopper_fp8_forward_kernel) and backward (hopper_backward_kernel), their own source compiled by
// the host compiler and run by the emulator
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
#include <functional>
#include <stdexcept>
#include <vector>

#include "common/harness.hpp"
#include "common/io_model.hpp"
#include "common/reference.hpp"
#include "common/verify.hpp"
#include "steps/09_hopper/backward_configs.cuh"
#include "steps/09_hopper/configs.cuh"
#include "steps/09_hopper/flash_hopper_fp8.cuh"
#include "steps/09_hopper/rung_wgmma.cuh"
#include "tests/flash_checks.hpp"
#include "tests/fp8_problems.hpp"
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

using fs::testing::gather_rows;
using fs::testing::spread_rows;
using fs::testing::to_16bit;
using fs::testing::to_float;

// Configuration Cfg's forward on host memory, O and LSE poisoned with NaN first, as
// launch_hopper_forward would launch it but with the emulation's tensor maps, on `ctas` CTAs
// (0: one per work tile). With `slices`, its traced instantiation records into them. gap: every
// tensor's rows d + gap elements apart, the gaps NaN and checked to stay NaN in O (spread_rows).
template <typename Cfg>
Outputs run(const fs::Shape& s, const fs::HostProblem& p, bool causal, int ctas,
            const fs::trace::Slices* slices = nullptr, int gap = 0) {
  using E = typename Cfg::E;
  using T = hp::ForwardTraits<Cfg>;
  const int ld = s.d + gap;
  const auto q = spread_rows(to_16bit<E>(p.q), s.d, ld), k = spread_rows(to_16bit<E>(p.k), s.d, ld),
             v = spread_rows(to_16bit<E>(p.v), s.d, ld);
  std::vector<E> o(s.rows() * ld, E(NAN));
  std::vector<float> lse(s.rows(), NAN);
  fs::FwdParams fp = fs::testing::forward_params(s, q.data(), k.data(), v.data(), o.data(), lse.data(), causal);
  fp.dtype = std::is_same_v<E, __nv_bfloat16> ? DType::bf16 : DType::fp16;
  fp.q_strides = fp.k_strides = fp.v_strides = fp.o_strides = fs::Strides{}.or_dense(s.H, s.N, ld);
  auto map = [&](const void* t, const fs::Strides& st, int box_rows) {
    return hp::emu_hopper::make_tensor_map(t, fp.dtype, st, s.d, s.N, s.H, s.B, box_rows);
  };
  const hp::TmaMaps maps{map(fp.q, fp.q_strides, Cfg::kBlockM), map(fp.k, fp.k_strides, Cfg::kBlockN),
                         map(fp.v, fp.v_strides, Cfg::kBlockN), map(fp.o, fp.o_strides, 64)};
  const int work = (s.N + Cfg::kBlockM - 1) / Cfg::kBlockM * s.heads();
  const dim3 grid(static_cast<unsigned>(ctas > 0 ? std::min(ctas, work) : work));
  const auto kernel = slices ? (causal ? hp::hopper_forward_kernel<Cfg, true, true> : hp::hopper_forward_kernel<Cfg, false, true>)
                             : (causal ? hp::hopper_forward_kernel<Cfg, true, false> : hp::hopper_forward_kernel<Cfg, false, false>);
  fs::emu::launch(kernel, grid, dim3(T::kThreads), T::kSmemBytes, maps, fp, slices ? *slices : fs::trace::Slices{});
  return {gather_rows(o, s.d, ld, "O"), lse};
}

void require_reference(const fs::Shape& s, const fs::HostProblem& p, bool causal, DType dtype, const Outputs& got) {
  const fs::AttnOptions attn{fs::default_scale(s.d), causal, {}, nullptr, dtype};
  fs::testing::require_reference(s, attn, p, got.o.data(), got.lse.data());
}

// fa3 against the reference on both grids (one CTA per work tile, and `ctas` persistent ones),
// which must agree bit for bit; then each rung of Rungs against fa3's bits.
template <typename Fa3, typename... Rungs>
void check(DType dtype, const fs::Shape& s, bool causal, int ctas, int gap = 0) {
  const fs::HostProblem p = fs::random_problem(s, 909 + s.N + s.d + s.B * s.H, false, dtype);
  DYNAMIC_SECTION(fs::dtype_name(dtype) << " d=" << s.d << " N=" << s.N << " B=" << s.B << " H=" << s.H
                                        << (causal ? " causal" : "")) {
    const Outputs want = run<Fa3>(s, p, causal, 0, nullptr, gap);
    require_reference(s, p, causal, dtype, want);
    const Outputs persistent = run<Fa3>(s, p, causal, ctas, nullptr, gap);
    CHECK(same_bits(persistent.o, want.o));
    CHECK(same_bits(persistent.lse, want.lse));
    const Outputs rungs[] = {run<Rungs>(s, p, causal, ctas, nullptr, gap)...};
    for (const Outputs& got : rungs) {
      CHECK(same_bits(got.o, want.o));
      CHECK(same_bits(got.lse, want.lse));
    }
  }
}

}  // namespace

// The ladder at d = 128 (where it is compiled): fa3 (2 stages, persistent, ping-pong), wgmma (no
// producer warpgroup), ws (no overlap: one product at a time), ws_overlap, ws_pingpong. N = 1
// (one row, one key), 97 (one short tile), 200 and 300 (tails of 72 and 44 rows and keys).
TEST_CASE("step 09 on the CPU: the ladder at d = 128 matches the reference and fa3's bits", "[emulated][hopper]") {
  using E = __nv_bfloat16;
  for (bool causal : {false, true})
    for (int N : {1, 97, 200, 300})
      check<hp::Fa3Config<E, 128>, hp::WgmmaConfig<E, 128>, hp::WsConfig<E, 128>, hp::WsOverlapConfig<E, 128>,
            hp::WsPingPongConfig<E, 128>>(
          DType::bf16, fs::Shape{1, 2, N, 128}, causal, 2);
  // wgmma's copies in line, a ring of 2 stages over a work tile of 5 key tiles, and 3 work tiles
  // per CTA (the ring runs on across them).
  check<hp::Fa3Config<E, 128>, hp::WgmmaConfig<E, 128>>(DType::bf16, fs::Shape{1, 3, 600, 128}, false, 2);
}

// ws at d = 64 on a ring of 2 stages (fa3's has 4 there): a configuration of the tests'.
template <typename E>
struct WsTwoStages : hp::WsConfig<E, 64> {
  static constexpr int kStages = 2;
};

// d = 64: fa3's 4 stages (the ring wraps within a work tile at N = 300), ws on 2, O through TMA
// stores of one box; three heads over two batches on three CTAs.
TEST_CASE("step 09 on the CPU: d = 64 matches the reference and fa3's bits", "[emulated][hopper]") {
  using E = __nv_bfloat16;
  for (bool causal : {false, true})
    for (int N : {1, 97, 300})
      check<hp::Fa3Config<E, 64>, WsTwoStages<E>>(DType::bf16, fs::Shape{1, 3, N, 64}, causal, 3);
  check<hp::Fa3Config<E, 64>, WsTwoStages<E>>(DType::bf16, fs::Shape{2, 1, 200, 64}, true, 3);
}

// d = 256: 64-key tiles, O stored by the threads (no room for a TMA store's tile); and fp16.
TEST_CASE("step 09 on the CPU: d = 256, and fp16", "[emulated][hopper]") {
  for (bool causal : {false, true}) {
    check<hp::Fa3Config<__nv_bfloat16, 256>>(DType::bf16, fs::Shape{1, 2, 200, 256}, causal, 2);
    check<hp::Fa3Config<__half, 128>>(DType::fp16, fs::Shape{1, 2, 300, 128}, causal, 2);
  }
  check<hp::Fa3Config<__half, 64>>(DType::fp16, fs::Shape{1, 2, 97, 64}, true, 2);
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

// Configuration Cfg's backward (Fa3BwdConfig or DeterministicBwdConfig) on host memory, given the forward's O and LSE:
// launch_hopper_backward's three kernels (step 08's preprocess, hopper_backward_kernel, step 08's
// convert) with the emulation's tensor maps, the gradients and the workspace poisoned with NaN
// first (the counters zeroed, as launch_hopper_backward does). With `slices`, the traced
// instantiation of hopper_backward_kernel records into them. gap: as run's, the gradients' gaps
// checked to stay NaN.
template <typename Cfg>
Grads run_backward(const fs::Shape& s, const fs::HostProblem& p, bool causal, const Outputs& fwd,
                   const fs::trace::Slices* slices = nullptr, int gap = 0) {
  using E = typename Cfg::E;
  namespace tc = fs::tc;
  const int d = s.d, ld = d + gap;
  const auto q = spread_rows(to_16bit<E>(p.q), d, ld), k = spread_rows(to_16bit<E>(p.k), d, ld),
             v = spread_rows(to_16bit<E>(p.v), d, ld), dout = spread_rows(to_16bit<E>(p.dout), d, ld);
  std::vector<E> o = spread_rows(to_16bit<E>(fwd.o), d, ld);  // exact: the forward's O, in E
  std::vector<float> lse = fwd.lse;
  std::vector<E> dq(s.rows() * ld, E(NAN)), dk(s.rows() * ld, E(NAN)), dv(s.rows() * ld, E(NAN));
  const std::size_t order_bytes = hp::hopper_order_bytes(s, Cfg::kBlockM);
  std::vector<float> workspace((tc::tc_bwd_workspace_bytes(s) + order_bytes) / sizeof(float), NAN);
  float* delta = workspace.data();
  float* dq_acc = delta + tc::tc_delta_bytes(s) / sizeof(float);
  int* order = reinterpret_cast<int*>(reinterpret_cast<unsigned char*>(workspace.data()) + tc::tc_bwd_workspace_bytes(s));
  if (Cfg::kDeterministic) std::memset(order, 0, order_bytes);

  fs::FwdParams fp = fs::testing::forward_params(s, q.data(), k.data(), v.data(), o.data(), lse.data(), causal);
  fp.dtype = std::is_same_v<E, __nv_bfloat16> ? DType::bf16 : DType::fp16;
  fp.q_strides = fp.k_strides = fp.v_strides = fp.o_strides = fs::Strides{}.or_dense(s.H, s.N, ld);
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
  const auto kernel = slices ? (causal ? hp::hopper_backward_kernel<Cfg, true, true> : hp::hopper_backward_kernel<Cfg, false, true>)
                             : (causal ? hp::hopper_backward_kernel<Cfg, true, false> : hp::hopper_backward_kernel<Cfg, false, false>);
  fs::emu::launch(kernel, grid, dim3(hp::BackwardTraits<Cfg>::kThreads), hp::BackwardTraits<Cfg>::kSmemBytes, maps, bp,
                  cdelta, order,
                  slices ? *slices : fs::trace::Slices{});
  fs::emu::launch(tc::tc_dq_convert_kernel<E, false>, dim3(tc::tc_dq_convert_blocks(s)), dim3(tc::kTcConvertThreads), 0, bp,
                  static_cast<const float*>(dq_acc), fs::trace::Slices{});
  return {gather_rows(dq, d, ld, "dQ"), gather_rows(dk, d, ld, "dK"), gather_rows(dv, d, ld, "dV")};
}

// fa3's forward (O, LSE), then both backward configurations: each against the fp64 reference, and
// deterministic's gradients against fa3's bit for bit. dK and dV sum in registers in one order in
// both, as on the GPU; dQ's reduce-adds land in the key tiles' order in both here, where the CTAs
// run one at a time in blockIdx order (on the GPU, fa3's land in whatever order the CTAs reach them).
template <typename E, int D>
void check_backward(DType dtype, const fs::Shape& s, bool causal, int gap = 0) {
  const fs::HostProblem p = fs::random_problem(s, 919 + s.N + s.d + s.B * s.H + causal, true, dtype);
  DYNAMIC_SECTION("backward " << fs::dtype_name(dtype) << " d=" << s.d << " N=" << s.N << " B=" << s.B
                              << " H=" << s.H << (causal ? " causal" : "")) {
    const Outputs fwd = run<hp::Fa3Config<E, D>>(s, p, causal, 0, nullptr, gap);
    const Grads fa3 = run_backward<hp::Fa3BwdConfig<E, D>>(s, p, causal, fwd, nullptr, gap);
    const Grads det = run_backward<hp::DeterministicBwdConfig<E, D>>(s, p, causal, fwd, nullptr, gap);
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

// A head dimension between the compiled ones (a multiple of 8: variants.hpp, runs_head_dim) in the
// next one's kernels (compiled_head_dim): TMA's boxes zero past d (at d = 136 the fourth box of K
// and V lies wholly past it), O's TMA stores (D ≤ 128) clipped there and the threads' stores of O
// (D = 256) stopped there, step 08's stores of dK and dV likewise, dQacc's reduce-adds dropped past d
// into rows of step 08's width. Every tensor's rows 8 elements of NaN apart: a read past d makes NaN
// of the result, and a write past d leaves a number in the gap (gather_rows throws).
TEST_CASE("step 09 on the CPU: a head dimension between the compiled ones runs padded on chip",
          "[emulated][hopper][head_dim]") {
  using E = __nv_bfloat16;
  static_assert(hp::compiled_head_dim(40) == 64 && hp::compiled_head_dim(72) == 128 &&
                hp::compiled_head_dim(136) == 256);
  for (bool causal : {false, true}) {
    check<hp::Fa3Config<E, 64>>(DType::bf16, fs::Shape{2, 1, 97, 8}, causal, 2, 8);
    check<hp::Fa3Config<E, 64>>(DType::bf16, fs::Shape{1, 2, 130, 40}, causal, 2, 8);
    check<hp::Fa3Config<E, 128>>(DType::bf16, fs::Shape{1, 2, 200, 72}, causal, 2, 8);
    check<hp::Fa3Config<__half, 128>>(DType::fp16, fs::Shape{1, 2, 97, 120}, causal, 2, 8);
    check<hp::Fa3Config<E, 256>>(DType::bf16, fs::Shape{1, 2, 130, 136}, causal, 2, 8);
    check<hp::Fa3Config<E, 256>>(DType::bf16, fs::Shape{1, 1, 97, 224}, causal, 2, 8);
    check_backward<E, 64>(DType::bf16, fs::Shape{2, 1, 130, 40}, causal, 8);
    check_backward<__half, 64>(DType::fp16, fs::Shape{1, 2, 65, 8}, causal, 8);
    check_backward<E, 128>(DType::bf16, fs::Shape{1, 2, 200, 72}, causal, 8);
    check_backward<E, 128>(DType::bf16, fs::Shape{2, 1, 97, 120}, causal, 8);
  }
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

// ---- the fp8 variant ----------------------------------------------------------------------------

// e4m3's decoding (common/e4m3.cpp, from the bits) against cuda_fp8.h's, and its rounding
// (cuda_fp8.h's, which the kernels use) landing on a neighbour of every value between two.
TEST_CASE("e4m3: the decoding agrees with cuda_fp8.h for every byte, and rounding goes to the nearest",
          "[emulated][hopper][fp8]") {
  for (int b = 0; b < 256; ++b) {
    const float mine = fs::e4m3_value(std::uint8_t(b));
    const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(b), __NV_E4M3);
    const float theirs = __half2float(__half(h));
    INFO("byte " << b);
    if (std::isnan(theirs)) {
      CHECK(std::isnan(mine));
      continue;
    }
    CHECK(mine == theirs);
    CHECK(fs::to_e4m3(mine) == b);
  }
  CHECK(fs::e4m3_value(fs::to_e4m3(1000.f)) == 448.f);   // saturates
  CHECK(fs::e4m3_value(fs::to_e4m3(1.0625f)) == 1.f);    // a tie, to even (1.0 | 1.125)
  CHECK(fs::e4m3_value(fs::to_e4m3(1.1875f)) == 1.25f);  // a tie, to even (1.125 | 1.25)
  CHECK(fs::e4m3_value(fs::to_e4m3(0x1p-10f)) == 0.f);    // half the smallest subnormal: to even, 0
  CHECK(fs::e4m3_value(fs::to_e4m3(0x1.8p-10f)) == 0x1p-9f);
}

TEST_CASE("e4m3: the FP8 rule's model of the tensor core's adder keeps bits below the largest term, and no more",
          "[emulated][hopper][fp8]") {
  const float one[2] = {1.f, 1.f};
  // The probe's two experiments (hopper::probe_fp8_mma on the GPU), on the model: exact to j = bits.
  for (int bits : {10, 13, 16})
    for (int j = 1; j <= 20; ++j) {
      INFO("bits " << bits << ", j " << j);
      const float a[2] = {256.f, std::ldexp(1.f, 8 - j)};
      const double sum = fs::e4m3_mma_sum(0.0, a, one, 2, bits);
      CHECK(sum == (j <= bits ? 256.0 + std::ldexp(1.0, 8 - j) : 256.0));
      const double acc = fs::e4m3_mma_sum(std::ldexp(1.0, j), one, one, 1, bits);
      CHECK(acc == (j <= bits ? std::ldexp(1.0, j) + 1.0 : std::ldexp(1.0, j)));
    }
  // Cut toward zero, each term on its own: negative terms lose their low bits toward zero too.
  const float a[3] = {1.f, -0x1.8p-14f, 0x1.8p-14f};
  const float b[3] = {1.f, 1.f, 1.f};
  CHECK(fs::e4m3_mma_sum(0.0, a, b, 3, 13) == 1.0);  // units of 2⁻¹³: ±1.5·2⁻¹⁴ both cut to 0
  CHECK(fs::e4m3_mma_sum(0.0, a, b, 3, 14) == 1.0);  // units of 2⁻¹⁴: to ∓2⁻¹⁴, which cancel
  CHECK(fs::e4m3_mma_sum(0.0, a, b, 2, 14) == 1.0 - 0x1p-14);
}

// The quantizer's slots: each group of 32 keys is a permutation, and the one pack_p_fp8 needs.
TEST_CASE("fp8: fp8_slot puts each key where wgmma's 8-bit A operand holds it", "[emulated][hopper][fp8]") {
  bool seen[32] = {};
  for (int j = 0; j < 32; ++j) {
    const int slot = hp::fp8_slot(j);
    REQUIRE(slot >= 0);
    REQUIRE(slot < 32);
    CHECK(!seen[slot]);
    seen[slot] = true;
    // Lane t (of a quad) holds A slots 4t .. 4t + 3 and 16 + 4t .. 16 + 4t + 3, and the
    // accumulators of keys 8c + 2t, 8c + 2t + 1: the same lane must own key j and its slot.
    CHECK((slot % 16) / 4 == (j % 8) / 2);
  }
}

namespace {

// The fp8 forward on host memory: the quantizer, then the kernel, as launch_hopper_forward_fp8
// launches them but with the emulation's tensor maps, on `ctas` CTAs (0: one per work tile). The
// workspace is poisoned first, so that bytes the quantizer leaves unwritten (Vᵀ's padding) show.
// `tamper`, if given, changes the quantizer's output before the kernel reads it.
template <typename EO, typename Cfg = hp::Fp8Config<EO>>
Outputs run_fp8(const fs::Shape& s, const fs::HostProblem& p, bool causal, int ctas, float scale,
                const std::function<void(const hp::Fp8Layout&, unsigned char*)>& tamper = {}) {
  const auto q = to_16bit<EO>(p.q), k = to_16bit<EO>(p.k), v = to_16bit<EO>(p.v);
  std::vector<EO> o(s.elems(), EO(NAN));
  std::vector<float> lse(s.rows(), NAN);
  fs::FwdParams fp = fs::testing::forward_params(s, q.data(), k.data(), v.data(), o.data(), lse.data(), causal);
  fp.dtype = std::is_same_v<EO, __nv_bfloat16> ? DType::bf16 : DType::fp16;
  fp.scale = scale;
  fp.variant = hp::kFp8;
  const hp::Fp8Layout l = hp::fp8_layout(s);
  std::vector<unsigned char> ws(l.bytes, 0x7f);  // 0x7f: e4m3's NaN
  fp.workspace = ws.data();
  const int heads = s.heads();
  fs::emu::launch(hp::quantize_fp8_kernel<EO>, hp::fp8_quantize_grid(l, heads), dim3(hp::kQuantizeThreads),
                  hp::kQuantizeSmem, fp, ws.data(), l);
  if (tamper) tamper(l, ws.data());
  namespace em = hp::emu_hopper;
  hp::TmaMaps maps{em::make_tensor_map_fp8(ws.data() + l.q, s.d, s.N, s.H, s.B, Cfg::kBlockM),
                   em::make_tensor_map_fp8(ws.data() + l.k, s.d, s.N, s.H, s.B, Cfg::kBlockN),
                   em::make_tensor_map_fp8(ws.data() + l.vt, int(l.n_pad), s.d, s.H, s.B, s.d),
                   em::make_tensor_map(fp.o, fp.dtype, fp.o_strides, s.d, s.N, s.H, s.B, 64)};
  hp::set_fp8_scales(maps, l, ws.data(), heads);
  using T = hp::ForwardTraits<Cfg>;
  const int work = (s.N + Cfg::kBlockM - 1) / Cfg::kBlockM * heads;
  const dim3 grid(static_cast<unsigned>(ctas > 0 ? std::min(ctas, work) : work));
  if (causal)
    fs::emu::launch(hp::hopper_fp8_forward_kernel<Cfg, true, false>, grid, dim3(T::kThreads), T::kSmemBytes, maps, fp,
                    fs::trace::Slices{});
  else
    fs::emu::launch(hp::hopper_fp8_forward_kernel<Cfg, false, false>, grid, dim3(T::kThreads), T::kSmemBytes, maps,
                    fp, fs::trace::Slices{});
  return {to_float(o), lse};
}

// fp8 against the reference of its e4m3 inputs under the FP8 rule (common/verify.hpp), on one CTA
// per work tile and on a persistent grid of `ctas`, which must agree bit for bit. `sharp`: scores
// τ = 1 instead of 1/√d, so that each row's softmax is nearly one key's: O is then nearly a row
// of V, and a key in the wrong slot, a wrong scale or fragment errs by about |V|, far past the
// rule's 2⁻⁴ max |V|. Returns the report (its O(in): the error against the given inputs).
fs::CheckReport fp8_report(const fs::Shape& s, const fs::HostProblem& p, bool causal, float scale, DType dtype,
                           const Outputs& got) {
  fs::AttnOptions attn{scale, causal, {}, nullptr, dtype};
  attn.e4m3 = true;
  return fs::verify_forward(s, attn, p.q.data(), p.k.data(), p.v.data(), got.o.data(), got.lse.data(), 7);
}
fs::HostProblem fp8_problem(const fs::Shape& s, bool causal, bool sharp, DType dtype) {
  return fs::random_problem(s, 929 + s.N + s.B * s.H + causal + 2 * sharp, false, dtype);
}

template <typename EO>
fs::CheckReport check_fp8(const fs::Shape& s, bool causal, bool sharp, int ctas) {
  const DType dtype = std::is_same_v<EO, __nv_bfloat16> ? DType::bf16 : DType::fp16;
  const fs::HostProblem p = fp8_problem(s, causal, sharp, dtype);
  const float scale = sharp ? 1.f : fs::default_scale(s.d);
  const Outputs got = run_fp8<EO>(s, p, causal, 0, scale);
  const fs::CheckReport report = fp8_report(s, p, causal, scale, dtype, got);
  INFO(report.summary());
  CHECK(report.coverage.rfind("all ", 0) == 0);
  CHECK(report.pass());
  const Outputs persistent = run_fp8<EO>(s, p, causal, ctas, scale);
  CHECK(same_bits(persistent.o, got.o));
  CHECK(same_bits(persistent.lse, got.lse));
  return report;
}

}  // namespace

// N = 1, 97 (one short tile), 200 and 300 (tails of 72 and 44 rows and keys, Vᵀ's padding read),
// 2 heads or 2 batches; causal and not; smooth and sharp softmax; O in bf16 and fp16.
TEST_CASE("step 09 on the CPU: fp8 matches the reference of its e4m3 inputs", "[emulated][hopper][fp8]") {
  for (bool sharp : {false, true})
    for (bool causal : {false, true})
      for (int N : {1, 97, 200, 300}) {
        const fs::Shape s = N % 2 == 0 ? fs::Shape{1, 2, N, 128} : fs::Shape{2, 1, N, 128};
        DYNAMIC_SECTION("bf16 N=" << N << (causal ? " causal" : "") << (sharp ? " sharp" : "")) {
          check_fp8<__nv_bfloat16>(s, causal, sharp, 1);
        }
      }
  SECTION("fp16 O") { check_fp8<__half>(fs::Shape{1, 2, 300, 128}, true, true, 2); }
}

// The FP8 rule's bound is no room for a wrong kernel to hide in, on the sharp problems: the kernel
// errs by well under it, and the same kernel reading Vᵀ with keys 0 and 1 in each other's slots
// (what a wrong fp8_slot or fragment does to a pair of keys) fails it — causal, row 0 sees key 0
// only, and gets key 1's values.
TEST_CASE("step 09 on the CPU: fp8's check fails a kernel that mixes up two keys", "[emulated][hopper][fp8]") {
  const fs::Shape s{1, 2, 300, 128};
  const fs::CheckReport r = check_fp8<__nv_bfloat16>(s, true, true, 1);
  REQUIRE(r.tensors.size() == 3);
  INFO(r.summary());
  CHECK(r.tensors[0].err < r.tensors[0].tol / 4);

  const fs::HostProblem p = fp8_problem(s, true, true, DType::bf16);
  const Outputs swapped = run_fp8<__nv_bfloat16>(s, p, true, 0, 1.f, [&](const hp::Fp8Layout& l, unsigned char* ws) {
    for (std::int64_t row = 0; row < std::int64_t(s.heads()) * s.d; ++row) {  // every row of Vᵀ
      unsigned char* r = ws + l.vt + row * l.n_pad;
      std::swap(r[hp::fp8_slot(0)], r[hp::fp8_slot(1)]);
    }
  });
  const fs::CheckReport bad = fp8_report(s, p, true, 1.f, DType::bf16, swapped);
  INFO(bad.summary());
  CHECK_FALSE(bad.pass());
}

// The lazy softmax (kLazy: V's scale folded into P̃, m moved only past the slack, O's rescale
// skipped where no max moved) on its two problems (tests/fp8_problems.hpp), causal and not:
// against the reference, beside the same tiles without it (Eager), which must pass too; and, on
// the climbing maxima, one CTA per work tile against a persistent grid, bit for bit.
// fp8's tiles without the lazy max, with ℓ in one sum, and with ping-pong: a configuration of the
// tests', which the softmax's eager path and the turns run under.
template <typename EO>
struct EagerFp8 : hp::Fp8Config<EO> {
  static constexpr bool kPingPong = true;
  static constexpr int kSumParts = 1;
  static constexpr bool kLazy = false;
  static constexpr float kSlack = 0.f;
};

static void check_lazy_fp8(const fs::Shape& s, std::uint64_t seed, fs::testing::Fp8Problem kind) {
  using EO = __nv_bfloat16;
  using Eager = EagerFp8<EO>;
  static_assert(hp::Fp8Config<EO>::kLazy && !Eager::kLazy);
  fs::HostProblem p = fs::random_problem(s, seed, false, DType::bf16);
  fs::testing::shape_fp8_problem(p, kind);
  const float scale = fs::default_scale(s.d);
  for (bool causal : {false, true}) {
    DYNAMIC_SECTION((causal ? "causal" : "not causal")) {
      const Outputs lazy = run_fp8<EO>(s, p, causal, 0, scale);
      const fs::CheckReport r = fp8_report(s, p, causal, scale, DType::bf16, lazy);
      INFO("lazy: " << r.summary());
      CHECK(r.pass());
      const Outputs eager = run_fp8<EO, Eager>(s, p, causal, 0, scale);
      const fs::CheckReport e = fp8_report(s, p, causal, scale, DType::bf16, eager);
      INFO("eager: " << e.summary());
      CHECK(e.pass());
      if (kind == fs::testing::Fp8Problem::climbing) {
        const Outputs persistent = run_fp8<EO>(s, p, causal, 2, scale);
        CHECK(same_bits(persistent.o, lazy.o));
        CHECK(same_bits(persistent.lse, lazy.lse));
      }
    }
  }
}

TEST_CASE("step 09 on the CPU: fp8's lazy max and V's scales in P̃", "[emulated][hopper][fp8]") {
  check_lazy_fp8(fs::Shape{1, 1, 800, 128}, 947, fs::testing::Fp8Problem::climbing);
}

TEST_CASE("step 09 on the CPU: fp8 with blocks of zeros in Q, K and V", "[emulated][hopper][fp8]") {
  check_lazy_fp8(fs::Shape{1, 2, 800, 128}, 953, fs::testing::Fp8Problem::zeros);
}

// ---- the trace's lanes ---------------------------------------------------------------------------

// A traced forward records each warpgroup in a lane of its own (record.hpp): the producer's waits
// for free stages and its copies in lane 0, each consumer's waits, products, softmax and stores in
// lanes 1 and 2. On a persistent grid of 2 CTAs walking 6 work tiles (N = 300: tails), causal or
// not: the outputs are the untraced run's bit for bit; every CTA records in all three lanes; each
// lane's times never go back; the producer records only loads (and waits, and skipped keys), the
// consumers only their phases and stores; per work tile each consumer with rows there records one
// S, one softmax and one P̃V per key tile; and the bytes of the loads and stores are the IO model's.
TEST_CASE("step 09 on the CPU: a traced forward records the producer and each consumer in a lane",
          "[emulated][hopper][trace]") {
  namespace tr = fs::trace;
  using Cfg = hp::Fa3Config<__nv_bfloat16, 128>;
  const fs::Shape s{1, 2, 300, 128};
  const int ctas = 2, lanes = 3;
  for (bool causal : {false, true}) {
    DYNAMIC_SECTION((causal ? "causal" : "not causal")) {
      const fs::HostProblem p = fs::random_problem(s, 939 + causal, false, DType::bf16);
      const Outputs plain = run<Cfg>(s, p, causal, ctas);
      const std::uint32_t cap = 512;
      std::vector<tr::CtaHeader> headers(ctas * lanes);
      std::vector<tr::DeviceRecord> records(headers.size() * cap);
      const tr::Slices slices{headers.data(), records.data(), cap, lanes};
      const Outputs traced = run<Cfg>(s, p, causal, ctas, &slices);
      CHECK(same_bits(traced.o, plain.o));
      CHECK(same_bits(traced.lse, plain.lse));

      std::int64_t read = 0, written = 0, s_events = 0, pv_events = 0, softmax_events = 0;
      for (int c = 0; c < ctas; ++c)
        for (int lane = 0; lane < lanes; ++lane) {
          const tr::CtaHeader& h = headers[c * lanes + lane];
          INFO("CTA " << c << " lane " << lane);
          REQUIRE(h.count > 0);
          REQUIRE(h.count <= cap);
          std::uint64_t t = h.t_start;
          for (std::uint32_t i = 0; i < h.count; ++i) {
            const tr::DeviceRecord& r = records[(c * lanes + lane) * std::size_t(cap) + i];
            CHECK(r.t_end >= t);
            t = r.t_end;
            const auto kind = tr::Kind(r.kind);
            const std::int64_t bytes = std::int64_t(r.bytes) | std::int64_t(r.bytes_hi) << 32;
            if (lane == 0) {
              CHECK((kind == tr::Kind::Load || kind == tr::Kind::Wait || kind == tr::Kind::Skip));
              if (kind == tr::Kind::Load) read += bytes;
            } else {
              CHECK(kind != tr::Kind::Load);
              CHECK(kind != tr::Kind::Skip);
              if (kind == tr::Kind::Store) written += bytes;
              s_events += kind == tr::Kind::ComputeS;
              softmax_events += kind == tr::Kind::Softmax;
              pv_events += kind == tr::Kind::AccumulateO;
            }
          }
        }
      // Per work tile, each consumer warpgroup with rows in it: one S, softmax and P̃V per key tile.
      std::int64_t tiles = 0;
      const int n_qtiles = (s.N + Cfg::kBlockM - 1) / Cfg::kBlockM;
      for (int qt = 0; qt < n_qtiles; ++qt) {
        const int key_end = causal ? std::min(s.N, (qt + 1) * Cfg::kBlockM) : s.N;
        const int key_tiles = (key_end + Cfg::kBlockN - 1) / Cfg::kBlockN;
        const int consumers = s.N - qt * Cfg::kBlockM > 64 ? 2 : 1;
        tiles += std::int64_t(key_tiles) * consumers * s.heads();
      }
      CHECK(s_events == tiles);
      CHECK(softmax_events == tiles);
      CHECK(pv_events == tiles);
      const fs::IoCount io = fs::io_flash2_forward(s, causal, Cfg::kBlockM, Cfg::kBlockN, 2);
      CHECK(read == io.read_bytes);
      CHECK(written == io.write_bytes);
    }
  }
}

namespace {

struct LaneRecord {
  fs::trace::Kind kind;
  fs::trace::Tensor tensor;
  std::int64_t bytes;
};
// The records of lane `lane` of CTA `cta` (record.hpp), checked for order in time.
std::vector<LaneRecord> lane_records(const std::vector<fs::trace::CtaHeader>& headers,
                                     const std::vector<fs::trace::DeviceRecord>& records, std::uint32_t cap, int lanes,
                                     int cta, int lane) {
  const fs::trace::CtaHeader& h = headers[cta * lanes + lane];
  REQUIRE(h.count <= cap);
  std::vector<LaneRecord> out;
  std::uint64_t t = h.t_start;
  for (std::uint32_t i = 0; i < h.count; ++i) {
    const fs::trace::DeviceRecord& r = records[(std::size_t(cta) * lanes + lane) * cap + i];
    CHECK(r.t_end >= t);
    t = r.t_end;
    out.push_back({fs::trace::Kind(r.kind), fs::trace::Tensor(r.tensor),
                   std::int64_t(r.bytes) | std::int64_t(r.bytes_hi) << 32});
  }
  return out;
}

}  // namespace

// The backward's lanes: the gradients are the untraced run's bit for bit; the producer records
// copies and waits only; each consumer, per query tile, one Sᵀ/dPᵀ product, one P/dS and one
// wait for dV, dK and dQ's products, then its block of dQ added (a load and a store of dQacc in
// L2), and at the end its keys of dK and dV; the bytes of those add up to the pass's dQ adds and
// its dK, dV.
TEST_CASE("step 09 on the CPU: a traced backward records the producer and each consumer in a lane",
          "[emulated][hopper][trace][backward]") {
  namespace tr = fs::trace;
  using E = __nv_bfloat16;
  for (bool deterministic : {false, true})
    for (bool causal : {false, true}) {
      DYNAMIC_SECTION((deterministic ? "deterministic" : "fa3") << (causal ? " causal" : "")) {
        const fs::Shape s{1, 2, 200, 128};
        const fs::HostProblem p = fs::random_problem(s, 949 + causal, true, DType::bf16);
        const Outputs fwd = run<hp::Fa3Config<E, 128>>(s, p, causal, 0);
        auto both = [&](const tr::Slices* slices) {
          return deterministic ? run_backward<hp::DeterministicBwdConfig<E, 128>>(s, p, causal, fwd, slices)
                               : run_backward<hp::Fa3BwdConfig<E, 128>>(s, p, causal, fwd, slices);
        };
        using Cfg = hp::Fa3BwdConfig<E, 128>;
        const Grads plain = both(nullptr);
        const int key_tiles = (s.N + Cfg::kBlockN - 1) / Cfg::kBlockN, ctas = key_tiles * s.heads(), lanes = 3;
        const std::uint32_t cap = 256;
        std::vector<tr::CtaHeader> headers(std::size_t(ctas) * lanes);
        std::vector<tr::DeviceRecord> records(headers.size() * cap);
        const tr::Slices slices{headers.data(), records.data(), cap, lanes};
        const Grads traced = both(&slices);
        CHECK(same_bits(traced.dq, plain.dq));
        CHECK(same_bits(traced.dk, plain.dk));
        CHECK(same_bits(traced.dv, plain.dv));

        std::int64_t dq_loaded = 0, dq_stored = 0, dkdv_stored = 0, want_dq = 0;
        for (int cta = 0; cta < ctas; ++cta) {
          const int key0 = (cta % key_tiles) * Cfg::kBlockN;
          const int q_begin = causal ? key0 / Cfg::kBlockM * Cfg::kBlockM : 0;
          const int q_tiles = (s.N - q_begin + Cfg::kBlockM - 1) / Cfg::kBlockM;
          want_dq += std::int64_t(s.N - q_begin) * s.d * 4;
          for (const LaneRecord& r : lane_records(headers, records, cap, lanes, cta, 0))
            CHECK((r.kind == tr::Kind::Load || r.kind == tr::Kind::Wait));
          for (int lane = 1; lane < lanes; ++lane) {
            INFO("CTA " << cta << " lane " << lane);
            const bool has_keys = s.N - key0 - 64 * (lane - 1) > 0;
            int products = 0, ds = 0, adds = 0;
            for (const LaneRecord& r : lane_records(headers, records, cap, lanes, cta, lane)) {
              products += r.kind == tr::Kind::ComputeS;
              ds += r.kind == tr::Kind::ComputeDS;
              adds += r.kind == tr::Kind::AccumulateDQ;
              CHECK((r.kind != tr::Kind::Load || r.tensor == tr::Tensor::dQacc));
              if (r.kind == tr::Kind::Load) dq_loaded += r.bytes;
              if (r.kind == tr::Kind::Store) (r.tensor == tr::Tensor::dQacc ? dq_stored : dkdv_stored) += r.bytes;
            }
            CHECK(adds == q_tiles);
            CHECK(products == (has_keys ? q_tiles : 0));
            CHECK(ds == (has_keys ? q_tiles : 0));
          }
        }
        CHECK(dq_loaded == want_dq);
        CHECK(dq_stored == want_dq);
        CHECK(dkdv_stored == 2 * s.elems() * std::int64_t(sizeof(E)));
      }
    }
}
