// A run of a step, decided once. From the options (whose shape is the problem's) the plan makes
// every check that needs no GPU — output paths, sizes, features the step lacks, host memory,
// the block mask's pattern or file, the step's own support check — so a bad input is refused,
// with exit code 2, on any machine and before any large allocation. The timed run (run_case,
// common/driver.hpp), the traced run (trace_case, common/traced_run.hpp), the IO model and the
// result rows all read the plan; nothing below it decides again.
//
//   const fs::RunPlan plan(step, opt);                       // throws InputError
//   const fs::CaseReport r = fs::run_case(plan, problem, dev);
//
// The checks are cheap by design: a --pattern is checked on its grid, and the mask itself
// (T_r·T_c bytes, 1 GiB at N = 4194304) is built when a pass first asks for it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/block_mask.hpp"
#include "common/cli.hpp"
#include "common/problem.hpp"
#include "common/smyrf.hpp"

namespace fs {

// The steps with kernels for a dtype, for the message that refuses one (a step program knows
// only its own step; tests/test_plan.cpp checks these against the table of steps).
constexpr const char* kStepsFp32 = "01, 02, 03, 04, 05, 06, 07, 08";
constexpr const char* kSteps16Bit = "08, 09";
// The steps whose kernels take a window, softcapping and ALiBi (StepInfo::score_mods).
constexpr const char* kStepsScoreMods = "04 (--variant fa2), 05, 08 (fa2, deterministic)";
// ... and K, V of their own length and head count (StepInfo::kv_shapes).
constexpr const char* kStepsKvShapes = "04 (--variant fa2), 05, 08 (fa2, deterministic)";
// ... and packed sequences (StepInfo::packed: --varlen).
constexpr const char* kStepsPacked = "04 (--variant fa2), 05, 08 (fa2, deterministic)";

// Every step's kernels put B·H in one dimension of their grid (y or z), where CUDA takes at most
// 65535 CTAs: the most (batch, head) pairs any step runs (RunPlan refuses more for every step).
constexpr std::int64_t kMaxHeads = 65535;

// --alibi FILE's slopes into f (ScoreFeatures::alibi_slopes and alibi_batch_stride): a float32
// .npy of shape (H), one slope per head, or (B, H), a row of them per batch, B = `batches`
// (alibi_batches: with packed sequences their count, a row per sequence), every slope finite.
// Throws InputError naming the shape the file holds and the two it may hold.
void read_alibi_slopes(const std::string& path, int batches, int H, bool packed, ScoreFeatures& f);

class RunPlan {
 public:
  // Throws InputError, in one line, when `step` cannot run what `opt` asks for:
  //   outputs   --save DIR, --trace FILE (and its backward file), --csv FILE: a folder that
  //             does not exist or cannot be written, a FIFO or a dangling symbolic link, checked
  //             without creating anything
  //   shape     sizes whose byte counts overflow, B·H past kMaxHeads (any step), features the step lacks (a backward pass,
  //             dropout, the dtype), what its kernels cannot run (StepInfo::refusal: a head
  //             dimension without kernels, B·H past the grid, a mask's blocks off the tiles)
  //   memory    host memory for the inputs and the outputs read back
  //   mask      block-sparse steps: --pattern checked on its grid, --mask read (and kept); a
  //             mask that keeps no block (with --causal: none on or below the diagonal).
  //             StepInfo::refusal sees a --pattern's grid with no block filled in: a step's
  //             check must judge the grid, not which blocks are on (step 06's does).
  //   clusters  clustered steps: the SMYRF parameters; with --load, a DIR holding q_order.npy,
  //             k_order.npy and clusters.npy gives the clusters (read and kept), whose rounds
  //             and cluster sizes must agree with --hashes and --cluster where those are given
  //   trace     --trace for a step that records none
//   features  --window, --softcap, --alibi for a step whose kernels have none; --alibi=FILE read
//             (and kept): finite float32 slopes, (H) or (B, H) (read_alibi_slopes); --seq-k, --heads-kv (or --load's k.npy of
//             another shape) for a step whose kernels take square problems only, or with --trace
//   packed    --varlen (or --load's cu_seqlens) for a step whose kernels take no packed sequences,
//             a block-sparse or clustered step, or with --trace; sequences that do not pack the
//             shape (B = 1, N and Nk their totals: common/varlen.hpp, packed_problem)
  RunPlan(const StepInfo& step, const Options& opt);

  const StepInfo& step() const { return *step_; }
  const Options& options() const { return opt_; }
  const Shape& shape() const { return opt_.shape; }
  // The settings of every pass; their mask is the plan's own (the plan must outlive them).
  PassSettings settings() const;
  // Block-sparse steps: the mask, built from --pattern at the first call; null for other steps.
  const BlockMask* mask() const;
  // Clustered steps with --load's clusters: those; else null (the step hashes on the GPU).
  const SmyrfClusters* given_clusters() const { return clusters_ ? &*clusters_ : nullptr; }
  // The fraction of the N × N scores a pass computes: the mask's blocks, SMYRF's clusters; with
  // a window, the scores it keeps of those the FLOP count takes (all, or the causal half; with
  // packed sequences, those of each sequence's own n × n_k).
  double density() const;
  // The FLOPs of one pass ("fwd" or "bwd") before density(): forward_flops or backward_flops,
  // summed over the sequences when they are packed.
  double flops(const std::string& pass) const;
  // What the results and the output call the run: "04_online_softmax/fa2"; the mask's pattern
  // spec or file name, SMYRF's clustering, or K/V's own shape and the score features
  // ("heads-kv:8+window:256:0+softcap:30+alibi", "varlen:4+seq-k:433": no commas, which the
  // tables' filters split on);
  // empty for a plain dense run of a square problem.
  std::string label() const { return step_->label(opt_.variant); }
  std::string mask_label() const;
  // The step's IO model of one pass, "fwd" or "bwd".
  IoCount io(const std::string& pass) const;

 private:
  const StepInfo* step_;
  Options opt_;
  mutable std::optional<BlockMask> mask_;  // --mask: read by the checks; --pattern: on demand
  std::optional<SmyrfClusters> clusters_;   // --load's clusters
  ScoreFeatures features_;                  // --window, --softcap, --alibi
};

}  // namespace fs
