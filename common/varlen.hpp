// Packed sequences of their own lengths on the host (flash_attn_varlen_func's cu_seqlens;
// PackedSeqs, common/problem.hpp): the command line's --varlen, the cu_seqlens files of --load and
// --save, and the checks that a packing fits its problem. Problems are one line, thrown as
// InputError (exit code 2).
//
//   fs::PackedSeqs p = fs::parse_varlen("128,0,77:300,5");  // cu_q {0,128,128,205,210}, cu_k {0,128,128,428,433}
//   if (auto why = fs::packed_problem(p, shape); !why.empty()) ...
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/problem.hpp"

namespace fs {

// Sequences a packed run may hold: the kernels give each its own layer of the grid (grid z).
constexpr int kMaxSequences = 65535;

// --varlen SPEC: each sequence's length, "128,0,77:300,5" (QUERIES:KEYS where they differ; 0 an
// empty sequence), or cu_seqlens from "FILE.npy" (the queries' and the keys' alike) or
// "Q.npy,K.npy" (cu_seqlens_q, cu_seqlens_k). Throws InputError beginning "--varlen" (or naming
// the file) on a length that is not a decimal number of tokens, totals past 2^31 − 1 or of no
// token, more than kMaxSequences sequences, or a file read_cu_seqlens refuses.
PackedSeqs parse_varlen(const std::string& spec);

// A cu_seqlens file: a 1-D int32 or int64 .npy of the sequences' prefix sums, at least 2 values,
// from 0, non-decreasing, within int32. Throws InputError "<path>: <what>".
std::vector<std::int32_t> read_cu_seqlens(const std::string& path);

// --load DIR's sequences: cu_seqlens_q.npy and cu_seqlens_k.npy, which go together (one without
// the other is refused). has_cu_seqlens: whether DIR holds either.
bool has_cu_seqlens(const std::string& dir);
PackedSeqs read_cu_seqlens_dir(const std::string& dir);
// --save DIR: the same two files (int32).
void write_cu_seqlens_dir(const std::string& dir, const PackedSeqs& p);

// Why `p` cannot pack the problem `s` (off: never): cu_seqlens of unequal lengths, not from 0,
// decreasing, more than kMaxSequences sequences; B ≠ 1, or totals other than N and Nk. Empty
// when it can.
std::string packed_problem(const PackedSeqs& p, const Shape& s);

// The sequences in words, for the programs' output: "4 sequences of 0 to 300 queries and 5 to
// 300 keys (1 empty)", "3 sequences of 17 to 64 tokens".
std::string describe(const PackedSeqs& p);

}  // namespace fs
