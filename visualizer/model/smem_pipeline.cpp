#include "visualizer/model/smem_pipeline.hpp"

#include <algorithm>
#include <iterator>

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
    {"08_tensor_cores", "fa2", 2, false, 64},         {"08_tensor_cores", "deterministic", 2, false, 64},
    {"08_tensor_cores", "key_warps", 2, false, 64},  // deterministic and key_warps run fa2's forward
};

const KnownVariant* known_variant(const tr::Meta& m) {
  for (const auto& k : kKnown)
    if (m.step == k.step && m.variant == k.variant) return &k;
  return nullptr;
}

// What the trace cannot say of the backward, as steps/08_tensor_cores/backward_configs.cuh
// compiles it: the dK/dV kernels' configurations — whether tc_dkdv_kernel's warps keep K and V's
// fragments in registers, the 16-row tiles of dQ's share each warp adds (kDqRowTiles), and how
// many rows of keys tc_dkdv_smem_kernel's warps form (kKeyGroups) — and the dQ kernel's tiles at
// each head dimension. A dK/dV entry is used only where it agrees with all that the trace says of
// the kernel (its name, d, warps, keys, queries and split) and the variant is one of step 08's:
// so a trace recorded before its variant moved to another configuration finds the one it ran
// where step 08 still compiles it (a rung's backward recorded when fa2's ran tc_dkdv_kernel at
// d = 64 finds the tiles key_warps has now), and a stale table is never believed over the trace.
struct KnownDkdv {
  int d;
  SmemKernel kernel;
  // DkdvConfig<E, d, kWarps, kQueries, kSplit, kKVInRegs, kDqRowTiles>: keys = 16·kWarps, a row of
  // keys a warp; DkdvSmemConfig<E, d, kKeys, kQueries, kWarps, kKeyGroups, kDqRowTiles>: no split,
  // K and V read from SRAM.
  int keys, queries, warps, key_groups, split;
  bool kv_in_regs;
  int dq_row_tiles;
};
constexpr KnownDkdv kKnownDkdv[] = {
    // fa2, deterministic and the rungs (Bwd<E, d>::Dkdv)
    {32, SmemKernel::Dkdv, 64, 64, 4, 4, 1, true, 1},
    {64, SmemKernel::DkdvSmem, 128, 128, 8, 4, 1, false, 2},
    {96, SmemKernel::Dkdv, 128, 64, 8, 8, 1, false, 1},
    {128, SmemKernel::DkdvSmem, 128, 64, 8, 4, 1, false, 2},
    {256, SmemKernel::Dkdv, 64, 64, 4, 4, 2, false, 1},
    // key_warps (KeyWarps<E, d>): tc_dkdv_kernel's 16-key warps at d = 64 and 128
    {64, SmemKernel::Dkdv, 64, 64, 4, 4, 1, true, 2},
    {128, SmemKernel::Dkdv, 128, 64, 8, 8, 1, false, 2},
};
struct KnownDq {
  int d, warps, mtiles, keys;  // DqConfig<E, d, kWarps, kMTiles, kKeys>
};
constexpr KnownDq kKnownDq[] = {{32, 4, 1, 64}, {64, 4, 1, 64}, {96, 4, 1, 64}, {128, 4, 1, 64}, {256, 4, 1, 32}};

constexpr const char* kBackwardVariants[] = {"fa2",         "deterministic", "r1_mma",   "r2_swizzle",
                                             "r3_pipeline", "r4_p_in_regs",  "key_warps"};

bool step08_backward(const tr::Meta& m) {
  return m.step == "08_tensor_cores" &&
         std::any_of(std::begin(kBackwardVariants), std::end(kBackwardVariants), [&](const char* v) { return m.variant == v; });
}

// The entry that agrees with the dK/dV layout L (kernel, d, tiles, warps, split), or null.
const KnownDkdv* known_dkdv(const tr::Meta& m, const SmemPipeline& L) {
  if (!step08_backward(m)) return nullptr;
  for (const auto& k : kKnownDkdv)
    if (k.d == L.d && k.kernel == L.kernel && k.keys == L.Bc && k.queries == L.Br && k.warps == L.warps &&
        k.split == L.split)
      return &k;
  return nullptr;
}

