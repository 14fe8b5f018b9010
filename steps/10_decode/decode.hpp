// Step 10: decoding. A few new query tokens per sequence against a long cache of keys and values,
// as flash_attn_with_kvcache takes them, with the keys split among CTAs (Flash-Decoding) and the
// splits merged by their log-sum-exp. The step's own problem and parameters live here, not in
// common/problem.hpp's FwdParams: the cache's fields (its lengths, later its pages) are this step's.
//
// Layouts, as flash_attn_with_kvcache has them (row-major, contiguous):
//   q        (batch, new_tokens, heads, d)
//   k_cache  (batch, seqlen_cache, heads_kv, d)      v_cache likewise; or paged:
//            (num_blocks, page_size, heads_kv, d)  with block_table (batch, max_blocks_per_seq)
//            int32: key j of sequence b is row j mod page_size of page block_table[b][j / page_size]
//   o        (batch, new_tokens, heads, d)           of q's type
//   lse      (batch, heads, new_tokens)              float32, natural log
// Sequence b holds cache_seqlens[b] keys (≤ seqlen_cache); the new tokens are already in the cache,
// or, with k_new and v_new (DecodeParams), appended to it first: L_b = cache_seqlens[b], or
// cache_seqlens[b] + n when appending. Query head h reads K/V head h / (heads / heads_kv). Causal:
// new token t of n sees keys j ≤ L_b − n + t (the bottom-right corner); a row that
// sees no key (an empty cache, or causal with fewer keys than new tokens) gets O = 0, LSE = −inf.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/dtype.hpp"
#include "common/problem.hpp"

namespace fs::trace {
class DeviceSink;
}  // namespace fs::trace

namespace fs::decoding {

// The CTA's query rows are one m16 tile of the mma: 16 (query head, new token) pairs.
inline constexpr int kRowsPerCta = 16;
// New tokens per sequence the kernels take: decoding, or speculative decoding's few; a longer
// chunk of queries is a prefill, which step 08's forward runs with its 128-row tiles.
inline constexpr int kMaxNewTokens = 16;

// An aggregate: DecodeShape{batch, heads, heads_kv, new_tokens, seqlen_cache, d}.
struct DecodeShape {
  int batch = 1;
  int heads = 32;         // query heads H
  int heads_kv = 8;       // K/V heads; H must be a multiple (grouped-query attention)
  int new_tokens = 1;     // n: query tokens per sequence
  int seqlen_cache = 1;   // the cache's room per sequence (its second dimension)
  int d = 128;

