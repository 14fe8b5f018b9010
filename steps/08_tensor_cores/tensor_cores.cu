// Step 08 — tensor cores: step 04's FlashAttention-2 forward with its two matrix products on
// the tensor cores (mma.sync m16n8k16: bf16 or fp16 in, fp32 accumulate), as FlashAttention-2
// itself runs on A100 and H100. The algorithm, the tiling and the HBM traffic are step 04's
// (Θ(N²d²/M), now in 2-byte elements); what changes is who computes the products and how the
// tiles reach them: flash_tc_forward.cuh has the kernel and its ladder of variants, mma.cuh the
// instructions, forward_configs.cuh the tiles of each variant.
#include "steps/08_tensor_cores/tensor_cores.hpp"

#include <string>

#include "common/check.hpp"
#include "common/io_model.hpp"
#include "steps/08_tensor_cores/forward_configs.cuh"

namespace fs {

namespace {

bool is_tc_head_dim(int d) { return d == 32 || d == 64 || d == 96 || d == 128 || d == 256; }

std::string unsupported(const Shape& s, const PassSettings& settings) {
  if (!is_tc_head_dim(s.d))
    return "d must be 32, 64, 96, 128 or 256 (the tensor-core kernels are compiled for these); got " + std::to_string(s.d);
  if (settings.variant != tc::kFa2 && (!tc::is_ladder_head_dim(s.d) || settings.dtype != DType::bf16))
    return "the ladder's rungs (every variant but fa2) are compiled for bf16 at d = 64 and 128";
  if (s.heads() > 65535) return "B·H must be at most 65535 (grid y)";
  if (!(settings.scale > 0.f)) return "the tensor-core kernels take a positive softmax scale";
  return {};
}

IoCount io_forward(const Shape& s, const PassSettings& settings) {
  const TcTiles t = tc_forward_tiles(s.d, settings.variant);
  return io_flash2_forward(s, settings.causal, t.Br, t.Bc, static_cast<int>(dtype_bytes(settings.dtype)));
}

template <typename Cfg>
TcTiles tiles_of() {
  return {Cfg::kBlockM, Cfg::kBlockN};
}

}  // namespace

TcTiles tc_forward_tiles(int d, int variant) {
  using E = __nv_bfloat16;  // the tiles do not depend on the element type
  if (variant != tc::kFa2) return tiles_of<tc::R4PInRegs<E, 64>>();  // the rungs share FA2's tile
  switch (d) {
    case 32: return tiles_of<tc::Fa2<E, 32>::Cfg>();
    case 64: return tiles_of<tc::Fa2<E, 64>::Cfg>();
    case 96: return tiles_of<tc::Fa2<E, 96>::Cfg>();
    case 128: return tiles_of<tc::Fa2<E, 128>::Cfg>();
    case 256: return tiles_of<tc::Fa2<E, 256>::Cfg>();
    default: return {};
  }
}

void tc_forward(const FwdParams& p) {
  const bool bf16 = p.dtype == DType::bf16;
  if (!is_tc_head_dim(p.shape.d) || !is_16bit(p.dtype))
    throw CudaError(cudaErrorInvalidValue, "tc_forward: unsupported d or dtype");
  switch (p.shape.d) {
    case 32: return bf16 ? tc::forward_bf16_d32(p) : tc::forward_fp16_d32(p);
    case 64: return bf16 ? tc::forward_bf16_d64(p) : tc::forward_fp16_d64(p);
    case 96: return bf16 ? tc::forward_bf16_d96(p) : tc::forward_fp16_d96(p);
    case 128: return bf16 ? tc::forward_bf16_d128(p) : tc::forward_fp16_d128(p);
    default: return bf16 ? tc::forward_bf16_d256(p) : tc::forward_fp16_d256(p);
  }
}

StepInfo step08_info() {
  StepInfo s;
  s.id = "08_tensor_cores";
  s.title = "tensor cores: the FlashAttention-2 forward on mma.sync, bf16/fp16 in, fp32 accumulate";
  s.variants = {"fa2", "r1_mma", "r2_swizzle", "r3_pipeline", "r4_p_in_regs"};
  s.forward = tc_forward;
  s.unsupported = unsupported;
  s.io_forward = io_forward;
  s.dtypes = {DType::bf16, DType::fp16};
  return s;
}

}  // namespace fs