const KnownDq* known_dq(const tr::Meta& m) {
  if (!step08_backward(m)) return nullptr;
  for (const auto& k : kKnownDq)
    if (k.d == m.d) return &k;
  return nullptr;
}

// Tile t of a CTA's walk, keys [key0, key0 + keys), issued: landed tiles (the first `landed`) are
// the one computed now or free; the others are loading, and waited on when the CTA is at its event.
StageView tile_stage(int t, int landed, int computing, bool at_its_load, int key0, int keys) {
  StageView s;
  s.tile = t;
  s.key0 = key0;
  s.keys = keys;
  if (t < landed) {
    s.state = t == computing ? StageState::Computing : StageState::Free;
  } else {
    s.state = StageState::Loading;
    s.waited_on = at_its_load;
  }
  return s;
}

int ceil_div(int a, int b) { return b > 0 ? (a + b - 1) / b : 0; }

// Whether the trace's tensors include t (those its events touch).
bool lists(const tr::Meta& m, tr::Tensor t) {
  return std::any_of(m.tensors.begin(), m.tensors.end(), [&](const tr::TensorInfo& ti) { return ti.id == t; });
}

// The dK/dV kernels, from L's kernel, d and warps, and the kernel's grid and shared memory and
// the trace's tiles (set_tiles: queries a stage and keys a CTA).
SmemPipeline derive_dkdv(const tr::Trace& trace, const tr::Kernel& k, SmemPipeline L) {
  const auto& m = trace.meta;
  const bool smem_pds = L.kernel == SmemKernel::DkdvSmem;
  L.Br = m.Br;  // queries a stage
  L.Bc = m.Bc;  // keys a CTA
  if (L.Br <= 0 || L.Bc <= 0 || L.Br % 16 != 0 || L.Bc % 16 != 0) {
    L.why_not = "the trace's tiles (Br = " + std::to_string(L.Br) + " queries, Bc = " + std::to_string(L.Bc) +
                " keys) are not whole 16-row mma tiles";
    return L;
  }
  if (!smem_pds && L.Bc != 16 * L.warps) {
    L.why_not = "the block's " + std::to_string(L.warps) + " warps own 16 keys each, " + std::to_string(16 * L.warps) +
                ", not the trace's Bc = " + std::to_string(L.Bc);
    return L;
  }
  const int key_tiles = ceil_div(m.N, L.Bc);
  if (key_tiles <= 0 || k.grid[0] % key_tiles != 0 || L.d % (16 * (k.grid[0] / key_tiles)) != 0) {
    L.why_not = "the grid's " + std::to_string(k.grid[0]) + " CTAs a head do not split d = " + std::to_string(L.d) +
                " evenly over the " + std::to_string(key_tiles) + " key tiles";
    return L;
  }
  L.split = k.grid[0] / key_tiles;
  if (smem_pds && L.split != 1) {
    L.why_not = "the grid's " + std::to_string(k.grid[0]) + " CTAs a head are not one for each of the " +
                std::to_string(key_tiles) + " key tiles";
    return L;
  }
  // tc_dkdv_kernel: dSᵀ's tile, for the atomic dQ, is the only part whose presence the size
  // leaves open. tc_dkdv_smem_kernel always has P's and dS's, and adds to dQacc where the trace
  // has one.
  L.p_in_smem = smem_pds;
  for (bool atomic : {false, true}) {
    if (smem_pds && atomic != lists(m, tr::Tensor::dQacc)) continue;
    SmemPipeline c = L;
    c.atomic_dq = atomic;
    if (c.total_bytes() == L.smem_bytes) {
      L.atomic_dq = atomic;
      L.valid = true;
    }
  }
  if (!L.valid) {
    L.why_not = "shared memory " + format_bytes(double(L.smem_bytes)) + " fits no layout of K, V, two stages of Q, dO, LSE, D" +
                (smem_pds ? ", P and dSᵀ" : " and dSᵀ");
    return L;
  }
  const KnownDkdv* kb = known_dkdv(m, L);
  // The warps' rows of keys: one warp a row (16 keys), or tc_dkdv_smem_kernel's G rows, each
  // warp of a row taking whole 16-row tiles of the queries (Sᵀ) and of the columns (dK, dV).
  std::vector<int> groups;
  for (int g = 1; g <= L.warps; ++g) {
    const int others = L.warps / g;
    if (L.warps % g == 0 && L.Bc % (16 * g) == 0 && L.Br % (16 * others) == 0 && L.d % (16 * others) == 0 &&
        (smem_pds || g == L.warps))
      groups.push_back(g);
  }
  if (groups.empty()) {
    L.valid = false;
    L.why_not = "the block's " + std::to_string(L.warps) + " warps do not split " + std::to_string(L.Bc) + " keys × " +
                std::to_string(L.Br) + " queries and d = " + std::to_string(L.d) + " into whole 16-row warp tiles";
    return L;
  }
  const bool table_fit = kb && std::find(groups.begin(), groups.end(), kb->key_groups) != groups.end();
  if (table_fit || groups.size() == 1) {
    L.row_groups = table_fit ? kb->key_groups : groups.front();
    L.rows_per_warp = L.Bc / L.row_groups;
    L.from_variant = groups.size() > 1;
  }
  L.dq_row_tiles = kb ? kb->dq_row_tiles : 0;
  if (L.atomic_dq && L.dq_row_tiles > 0 &&
      (L.Br % (16 * L.dq_row_tiles) != 0 || L.warps % L.dq_row_groups() != 0 ||
       L.cols() % (16 * L.dq_col_groups()) != 0)) {
    L.valid = false;
    L.why_not = "dQ's share does not split into whole warp tiles of the CTA's " + std::to_string(L.cols()) + " columns";
    return L;
  }
  // tc_dkdv_smem_kernel reads its keys' rows of K and V from SRAM for every query tile.
  L.kv_in_regs = smem_pds ? 0 : kb ? int(kb->kv_in_regs) : -1;
  return L;
}

