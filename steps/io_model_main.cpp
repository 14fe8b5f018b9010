// io_model: the HBM bytes each step's IO model counts for a shape (no GPU needed; tile sizes
// that depend on shared memory use this GPU's, or the H200's 227 KiB without one). CSV out.
//   io_model [shape] [--causal] [--pattern SPEC] [--smyrf SPEC]
//                                                  step,pass,...,read_bytes,write_bytes,mask,dtype
//                                                  (each step in its first dtype: 08 in bf16; 07 at
//                                                  --smyrf's clusters, mask smyrf:SPEC, not causal)
//   io_model --tiles [--seq N] [--dim d]           step,N,d,name,value: the tiles each kernel uses
// The docs quote both; docs/benchmarks/prose_check.py holds the quotes to this program's output.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <optional>
#include <string>

#include "common/block_mask.hpp"
#include "common/cli_numbers.hpp"
#include "common/device.hpp"
#include "common/errors.hpp"
#include "common/smyrf.hpp"
#include "steps/02_fused/fused.hpp"
#include "steps/03_tiled/tiled.hpp"
#include "steps/04_online_softmax/flash.hpp"
#include "steps/05_recompute_backward/backward.hpp"
#include "steps/06_block_sparse/block_sparse.hpp"
#include "steps/07_smyrf/smyrf.hpp"
#include "steps/08_tensor_cores/tensor_cores.hpp"
#include "steps/registry.hpp"

