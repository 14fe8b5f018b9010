// Step 09 — Hopper: the host side. Checks what the kernels take, builds the TMA tensor maps
// (cuTensorMapEncodeTiled, found in the driver at run time so that nothing links libcuda), and
// dispatches to the forward of the element type and head dimension (variants.hpp names the
// variants, configs.cuh has their configs, flash_hopper_forward.cuh the kernel, hopper.cuh the
// instructions).
#include "steps/09_hopper/hopper.hpp"

#include <cuda.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

#include <string>
#include <type_traits>

#include "common/check.hpp"
#include "common/device.hpp"
#include "common/io_model.hpp"
#include "common/strides_check.hpp"
#include "steps/09_hopper/backward_configs.cuh"
#include "steps/09_hopper/configs.cuh"
#include "steps/09_hopper/flash_hopper_fp8.cuh"
#include "steps/09_hopper/rung_wgmma.cuh"
#include "steps/09_hopper/variants.hpp"

namespace fs {

namespace hopper {

namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    FS_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || !f)
      throw CudaError(cudaErrorNotSupported, "step 09: the driver has no cuTensorMapEncodeTiled (TMA needs CUDA 12)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

}  // namespace

CUtensorMap make_tensor_map(const void* base, DType dtype, const Strides& strides, int d, int rows, int heads,
                            int batches, int box_rows) {
  const Strides st = strides.or_dense(heads, rows, d);
  const std::uint64_t e = dtype_bytes(dtype);
  // Innermost first: d, rows, heads, batches; strides in bytes for all but the first.
  const cuuint64_t dims[4] = {cuuint64_t(d), cuuint64_t(rows), cuuint64_t(heads), cuuint64_t(batches)};
  const cuuint64_t bytes[3] = {st.row * e, st.head * e, st.batch * e};
  const cuuint32_t box[4] = {64, cuuint32_t(box_rows), 1, 1};
  const cuuint32_t unit[4] = {1, 1, 1, 1};
  CUtensorMap map{};
  const CUresult r = encode_tiled()(&map, dtype == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                                    4, const_cast<void*>(base), dims, bytes, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                    CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw CudaError(cudaErrorInvalidValue, "step 09: cuTensorMapEncodeTiled failed (error " + std::to_string(int(r)) +
                                               "): a tensor's address or strides are not what TMA takes");
  return map;
}

CUtensorMap make_tensor_map_fp8(const void* base, int cols, int rows, int heads, int batches, int box_rows) {
  // Bytes, dense: (cols, rows, heads, batches), boxes of 128 columns (128 bytes) × box_rows rows.
  const cuuint64_t dims[4] = {cuuint64_t(cols), cuuint64_t(rows), cuuint64_t(heads), cuuint64_t(batches)};
  const cuuint64_t row = cuuint64_t(cols);
  const cuuint64_t bytes[3] = {row, row * cuuint64_t(rows), row * cuuint64_t(rows) * cuuint64_t(heads)};
  const cuuint32_t box[4] = {128, cuuint32_t(box_rows), 1, 1};
  const cuuint32_t unit[4] = {1, 1, 1, 1};
  CUtensorMap map{};
  const CUresult r = encode_tiled()(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 4, const_cast<void*>(base), dims, bytes, box,
                                    unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw CudaError(cudaErrorInvalidValue, "step 09: cuTensorMapEncodeTiled failed for an e4m3 tensor (error " +
                                               std::to_string(int(r)) + ")");
  return map;
}

CUtensorMap make_dq_acc_map(float* dq_acc, const Shape& s) {
  // (d, N, H, B) float32 in rows of step 08's compiled head dimension (tc_dq_acc_cols ≥ d, which its
  // preprocess zeroes and its convert reads); boxes of 32 columns (128 bytes) × 64 rows, as the kernel
  // stages them, their adds past d dropped.
  const cuuint64_t dims[4] = {cuuint64_t(s.d), cuuint64_t(s.N), cuuint64_t(s.H), cuuint64_t(s.B)};
  const cuuint64_t row = cuuint64_t(tc::tc_dq_acc_cols(s)) * sizeof(float);
  const cuuint64_t bytes[3] = {row, row * cuuint64_t(s.N), row * cuuint64_t(s.N) * cuuint64_t(s.H)};
  const cuuint32_t box[4] = {32, 64, 1, 1};
  const cuuint32_t unit[4] = {1, 1, 1, 1};
  CUtensorMap map{};
  const CUresult r = encode_tiled()(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, dq_acc, dims, bytes, box, unit,
                                    CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw CudaError(cudaErrorInvalidValue, "step 09: cuTensorMapEncodeTiled failed for dQacc (error " +
                                               std::to_string(int(r)) + ")");
  return map;
}

int block_n(int d, int variant) {
  using E = __nv_bfloat16;  // the tiles do not depend on the element type
  if (variant == kFp8) return Fp8Config<E>::kBlockN;
  if (is_rung(variant)) d = kLadderHeadDim;  // the rungs are compiled there only
  auto keys = [](auto cfg) { return decltype(cfg)::kBlockN; };
  switch (compiled_head_dim(d)) {
    case 64: return with_forward_config<E, 64>(variant, keys);
    case 128: return with_forward_config<E, 128>(variant, keys);
    default: return with_forward_config<E, 256>(variant, keys);
  }
}

int sm_count() {
  int device = 0, count = 0;
  FS_CUDA_CHECK(cudaGetDevice(&device));
  FS_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  return count;
}

}  // namespace hopper

namespace {

// The kernels are sm_90a's. Without a GPU (a build machine) nothing is refused on that ground,
// so that the IO models and plans are those of the H200 the docs were measured on.
std::string gpu_refusal() {
  static const std::string why = [] {
    if (!gpu_unavailable_reason().empty()) return std::string();
    const DeviceInfo dev = query_device();
    if (dev.cc_major == 9 && dev.cc_minor == 0) return std::string();
    return "step 09's kernels are Hopper's (sm_90a: TMA, wgmma); this GPU is sm_" + std::to_string(dev.cc_major) +
           std::to_string(dev.cc_minor);
  }();
  return why;
}

std::string unsupported(const Shape& s, const PassSettings& settings) {
  if (!is_16bit(settings.dtype)) return "step 09 takes bf16 or fp16 (fp32 runs on the tensor cores in step 08's 3xtf32)";
  if (!hopper::runs_head_dim(s.d))
    return "d must be a multiple of 8 up to 256 (the kernels are compiled at 64, 128 and 256, the sizes between run padded "
           "on chip, and TMA takes rows of 16-byte multiples; step 08 takes any d); got " + std::to_string(s.d);
  if (hopper::is_rung(settings.variant) && (s.d != hopper::kLadderHeadDim || settings.dtype != DType::bf16)) {
    std::string rungs;  // their names, from the table
    for (int v = 0; v < hopper::kHopperVariants; ++v)
      if (hopper::is_rung(v)) rungs += std::string(rungs.empty() ? "" : ", ") + hopper::hopper_variant(v).name;
    return "the ladder's rungs (" + rungs + ") are compiled for bf16 at d = 128";
  }
  if (settings.variant == hopper::kFp8 && s.d != hopper::kFp8HeadDim)
    return "fp8 is compiled for d = 128 (a row of Q or K is one 128-byte box of e4m3); got " + std::to_string(s.d);
  if (!s.square() || s.kv_heads() != s.H) return "step 09 takes N keys and H heads of K and V (--seq-k, --heads-kv: step 08)";
  if (!(settings.scale > 0.f)) return "step 09's kernels take a positive softmax scale";
  return gpu_refusal();
}

std::string unsupported_backward(const Shape& s, const PassSettings& settings) {
  if (settings.variant == hopper::kFp8)
    return "fp8 is a forward only (as FlashAttention-3's FP8 is): train with fa3 or deterministic";
  if (!hopper::runs_backward_head_dim(s.d))
    return "step 09's backward takes d up to 128 (compiled at 64 and 128; at 256 a warpgroup's dK and dV do not fit "
           "its registers: step 08's backward takes d up to 256); got " + std::to_string(s.d);
  return {};
}

// A trace records the kernels' tiles, D columns wide: at a d they run padded, not the problem's.
std::string untraced_padded(const Shape& s, const PassSettings&) {
  if (hopper::is_head_dim(s.d) || !hopper::runs_head_dim(s.d)) return {};
  return "step 09 is traced at d = 64, 128 or 256, where its tiles are the problem's; d = " + std::to_string(s.d) +
         " runs in the d = " + std::to_string(hopper::compiled_head_dim(s.d)) + " kernels, padded on chip";
}

// fp8's quantizer: Q, K and V read in the problem's type, written as e4m3 (Vᵀ padded to 224 keys),
// and a scale per block of a head (128 rows of Q, 224 of K and of V). No event of a trace records
// it.
UntracedIo fp8_quantizer_io(const Shape& s, const PassSettings& settings) {
  const hopper::Fp8Layout l = hopper::fp8_layout(s);
  const std::int64_t e = static_cast<std::int64_t>(dtype_bytes(settings.dtype)), heads = s.heads();
  return {"quantize_fp8_kernel: Q, K, V to e4m3 and their scales", 3 * s.elems() * e,
          2 * s.elems() + heads * s.d * l.n_pad + heads * (l.blocks_q + 2 * l.blocks_kv) * std::int64_t(sizeof(float)),
          {}};
}

// fp8: the kernel reads one byte per element of Q, K and V and writes O in the problem's type; the
// quantizer's bytes on top.
IoCount io_forward(const Shape& s, const PassSettings& settings) {
  const int e = static_cast<int>(dtype_bytes(settings.dtype));
  if (settings.variant != hopper::kFp8)
    return io_flash2_forward(s, settings.causal, 128, hopper::block_n(s.d, settings.variant), e);
  IoCount io = io_flash2_forward(s, settings.causal, 128, hopper::block_n(s.d, settings.variant), 1);
  io.write_bytes += s.elems() * (e - 1);  // O in bf16 or fp16, not one byte
  const UntracedIo q = fp8_quantizer_io(s, settings);
  io.read_bytes += q.read_bytes;
  io.write_bytes += q.write_bytes;
  return io;
}

std::vector<UntracedIo> untraced_io(const Shape& s, const PassSettings& settings, const std::string& pass) {
  if (pass != "fwd" || settings.variant != hopper::kFp8) return {};
  return {fp8_quantizer_io(s, settings)};
}

std::size_t fwd_ws_bytes(const Shape& s, const PassSettings& settings) {
  return settings.variant == hopper::kFp8 ? hopper::fp8_layout(s).bytes : 0;
}

// Step 08's atomic backward's bytes with this step's tiles: the reduce-adds read and write dQacc
// as the atomics did.
IoCount io_backward(const Shape& s, const PassSettings& settings) {
  return io_flash2_backward(s, settings.causal, hopper::backward_tiles(s.d), true,
                            static_cast<int>(dtype_bytes(settings.dtype)));
}

std::size_t bwd_ws_bytes(const Shape& s, const PassSettings&) {
  return tc::tc_bwd_workspace_bytes(s) + hopper::hopper_order_bytes(s, hopper::backward_tiles(s.d).queries);
}

// The plain problem only, and every tensor's strides as the kernels read them: TMA reads each
// through its map (addresses 16-byte aligned, strides multiples of 16 bytes: row_aligned_strides),
// and the stores of O, dK, dV and dQ use the strides filled in here. FwdParams and BwdParams alike.
template <class Params>
Params with_layouts(const Params& params, const char* who) {
  const Shape& s = params.shape;
  if (params.dropout.on() || params.mods.on() || params.packed.on() || !s.square() || s.kv_heads() != s.H)
    throw CudaError(cudaErrorInvalidValue, std::string(who) + ": the plain problem only (no dropout, score mods, "
                                                              "packed sequences, or K/V of other shapes)");
  Params p = params;
  auto fill = [&](const char* name, const void* t, Strides& st) {
    st = row_aligned_strides("step 09", name, t, st, s.H, s.N, s.d, 2);
  };
  fill("q", p.q, p.q_strides);
  fill("k", p.k, p.k_strides);
  fill("v", p.v, p.v_strides);
  fill("o", p.o, p.o_strides);
  if constexpr (std::is_same_v<Params, BwdParams>) {
    fill("dout", p.dout, p.dout_strides);
    fill("dq", p.dq, p.dq_strides);
    fill("dk", p.dk, p.dk_strides);
    fill("dv", p.dv, p.dv_strides);
  }
  return p;
}

}  // namespace

void hopper_forward(const FwdParams& params) {
  if (!is_16bit(params.dtype) || !hopper::runs_head_dim(params.shape.d))
    throw CudaError(cudaErrorInvalidValue, "hopper_forward: bf16 or fp16 at d a multiple of 8 up to 256");
  const FwdParams p = with_layouts(params, "hopper_forward");
  const bool bf16 = p.dtype == DType::bf16;
  if (p.part != FwdPart::kBoth && p.variant != hopper::kFp8)
    throw CudaError(cudaErrorInvalidValue, "hopper_forward: only fp8 has a part to prepare (FwdParams::part)");
  if (p.variant == hopper::kFp8) {
    if (p.shape.d != hopper::kFp8HeadDim || !p.workspace)
      throw CudaError(cudaErrorInvalidValue, "hopper_forward: fp8 takes d = 128 and a workspace "
                                             "(StepInfo::fwd_workspace bytes: the e4m3 tensors and their scales)");
    return bf16 ? hopper::forward_fp8_bf16(p) : hopper::forward_fp8_fp16(p);
  }
  switch (hopper::compiled_head_dim(p.shape.d)) {
    case 64: return bf16 ? hopper::forward_bf16_d64(p) : hopper::forward_fp16_d64(p);
    case 128: return bf16 ? hopper::forward_bf16_d128(p) : hopper::forward_fp16_d128(p);
    default: return bf16 ? hopper::forward_bf16_d256(p) : hopper::forward_fp16_d256(p);
  }
}

void hopper_backward(const BwdParams& params) {
  if (!is_16bit(params.dtype) || !hopper::runs_backward_head_dim(params.shape.d))
    throw CudaError(cudaErrorInvalidValue, "hopper_backward: bf16 or fp16 at d a multiple of 8 up to 128");
  if (!params.workspace)  // D, LSE's copy, dQacc and the counters live there
    throw CudaError(cudaErrorInvalidValue, "hopper_backward: no workspace (BwdParams::workspace, StepInfo::bwd_workspace bytes)");
  const BwdParams p = with_layouts(params, "hopper_backward");
  const bool bf16 = p.dtype == DType::bf16;
  if (hopper::compiled_head_dim(p.shape.d) == 64) return bf16 ? hopper::backward_bf16_d64(p) : hopper::backward_fp16_d64(p);
  return bf16 ? hopper::backward_bf16_d128(p) : hopper::backward_fp16_d128(p);
}

StepInfo step09_info() {
  StepInfo s;
  s.id = "09_hopper";
  s.title = "Hopper: forward and backward on TMA, wgmma and a producer warpgroup, FlashAttention-3's schedules; "
            "bf16/fp16, and an FP8 (e4m3) forward";
  for (int i = 0; i < hopper::kHopperVariants; ++i) {
    const hopper::HopperVariantRow v = hopper::hopper_variant(i);
    s.variants.push_back(v.name);
    // dQ is added up by TMA reduce-adds in the order they land; deterministic orders them.
    if (v.backward == hopper::HopperBackward::kAtomicDq) s.order_dependent.push_back(v.name);
    // Q, K, V rounded to e4m3 (fp8.cuh): checked under the FP8 rule.
    if (v.inputs == hopper::HopperInputs::kE4m3) s.e4m3.push_back(v.name);
  }
  s.forward = hopper_forward;
  s.backward = hopper_backward;
  s.fwd_workspace_bytes = fwd_ws_bytes;
  s.bwd_workspace_bytes = bwd_ws_bytes;
  s.untraced_io = untraced_io;
  s.unsupported = unsupported;
  s.unsupported_backward = unsupported_backward;
  s.untraced = untraced_padded;
  s.io_forward = io_forward;
  s.io_backward = io_backward;
  s.strides = true;
  s.dtypes = {DType::bf16, DType::fp16};
  return s;
}

}  // namespace fs