// The backward's dK/dV and dQ kernels (flash_tc_backward.cuh), from the kernel's block, grid
// and shared memory and the trace's tiles (set_tiles: the dK/dV kernel's queries a stage and
// keys a CTA).
SmemPipeline derive_backward(const tr::Trace& trace, int kernel) {
  SmemPipeline L;
  const auto& m = trace.meta;
  if (kernel < 0 || kernel >= int(trace.kernels.size())) {
    L.why_not = "no kernel in the trace";
    return L;
  }
  const auto& k = trace.kernels[std::size_t(kernel)];
  if (k.name == "tc_dkdv_kernel")
    L.kernel = SmemKernel::Dkdv;
  else if (k.name == "tc_dkdv_smem_kernel")
    L.kernel = SmemKernel::DkdvSmem;
  else if (k.name == "tc_dq_kernel")
    L.kernel = SmemKernel::Dq;
  else
    return L;  // the preprocess and convert kernels stream no tiles through shared memory
  L.d = m.d;
  L.elem_bytes = 2;
  L.stages = 2;
  L.variant = m.variant;
  L.smem_bytes = k.smem_bytes;
  const std::int64_t threads = std::int64_t(k.block[0]) * k.block[1] * k.block[2];
  if (L.d <= 0 || L.d % 16 != 0) {
    L.why_not = "head dimension d = " + std::to_string(L.d) + " is not a multiple of 16";
    return L;
  }
  if (threads <= 0 || threads % 32 != 0) {
    L.why_not = "the block's " + std::to_string(threads) + " threads are not whole warps";
    return L;
  }
  L.warps = int(threads / 32);
  if (L.dkdv()) return derive_dkdv(trace, k, L);
  // The dQ kernel: Br = 16·MT·W rows a CTA (its grid: ceil(N / Br) CTAs a head), Bc keys a stage,
  // shared memory e·(2·Br·d + 4·Bc·d).
  struct Fit {
    int Br, Bc;
  };
  std::vector<Fit> fits;
  const std::int64_t elems = L.smem_bytes / L.elem_bytes;
  for (int mt = 1; L.smem_bytes % L.elem_bytes == 0; ++mt) {
    const int br = 16 * mt * L.warps;
    const std::int64_t rest = elems - 2 * std::int64_t(br) * L.d;  // the stages' share
    if (rest <= 0) break;
    if (ceil_div(m.N, br) != k.grid[0]) continue;
    if (rest % (4 * L.d) == 0 && (rest / (4 * L.d)) % 16 == 0) fits.push_back({br, int(rest / (4 * L.d))});
  }
  if (fits.empty()) {
    L.why_not = "shared memory " + format_bytes(double(L.smem_bytes)) + " and the grid's " + std::to_string(k.grid[0]) +
                " CTAs a head fit no tile of Q, dO and two stages of K, V";
    return L;
  }
  const KnownDq* kb = known_dq(m);
  const auto table_fit = kb && kb->warps == L.warps ? std::find_if(fits.begin(), fits.end(), [&](const Fit& f) {
    return f.Br == 16 * kb->mtiles * kb->warps && f.Bc == kb->keys;
  }) : fits.end();
  if (fits.size() > 1 && table_fit == fits.end()) {
    L.why_not = "shared memory " + format_bytes(double(L.smem_bytes)) + " and the grid fit " + std::to_string(fits.size()) +
                " tile sizes; the trace does not say which";
    return L;
  }
  const Fit f = table_fit != fits.end() ? *table_fit : fits.front();
  L.Br = f.Br;
  L.Bc = f.Bc;
  L.rows_per_warp = L.Br / L.warps;
  L.row_groups = L.warps;
  L.from_variant = fits.size() > 1;
  L.valid = true;
  return L;
}

