// Step 10's CPU reference and its check: attention of the new tokens against a KV cache, exactly as
// the kernels define it (decode.hpp) — a contiguous or paged cache (its rows gathered through the
// block table), per-sequence lengths, grouped K/V heads, the causal mask at the bottom-right
// corner — row by row, in the project's two precisions (common/reference.hpp):
//   T = double  the reference the kernels are checked against;
//   T = float   a plain float32 implementation that rounds where a 16-bit kernel must (P̃ before
//               P̃V, and O), whose own error against the double one sets the tolerance.
// verify_decode holds the kernels' O and LSE to the project's rule (common/verify.hpp): at most
// twice the float32 error plus the floor, O's floor one unit of the dtype in the last place.
#pragma once

#include <cstdint>
#include <vector>

#include "common/verify.hpp"
#include "steps/10_decode/decode.hpp"

namespace fs::decoding {

// A rotary embedding's tables (rotary.hpp, DecodeParams::rotary_*): (len, dim / 2) each, float
// values of the run's dtype, row pos holding cos and sin of θ_{pos,i} = pos · 10000^(−2i / dim).
struct RotaryTables {
  int dim = 0;
  int len = 0;
  bool interleaved = false;
  std::vector<float> cos, sin;
};
RotaryTables rotary_tables(int len, int dim, bool interleaved, DType dtype);

// A decoding problem on the host, as float values of the run's dtype, in the kernels' layouts.
struct DecodeHost {
  DecodeShape shape;
  DType dtype = DType::bf16;
  std::vector<float> q;              // (batch, new_tokens, heads, d)
  std::vector<float> k, v;           // (batch, seqlen_cache, heads_kv, d), or paged (below)
  std::vector<std::int32_t> seqlens;  // (batch): keys per sequence, each in [0, seqlen_cache]
  // Paged (page_size > 0): k, v are (num_blocks, page_size, heads_kv, d) and key j of sequence b
  // is row j mod page_size of page block_table[b · max_blocks_per_seq + j / page_size] (decode.hpp).
  int page_size = 0;
  int max_blocks_per_seq = 0;
  std::vector<std::int32_t> block_table;  // (batch, max_blocks_per_seq)
  // Contiguous only: sequence b's keys are the cache's sequence cache_batch_idx[b] (empty: b), k
  // and v then holding as many sequences as the cache has (DecodeParams::cache_batch_idx).
  std::vector<std::int32_t> cache_batch_idx;
  // The score modifiers of the run (DecodeParams::mods as values: the window, softcap, the ALiBi
  // slopes — one per query head, or with alibi_batch_stride = heads a row per sequence of the
  // batch), which the reference applies as the kernels do.
  ScoreFeatures mods;
  int num_blocks() const {  // pages in k (and v); 0 contiguous
    return page_size ? static_cast<int>(k.size() / (std::size_t(page_size) * shape.heads_kv * shape.d)) : 0;
  }
  // Key j's row of sequence b, K/V head hk, in k or v (either layout): the reference's one gather.
  std::int64_t key_row(int b, int hk, int j) const;
  // Appending (flash_attn_with_kvcache's k, v): this problem with the new tokens' keys and values
  // k_new, v_new, (batch, new_tokens, heads_kv, d), written at keys seqlens[b] .. seqlens[b] + n − 1
  // of each sequence (through the block table when paged; every other row as it was) and the
  // lengths grown by n — the problem the kernels attend over after their append, so that the
  // reference of an appending run is decode_reference_row on it. Throws std::invalid_argument
  // with append_unsupported's line when a sequence would overflow seqlen_cache. With `rotary`, the
  // new keys are turned at their positions seqlens[b] + t as they are written, and q (causal, or
  // `mods` windowed: at seqlens[b] + t; else at seqlens[b]), each value rounded to dtype, as the
  // append kernel does. per_token: q at each token's position (pass causal || windowed).
  DecodeHost appended(const std::vector<float>& k_new, const std::vector<float>& v_new,
                      const RotaryTables* rotary = nullptr, bool causal = false) const;
};

// The new tokens' keys or values for an append, (batch, new_tokens, heads_kv, d): standard normal,
// rounded to dtype.
std::vector<float> random_new_rows(const DecodeShape& s, DType dtype, std::uint64_t seed);

// Fresh standard-normal q, k and v (never zeros) rounded to dtype, the cache filled to its room
// (a sequence's keys past its length are there too, and must not count); seqlens.size() == batch.
DecodeHost random_decode_problem(const DecodeShape& s, const std::vector<std::int32_t>& seqlens, DType dtype,
                                 std::uint64_t seed);

// A block table of `entries` pages drawn without repeats from pages [0, pages), in an order
// shuffled by seed: (batch, max_blocks_per_seq) entries for paged_layout and for the program's
// timed runs, whose inputs never leave the GPU.
std::vector<std::int32_t> shuffled_block_table(int entries, int pages, std::uint64_t seed);

// A batch of idx.size() sequences that read the cache of `cache` (a contiguous problem whose
// sequences are the cache's: k, v, their lengths) through cache_batch_idx = idx: fresh q for the
// batch (drawn from seed, rounded to its dtype), sequence b's length the cache's idx[b]'s.
DecodeHost batch_from_cache(const DecodeHost& cache, const std::vector<std::int32_t>& idx, std::uint64_t seed);

// The same problem (q, the cache's values, lengths) with its cache laid out in pages of page_size
// keys (a power of two ≥ 16) in shuffled order: ⌈seqlen_cache / page_size⌉ pages per sequence,
// `spare` pages more that no sequence uses, the pages' order a permutation drawn from seed. Every
// row that is not one of a sequence's keys [0, L_b) (the rest of its last page, the spare pages)
// is NaN, so that a kernel reading one shows it.
DecodeHost paged_layout(const DecodeHost& contiguous, int page_size, std::uint64_t seed, int spare = 1);

// Row `row` of the output in LSE's order, (batch, heads, new_tokens): o_row[0..d) and its LSE.
// A row that sees no key gets O = 0 and LSE = −inf.
template <typename T>
void decode_reference_row(const DecodeHost& h, float scale, bool causal, std::int64_t row, T* o_row, T* lse);

// The kernels' O, (batch, new_tokens, heads, d), and LSE, (batch, heads, new_tokens), as floats,
// against the reference: every row, or a sample of them (each sequence's first and last token's
// rows among them) when the problem costs more than `budget` multiply-adds.
CheckReport verify_decode(const DecodeHost& h, float scale, bool causal, const float* o, const float* lse,
                          std::uint64_t seed, std::int64_t budget = kForwardCheckBudget);

}  // namespace fs::decoding
