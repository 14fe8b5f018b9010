// What the visualizer's panels derive from a trace each frame (visualizer/model), not only its
// loading: the shared-memory layout of every kernel (derive_smem_pipeline: step 08's forward,
// dK/dV and dQ kernels, step 09's in lanes — the searches over tile sizes that spun forever on a
// dQ kernel of 2^50 bytes), its stages and regions at moments of the replay (pipeline_at,
// regions, region_view), a CTA's tiles and memory, the softmax panel's running statistics, a
// clustered trace's slot orders, row runs, cluster boxes and round share, the coverage's round
// grids, and the tiles' labels. The trace: a synthetic one of each step the generator knows, whose
// meta (step, variant, pass, dtype, tiles, N, d, shared memory) and kernels (name, grid, block,
// shared memory) the input rewrites within what the reader accepts, so that the model sees only
// what a file could hand it. Never a crash, a sanitizer report, or a hang (libFuzzer's -timeout).
#include <cstdlib>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "tests/fuzz/fuzz_util.hpp"
#include "visualizer/model/clusters.hpp"
#include "visualizer/model/coverage.hpp"
#include "visualizer/model/playback.hpp"
#include "visualizer/model/replay.hpp"
#include "visualizer/model/labels.hpp"
#include "visualizer/model/running_stats.hpp"
#include "visualizer/model/smem_pipeline.hpp"
#include "visualizer/model/synthetic.hpp"

