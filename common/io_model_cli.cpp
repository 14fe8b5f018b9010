// The io_model program's command line and rows (common/io_model_cli.hpp).
#include "common/io_model_cli.hpp"

#include <CLI/CLI.hpp>


#include "common/block_mask.hpp"
#include "common/cli.hpp"
#include "common/cli_numbers.hpp"
#include "common/errors.hpp"
#include "common/harness.hpp"
#include "common/host_memory.hpp"
#include "common/plan.hpp"
#include "common/smyrf.hpp"

namespace fs {

std::optional<IoModelOptions> parse_io_model(int argc, const char* const* argv) {
  CLI::App app{"io_model: HBM bytes of every step's IO model for one shape, or the tile sizes, as CSV"};
  IoModelOptions o;
  // Sizes are read as 64-bit (size_option).
  long long B = o.shape.B, H = o.shape.H, N = o.shape.N, d = o.shape.d, block = 0;
  app.add_option("-b,--batch", B, "batch size")->transform(decimal<long long>())->capture_default_str();
  app.add_option("--heads", H, "heads")->transform(decimal<long long>())->capture_default_str();
  app.add_option("-n,--seq", N, "sequence length (at most " + std::to_string(kIoModelMaxSeq) + ")")
      ->transform(decimal<long long>())
      ->capture_default_str();
  app.add_option("-d,--dim", d, "head dimension")->transform(decimal<long long>())->capture_default_str();
  app.add_flag("--causal", o.causal, "causal mask");
  app.add_option("--pattern", o.pattern, std::string("block-sparse steps: the block mask (default: all ones): ") + kPatternForms);
  app.add_option("--block", block, "block-sparse steps: mask block size (default: the step's for --dim)")
      ->transform(decimal<long long>());
  std::string smyrf = smyrf_spec(kSmyrfDefault);
  app.add_option("--smyrf", smyrf, "clustered steps: rounds x cluster size (or rounds x queries x keys)")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "seed of --pattern random")->transform(decimal<std::uint64_t>())->capture_default_str();
  app.add_flag("--tiles", o.tiles, "print the tile sizes of every tiled kernel at --seq, --dim instead");
  if (!parse_command_line(app, argc, argv)) return std::nullopt;
  constexpr long long kMaxInt = 0x7fffffff;
  // --tiles: the kernels' tile functions, whose sums of N and d (and 4·d) are ints: no head
  // dimension past any kernel's by far, no N near int's end (4·2^30 divided by zero in alg1_tiles).
  o.shape = {size_option("--batch", B, kMaxInt), size_option("--heads", H, kMaxInt),
             size_option("--seq", N, o.tiles ? 1 << 30 : kMaxInt), size_option("--dim", d, o.tiles ? 1 << 16 : kMaxInt)};
  if (o.tiles) return o;
  if (N > kIoModelMaxSeq)
    throw InputError("--seq must be at most " + std::to_string(kIoModelMaxSeq) + " (the IO models count tile by tile; got " +
                     std::to_string(N) + ")");
  validate_shape(o.shape);
  if (o.shape.heads() > kMaxHeads)
    throw InputError("B·H must be at most " + std::to_string(kMaxHeads) + " (every step's grid holds B·H CTAs in one "
                     "dimension); got " + std::to_string(o.shape.heads()));
  if (app.count("--block")) o.block = size_option("--block", block, kMaxInt);
  const std::optional<SmyrfParams> clustering = parse_smyrf_spec(smyrf);
  if (!clustering) throw InputError("--smyrf " + smyrf + " is not HASHESxCLUSTER or HASHESxQxK");
  o.clustering = *clustering;
  return o;
}

std::vector<std::string> io_model_rows(const std::vector<const StepInfo*>& steps, const IoModelOptions& o) {
  const Shape& s = o.shape;
  std::vector<std::string> rows;
  std::string first_refusal;
  for (const StepInfo* each : steps) {
    const StepInfo& step = *each;
    if (step.clustered && o.causal) continue;  // SMYRF has no causal form
    const bool masked = step.block_sparse && !o.pattern.empty();
    std::string mask = !masked ? "" : o.pattern.find(',') == std::string::npos ? o.pattern : '"' + o.pattern + '"';
    if (step.clustered) mask = "smyrf:" + smyrf_spec(o.clustering);
    // The mask's grid first, no block filled in (what the step's check judges, as in RunPlan);
    // the mask itself once a variant takes the grid: T_r·T_c bytes and its lists.
    BlockMask grid;
    std::optional<BlockMask> m;
    const int block = masked ? (o.block ? o.block : step.mask_block(s.d)) : 0;
    if (masked) {
      const PatternGrid g = check_pattern(o.pattern, s.N, block);
      grid.block_r = grid.block_c = block;
      grid.Tr = g.Tr;
      grid.Tc = g.Tc;
    }
    for (std::size_t v = 0; v < step.variants.size(); ++v) {
      PassSettings settings{default_scale(s.d), o.causal, static_cast<int>(v), {}, masked ? &grid : nullptr,
                            default_dtype(step, static_cast<int>(v)), step.clustered ? o.clustering : SmyrfParams{}};
      if (std::string why = step.refusal(s, settings); !why.empty()) {
        if (first_refusal.empty()) first_refusal = "step " + step.label(static_cast<int>(v)) + ": " + why;
        continue;  // no kernel runs this problem: no model of it
      }
      if (masked && !m) {
        require_host_memory(std::uint64_t(grid.Tr) * std::uint64_t(grid.Tc) * 9, "the block mask '" + o.pattern + "'");
        m = make_pattern(o.pattern, s.N, block, o.seed);
      }
      if (masked) settings.mask = &*m;
      auto row = [&](const char* pass, IoCount io) {
        rows.push_back(step.label(static_cast<int>(v)) + "," + pass + "," + std::to_string(s.B) + "," + std::to_string(s.H) +
                       "," + std::to_string(s.N) + "," + std::to_string(s.d) + "," + (o.causal ? "1" : "0") + "," +
                       std::to_string(io.read_bytes) + "," + std::to_string(io.write_bytes) + "," + mask + "," +
                       dtype_name(settings.dtype));
      };
      row("fwd", step.io_forward(s, settings));
      if (step.backward_takes(s, settings)) row("bwd", step.io_backward(s, settings));
    }
  }
  if (rows.empty()) throw InputError("no step runs this shape" + (first_refusal.empty() ? "" : ": " + first_refusal));
  return rows;
}

}  // namespace fs
