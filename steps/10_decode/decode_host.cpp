// What step 10's launcher decides on the host, without a GPU: which problems its kernels take and
// the workspace of the splits. Host code, so that the program refuses bad input and the CPU tests
// run without the CUDA kernels; and whether the paging fields make a cache the kernels can read.
#include <cstdint>
#include <string>

#include "steps/10_decode/decode.hpp"
#include "steps/10_decode/split_rule.hpp"

namespace fs::decoding {

std::size_t decode_workspace_bytes(const DecodeShape& s, int num_splits, bool rotary) {
  if (!rotary) return partials_bytes(s, num_splits);  // o_part (rows, splits, d), then lse_part (rows, splits)
  return rotary_q_offset(s, num_splits) + 2 * static_cast<std::size_t>(s.q_elems());  // q's 2-byte elements
}

std::string rotary_unsupported(const DecodeParams& p) {
  const bool tables = p.rotary_cos != nullptr || p.rotary_sin != nullptr;
  if (!tables && p.rotary_dim == 0) return {};
  if (!p.rotary_cos || !p.rotary_sin) return "rotary_cos and rotary_sin come together";
  if (!p.k_new) return "a rotary embedding rotates the appended keys: it needs the new tokens' k and v";
  if (p.rotary_dim < 2 || p.rotary_dim > p.shape.d || p.rotary_dim % 2 != 0)
    return "rotary_dim must be even and in 2..d = " + std::to_string(p.shape.d) + "; got " + std::to_string(p.rotary_dim);
  if (!p.cache_seqlens && std::int64_t(p.cache_len) + p.shape.new_tokens > p.rotary_len)
    return "the rotary tables' " + std::to_string(p.rotary_len) + " positions end before the last new token's (" +
           std::to_string(std::int64_t(p.cache_len) + p.shape.new_tokens - 1) + ")";
  return {};
}

std::string decode_unsupported(const DecodeShape& s, DType dtype, int num_splits) {
  if (dtype != DType::bf16 && dtype != DType::fp16)
    return std::string("the decoding kernels take bf16 or fp16 (mma.sync m16n8k16); got ") + dtype_name(dtype);
  if (s.d != 64 && s.d != 128 && s.d != 256)
    return "d must be 64, 128 or 256 (the decoding kernels are compiled for these); got " + std::to_string(s.d);
  if (s.batch < 1 || s.heads < 1 || s.heads_kv < 1 || s.new_tokens < 1 || s.seqlen_cache < 1)
    return "batch, heads, K/V heads, new tokens and the cache's length must each be at least 1";
  if (s.heads % s.heads_kv != 0)
    return "the query heads (" + std::to_string(s.heads) + ") must be a multiple of the K/V heads (" +
           std::to_string(s.heads_kv) + ")";
  if (s.new_tokens > kMaxNewTokens)
    return "at most " + std::to_string(kMaxNewTokens) + " new tokens per sequence (decoding; a longer chunk is a "
           "prefill, step 08's problem); got " + std::to_string(s.new_tokens);
  if (s.batch > 65535) return "at most 65535 sequences (the grid's z)";
  if (std::int64_t(s.heads_kv) * s.row_blocks() > 65535)
    return "K/V heads × blocks of 16 query rows must be at most 65535 (the grid's y)";
  if (num_splits < 1 || num_splits > kMaxSplits)
    return "the splits must be in 1.." + std::to_string(kMaxSplits) + "; got " + std::to_string(num_splits);
  return {};
}

std::string paging_unsupported(const DecodeShape& s, bool has_block_table, int page_size, int max_blocks_per_seq) {
  if (!has_block_table) {
    if (page_size != 0 || max_blocks_per_seq != 0)
      return "a page size or blocks per sequence without a block table (null block_table: the contiguous cache, "
             "page_size 0)";
    return {};
  }
  // A power of two: the kernels find a key's page and row with a shift and a mask. At least 16: the
  // smallest page the issue asks for (flash_attn's paged kernel takes multiples of 256).
  if (page_size < 16 || (page_size & (page_size - 1)) != 0 || page_size > (1 << 20))
    return "the page size must be a power of two in 16..1048576; got " + std::to_string(page_size);
  if (max_blocks_per_seq < 1) return "a paged cache needs at least one block per sequence in its block table";
  if (std::int64_t(max_blocks_per_seq) * page_size < s.seqlen_cache)
    return "the block table's " + std::to_string(max_blocks_per_seq) + " pages of " + std::to_string(page_size) +
           " keys per sequence hold fewer than seqlen_cache = " + std::to_string(s.seqlen_cache) + " keys";
  return {};
}

std::string batch_idx_unsupported(const DecodeParams& p) {
  if (p.cache_batch_idx && p.block_table)
    return "cache_batch_idx picks sequences of a contiguous cache; a paged cache's are its block table's rows";
  return {};
}

std::string traced_unsupported(const DecodeShape& s, int rotary_dim) {
  if (s.d != kTracedHeadDim)
    return "a traced run takes d = " + std::to_string(kTracedHeadDim) + " (the traced kernels are compiled at it); got " +
           std::to_string(s.d);
  if (rotary_dim > 0) return "a traced run takes no rotary embedding (the IO model does not count its tables' re-reads)";
  return {};
}

std::string append_unsupported(const DecodeShape& s, const std::int32_t* lengths, int cache_len) {
  for (int b = 0; b < (lengths ? s.batch : 1); ++b) {
    const std::int64_t len = lengths ? lengths[b] : cache_len;
    if (len < 0 || len + s.new_tokens > s.seqlen_cache)
      return "appending " + std::to_string(s.new_tokens) + " new tokens to " + std::to_string(len) +
             " cached keys (sequence " + std::to_string(b) + ") overflows the cache's room of " +
             std::to_string(s.seqlen_cache) + " keys";
  }
  return {};
}

}  // namespace fs::decoding
