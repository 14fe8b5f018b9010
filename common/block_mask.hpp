// Block masks for block-sparse FlashAttention (step 06; docs/notation.md, Algorithm 5 and
// Proposition 4): the Tr × Tc grid of (query block, key block) tiles that are computed, the
// patterns the step's program offers (local, global + local, random, the flat block butterfly
// of Pixelated Butterfly, ...), the compact per-row / per-column lists the kernels walk, and
// .npy files so that users can bring their own mask (np.save("blocks.npy", mask)).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fs {

// A block mask over the Tr × Tc grid of (query block, key block) pairs (docs/notation.md, Algorithm 5):
// block (i, j) covers queries [i·block_r, (i+1)·block_r) and keys [j·block_c, (j+1)·block_c),
// the last row and column cut at N. Tile (i, j) is computed when at(i, j), skipped otherwise.
struct BlockMask {
  int block_r = 128, block_c = 128;  // elements per block: queries, keys
  int Tr = 0, Tc = 0;                // ⌈N/block_r⌉, ⌈N/block_c⌉
  std::vector<std::uint8_t> dense;   // (Tr, Tc), row-major, each 0 or 1

  // Whether block (i, j) is computed; 0 ≤ i < Tr, 0 ≤ j < Tc (not checked).
  bool at(int i, int j) const { return dense[std::size_t(i) * Tc + j] != 0; }
  void set(int i, int j, bool on) { dense[std::size_t(i) * Tc + j] = on ? 1 : 0; }
  std::int64_t nonzero() const;      // blocks computed
  double density() const;            // nonzero / (Tr·Tc): the fraction s of Proposition 4
  // Whether `query` attends to `key` under this mask alone (the causal mask, if any, is
  // separate): at(query / block_r, key / block_c). Both in [0, N).
  bool visible(std::int64_t query, std::int64_t key) const {
    return at(int(query / block_r), int(key / block_c));
  }
};
bool operator==(const BlockMask& a, const BlockMask& b);  // same blocks, grid and mask
inline bool operator!=(const BlockMask& a, const BlockMask& b) { return !(a == b); }

// All zeros, Tr = ⌈N/block_r⌉ and Tc = ⌈N/block_c⌉. Throws InputError when N or a block
// size is below 1, or the grid has more than 2^30 blocks.
BlockMask empty_mask(int N, int block_r, int block_c);

// The compact form the kernels walk (CSR and CSC of the mask): per block row the nonzero key
// blocks (forward), per block column the nonzero query blocks (backward), both ascending.
struct BlockLists {
  int Tr = 0, Tc = 0;
  std::vector<int> row_ptr, col_idx;  // row i: col_idx[row_ptr[i] .. row_ptr[i+1]); row_ptr (Tr + 1)
  std::vector<int> col_ptr, row_idx;  // column j: row_idx[col_ptr[j] .. col_ptr[j+1]); col_ptr (Tc + 1)
  std::int64_t nonzero() const { return row_ptr.empty() ? 0 : row_ptr.back(); }
};

// The lists of `m`. causal = true also drops the blocks that lie entirely above the diagonal
// (every key of the block after every query of the block: j·block_c > (i+1)·block_r − 1), so
// that causal composes with the mask; the blocks the diagonal crosses stay, and the kernels
// mask their upper part element by element.
BlockLists to_lists(const BlockMask& m, bool causal = false);
// The inverse of to_lists(m, false): the mask whose nonzero blocks are the row lists (of
// to_lists(m, true): m without the blocks causal drops). Throws InputError when the lists are
// inconsistent: pointer sizes, an index out of range or not ascending, or column lists that
// name other blocks than the row lists (empty column lists are not checked).
BlockMask from_lists(const BlockLists& l, int block_r, int block_c);

