// Step 08 — tensor cores: step 04's FlashAttention-2 forward and step 05's recomputation backward
// with their matrix products on the tensor cores (mma.sync m16n8k16: bf16 or fp16 in, fp32
// accumulate), as FlashAttention-2 itself runs on A100 and H100. The algorithms, the tiling and
// the HBM traffic are those steps' (Θ(N²d²/M), now in 2-byte elements); what changes is who
// computes the products and how the tiles reach them: flash_tc_forward.cuh has the forward and
// its ladder of variants, flash_tc_backward.cuh the backward, mma.cuh the instructions,
// forward_configs.cuh and backward_configs.cuh the tiles.
#include "steps/08_tensor_cores/tensor_cores.hpp"

#include <string>

#include "common/check.hpp"
#include "common/flash_features.cuh"
#include "common/packed_check.hpp"
#include "common/strides_check.hpp"
#include "common/io_model.hpp"
#include <algorithm>

#include "steps/08_tensor_cores/backward_configs.cuh"
#include "steps/08_tensor_cores/forward_configs.cuh"

namespace fs {

namespace {

bool is_tc_head_dim(int d) { return d == 32 || d == 64 || d == 96 || d == 128 || d == 256; }

std::string unsupported(const Shape& s, const PassSettings& settings) {
  const bool fp32 = settings.dtype == DType::fp32;
  if (fp32 && settings.variant != tc::k3xTf32)
    return "fp32 runs in variant 3xtf32 (each product as three TF32 ones); fa2 and the others take bf16 or fp16";
  if (!fp32 && settings.variant == tc::k3xTf32) return "3xtf32 is the fp32 variant (--dtype fp32)";
  if (fp32 && !tc::is_f32_head_dim(s.d))
    return "3xtf32 is compiled for d = 32, 64 and 128; got " + std::to_string(s.d);
  if (!is_tc_head_dim(s.d))
    return "d must be 32, 64, 96, 128 or 256 (the tensor-core kernels are compiled for these); got " + std::to_string(s.d);
  if (tc::is_rung(settings.variant) && (!tc::is_ladder_head_dim(s.d) || settings.dtype != DType::bf16))
    return "the ladder's rungs (r1_mma ... r4_p_in_regs) are compiled for bf16 at d = 64 and 128";
  if (settings.variant == tc::kKeyWarps && !tc::is_ladder_head_dim(s.d))
    return "key_warps is compiled at d = 64 and 128 (fa2's dK/dV kernel at the other d has its 16-key warps already)";
  if (tc::is_rung(settings.variant) && settings.dropout.on())
    return "dropout is compiled into fa2 and deterministic; the ladder's rungs are the forward without it";
  if ((tc::is_rung(settings.variant) || settings.variant == tc::kKeyWarps) &&
      (settings.features.on() || !s.square() || settings.packed.on()))
    return "--window, --softcap, --alibi, --seq-k, --heads-kv and --varlen are compiled into fa2 and deterministic; the "
           "ladder's rungs and key_warps are the plain problem";
  if (s.heads() > 65535) return "B·H must be at most 65535 (grid y)";
  if (!(settings.scale > 0.f)) return "the tensor-core kernels take a positive softmax scale";
  return {};
}

IoCount io_forward(const Shape& s, const PassSettings& settings) {
  const TcTiles t = tc_forward_tiles(s.d, settings.variant);
  const ScoreFeatures& f = settings.features;
  return io_flash2_forward(s, settings.causal, t.Br, t.Bc, static_cast<int>(dtype_bytes(settings.dtype)),
                           clamp_reach(f.window_left, s.N, s.keys()), clamp_reach(f.window_right, s.N, s.keys()));
}

template <typename Cfg>
TcTiles tiles_of() {
  return {Cfg::kBlockM, Cfg::kBlockN};
}

std::size_t bwd_ws_bytes(const Shape& s, const PassSettings&) { return tc::tc_bwd_workspace_bytes(s); }

IoCount io_backward(const Shape& s, const PassSettings& settings) {
  const ScoreFeatures& f = settings.features;
  return io_tc_backward(s, settings.causal, settings.variant, static_cast<int>(dtype_bytes(settings.dtype)),
                        clamp_reach(f.window_left, s.N, s.keys()), clamp_reach(f.window_right, s.N, s.keys()));
}

template <typename Dkdv, typename Dq>
TcBwdTiles bwd_tiles_of() {
  return {Dkdv::kKeys, Dkdv::kQueries, Dkdv::kSplit, Dq::kRows, Dq::kKeys};
}
template <int D>
TcBwdTiles bwd_tiles_of(int variant) {
  using E = __nv_bfloat16;  // the tiles do not depend on the element type
  using B = tc::Bwd<E, D>;
  if constexpr (tc::is_ladder_head_dim(D)) {
    if (variant == tc::kKeyWarps) return bwd_tiles_of<tc::KeyWarps<E, D>, typename B::Dq>();
  }
  return bwd_tiles_of<typename B::Dkdv, typename B::Dq>();
}

}  // namespace

TcBwdTiles tc_backward_tiles(int d, int variant) {
  if (variant == tc::k3xTf32) {
    auto f32 = [](auto cfg) { return TcBwdTiles{decltype(cfg)::kKeys, decltype(cfg)::kQueries, 1, 0, 0}; };
    switch (d) {
      case 32: return f32(tc::BwdF32<32>::Dkdv{});
      case 64: return f32(tc::BwdF32<64>::Dkdv{});
      case 128: return f32(tc::BwdF32<128>::Dkdv{});
      default: return {};
    }
  }
  switch (d) {
    case 32: return bwd_tiles_of<32>(variant);
    case 64: return bwd_tiles_of<64>(variant);
    case 96: return bwd_tiles_of<96>(variant);
    case 128: return bwd_tiles_of<128>(variant);
    case 256: return bwd_tiles_of<256>(variant);
    default: return {};
  }
}

IoCount io_tc_backward(const Shape& s, bool causal, int variant, int elem_bytes, int window_left, int window_right) {
  return io_flash2_backward(s, causal, tc_backward_tiles(s.d, variant), variant != tc::kDeterministic, elem_bytes,
                            window_left, window_right);
}

TcTiles tc_forward_tiles(int d, int variant) {
  using E = __nv_bfloat16;  // the tiles do not depend on the element type
  if (tc::is_rung(variant)) return tiles_of<tc::R4PInRegs<E, 64>>();  // the rungs share FA2's tile
  if (variant == tc::k3xTf32) switch (d) {
      case 32: return tiles_of<tc::F32<32, 3>::Cfg>();
      case 64: return tiles_of<tc::F32<64, 3>::Cfg>();
      case 128: return tiles_of<tc::F32<128, 3>::Cfg>();
      default: return {};
    }
  switch (d) {
    case 32: return tiles_of<tc::Fa2<E, 32>::Cfg>();
    case 64: return tiles_of<tc::Fa2<E, 64>::Cfg>();
    case 96: return tiles_of<tc::Fa2<E, 96>::Cfg>();
    case 128: return tiles_of<tc::Fa2<E, 128>::Cfg>();
    case 256: return tiles_of<tc::Fa2<E, 256>::Cfg>();
    default: return {};
  }
}

namespace {

// The layouts the kernels read (row_aligned_strides): cp.async copies 16 bytes, and dQ's
// conversion stores 16, so every row starts on a 16-byte boundary.
Strides tc_strides(const char* name, const void* t, const Strides& st, int heads, int rows, int d, DType dtype) {
  return row_aligned_strides("step 08", name, t, st, heads, rows, d, dtype_bytes(dtype));
}

// Q's, K's, V's and O's strides, as the kernels read them (FwdParams and BwdParams alike).
template <class Params>
void with_strides(Params& p) {
  const Shape& s = p.shape;
  p.q_strides = tc_strides("q", p.q, p.q_strides, s.H, s.N, s.d, p.dtype);
  p.k_strides = tc_strides("k", p.k, p.k_strides, s.kv_heads(), s.keys(), s.d, p.dtype);
  p.v_strides = tc_strides("v", p.v, p.v_strides, s.kv_heads(), s.keys(), s.d, p.dtype);
  p.o_strides = tc_strides("o", p.o, p.o_strides, s.H, s.N, s.d, p.dtype);
}

// Packed sequences (FwdParams::packed) go through the kernels of fa2 and deterministic, which take
// FlashAttention's features; the rungs and key_warps are the plain problem, and traces are not
// recorded for them yet.
template <class Params>
void check_packed(const Params& p) {
  if (p.packed.on() && (tc::is_rung(p.variant) || p.variant == tc::kKeyWarps))
    throw CudaError(cudaErrorInvalidValue, "step 08: packed sequences run in fa2 and deterministic");
  require_packable<FlashFeatures>(p, "step 08");
}

}  // namespace

void tc_forward_tf32(const FwdParams& params, int passes) {
  if (params.dtype != DType::fp32 || !tc::is_f32_head_dim(params.shape.d) || (passes != 1 && passes != 3))
    throw CudaError(cudaErrorInvalidValue, "tc_forward_tf32: fp32 at d = 32, 64 or 128, with 1 or 3 passes");
  if (passes == 1 && (params.dropout.on() || params.mods.on() || !params.shape.square() || params.packed.on()))
    throw CudaError(cudaErrorInvalidValue, "tc_forward_tf32: plain TF32 (1 pass) runs the plain problem only");
  require_packable<FlashFeatures>(params, "step 08");
  FwdParams p = params;
  with_strides(p);
  switch (p.shape.d) {
    case 32: return tc::forward_fp32_d32(p, passes);
    case 64: return tc::forward_fp32_d64(p, passes);
    default: return tc::forward_fp32_d128(p, passes);
  }
}

void tc_forward(const FwdParams& params) {
  if (params.dtype == DType::fp32) {
    if (params.variant != tc::k3xTf32) throw CudaError(cudaErrorInvalidValue, "tc_forward: fp32 runs in variant 3xtf32");
    return tc_forward_tf32(params, 3);
  }
  const bool bf16 = params.dtype == DType::bf16;
  if (!is_tc_head_dim(params.shape.d) || !is_16bit(params.dtype))
    throw CudaError(cudaErrorInvalidValue, "tc_forward: unsupported d or dtype");
  check_packed(params);
  FwdParams p = params;
  with_strides(p);
  switch (p.shape.d) {
    case 32: return bf16 ? tc::forward_bf16_d32(p) : tc::forward_fp16_d32(p);
    case 64: return bf16 ? tc::forward_bf16_d64(p) : tc::forward_fp16_d64(p);
    case 96: return bf16 ? tc::forward_bf16_d96(p) : tc::forward_fp16_d96(p);
    case 128: return bf16 ? tc::forward_bf16_d128(p) : tc::forward_fp16_d128(p);
    default: return bf16 ? tc::forward_bf16_d256(p) : tc::forward_fp16_d256(p);
  }
}

void tc_backward(const BwdParams& params) {
  const bool fp32 = params.dtype == DType::fp32;
  if (fp32 && (params.variant != tc::k3xTf32 || !tc::is_f32_head_dim(params.shape.d)))
    throw CudaError(cudaErrorInvalidValue, "tc_backward: fp32 runs in variant 3xtf32 at d = 32, 64 or 128");
  const bool bf16 = params.dtype == DType::bf16;
  if (!is_tc_head_dim(params.shape.d) || !(fp32 || is_16bit(params.dtype)))
    throw CudaError(cudaErrorInvalidValue, "tc_backward: unsupported d or dtype");
  if (!params.workspace)  // D, LSE's copy and dQacc live there: without it the kernels write through null
    throw CudaError(cudaErrorInvalidValue, "tc_backward: no workspace (BwdParams::workspace, StepInfo::bwd_workspace bytes)");
  check_packed(params);
  BwdParams p = params;
  with_strides(p);
  const Shape& s = p.shape;
  p.dout_strides = tc_strides("dout", p.dout, p.dout_strides, s.H, s.N, s.d, p.dtype);
  p.dq_strides = tc_strides("dq", p.dq, p.dq_strides, s.H, s.N, s.d, p.dtype);
  p.dk_strides = tc_strides("dk", p.dk, p.dk_strides, s.kv_heads(), s.keys(), s.d, p.dtype);
  p.dv_strides = tc_strides("dv", p.dv, p.dv_strides, s.kv_heads(), s.keys(), s.d, p.dtype);
  if (fp32) switch (p.shape.d) {
      case 32: return tc::backward_fp32_d32(p);
      case 64: return tc::backward_fp32_d64(p);
      default: return tc::backward_fp32_d128(p);
    }
  switch (p.shape.d) {
    case 32: return bf16 ? tc::backward_bf16_d32(p) : tc::backward_fp16_d32(p);
    case 64: return bf16 ? tc::backward_bf16_d64(p) : tc::backward_fp16_d64(p);
    case 96: return bf16 ? tc::backward_bf16_d96(p) : tc::backward_fp16_d96(p);
    case 128: return bf16 ? tc::backward_bf16_d128(p) : tc::backward_fp16_d128(p);
    default: return bf16 ? tc::backward_bf16_d256(p) : tc::backward_fp16_d256(p);
  }
}

StepInfo step08_info() {
  StepInfo s;
  s.id = "08_tensor_cores";
  s.title = "tensor cores: FlashAttention-2 forward and backward on mma.sync, bf16/fp16 in, fp32 accumulate; fp32 as 3xTF32";
  s.variants = {"fa2", "deterministic", "r1_mma", "r2_swizzle", "r3_pipeline", "r4_p_in_regs", "key_warps", "3xtf32"};
  s.forward = tc_forward;
  s.backward = tc_backward;
  s.bwd_workspace_bytes = bwd_ws_bytes;
  s.unsupported = unsupported;
  s.untraced = untraced_head_dim;  // traced kernels at d = 64 only (trace::kTracedAt)
  s.io_forward = io_forward;
  s.io_backward = io_backward;
  s.dropout = true;
  s.score_mods = true;  // fa2's and deterministic's (unsupported refuses them for the rungs and key_warps)
  s.kv_shapes = true;   // likewise
  s.strides = true;     // every variant's
  s.packed = true;      // fa2's and deterministic's (tc_forward and tc_backward refuse the others)
  s.dtypes = {DType::bf16, DType::fp16, DType::fp32};  // fp32: variant 3xtf32
  s.order_dependent = {"fa2", "r1_mma", "r2_swizzle", "r3_pipeline", "r4_p_in_regs", "key_warps", "3xtf32"};
  return s;
}

}  // namespace fs
