// Step 09's fp8 forward: fa3's forward on Q, K and V quantized to e4m3, a kernel of its own over
// the 16-bit forward's roles (flash_hopper_forward.cuh) with two pieces of its own:
//   Vᵀ          VTransposed below: wgmma reads 8-bit operands K-major only, so V arrives transposed
//               (the quantizer writes Vᵀ, fp8.cuh) and P̃V reads it like K;
//   the softmax Fp8Softmax (fp8_softmax.cuh): S times its blocks' scales, P̃ up to 2⁸ rounded to
//               e4m3 (products by wgmma k32), O kept in units of a V block's scale.
// O is written in EO (the problem's bf16 or fp16), as the 16-bit forward writes it.
#pragma once

#include <cuda.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "common/problem.hpp"
#include "common/recorder/device.cuh"
#include "common/recorder/launch.cuh"
#include "steps/09_hopper/configs.cuh"
#include "steps/09_hopper/fp8.cuh"
#include "steps/09_hopper/fp8_softmax.cuh"

namespace fs::hopper {

// Vᵀ (the quantizer's): the tile's keys along the 128-byte rows, d rows of them, in kVBoxes boxes
// of 128 keys (traits.cuh); each 32 keys in the order a thread holds P̃ (fp8_slot).
struct VTransposed {
  template <typename T>
  __device__ __forceinline__ static void load(typename T::E* dst, const CUtensorMap* map, std::uint64_t* bar, int t,
                                              const Work& wk) {
    static_assert(T::kVTransposed);
#pragma unroll
    for (int c = 0; c < T::kVBoxes; ++c)
      tma_load_4d(dst + c * T::D * 128, map, bar, t * T::kBlockN + 128 * c, 0, wk.h_kv, wk.b);
  }
  // K-major like K: d its rows, 32 keys per k-step.
  template <typename T>
  __device__ __forceinline__ static std::uint64_t desc(const typename T::E* sV) {
    return make_desc(sV, 16, 1024);
  }
  template <typename T>
  __device__ __forceinline__ static std::uint64_t at(std::uint64_t v0, int stage, int kk, int half) {
    constexpr std::int64_t kE = sizeof(typename T::E);
    return desc_add(v0, kE * (stage * T::kVElems + (kk / 4) * T::D * T::kBoxCols + half * T::kONt * T::kBoxCols +
                              (kk % 4) * T::kStepK));
  }
};

// fp8: fa3 on e4m3 Q, K and Vᵀ, O in EO. Tiles of 224 keys, the quantizer's K and V blocks: Q
// 16 KiB + 2 stages × (K, Vᵀ: 28 + 32 KiB) + O 32 KiB (a third stage would not fit). Its softmax: ℓ
// in 4 partial sums, and the lazy max with a slack of 0.8 (P̃ = 2^(x − m + 8) ≤ 2^8.8 < 448, O's
// rescale skipped where no row's max moved: kLazy). A larger slack needs a smaller offset
// (fp8_offset), and then ℓ ≥ 2^off no longer bounds the error of P̃'s subnormals as the FP8 rule
// assumes (common/verify.hpp: ℓ ≥ 2⁸). Every exponential is the MUFU unit's: moving 1 in 8 to a
// polynomial on the FMA units (FlashAttention-4's trick; the experiment patches in
// docs/benchmarks have it) was 11 % slower on the H200 (docs/benchmarks/experiments/h200_hopper_fp8_sweep2.txt).
// No ping-pong: the two consumer warpgroups issue their products without taking turns, which was
// as fast or faster at 224 keys on the H200 (docs/benchmarks/experiments/h200_hopper_fp8_224.txt).
template <typename EO_>
struct Fp8Config : Fa3Config<__nv_fp8_e4m3, kFp8HeadDim> {
  using EO = EO_;
  static constexpr int kBlockN = kFp8BlockKV;
  static constexpr bool kPingPong = false;
  static constexpr int kSumParts = 4;        // ℓ's partial sums (softmax_tile_fp8)
  static constexpr bool kLazy = true;        // Fp8Lazy
  static constexpr float kSlack = 0.8f;      // base-2 units
};

template <typename Cfg, bool kCausal, bool kTrace>
__global__ void __launch_bounds__(ForwardTraits<Cfg>::kThreads, 1)
    hopper_fp8_forward_kernel(const __grid_constant__ TmaMaps maps, const FwdParams p, trace::Slices slices) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(FS_EMULATION)
  static_assert(ForwardTraits<Cfg>::kFp8, "e4m3 Q, K and Vᵀ");
  forward_cta<Cfg, kCausal, kTrace, Fp8Softmax<Cfg>, VTransposed>(maps, p, slices);
#else
  __trap();  // compiled for another architecture than sm_90a: step 09 refuses other GPUs first
#endif
}

// A dense tensor of bytes: (cols, rows, heads, batches), boxes of 128 columns × box_rows rows,
// swizzled by 128 bytes (hopper.cu).
CUtensorMap make_tensor_map_fp8(const void* base, int cols, int rows, int heads, int batches, int box_rows);

// The scales of the maps, where the quantizer wrote them (fp8_layout).
inline void set_fp8_scales(TmaMaps& maps, const Fp8Layout& l, const unsigned char* ws, std::int64_t heads) {
  const float* scales = reinterpret_cast<const float*>(ws + l.scales);
  maps.scale_q = scales + l.scale_offset(0, heads);
  maps.scale_k = scales + l.scale_offset(1, heads);
  maps.scale_v = scales + l.scale_offset(2, heads);
  maps.blocks_q = l.blocks_q;
  maps.blocks_kv = l.blocks_kv;
}

// The quantizer (fp8.cuh) writes Q, K, Vᵀ and their scales into the workspace, then the
// kernel reads them; O and LSE as the 16-bit forward writes them. p.part: both, or the quantizer
// alone, or the kernel alone on what the quantizer last wrote.
template <typename Cfg>
void launch_hopper_forward_fp8(const FwdParams& p) {
  using EI = typename Cfg::EO;  // the problem's elements, in and out
  const Shape& s = p.shape;
  if (s.N == 0 || s.heads() == 0) return;
  const Fp8Layout l = fp8_layout(s);
  unsigned char* ws = static_cast<unsigned char*>(p.workspace);
  const int heads = s.B * s.H;
  if (p.part != FwdPart::kKernel)
    trace::launch_untraced("quantize_fp8_kernel", quantize_fp8_kernel<EI>, fp8_quantize_grid(l, heads),
                           dim3(kQuantizeThreads), kQuantizeSmem, p.stream, p, ws, l);
  if (p.part == FwdPart::kPrepare) return;
  TmaMaps maps{make_tensor_map_fp8(ws + l.q, s.d, s.N, s.H, s.B, Cfg::kBlockM),
               make_tensor_map_fp8(ws + l.k, s.d, s.N, s.H, s.B, Cfg::kBlockN),
               make_tensor_map_fp8(ws + l.vt, int(l.n_pad), s.d, s.H, s.B, s.d),
               make_tensor_map(p.o, p.dtype, p.o_strides, s.d, s.N, s.H, s.B, 64)};
  set_fp8_scales(maps, l, ws, heads);
  // Traced under the forward's name: its lanes are the 16-bit forward's.
  launch_forward<Cfg>(p, maps, [](auto causal, auto tr) { return hopper_fp8_forward_kernel<Cfg, causal, tr>; });
}

}  // namespace fs::hopper