namespace {

using namespace fs::viz;
using fs::fuzz::take_byte;

template <typename T, std::size_t n>
const T& pick(const T (&values)[n], const std::uint8_t*& data, std::size_t& size) {
  return values[take_byte(data, size) % n];
}

std::int64_t sized(const std::uint8_t*& data, std::size_t& size) {
  static const std::int64_t values[] = {0,     1,      16,     1024,   24576, 32768,  40960,  49152,  65536,
                                        98304, 131072, 165888, 196608, 232448, 262144, std::int64_t(1) << 31,
                                        std::int64_t(1) << 50};
  const std::uint8_t b = take_byte(data, size);
  return b < 200 ? values[b % 17] : std::int64_t(b) * 1024 + take_byte(data, size) * 16;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const SyntheticStep kSteps[] = {SyntheticStep::Naive, SyntheticStep::Flash, SyntheticStep::Smyrf, SyntheticStep::Hopper};
  static const int kN[] = {16, 17, 32, 48, 64};
  static const int kD[] = {16, 32, 64, 128};
  static const int kTiles[] = {0, 16, 32, 64, 96, 128, 224, 256};
  static const char* const kStepNames[] = {"", "08_tensor_cores", "09_hopper", "07_smyrf", "04_online_softmax"};
  static const char* const kVariants[] = {"", "fa2", "deterministic", "r1_mma", "r3_pipeline", "key_warps", "fa3", "fp8", "wgmma",
                                          "ws_pingpong", "tomorrow"};
  static const char* const kPasses[] = {"", "fwd", "bwd"};
  static const char* const kDtypes[] = {"", "bf16", "fp16", "fp32"};
  static const char* const kKernels[] = {"", "tc_forward_kernel", "tc_dkdv_kernel", "tc_dkdv_smem_kernel", "tc_dq_kernel",
                                         "hopper_forward_kernel", "hopper_backward_kernel", "tc_bwd_preprocess_kernel"};
  static const int kThreads[] = {0, 32, 64, 96, 128, 256, 384, 1024};

  SyntheticSpec spec;
  spec.step = pick(kSteps, data, size);
  spec.N = pick(kN, data, size);
  spec.d = pick(kD, data, size);
  spec.Br = 16 << (take_byte(data, size) % 3);
  spec.Bc = 16 << (take_byte(data, size) % 3);
  spec.causal = take_byte(data, size) % 2;
  spec.mask = take_byte(data, size) % 2 ? BlockMask::Butterfly : BlockMask::Dense;
  spec.H = 1 + take_byte(data, size) % 4 / 3;  // 1, now and then 2
  spec.hashes = 1 + take_byte(data, size) % 2;
  spec.cluster = 8 << (take_byte(data, size) % 2);
  spec.sms = 1 + take_byte(data, size) % 4;
  spec.seed = take_byte(data, size);
  fs::trace::Trace t;
  try {
    t = make_synthetic_trace(spec);
  } catch (const std::invalid_argument&) {  // a spec the generator does not make (clusters past N)
    return 0;
  }
  // The meta and the kernels, rewritten where the input says (an empty pick keeps what was there).
  auto text = [&](std::string& field, const char* const* values, std::size_t n) {
    const char* v = values[take_byte(data, size) % n];
    if (*v) field = v;
  };
  text(t.meta.step, kStepNames, std::size(kStepNames));
  text(t.meta.variant, kVariants, std::size(kVariants));
  text(t.meta.pass, kPasses, std::size(kPasses));
  text(t.meta.dtype, kDtypes, std::size(kDtypes));
  if (const int br = pick(kTiles, data, size)) t.meta.Br = br;
  if (const int bc = pick(kTiles, data, size)) t.meta.Bc = bc;
  if (take_byte(data, size) > 200) t.meta.d = pick(kD, data, size) * (1 + take_byte(data, size) % 3);
  if (take_byte(data, size) > 128) t.meta.smem_per_cta_bytes = sized(data, size);
  for (auto& k : t.kernels) {
    const char* name = pick(kKernels, data, size);
    if (*name) k.name = name;
    if (const int threads = pick(kThreads, data, size)) {
      k.block[0] = threads;
      k.block[1] = take_byte(data, size) > 240 ? 1024 : 1;
    }
    if (take_byte(data, size) > 128) k.smem_bytes = sized(data, size);
    if (take_byte(data, size) > 200) k.grid[0] = 1 + take_byte(data, size) * (1 + take_byte(data, size));
  }
  // What a file could hand the model: the rewrites stay inside the reader's limits (names of any
  // text, tiles 0 to 2^31 - 1, blocks of 1 to 1024 threads a dimension, grids of at least one CTA,
  // shared memory up to 2^50 bytes: trace_io.cpp's read_meta and read_kernels), so that reading
  // the trace back, which costs far more than the rest, is not needed for it to be one.
  for (const auto& k : t.kernels)
    for (int a = 0; a < 3; ++a)
      if (k.block[a] < 1 || k.block[a] > 1024 || k.grid[a] < 1 || k.smem_bytes > (std::int64_t(1) << 50)) std::abort();
  const auto replay = std::make_unique<Replay>(std::move(t));
  const Replay& r = *replay;
  const fs::trace::Meta& m = r.meta();
  std::vector<Cursor> moments;
  for (Order order : {Order::Logical, Order::Real})
    for (double f : {0.0, 0.3, 0.9}) {
      Playback p;
      p.rewind(r);
      p.set_order(r, order);
      p.seek_fraction(r, f);
      moments.push_back(p.cursor());
    }
  for (int kernel = 0; kernel < int(r.trace().kernels.size()); ++kernel) {
    const SmemPipeline L = derive_smem_pipeline(r.trace(), kernel);
    const std::vector<SmemRegion> regions = L.regions();
    if (L.valid) {
      (void)L.total_bytes();
      (void)L.stage_tensors();
      (void)L.kept_tensors();
      for (int w = 0; w < L.warps; ++w) (void)(L.warp_row0(w) + L.warp_query0(w) + L.warp_col0(w) + L.dq_cols());
    }
    int visited = 0;
    for (int track = 0; track < r.track_count() && visited < 2; ++track) {
      if (r.trace().tracks[std::size_t(track)].kernel != kernel) continue;
      ++visited;
      for (const Cursor c : moments) {
        const PipelineView a = pipeline_at(r, L, track, c);
        const PipelineView b = pipeline_at(r, L, track, r.track_cursor(track, c));
        for (const SmemRegion& g : regions) (void)region_view(L, a, g);
        (void)b.tiles;
        const TrackCursor tc = r.track_cursor(track, c);
        (void)r.cta_tiles(track, c);
        (void)(r.smem_after(track, tc.done) + r.regs_after(track, tc.done));
        (void)r.round_to_follow(track, c);
      }
      if (r.has_running_stats()) (void)running_stats(r, track);
      for (int e : r.track_events(track)) {
        const fs::trace::Event& ev = r.trace().events[std::size_t(e)];
        (void)tile_label(ev);
        (void)sample_row_label(r, ev);
        (void)moved_element_type(r, ev.tensor);
        break;
      }
    }
  }
  // The clusters of a clustered trace, and the coverage's grids of its rounds.
  if (usable_clustering(m)) {
    (void)cluster_boxes(m);
    (void)round_score_share(m);
    for (int round = -1; round <= m.clusters.hashes; ++round)
      for (fs::trace::Tensor tensor : {fs::trace::Tensor::Q, fs::trace::Tensor::K, fs::trace::Tensor::S}) {
        const SlotOrders o = slot_orders(m, tensor, 0, round);
        (void)row_runs(o.rows, 0, m.N);
        (void)row_runs(o.cols, m.N / 2, m.N - m.N / 2);
      }
  }
  // The coverage's grids of each round (the score panel's): fuzz_viz_model covers the rest of it.
  if (r.clustered()) {
    try {
      Coverage coverage(r);
      coverage.seek(r, moments[1]);
      for (int round = -1; round <= r.rounds(); ++round)
        for (bool sorted : {false, true}) (void)coverage.round_scores(round, sorted);
    } catch (const fs::InputError&) {  // more cells than the memory available
    }
  }
  return 0;
}
