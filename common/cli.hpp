// The command line every step program shares:
//   --batch --heads --seq --dim --seq-k --heads-kv --causal --scale --seed --check --bench --reps
//   --dtype --load DIR --save DIR --csv FILE --trace FILE --trace-cap N
//   --window --softcap --alibi --varlen (these and --seq-k, --heads-kv refused by the plan where
//   a step's kernels lack them)
//   (--backward only where a step has a backward pass; --variant where a step holds several
//   kernels; --dropout where a step has dropout;
//   --deterministic where a step has a "deterministic" variant; --pattern --mask --block where a
//   step is block-sparse; --hashes --cluster --q-cluster --k-cluster --r where a step is clustered)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "common/problem.hpp"

namespace fs {

// The shape of a traced run when --trace is given without one: small enough to follow by eye.
constexpr Shape kTraceShape{1, 1, 256, 64};
static_assert(kTraceShape.d == kTracedHeadDim, "steps 04-08 compile their traced kernels at this d alone");

struct Options {
  Shape shape{2, 4, 1024, 64};
  std::optional<float> scale;  // default 1/√d
  bool causal = false;
  std::uint64_t seed = 1;
  bool check = false;
  bool bench = false;
  bool backward = false;
  int reps = 20;
  int warmup = 3;
  int variant = 0;
  DType dtype = DType::fp32;       // --dtype: the tensors' element type (without it, default_dtype)
  float dropout = 0.f;             // --dropout P: probability of dropping each P_ij (seeded by --seed)
  // Block-sparse steps: the mask is --mask FILE (.npy, 0/1, ⌈N/block⌉ × ⌈N/block⌉) or else
  // --pattern SPEC (common/block_mask.hpp, make_pattern), over blocks of --block elements.
  std::string pattern = "butterfly";
  std::string mask_path;
  int block = 0;  // 0: the step's default (StepInfo::mask_block)
  std::string load_dir, save_dir, csv_path;
  // Clustered steps (SMYRF, step 07): --hashes, --cluster (or --q-cluster, --k-cluster), --r;
  // --seed draws the projections too. Off (hashes 0) for the other steps.
  SmyrfParams smyrf;
  bool smyrf_given = false;        // one of those options was given (else --load's clusters.npy may say)
  // FlashAttention's score features (steps with StepInfo::score_mods): --window L,R (−1: that
  // side unbounded), --softcap C (0: off), --alibi (the standard slopes of H heads) or --alibi FILE
  // (.npy of float32 slopes, (H) or (B, H): a row per batch, or with --varlen per sequence). The
  // plan makes them PassSettings::features (the slopes need B and H, and a file needs reading).
  int window_left = -1, window_right = -1;
  float softcap = 0.f;
  bool alibi = false;
  std::string alibi_path;          // empty with alibi: the standard slopes
  // Packed sequences (steps with StepInfo::packed): --varlen LENGTHS, FILE.npy or Q.npy,K.npy
  // (common/varlen.hpp), or --load DIR's cu_seqlens files; the shape is then B = 1 and N, Nk their
  // totals. Off: the shape's B batches.
  PackedSeqs packed;
  std::string trace_path;          // --trace FILE: record a traced run (common/traced_run.hpp)
  std::int64_t trace_cap = 256;    // --trace-cap: device records per CTA


  float effective_scale() const { return scale ? *scale : default_scale(shape.d); }
  Dropout effective_dropout() const { return {dropout, seed}; }
  SmyrfParams effective_smyrf() const {
    SmyrfParams p = smyrf;
    p.seed = seed;
    return p;
  }
};

// The element type of a run without --dtype: fp32 where `variant` of `step` has fp32 kernels,
// else the first of StepInfo::dtypes it has kernels for (step 08's fa2 and step 09: bf16), as the
// step's own check (StepInfo::refusal) judges it at the traced runs' shape, which every step runs.
DType default_dtype(const StepInfo& step, int variant);

// Parses and validates argv for `step`'s program. Returns std::nullopt when --help was
// asked for (and printed). Throws InputError with one line on any bad input. Numbers are
// decimal and range-checked (common/cli_numbers.hpp).
// --window L,R: the keys a query sees on its left and right (-1: unbounded); InputError otherwise.
std::pair<int, int> window_option(const std::string& window);

std::optional<Options> parse_options(const StepInfo& step, int argc, const char* const* argv);

}  // namespace fs