  __host__ __device__ int group() const { return heads / heads_kv; }  // g: query heads per K/V head
  // The query rows of one (sequence, K/V head): its g heads × n tokens, and the CTAs they take.
  __host__ __device__ int group_rows() const { return group() * new_tokens; }
  __host__ __device__ int row_blocks() const { return (group_rows() + kRowsPerCta - 1) / kRowsPerCta; }
  __host__ __device__ std::int64_t q_elems() const { return std::int64_t(batch) * new_tokens * heads * d; }  // and O's
  __host__ __device__ std::int64_t cache_elems() const {  // K's, V's
    return std::int64_t(batch) * seqlen_cache * heads_kv * d;
  }
  __host__ __device__ std::int64_t rows() const { return std::int64_t(batch) * heads * new_tokens; }  // LSE's
};

// What the launcher takes (decode_forward). Tensors of dtype (bf16 or fp16), LSE and the
// workspace float32; every pointer where the kernels run.
struct DecodeParams {
  const void* q = nullptr;        // (batch, new_tokens, heads, d)
  const void* k_cache = nullptr;  // (batch, seqlen_cache, heads_kv, d)
  const void* v_cache = nullptr;  // (batch, seqlen_cache, heads_kv, d)
  // Keys per sequence, (batch) int32 (flash_attn_with_kvcache's cache_seqlens as a tensor); null:
  // every sequence holds cache_len keys (cache_seqlens as an int).
  const std::int32_t* cache_seqlens = nullptr;
  int cache_len = 0;
  void* o = nullptr;              // (batch, new_tokens, heads, d)
  float* lse = nullptr;           // (batch, heads, new_tokens)
  DType dtype = DType::bf16;
  DecodeShape shape;
  float scale = 0.f;              // τ > 0
  bool causal = false;
  // Splits of every sequence's keys, ≥ 1 (the caller resolves 0 with num_splits, split_rule.hpp).
  // Above 1 the splits' partial results go to the workspace and a second kernel merges them.
  int num_splits = 1;
  float* workspace = nullptr;     // decode_workspace_bytes(shape, num_splits) bytes
  cudaStream_t stream = nullptr;
  // A paged cache (flash_attn_with_kvcache's block_table), last so that the fields above keep
  // their offsets in the kernels' parameter: k_cache and v_cache are then
  // (num_blocks, page_size, heads_kv, d), and key j of sequence b is row j mod page_size of page
  // block_table[b · max_blocks_per_seq + j / page_size]. Null: the contiguous cache above.
  // page_size a power of two ≥ 16 (paging_unsupported); max_blocks_per_seq · page_size ≥
  // seqlen_cache, every entry a sequence's keys reach a page in [0, num_blocks).
  const std::int32_t* block_table = nullptr;
  int page_size = 0;
  int max_blocks_per_seq = 0;
  // The new tokens' keys and values to append (flash_attn_with_kvcache's k, v), last so that the
  // fields above keep their offsets: (batch, new_tokens, heads_kv, d) each, of dtype. Null: no
  // append (the new tokens' keys are already in the cache, within cache_seqlens). Set: an append
  // kernel (append.cuh) first writes token t of sequence b at cache key cache_seqlens[b] + t
  // (through the block table when paged), then the attention runs over cache_seqlens[b] + n keys.
  // The caller's cache_seqlens (or cache_len) keep their values: the kernels add n themselves
  // (sequence_keys, kv_cache.cuh). Every cache_seqlens[b] + n must be ≤ seqlen_cache
  // (append_unsupported); the append kernel writes no row past seqlen_cache either way.
  const void* k_new = nullptr;
  const void* v_new = nullptr;
  // Rotary embedding (flash_attn_with_kvcache's rotary_cos, rotary_sin, rotary_interleaved), with an
  // append only: tables (rotary_len, rotary_dim / 2) of dtype, row `pos` holding cos and sin of
  // position pos's angles (rotary.hpp). As the append writes token t of sequence b it rotates the
  // key at position cache_seqlens[b] + t; the queries are rotated at that position too when causal
  // or windowed, and all at cache_seqlens[b] when neither (flash_attn_with_kvcache's rule), into
  // the workspace (decode_workspace_bytes with rotary: q stays the caller's), where the split kernel
  // reads them. Columns past rotary_dim keep their values. A position past the tables is the
  // caller's error (rotary_unsupported checks the one-length form; the kernels clamp it).
  const void* rotary_cos = nullptr;
  const void* rotary_sin = nullptr;
  int rotary_dim = 0;  // even, at most d; 0: no rotary embedding
  int rotary_len = 0;  // the tables' rows: positions 0 .. rotary_len − 1
  bool rotary_interleaved = false;  // pairs (2i, 2i + 1), else (i, i + rotary_dim / 2)
  // flash_attn_with_kvcache's cache_batch_idx, contiguous caches only: (batch) int32, sequence b's
  // keys and values are the cache's sequence cache_batch_idx[b] (a cache of more sequences than the
  // batch, e.g. a server's slots); null: sequence b is the cache's b. cache_seqlens stay the
  // batch's, indexed by b. With an append, indices that repeat write the same rows (whose values
  // then come from any one of them, as in flash_attn).
  const std::int32_t* cache_batch_idx = nullptr;
  // flash_attn_with_kvcache's window_size, softcap and alibi_slopes (common/problem.hpp's ScoreMods,
  // the same as step 08's), aligned to the bottom-right corner: token t of n is query row L − n + t
  // of its sequence of L keys (its diagonal key). In that order: the score τ q·k capped,
  // softcap · tanh(τ q·k / softcap); ALiBi's −slope_h · |L − n + t − j|; then the window keeps keys
  // L − n + t − window_left ≤ j ≤ L − n + t + window_right (−1: that side unbounded), and causal
  // (if set) none past the diagonal. alibi_slopes: float32 where the kernels run, (heads), or
  // (batch, heads) with alibi_batch_stride = heads: row b for sequence b (the batch's, not the
  // cache's: cache_batch_idx does not move it).
  ScoreMods mods;
  // A traced run (step10_decode --trace): the kernels' traced twins record into this sink
  // (decode_trace.cuh has what they record); null, the plain kernels. Traced twins exist at
  // d = kTracedHeadDim alone, and take no rotary embedding (traced_unsupported).
  trace::DeviceSink* trace = nullptr;
};

// The workspace of num_splits splits (0 for one): a partial O (fp32) and an LSE per split of each
// query row, laid out row by row so that the combine reads one contiguous block per row:
//   o_part    (rows, splits, d)     rows in LSE's order: (batch, heads, new_tokens)
//   lse_part  (rows, splits)        after o_part
// and with rotary (DecodeParams::rotary_dim > 0) the rotated queries after them, q's layout and
// its 2-byte elements, at rotary_q_offset bytes (16-byte aligned).
std::size_t decode_workspace_bytes(const DecodeShape& s, int num_splits, bool rotary = false);
// The partial results' bytes alone (0 for one split), and where the rotated queries start.
__host__ __device__ inline std::size_t partials_bytes(const DecodeShape& s, int num_splits) {
  if (num_splits <= 1) return 0;
  return sizeof(float) * static_cast<std::size_t>(s.rows()) * static_cast<std::size_t>(num_splits) *
         static_cast<std::size_t>(s.d + 1);
}
__host__ __device__ inline std::size_t rotary_q_offset(const DecodeShape& s, int num_splits) {
  return (partials_bytes(s, num_splits) + 15) / 16 * 16;
}

// Empty when the kernels take this problem; otherwise why not, in one line (decode_forward throws
// it as a CudaError of cudaErrorInvalidValue).
std::string decode_unsupported(const DecodeShape& s, DType dtype, int num_splits);

// Empty when the paging fields are consistent (no block table and page_size 0: contiguous; or a
// block table, page_size a power of two ≥ 16 and max_blocks_per_seq · page_size ≥ seqlen_cache);
// otherwise why not, in one line (decode_forward throws it as decode_unsupported's).
std::string paging_unsupported(const DecodeShape& s, bool has_block_table, int page_size, int max_blocks_per_seq);

// Empty when cache_batch_idx may be used: null, or with a contiguous cache (a paged cache's
// sequences are its block table's rows); otherwise why not, in one line (decode_forward throws it).
std::string batch_idx_unsupported(const DecodeParams& p);

// Empty when appending n = s.new_tokens tokens fits the cache's room: every length + n ≤
// seqlen_cache (the room of a contiguous sequence; with pages, paging_unsupported has checked that
// the block table's pages hold at least seqlen_cache keys). lengths: the (batch) lengths on the
// host, or null for cache_len as every sequence's length. Otherwise why not, in one line
// (decode_forward checks the cache_len form; per-sequence lengths live on the device there, so the
// caller, who has them, checks them: the program does).
std::string append_unsupported(const DecodeShape& s, const std::int32_t* lengths, int cache_len);

// Empty when the rotary fields are consistent: none (rotary_dim 0, no tables), or tables with an
// append (k_new), rotary_dim even in 2..d, and (cache_seqlens null) cache_len + n ≤ rotary_len;
// otherwise why not, in one line (decode_forward throws it).
std::string rotary_unsupported(const DecodeParams& p);

// Empty when a traced run (DecodeParams::trace) takes a problem of shape s and rotary_dim:
// d = kTracedHeadDim, the one head dimension the traced twins are compiled at (a twin at every d
// and type would double the step's build for traces nobody records), and no rotary embedding (its
// tables' rows are re-read by every chunk that turns a column, which the IO model does not count);
// otherwise why not, in one line (decode_forward throws it).
std::string traced_unsupported(const DecodeShape& s, int rotary_dim);

// The split kernel, and with num_splits > 1 the combine kernel, on p.stream.
void decode_forward(const DecodeParams& p);

// Inputs for timed runs that no check reads (step10_decode without --check): n elements of dtype
// (bf16 or fp16) at p, uniform in [−1, 1) from a hash of (seed, index), written on the GPU on
// `stream`. A cache of 64 sequences × 128K keys is 34 GB, which the host would take minutes to draw
// and copy.
void fill_uniform(void* p, std::int64_t n, DType dtype, std::uint64_t seed, cudaStream_t stream = nullptr);

}  // namespace fs::decoding
