// Step 10 — decoding (Flash-Decoding): the new tokens of each sequence against its KV cache, the
// keys split among CTAs and the splits merged by their log-sum-exp. Step 08's forward walks all of
// a head's keys in one CTA per 128 query rows: with one query row per head that is one CTA per
// head, reading the whole cache alone, and the GPU's bandwidth mostly idle. The HBM traffic is the
// cache's bytes either way, Θ(B · L · H_kv · d) (plus Θ(splits · B · H · n · d) for the partial
// results), and decoding's limit is how fast those bytes arrive: the splits put enough CTAs on
// the GPU to pull them at its bandwidth. Kernels: flash_decode.cuh (the splits), combine.cuh (the
// merge); the schedule decode_cta.cuh, the cache's addressing kv_cache.cuh, the tiles
// decode_configs.cuh, the split rule split_rule.hpp. The kernels compile in the units
// CMakeLists.txt generates from decode_instance.cu.in, one per element type and head dimension.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/check.hpp"
#include "steps/10_decode/decode.hpp"

namespace fs::decoding {

// Defined in decode_launch.cuh; instantiated in the generated units.
template <typename E, int D>
void launch_decode(const DecodeParams& p);

namespace {

template <typename E>
void dispatch_dim(const DecodeParams& p) {
  switch (p.shape.d) {
    case 64: return launch_decode<E, 64>(p);
    case 128: return launch_decode<E, 128>(p);
    default: return launch_decode<E, 256>(p);
  }
}

// splitmix64's finaliser of (seed, i): 64 well-mixed bits per element, no state between threads.
__global__ void fill_uniform_kernel(void* p, std::int64_t n, bool bf16, std::uint64_t seed) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * std::uint64_t(i + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const float x = float(z >> 40) * 0x1p-23f - 1.f;  // 24 bits: [−1, 1)
    if (bf16) static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(x);
    else static_cast<__half*>(p)[i] = __float2half(x);
  }
}

}  // namespace

void fill_uniform(void* p, std::int64_t n, DType dtype, std::uint64_t seed, cudaStream_t stream) {
  if (dtype != DType::bf16 && dtype != DType::fp16)
    throw CudaError(cudaErrorInvalidValue, "fill_uniform: bf16 or fp16 only");
  if (n <= 0) return;
  const std::int64_t blocks = std::min<std::int64_t>((n + 255) / 256, 65536);
  fill_uniform_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(p, n, dtype == DType::bf16, seed);
  FS_CUDA_CHECK(cudaGetLastError());
}

void decode_forward(const DecodeParams& p) {
  if (std::string why = decode_unsupported(p.shape, p.dtype, p.num_splits); !why.empty())
    throw CudaError(cudaErrorInvalidValue, "decode_forward: " + why);
  if (std::string why = paging_unsupported(p.shape, p.block_table != nullptr, p.page_size, p.max_blocks_per_seq);
      !why.empty())
    throw CudaError(cudaErrorInvalidValue, "decode_forward: " + why);
  if (!(p.scale > 0.f)) throw CudaError(cudaErrorInvalidValue, "decode_forward: the softmax scale must be positive");
  if (!p.cache_seqlens && (p.cache_len < 0 || p.cache_len > p.shape.seqlen_cache))
    throw CudaError(cudaErrorInvalidValue, "decode_forward: cache_len must be in [0, seqlen_cache]");
  if ((p.k_new == nullptr) != (p.v_new == nullptr))
    throw CudaError(cudaErrorInvalidValue, "decode_forward: k_new and v_new come together (both null: no append)");
  if (p.k_new && !p.cache_seqlens)  // per-sequence lengths are on the device: the caller checks those
    if (std::string why = append_unsupported(p.shape, nullptr, p.cache_len); !why.empty())
      throw CudaError(cudaErrorInvalidValue, "decode_forward: " + why);
  if (std::string why = batch_idx_unsupported(p); !why.empty())
    throw CudaError(cudaErrorInvalidValue, "decode_forward: " + why);
  if (std::string why = rotary_unsupported(p); !why.empty()) throw CudaError(cudaErrorInvalidValue, "decode_forward: " + why);
  if (p.trace)
    if (std::string why = traced_unsupported(p.shape, p.rotary_dim); !why.empty())
      throw CudaError(cudaErrorInvalidValue, "decode_forward: " + why);
  if ((p.num_splits > 1 || p.rotary_dim > 0) && !p.workspace)  // the partial results go there: without it the kernels write through null
    throw CudaError(cudaErrorInvalidValue, "decode_forward: more than one split, or a rotary embedding, needs the "
                                           "workspace (decode_workspace_bytes)");
  if (p.dtype == DType::bf16)
    dispatch_dim<__nv_bfloat16>(p);
  else
    dispatch_dim<__half>(p);
}

}  // namespace fs::decoding