namespace {

// The tile sizes of every tiled kernel at (N, d), one value per row, so that a lesson's
// "Br = 128" can be checked against the code that launches the kernel.
void print_tiles(int N, int d) {
  auto row = [&](const char* step, const char* name, long long value) {
    std::printf("%s,%d,%d,%s,%lld\n", step, N, d, name, value);
  };
  const std::size_t budget = fs::smem_budget_bytes();
  row("02_fused", "rows_per_cta", fs::fused_rows_per_cta(N, d, budget));
  row("02_fused", "max_seq", fs::fused_max_seq(d, budget));
  const fs::TileSizes t3 = fs::tiled_tile_sizes(d);
  row("03_tiled", "Br", t3.Br);
  row("03_tiled", "Bc", t3.Bc);
  const fs::Alg1Tiles a = fs::alg1_tiles(d, budget);
  row("04_online_softmax/alg1", "budget_bytes", static_cast<long long>(budget));
  row("04_online_softmax/alg1", "M", static_cast<long long>(a.M));
  row("04_online_softmax/alg1", "Br", a.Br);
  row("04_online_softmax/alg1", "Bc", a.Bc);
  row("04_online_softmax/alg1", "smem_bytes", static_cast<long long>(a.smem_bytes));
  const fs::Flash2Tiles f = fs::flash2_tiles(d);
  row("04_online_softmax/fa2", "Br", f.Br);
  row("04_online_softmax/fa2", "Bc", f.Bc);
  row("04_online_softmax/fa2", "rows_per_thread", f.rows_per_thread);
  row("04_online_softmax/fa2", "threads_per_row", f.threads_per_row);
  row("04_online_softmax/fa2", "cols_per_thread", f.threads_per_row ? d / f.threads_per_row : 0);
  row("04_online_softmax/fa2", "threads", f.rows_per_thread ? f.Br / f.rows_per_thread * f.threads_per_row : 0);
  const fs::BwdTiles b = fs::backward_tiles(d);
  row("05_recompute_backward", "keys_per_cta", b.keys);
  row("05_recompute_backward", "stage", b.stage);
  row("05_recompute_backward", "keys_per_thread", b.rows_per_thread);
  row("05_recompute_backward", "threads_per_key", b.threads_per_row);
  row("05_recompute_backward", "cols_per_thread", b.threads_per_row ? d / b.threads_per_row : 0);
  row("06_block_sparse", "block", fs::default_mask_block(d));
  const fs::SmyrfTiles sm = fs::smyrf_tiles(d, fs::kSmyrfDefault);  // at the paper's clusters of 32
  row("07_smyrf", "fwd_rows", sm.fwd_rows);
  row("07_smyrf", "fwd_keys", sm.fwd_keys);
  row("07_smyrf", "dkdv_keys", sm.dkdv_keys);
  row("07_smyrf", "dq_rows", sm.dq_rows);
  row("07_smyrf", "stage", sm.stage);
  const fs::TcTiles tc = fs::tc_forward_tiles(d, 0);
  row("08_tensor_cores/fa2", "Br", tc.Br);
  row("08_tensor_cores/fa2", "Bc", tc.Bc);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"io_model: HBM bytes of every step's IO model for one shape, or the tile sizes, as CSV"};
  fs::Shape s{1, 8, 2048, 64};
  bool causal = false, tiles = false;
  std::string pattern;
  int block = 0;
  std::uint64_t seed = 0;
  app.add_option("-b,--batch", s.B, "batch size")->transform(fs::decimal<int>())->capture_default_str();
  app.add_option("--heads", s.H, "heads")->transform(fs::decimal<int>())->capture_default_str();
  app.add_option("-n,--seq", s.N, "sequence length")->transform(fs::decimal<int>())->capture_default_str();
  app.add_option("-d,--dim", s.d, "head dimension")->transform(fs::decimal<int>())->capture_default_str();
  app.add_flag("--causal", causal, "causal mask");
  app.add_option("--pattern", pattern,
                 std::string("block-sparse steps: the block mask (default: all ones): ") + fs::kPatternForms);
  app.add_option("--block", block, "block-sparse steps: mask block size (default: the step's for --dim)")
      ->transform(fs::decimal<int>());
  std::string smyrf = fs::smyrf_spec(fs::kSmyrfDefault);
  app.add_option("--smyrf", smyrf, "clustered steps: rounds x cluster size (or rounds x queries x keys)")
      ->capture_default_str();
  app.add_option("--seed", seed, "seed of --pattern random")->transform(fs::decimal<std::uint64_t>())->capture_default_str();
  app.add_flag("--tiles", tiles, "print the tile sizes of every tiled kernel at --seq, --dim instead");
  CLI11_PARSE(app, argc, argv);
  if (tiles) {
    std::printf("step,N,d,name,value\n");
    print_tiles(s.N, s.d);
    return 0;
  }
  const std::optional<fs::SmyrfParams> clustering = fs::parse_smyrf_spec(smyrf);
  if (!clustering) {
    std::fprintf(stderr, "io_model: --smyrf %s is not HASHESxCLUSTER or HASHESxQxK\n", smyrf.c_str());
    return 2;
  }
  std::printf("step,pass,B,H,N,d,causal,read_bytes,write_bytes,mask,dtype\n");
  try {
    for (const auto& step : fs::all_steps())
      for (std::size_t v = 0; v < step.variants.size(); ++v) {
        const bool masked = step.block_sparse && !pattern.empty();
        std::string mask = !masked ? "" : pattern.find(',') == std::string::npos ? pattern : '"' + pattern + '"';
        if (step.clustered) mask = "smyrf:" + fs::smyrf_spec(*clustering);
        std::optional<fs::BlockMask> m;
        if (masked) m = fs::make_pattern(pattern, s.N, block ? block : step.mask_block(s.d), seed);
        const fs::PassSettings settings{fs::default_scale(s.d), causal, static_cast<int>(v), {}, m ? &*m : nullptr,
                                        step.dtypes.front(), step.clustered ? *clustering : fs::SmyrfParams{}};
        if (step.clustered && causal) continue;  // SMYRF has no causal form
        auto row = [&](const char* pass, fs::IoCount io) {
          std::printf("%s,%s,%d,%d,%d,%d,%d,%lld,%lld,%s,%s\n", step.label(static_cast<int>(v)).c_str(), pass, s.B,
                      s.H, s.N, s.d, causal ? 1 : 0, static_cast<long long>(io.read_bytes),
                      static_cast<long long>(io.write_bytes), mask.c_str(), fs::dtype_name(settings.dtype));
        };
        row("fwd", step.io_forward(s, settings));
        if (step.backward_takes(s, settings)) row("bwd", step.io_backward(s, settings));
      }
  } catch (const fs::InputError& e) {
    std::fprintf(stderr, "io_model: %s\n", e.what());
    return 2;
  }
  return 0;
}