PipelineView backward_at(const Replay& r, const SmemPipeline& L, int track, const TrackCursor& tc) {
  PipelineView v;
  v.stages.assign(std::size_t(L.stages), StageView{});
  const auto& list = r.track_events(track);
  const auto& events = r.trace().events;
  auto at = [&](int i) -> const tr::Event& { return events[std::size_t(list[std::size_t(i)])]; };
  const int n = int(list.size());
  const bool dkdv = L.dkdv();
  const tr::Tensor kept = dkdv ? tr::Tensor::K : tr::Tensor::Q;    // its first load: the kept tiles'
  const tr::Tensor marker = dkdv ? tr::Tensor::Q : tr::Tensor::K;  // a stage's tile has landed
  // The CTA's walk: a marker per tile, the event that writes its dSᵀ (tc_dkdv_kernel: the dV
  // product; tc_dkdv_smem_kernel: dS, with P) and, in tc_dkdv_smem_kernel, the dV product that
  // reads them, the atomics (Load dQacc: dSᵀ read back, dQ's share added; Store dQacc), and where
  // the loop ends (its first store of an output, or skip, after the last tile).
  const tr::Kind writes = L.kernel == SmemKernel::DkdvSmem ? tr::Kind::ComputeDS : tr::Kind::AccumulateDV;
  std::vector<int> pos, wr, dv, lq, sq;
  int loop_end = n;
  bool kept_seen = false;
  for (int i = 0; i < n; ++i) {
    const auto& e = at(i);
    if (e.kind == tr::Kind::Load && e.tensor == kept && !kept_seen) {
      kept_seen = true;
      v.kept_row0 = e.row0;
      v.kept_rows = e.rows;
    }
    if (e.kind == tr::Kind::Load && e.tensor == marker) {
      pos.push_back(i);
      for (auto* marks : {&wr, &dv, &lq, &sq}) marks->push_back(-1);
      loop_end = n;
    }
    if (!pos.empty()) {
      if (e.kind == writes && wr.back() < 0) wr.back() = i;
      if (e.kind == tr::Kind::AccumulateDV && dv.back() < 0) dv.back() = i;
      if (e.kind == tr::Kind::Load && e.tensor == tr::Tensor::dQacc && lq.back() < 0) lq.back() = i;
      if (e.kind == tr::Kind::Store && e.tensor == tr::Tensor::dQacc && sq.back() < 0) sq.back() = i;
    }
    if (((e.kind == tr::Kind::Store && e.tensor != tr::Tensor::dQacc) || e.kind == tr::Kind::Skip) && loop_end == n)
      loop_end = i;
  }
  const int T = int(pos.size());
  v.tiles = T;
  if (dkdv) {  // blockIdx.x % kSplit · kCols: the CTA's half of d, split or not
    const auto& info = r.trace().tracks[std::size_t(track)];
    const int gx = std::max(1, r.trace().kernels[std::size_t(info.kernel)].grid[0]);
    v.col0 = info.cta % gx % std::max(1, L.split) * L.cols();
  }
  if (!tc.started || tc.retired) return v;
  const int p = tc.active >= 0 ? tc.active : tc.done;
  v.kept_loaded = T > 0 ? p > pos[0] : p >= loop_end;
  const int landed = int(std::lower_bound(pos.begin(), pos.end(), p) - pos.begin());
  if (landed >= 1 && p < (landed < T ? pos[std::size_t(landed)] : loop_end)) v.computing = landed - 1;
  for (int t = 0; t < T; ++t) {
    // Tile 0 goes out where its marker's span begins, tile t + 1 where tile t's marker ends.
    const bool issued = t == 0 ? p >= pos[0] : p > pos[std::size_t(t - 1)];
    if (!issued) break;
    const StageView s = tile_stage(t, landed, v.computing, p == pos[std::size_t(t)], at(pos[std::size_t(t)]).row0,
                                   at(pos[std::size_t(t)]).rows);
    if (s.state == StageState::Loading && !s.waited_on) v.in_flight = t;
    v.stages[std::size_t(L.stage_of(t))] = s;
  }
  if (L.ds_in_smem())
    for (int t = 0; t < T; ++t) {
      const int w = wr[std::size_t(t)], rd = lq[std::size_t(t)], st = sq[std::size_t(t)];
      if (w < 0 || w > p) continue;
      // tc_dkdv_smem_kernel's operands: read by its dV product (tc_dkdv_kernel's writes them).
      const int op = L.p_in_smem ? dv[std::size_t(t)] : -1;
      auto phase = [&](bool read_for_dq) {
        if (p == w) return DsPhase::Writing;
        if (op >= 0 && p <= op) return p < op ? DsPhase::Written : DsPhase::Operand;
        if (read_for_dq) return p < rd ? DsPhase::Written : p == rd ? DsPhase::Reading : DsPhase::Spent;
        return op >= 0 ? DsPhase::Spent : DsPhase::Written;
      };
      v.ds_tile = t;
      v.ds_row0 = at(pos[std::size_t(t)]).row0;
      v.ds_phase = phase(L.atomic_dq && rd >= 0);
      if (L.p_in_smem) v.p_phase = phase(false);
      v.dq_atomic_tile = rd >= 0 && rd <= p && p <= std::max(rd, st) ? t : -1;
    }
  return v;
}

}  // namespace