// Pattern generators. N = sequence length, square blocks of `block` elements, T = ⌈N/block⌉
// block rows and columns; (i, j) = (query block, key block). Bad parameters throw InputError.
BlockMask pattern_dense(int N, int block);                // all ones
BlockMask pattern_local(int N, int block, int window);   // |i − j| ≤ window (in blocks), window ≥ 0
// Local, plus the first n_global block rows and block columns all ones (0 ≤ n_global ≤ T).
BlockMask pattern_global_local(int N, int block, int window, int n_global);
BlockMask pattern_causal_block(int N, int block);        // j ≤ i: the lower triangle with the diagonal
// Every block row gets exactly round(density·T) blocks (at least 1 when density > 0), chosen
// uniformly without replacement; density in [0, 1]. Reproducible on every machine: the same
// seed gives the same mask (splitmix64 and integer rejection sampling, no std:: distributions).
BlockMask pattern_random(int N, int block, double density, std::uint64_t seed);
// Flat block butterfly (Pixelated Butterfly, Chen et al. 2021, the pattern the FlashAttention
// paper trains with) on groups of `group` consecutive blocks with `factors` butterfly factors:
// block (i, j) nonzero when g = (i/group) XOR (j/group) is 0 or 2^t with t < factors. Group 1
// with factors = log2(T) is the classic flat butterfly. Symmetric, the diagonal always set.
// Density = group·(factors + 1)/T when T and group are powers of two. Throws when group is
// outside 1..T, or factors outside 0..⌈log2 ⌈T/group⌉⌉ (= log2(T/group) for powers of two:
// more factors than that add no block).
BlockMask pattern_butterfly(int N, int block, int group, int factors);
// The butterfly with density exactly `density` on T = ⌈N/block⌉ blocks, T a power of two: the
// smallest group w (a power of two) for which k + 1 = density·T/w is an integer with
// k ≤ log2(T/w). Throws InputError with a clear message when T is not a power of two or no w fits.
BlockMask pattern_butterfly_density(int N, int block, double density);

// The mask "--pattern SPEC" of the step 06 program names:
//   dense | local:W | global:G,W | causal | random:DENSITY | butterfly (full flat butterfly:
//   group 1, ⌈log2 T⌉ factors) | butterfly:K (K factors, group 1) | butterfly:K,W (K factors,
//   group W) | butterfly@DENSITY (pattern_butterfly_density).
// `seed` is used by random only. Throws InputError on an unknown or malformed spec, listing
// the valid forms, and on parameters the pattern rejects.
BlockMask make_pattern(const std::string& spec, int N, int block, std::uint64_t seed);
extern const char* const kPatternForms;  // the valid forms, one line, for --help and errors

// What make_pattern(spec, N, block, seed) would build, without building it: the spec parsed and
// its parameters checked on the grid (the same InputError as make_pattern), then the grid's
// size and whether the pattern selects no block at all (random:0). Allocates nothing, so a
// program can refuse a bad spec before any GPU work however large the mask would be.
struct PatternGrid {
  int Tr = 0, Tc = 0;
  bool no_block = false;
};
PatternGrid check_pattern(const std::string& spec, int N, int block);

// One line: "32 × 32 blocks of 128 × 128, 192 nonzero (density 0.1875)".
std::string describe(const BlockMask& m);

// Reads a block mask from .npy: a 2-D array of dtype |b1, |u1, <i4, <i8 or <f4 whose values
// are all 0 or 1, of shape (⌈N/block_r⌉, ⌈N/block_c⌉). Anything else throws one InputError
// naming the file and the problem ("blocks.npy: shape (3, 4) but N=512 with 128 × 128 blocks
// needs (4, 4)", "blocks.npy: value 2 at (1, 3) is not 0 or 1", a dtype, truncation, ...).
BlockMask read_block_mask(const std::string& path, int N, int block_r, int block_c);
// Writes `m` as |u1 of shape (Tr, Tc), all of the file or none of it (np.load reads it back).
void write_block_mask(const std::string& path, const BlockMask& m);

}  // namespace fs
