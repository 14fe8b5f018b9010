// The io_model program (steps/io_model_main.cpp): its command line, checked before any model is
// counted, and the rows it prints — every step's IO model for one shape, as CSV (the docs quote
// them; docs/benchmarks/prose_check.py holds the quotes to them).
//
// The models count tile by tile, and several walk every pair of a query tile and a key tile:
// their time grows with N², their byte counts with N²·B·H. So the shape has limits a step
// program's plan has not: N at most kIoModelMaxSeq, B·H at most kMaxHeads (as every step's grid),
// and the sizes of validate_shape. A step (or variant) whose kernels do not run the shape
// (StepInfo::refusal: a head dimension without kernels, a mask off the tiles, SMYRF's rounds) has
// no model of it and no row; a shape no step runs is refused.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/problem.hpp"

namespace fs {

// 2^17: every model of every step at this N takes well under a second on one core.
constexpr int kIoModelMaxSeq = 1 << 17;

struct IoModelOptions {
  Shape shape{1, 8, 2048, 64};
  bool causal = false;
  bool tiles = false;          // --tiles: the tile sizes instead (io_model_main.cpp prints them)
  std::string pattern;         // block-sparse steps' mask (default: all ones)
  int block = 0;               // its block size; 0: the step's for d
  std::uint64_t seed = 0;      // of --pattern random
  SmyrfParams clustering;      // clustered steps' --smyrf
};

// Empty when --help was asked for (and printed). Throws InputError, in one line.
std::optional<IoModelOptions> parse_io_model(int argc, const char* const* argv);

// The CSV lines (without the header, "step,pass,B,H,N,d,causal,read_bytes,write_bytes,mask,dtype")
// of every variant of `steps` whose kernels run the shape, each in the dtype it runs without
// --dtype (default_dtype: 08's fa2 in bf16, its 3xtf32 in fp32; 07 at --smyrf's clusters, not
// causal). Throws InputError when none does, or for a bad --pattern.
std::vector<std::string> io_model_rows(const std::vector<const StepInfo*>& steps, const IoModelOptions& o);

}  // namespace fs