std::vector<tr::Tensor> SmemPipeline::stage_tensors() const {
  if (dkdv()) return {tr::Tensor::Q, tr::Tensor::dO, tr::Tensor::LSE, tr::Tensor::D};
  return {tr::Tensor::K, tr::Tensor::V};
}

std::vector<tr::Tensor> SmemPipeline::kept_tensors() const {
  if (dkdv()) return {tr::Tensor::K, tr::Tensor::V};
  if (kernel == SmemKernel::Dq) return {tr::Tensor::Q, tr::Tensor::dO};
  return {tr::Tensor::Q};
}

SmemPipeline derive_smem_pipeline(const tr::Trace& trace, int kernel) {
  SmemPipeline L;
  const auto& m = trace.meta;
  // Tensor cores take 16-bit inputs: an fp32 trace keeps its own drawing.
  if (m.dtype != "bf16" && m.dtype != "fp16") return L;
  if (m.pass == "bwd") return derive_backward(trace, kernel);
  if (m.pass != "fwd") return L;
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
  L.row_groups = L.warps;
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
  if (L.backward()) return backward_at(r, L, track, tc);
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
    const StageView s = tile_stage(t, landed, v.computing, p == pos[std::size_t(t)], at(pos[std::size_t(t)]).row0,
                                   at(pos[std::size_t(t)]).rows);
    if (s.state == StageState::Loading && !s.waited_on) v.in_flight = t;
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
