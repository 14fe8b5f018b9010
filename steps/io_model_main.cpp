// io_model: the HBM bytes each step's IO model counts for a shape (no GPU needed; tile sizes
// that depend on shared memory use this GPU's, or the H200's 227 KiB without one). CSV out.
//   io_model [shape] [--causal] [--pattern SPEC] [--smyrf SPEC]
//                                                  step,pass,...,read_bytes,write_bytes,mask,dtype
//                                                  (each variant in its default dtype: 08's fa2 in
//                                                  bf16; 07 at --smyrf's clusters, mask smyrf:SPEC,
//                                                  not causal)
//   io_model --tiles [--seq N] [--dim d]           step,N,d,name,value: the tiles each kernel uses
// The docs quote both; docs/benchmarks/prose_check.py holds the quotes to this program's output.
// The options, their limits and the rows: common/io_model_cli.hpp. Bad input is one line, exit 2.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "common/device.hpp"
#include "common/errors.hpp"
#include "common/io_model_cli.hpp"
#include "common/smyrf.hpp"
#include "steps/registry.hpp"
#ifdef FS_WITH_STEP_02
#include "steps/02_fused/fused.hpp"
#endif
#ifdef FS_WITH_STEP_03
#include "steps/03_tiled/tiled.hpp"
#endif
#ifdef FS_WITH_STEP_04
#include "steps/04_online_softmax/flash.hpp"
#endif
#ifdef FS_WITH_STEP_05
#include "steps/05_recompute_backward/backward.hpp"
#endif
#ifdef FS_WITH_STEP_06
#include "steps/06_block_sparse/block_sparse.hpp"
#endif
#ifdef FS_WITH_STEP_07
#include "steps/07_smyrf/smyrf.hpp"
#endif
#ifdef FS_WITH_STEP_08
#include "steps/08_tensor_cores/tensor_cores.hpp"
#endif

namespace {

// The tile sizes of every tiled kernel at (N, d) (of the steps this build has: FS_STEPS), one
// value per row, so that a lesson's "Br = 128" can be checked against the code that launches the
// kernel.
void print_tiles(int N, int d) {
  [[maybe_unused]] auto row = [&](const char* step, const char* name, long long value) {
    std::printf("%s,%d,%d,%s,%lld\n", step, N, d, name, value);
  };
  [[maybe_unused]] const std::size_t budget = fs::smem_budget_bytes();
#ifdef FS_WITH_STEP_02
  row("02_fused", "rows_per_cta", fs::fused_rows_per_cta(N, d, budget));
  row("02_fused", "max_seq", fs::fused_max_seq(d, budget));
#endif
#ifdef FS_WITH_STEP_03
  const fs::TileSizes t3 = fs::tiled_tile_sizes(d);
  row("03_tiled", "Br", t3.Br);
  row("03_tiled", "Bc", t3.Bc);
#endif
#ifdef FS_WITH_STEP_04
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
#endif
#ifdef FS_WITH_STEP_05
  const fs::BwdTiles b = fs::backward_tiles(d);
  row("05_recompute_backward", "keys_per_cta", b.keys);
  row("05_recompute_backward", "stage", b.stage);
  row("05_recompute_backward", "keys_per_thread", b.rows_per_thread);
  row("05_recompute_backward", "threads_per_key", b.threads_per_row);
  row("05_recompute_backward", "cols_per_thread", b.threads_per_row ? d / b.threads_per_row : 0);
#endif
#ifdef FS_WITH_STEP_06
  row("06_block_sparse", "block", fs::default_mask_block(d));
#endif
#ifdef FS_WITH_STEP_07
  const fs::SmyrfTiles sm = fs::smyrf_tiles(d, fs::kSmyrfDefault);  // at the paper's clusters of 32
  row("07_smyrf", "fwd_rows", sm.fwd_rows);
  row("07_smyrf", "fwd_keys", sm.fwd_keys);
  row("07_smyrf", "dkdv_keys", sm.dkdv_keys);
  row("07_smyrf", "dq_rows", sm.dq_rows);
  row("07_smyrf", "stage", sm.stage);
#endif
#ifdef FS_WITH_STEP_08
  const fs::TcTiles tc = fs::tc_forward_tiles(d, 0);
  row("08_tensor_cores/fa2", "Br", tc.Br);
  row("08_tensor_cores/fa2", "Bc", tc.Bc);
#endif
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::optional<fs::IoModelOptions> o = fs::parse_io_model(argc, argv);
    if (!o) return fs::kExitOk;
    if (o->tiles) {
      std::printf("step,N,d,name,value\n");
      print_tiles(o->shape.N, o->shape.d);
      return fs::kExitOk;
    }
    std::vector<const fs::StepInfo*> steps;
    for (const fs::StepInfo& step : fs::all_steps()) steps.push_back(&step);
    const std::vector<std::string> rows = fs::io_model_rows(steps, *o);
    std::printf("step,pass,B,H,N,d,causal,read_bytes,write_bytes,mask,dtype\n");
    for (const std::string& row : rows) std::printf("%s\n", row.c_str());
    return fs::kExitOk;
  } catch (const fs::InputError& e) {
    std::fprintf(stderr, "io_model: error: %s\n", e.what());
    return fs::kExitBadInput;
  }
}
