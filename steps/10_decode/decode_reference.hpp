// Step 10's CPU reference and its check: attention of the new tokens against a KV cache, exactly as
// the kernels define it (decode.hpp) — per-sequence lengths, grouped K/V heads, the causal mask at
// the bottom-right corner — row by row, in the project's two precisions (common/reference.hpp):
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

// A decoding problem on the host, as float values of the run's dtype, in the kernels' layouts.
struct DecodeHost {
  DecodeShape shape;
  DType dtype = DType::bf16;
  std::vector<float> q;              // (batch, new_tokens, heads, d)
  std::vector<float> k, v;           // (batch, seqlen_cache, heads_kv, d)
  std::vector<std::int32_t> seqlens;  // (batch): keys per sequence, each in [0, seqlen_cache]
};

// Fresh standard-normal q, k and v (never zeros) rounded to dtype, the cache filled to its room
// (a sequence's keys past its length are there too, and must not count); seqlens.size() == batch.
DecodeHost random_decode_problem(const DecodeShape& s, const std::vector<std::int32_t>& seqlens, DType dtype,
                                 std::uint64_t seed);

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
