// The benchmark sweep (steps/bench.cpp): every step of a table and every variant over a grid of
// shapes, appending one CSV row per pass (docs/benchmarks/<gpu>.csv). A program that measures and
// records; the tests are what check correctness (--check records max_err too).
//
// Shapes follow the FlashAttention benchmarks: B·N = 16384 tokens (B = max(1, 16384/N)) and
// H = 2048/d heads, so every N fills the GPU with about the same work per matmul. With --varlen
// the one shape is the packed sequences' (B = 1, N and Nk their totals), in the steps that take them.
//
// The command line is checked whole before any GPU is looked for: every list item a decimal number
// in its range (--seqs 0 divided 16384 by zero on a GPU), each --patterns spec and --windows L,R
// well formed, each --steps and --variants name one the table has, --csv a file that can be
// written (not a FIFO, a folder or a dangling link), every grid point a shape whose byte counts
// fit (validate_shape). What a step cannot run at a grid point is that point's "skipped".
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/problem.hpp"

namespace fs {

struct BenchPlan {
  struct Window {
    int left = -1, right = -1;  // --window's L,R; -1, -1: none
  };
  std::vector<const StepInfo*> steps;  // --steps, or the whole table
  std::vector<DType> dtypes;
  std::vector<int> seqs, dims;
  std::vector<bool> causals;
  std::vector<float> dropouts;
  std::vector<std::string> patterns;   // block-sparse steps' masks (--pattern specs)
  std::vector<SmyrfParams> clusterings;
  std::vector<Window> windows;
  std::vector<std::string> variants;   // empty: every variant
  PackedSeqs packed;                   // --varlen: one shape of these sequences instead of --seqs
  int batch = 0, heads = 0;            // 0: 16384/N and 2048/d
  int reps = 10, warmup = 3;
  bool backward = false, check = false;
  std::string csv;

  // The problem of grid point (N, d): B·N = 16384 tokens and H = 2048/d heads unless --batch,
  // --heads say; with --varlen, B = 1 and the sequences' totals.
  Shape shape(int N, int d) const;
};

// The sweep's command line over the table `all`. Empty when --help was asked for (and printed).
// Throws InputError, in one line.
std::optional<BenchPlan> plan_bench(const std::vector<const StepInfo*>& all, int argc, const char* const* argv);

// main() of the sweep over `all`. Exit codes: common/errors.hpp (3: no GPU, after the checks).
int bench_main(const std::vector<const StepInfo*>& all, int argc, const char* const* argv);

}  // namespace fs
