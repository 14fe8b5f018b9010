// Step 08 — tensor cores: step 04's FlashAttention-2 forward and step 05's recomputation backward
// with their matrix products on the tensor cores (mma.sync m16n8k16: bf16 or fp16 in, fp32
// accumulate), as FlashAttention-2 itself runs on A100 and H100. The algorithms, the tiling and
// the HBM traffic are those steps' (Θ(N²d²/M), now in 2-byte elements); what changes is who
// computes the products and how the tiles reach them. variants.hpp names the variants;
// forward_configs.cuh and backward_configs.cuh hold their tiles and the dispatch; each kernel has
// a file of its own (flash_tc_forward.cuh, flash_tc_forward_f32.cuh, tc_dkdv_kernel.cuh,
// flash_tc_backward.cuh, tc_dq_kernel.cuh, flash_tc_backward_f32.cuh, preprocess_convert.cuh),
// mma.cuh the instructions. This file decides what a run may ask for and calls the dispatch; the
// kernels compile in the units CMakeLists.txt generates (instances.cu.in).
#include "steps/08_tensor_cores/tensor_cores.hpp"

#include <string>
#include <type_traits>

#include "common/check.hpp"
#include "common/flash_features.cuh"
#include "common/io_model.hpp"
#include "common/packed_check.hpp"
#include "common/strides_check.hpp"
// The configurations and the dispatch; the kernels' headers for their traits (the tiles), none of
// their kernels instantiated here.
#include "steps/08_tensor_cores/backward_configs.cuh"
#include "steps/08_tensor_cores/flash_tc_backward.cuh"
#include "steps/08_tensor_cores/flash_tc_backward_f32.cuh"
#include "steps/08_tensor_cores/flash_tc_forward.cuh"
#include "steps/08_tensor_cores/flash_tc_forward_f32.cuh"
#include "steps/08_tensor_cores/forward_configs.cuh"
#include "steps/08_tensor_cores/tc_dkdv_kernel.cuh"
#include "steps/08_tensor_cores/tc_dq_kernel.cuh"
#include "steps/08_tensor_cores/variants.hpp"

