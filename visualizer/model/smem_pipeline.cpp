#include "visualizer/model/smem_pipeline.hpp"

#include <algorithm>

#include "visualizer/model/labels.hpp"

namespace fs::viz {

namespace {

// What the trace cannot say: step 08's variants as steps/08_tensor_cores/forward_configs.cuh
// builds them. Used only where the shared-memory size fits two layouts, and only when this
// entry is one of them (a table that has gone stale is ignored, never believed over the trace).
struct KnownVariant {
  const char* step;
  const char* variant;
  int stages;
  bool p_in_smem;
  int q_in_regs_max_d;  // Q's fragments in registers at d up to this (0: never)
};
constexpr KnownVariant kKnown[] = {
    {"08_tensor_cores", "r1_mma", 1, true, 0},        {"08_tensor_cores", "r2_swizzle", 1, true, 0},
    {"08_tensor_cores", "r3_pipeline", 2, true, 0},   {"08_tensor_cores", "r4_p_in_regs", 2, false, 0},
    {"08_tensor_cores", "fa2", 2, false, 64},
};

const KnownVariant* known_variant(const tr::Meta& m) {
  for (const auto& k : kKnown)
    if (m.step == k.step && m.variant == k.variant) return &k;
  return nullptr;
}

}  // namespace

SmemPipeline derive_smem_pipeline(const tr::Trace& trace, int kernel) {
  SmemPipeline L;
  const auto& m = trace.meta;
  // Tensor cores take 16-bit inputs: an fp32 trace keeps its own drawing.
  if ((m.dtype != "bf16" && m.dtype != "fp16") || m.pass != "fwd") return L;
  if (kernel < 0 || kernel >= int(trace.kernels.size())) {
    L.why_not = "no kernel in the trace";
    return L;
  }
  const auto& k = trace.kernels[std::size_t(kernel)];
  L.Br = m.Br;
  L.Bc = m.Bc;
  L.d = m.d;
  L.elem_bytes = 2;
  L.variant = m.variant;
  L.smem_bytes = k.smem_bytes > 0 ? k.smem_bytes : m.smem_per_cta_bytes;
  const std::int64_t threads = std::int64_t(k.block[0]) * k.block[1] * k.block[2];
  if (L.Br <= 0 || L.Bc <= 0 || L.d <= 0) {
    L.why_not = "the trace has no tile sizes";
    return L;
  }
  if (threads <= 0 || threads % 32 != 0 || L.Br % (16 * (threads / 32)) != 0) {
    L.why_not = "the block's " + std::to_string(threads) + " threads do not split Br = " + std::to_string(L.Br) +
                " rows into whole 16-row warp tiles";
    return L;
  }
  L.warps = int(threads / 32);
  L.rows_per_warp = L.Br / L.warps;
  // The layouts whose size is the kernel's shared memory.
  struct Fit {
    int stages;
    bool p_in_smem;
  };
  std::vector<Fit> fits;
  for (int stages : {1, 2})
    for (bool p : {false, true}) {
      SmemPipeline c = L;
      c.stages = stages;
      c.p_in_smem = p;
      if (c.total_bytes() == L.smem_bytes) fits.push_back({stages, p});
    }
  const KnownVariant* kv = known_variant(m);
  const auto table_fit = kv ? std::find_if(fits.begin(), fits.end(), [&](const Fit& f) {
    return f.stages == kv->stages && f.p_in_smem == kv->p_in_smem;
  }) : fits.end();
  if (fits.empty()) {
    L.why_not = "shared memory " + format_bytes(double(L.smem_bytes)) + " fits no layout of Q, K/V stages and P";
    return L;
  }
  if (fits.size() > 1 && table_fit == fits.end()) {
    L.why_not = "shared memory " + format_bytes(double(L.smem_bytes)) +
                " fits 1 stage with P in SRAM and 2 stages with P in registers; the trace does not say which";
    return L;
  }
  const Fit f = table_fit != fits.end() ? *table_fit : fits.front();
  L.stages = f.stages;
  L.p_in_smem = f.p_in_smem;
  L.from_variant = fits.size() > 1;
  if (table_fit != fits.end()) L.q_in_regs = L.d <= kv->q_in_regs_max_d ? 1 : 0;
  L.valid = true;
  return L;
}

PipelineView pipeline_at(const Replay& r, const SmemPipeline& L, int track, const TrackCursor& tc) {
  PipelineView v;
  if (!L.valid || track < 0 || track >= r.track_count()) return v;
  v.stages.assign(std::size_t(L.stages), StageView{});
  const auto& list = r.track_events(track);
  const auto& events = r.trace().events;
  auto at = [&](int i) -> const tr::Event& { return events[std::size_t(list[std::size_t(i)])]; };
  const int n = int(list.size());
  // The CTA's walk: its Load K events (one per tile, where the tile has landed), the P̃V event
  // of each tile, and where its loop ends (the first store or skip after the last tile).
  std::vector<int> pos, acc;
  int q_pos = -1, loop_end = n;
  for (int i = 0; i < n; ++i) {
    const auto& e = at(i);
    if (e.kind == tr::Kind::Load && e.tensor == tr::Tensor::Q && q_pos < 0) q_pos = i;
    if (e.kind == tr::Kind::Load && e.tensor == tr::Tensor::K) {
      pos.push_back(i);
      acc.push_back(-1);
      loop_end = n;
    }
    if (e.kind == tr::Kind::AccumulateO && !acc.empty() && acc.back() < 0) acc.back() = i;
    if ((e.kind == tr::Kind::Store || e.kind == tr::Kind::Skip) && !pos.empty() && loop_end == n) loop_end = i;
  }
  const int T = int(pos.size());
  v.tiles = T;
  if (!tc.started || tc.retired) return v;  // before it starts and after it exits, it holds nothing
  // The moment: the event in progress, or (between events) the next one.
  const int p = tc.active >= 0 ? tc.active : tc.done;
  v.q_loaded = q_pos >= 0 && q_pos < p;
  const int landed = int(std::lower_bound(pos.begin(), pos.end(), p) - pos.begin());  // Load K events done
  if (landed >= 1 && p < (landed < T ? pos[std::size_t(landed)] : loop_end)) v.computing = landed - 1;
  for (int t = 0; t < T; ++t) {
    // Issued where the span of Load K t (one stage) or Load K t−1 (two: the prefetch) begins.
    const bool issued = p >= pos[std::size_t(L.stages == 2 ? std::max(0, t - 1) : t)];
    if (!issued) break;
    StageView s;
    s.tile = t;
    s.key0 = at(pos[std::size_t(t)]).row0;
    s.keys = at(pos[std::size_t(t)]).rows;
    if (t < landed) {
      s.state = t == v.computing ? StageState::Computing : StageState::Free;
    } else {
      s.state = StageState::Loading;
      s.waited_on = p == pos[std::size_t(t)];
      if (!s.waited_on) v.in_flight = t;
    }
    v.stages[std::size_t(L.stage_of(t))] = s;
  }
  if (L.p_in_smem)
    for (int t = 0; t < T; ++t)
      if (acc[std::size_t(t)] >= 0 && acc[std::size_t(t)] <= p) {
        v.p_tile = t;
        v.p_live = tc.active == acc[std::size_t(t)];
      }
  return v;
}

}  // namespace fs::viz