namespace fs {

namespace {

// A variant's name (variants.hpp), for the refusals.
std::string name(int variant) { return tc::tc_variant_name(variant); }
// fa2 and deterministic: the variants compiled with dropout and FlashAttention's features.
std::string full_variants() { return name(tc::kFa2) + " and " + name(tc::kDeterministic); }

std::string unsupported(const Shape& s, const PassSettings& settings) {
  const tc::TcVariantRow& v = tc::tc_variant(settings.variant);
  const bool fp32 = settings.dtype == DType::fp32;
  const std::string f32 = name(tc::k3xTf32);
  if (fp32 && !v.fp32)
    return "fp32 runs in variant " + f32 + " (each product as three TF32 ones); " + name(tc::kFa2) +
           " and the others take bf16 or fp16";
  if (!fp32 && v.fp32) return f32 + " is the fp32 variant (--dtype fp32)";
  if (fp32 && !tc::is_f32_head_dim(s.d)) return f32 + " is compiled for d = 32, 64 and 128; got " + std::to_string(s.d);
  if (s.d < 1 || s.d > tc::kMaxHeadDim) return "d must be 1 to 256; got " + std::to_string(s.d);
  if (v.rung && (!tc::is_ladder_head_dim(s.d) || settings.dtype != DType::bf16))
    return "the ladder's rungs (" + name(tc::kR1Mma) + " ... " + name(tc::kR4PInRegs) +
           ") are compiled for bf16 at d = 64 and 128";
  if (!tc::is_tc_head_dim(s.d) && v.plain_only)  // (the rungs: above)
    return name(settings.variant) + " is compiled at d = 64 and 128; other head dimensions run in " + full_variants();
  if (v.ladder_only && !tc::is_ladder_head_dim(s.d))
    return name(settings.variant) +
           " is compiled at d = 64 and 128 (fa2's dK/dV kernel at the other d has its 16-key warps already)";
  if (v.rung && settings.dropout.on())
    return "dropout is compiled into " + full_variants() + "; the ladder's rungs are the forward without it";
  if (v.plain_only && (settings.features.on() || !s.square() || settings.packed.on()))
    return "--window, --softcap, --alibi, --seq-k, --heads-kv and --varlen are compiled into " + full_variants() +
           "; the ladder's rungs and " + name(tc::kKeyWarps) + " are the plain problem";
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

// A forward configuration's tiles (its named fields, forward_configs.cuh).
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

// The backward's tiles, from the kernels' traits.
template <typename Dkdv, typename Dq>
TcBwdTiles bwd_tiles_of() {
  return {Dkdv::kKeys, Dkdv::kQueries, Dkdv::kSplit, Dq::kRows, Dq::kKeys};
}
template <int D>
TcBwdTiles bwd_tiles_of(int variant) {
  using E = __nv_bfloat16;  // the tiles do not depend on the element type
  using B = tc::Bwd<E, D>;
  if constexpr (tc::is_ladder_head_dim(D)) {
    if (variant == tc::kKeyWarps) return bwd_tiles_of<tc::DkdvTraits<E, D, tc::KeyWarps<D>>, typename B::Dq>();
  }
  return bwd_tiles_of<typename B::Dkdv, typename B::Dq>();
}
template <int D>
TcBwdTiles f32_bwd_tiles() {
  using Kt = tc::DkdvF32Traits<D, tc::F32Dkdv<D>>;
  return {Kt::kKeys, Kt::kQueries, 1, 0, 0};
}

}  // namespace

TcBwdTiles tc_backward_tiles(int d, int variant) {
  if (tc::tc_variant(variant).fp32) {
    switch (d) {
      case 32: return f32_bwd_tiles<32>();
      case 64: return f32_bwd_tiles<64>();
      case 128: return f32_bwd_tiles<128>();
      default: return {};
    }
  }
  switch (tc::tc_compiled_head_dim(d)) {
    case 32: return bwd_tiles_of<32>(variant);
    case 64: return bwd_tiles_of<64>(variant);
    case 96: return bwd_tiles_of<96>(variant);
    case 128: return bwd_tiles_of<128>(variant);
    case 256: return bwd_tiles_of<256>(variant);
    default: return {};
  }
}

IoCount io_tc_backward(const Shape& s, bool causal, int variant, int elem_bytes, int window_left, int window_right) {
  return io_flash2_backward(s, causal, tc_backward_tiles(s.d, variant), tc::tc_variant(variant).atomic_dq, elem_bytes,
                            window_left, window_right);
}

TcTiles tc_forward_tiles(int d, int variant) {
  if (tc::is_rung(variant)) return tiles_of<tc::R4PInRegs>();  // the rungs share FA2's tile
  if (tc::tc_variant(variant).fp32) switch (d) {
      case 32: return tiles_of<tc::F32Fwd<32>>();
      case 64: return tiles_of<tc::F32Fwd<64>>();
      case 128: return tiles_of<tc::F32Fwd<128>>();
      default: return {};
    }
  switch (tc::tc_compiled_head_dim(d)) {
    case 32: return tiles_of<tc::Fa2<32>>();
    case 64: return tiles_of<tc::Fa2<64>>();
    case 96: return tiles_of<tc::Fa2<96>>();
    case 128: return tiles_of<tc::Fa2<128>>();
    case 256: return tiles_of<tc::Fa2<256>>();
    default: return {};
  }
}

namespace {

// The layouts the kernels read (row_aligned_strides): cp.async copies 16 bytes, and dQ's
// conversion stores 16, so every row starts on a 16-byte boundary — but at a 16-bit head dimension
// that is not a multiple of 8, whose rows the kernels move element by element (tc_tiles.cuh,
// load_tile_cols and store_pair) and may start anywhere.
Strides tc_strides(const char* name, const void* t, const Strides& st, int heads, int rows, int d, DType dtype) {
  if (dtype != DType::fp32 && d % 8 != 0) return st.or_dense(heads, rows, d);
  return row_aligned_strides("step 08", name, t, st, heads, rows, d, dtype_bytes(dtype));
}

// A head dimension the 16-bit kernels are not compiled at runs in fa2's and deterministic's
// kernels with FlashAttention's features (launchers.cuh, with_features); the others refuse it.
template <class Params>
void check_head_dim(const Params& p, const char* who) {
  const int d = p.shape.d;
  if (d < 1 || d > tc::kMaxHeadDim || !is_16bit(p.dtype))
    throw CudaError(cudaErrorInvalidValue, std::string(who) + ": unsupported d or dtype");
  if (!tc::is_tc_head_dim(d) && tc::tc_variant(p.variant).plain_only)
    throw CudaError(cudaErrorInvalidValue, std::string(who) + ": d = " + std::to_string(d) + " runs in " + full_variants() +
                                               " (" + name(p.variant) + " is compiled at d = 64 and 128)");
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
  if (p.packed.on() && tc::tc_variant(p.variant).plain_only)
    throw CudaError(cudaErrorInvalidValue, "step 08: packed sequences run in " + full_variants());
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
    case 32: return tc::tc_forward_f32_dispatch<32>(p, passes);
    case 64: return tc::tc_forward_f32_dispatch<64>(p, passes);
    default: return tc::tc_forward_f32_dispatch<128>(p, passes);
  }
}

void tc_forward(const FwdParams& params) {
  if (params.dtype == DType::fp32) {
    if (!tc::tc_variant(params.variant).fp32)
      throw CudaError(cudaErrorInvalidValue, "tc_forward: fp32 runs in variant " + name(tc::k3xTf32));
    return tc_forward_tf32(params, 3);
  }
  check_head_dim(params, "tc_forward");
  check_packed(params);
  FwdParams p = params;
  with_strides(p);
  tc::with_element_and_dim(p, [&](auto* e, auto d) {
    using E = std::remove_pointer_t<decltype(e)>;
    if constexpr (!std::is_same_v<E, float>) tc::tc_forward_dispatch<E, decltype(d)::value>(p);  // fp32: above
  });
}

void tc_backward(const BwdParams& params) {
  const bool fp32 = params.dtype == DType::fp32;
  if (fp32 && (!tc::tc_variant(params.variant).fp32 || !tc::is_f32_head_dim(params.shape.d)))
    throw CudaError(cudaErrorInvalidValue, "tc_backward: fp32 runs in variant " + name(tc::k3xTf32) + " at d = 32, 64 or 128");
  if (!fp32) check_head_dim(params, "tc_backward");
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
  tc::with_element_and_dim(p, [&](auto* e, auto d) {
    using E = std::remove_pointer_t<decltype(e)>;
    constexpr int D = decltype(d)::value;
    if constexpr (!std::is_same_v<E, float>)
      tc::tc_backward_dispatch<E, D>(p);
    else if constexpr (tc::is_f32_head_dim(D))
      tc::tc_backward_f32_dispatch<D>(p);
  });
}

StepInfo step08_info() {
  StepInfo s;
  s.id = "08_tensor_cores";
  s.title = "tensor cores: FlashAttention-2 forward and backward on mma.sync, bf16/fp16 in, fp32 accumulate; fp32 as 3xTF32";
  for (const tc::TcVariantRow& v : tc::kTcVariants) s.variants.push_back(v.name);
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
  for (const tc::TcVariantRow& v : tc::kTcVariants)
    if (v.atomic_dq) s.order_dependent.push_back(v.name);  // dQ by atomics: repeats are not bit-identical
  return s;
}

}  // namespace fs
