#include "visualizer/model/smem_pipeline.hpp"

#include <algorithm>
#include <iterator>

#include "common/e4m3.hpp"
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

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return b > 0 ? (a + b - 1) / b : 0; }

// What any kernel of the steps can have, on any GPU: 1024 threads a CTA, and 227 KiB of shared
// memory (Hopper's; 256 KiB here). A trace may say more (the reader takes blocks of 1024 threads a
// dimension and sizes up to 2^50 bytes); its layout is then no kernel's, and the searches below,
// which walk tile sizes up to the shared memory's, stay short.
constexpr std::int64_t kMaxCtaThreads = 1024;
constexpr std::int64_t kMaxCtaSmemBytes = std::int64_t(256) << 10;

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
  const std::int64_t key_tiles = ceil_div(m.N, L.Bc);
  if (key_tiles <= 0 || k.grid[0] % key_tiles != 0 || L.d % (16 * (k.grid[0] / key_tiles)) != 0) {
    L.why_not = "the grid's " + std::to_string(k.grid[0]) + " CTAs a head do not split d = " + std::to_string(L.d) +
                " evenly over the " + std::to_string(key_tiles) + " key tiles";
    return L;
  }
  L.split = int(k.grid[0] / key_tiles);
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
// keys a CTA). `kernel` is one of the trace's (derive_smem_pipeline checks).
SmemPipeline derive_backward(const tr::Trace& trace, int kernel) {
  SmemPipeline L;
  const auto& m = trace.meta;
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
  // Br grows until Q's and dO's tiles alone fill the shared memory, which derive_smem_pipeline
  // bounds: at most kMaxCtaSmemBytes / (64·d) steps (it ran to 2^40 on 2^50 bytes, br past int).
  for (std::int64_t br = 16 * L.warps; L.smem_bytes % L.elem_bytes == 0; br += 16 * L.warps) {
    const std::int64_t rest = elems - 2 * br * L.d;  // the stages' share
    if (rest <= 0) break;
    if (ceil_div(m.N, br) != k.grid[0]) continue;
    if (rest % (4 * L.d) == 0 && (rest / (4 * L.d)) % 16 == 0) fits.push_back({int(br), int(rest / (4 * L.d))});
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

// --- Step 09 (steps/09_hopper) ----------------------------------------------------------------

// What the trace's size alone leaves open, as steps/09_hopper/configs.cuh compiles the forward:
// the variant's keys a tile and stages at each d (deterministic runs fa3's forward, the rungs
// ws's tiles; fp8's Fp8Cfg: d = kFp8HeadDim = 128, tiles of kFp8BlockKV = kE4m3BlockKV keys, the
// quantizer's K and V blocks, through 2 stages). Used only where the kernel's shared memory is
// not in the trace, or fits more than one layout and this entry is one of them.
struct KnownHopper {
  const char* variant;
  int d, keys, stages;
};
constexpr KnownHopper kKnownHopper[] = {
    {"fa3", 64, 128, 4},         {"fa3", 128, 128, 2},         {"fa3", 256, 64, 2},
    {"deterministic", 64, 128, 4}, {"deterministic", 128, 128, 2}, {"deterministic", 256, 64, 2},
    {"wgmma", 128, 128, 2},      {"ws", 128, 128, 2},          {"ws_overlap", 128, 128, 2},
    {"ws_pingpong", 128, 128, 2}, {"fp8", 128, kE4m3BlockKV, 2},
};

// HopperConfig's tiles of keys (its static_assert: S's wgmma is m64n64, m64n128, or, fp8 alone,
// m64n224 at d = 128).
bool hopper_keys_ok(bool fp8, int d, int keys) {
  if (fp8) return d == 128 && (keys == 64 || keys == 128 || keys == 224);
  return keys == 64 || keys == 128;
}

const KnownHopper* known_hopper(const tr::Meta& m) {
  for (const auto& k : kKnownHopper)
    if (m.variant == k.variant && m.d == k.d && m.Bc == k.keys) return &k;
  return nullptr;
}

constexpr int kHopperLanes = 3;     // the copies and two consumer warpgroups
constexpr int kConsumerRows = 64;   // a consumer's query rows (forward) or keys (backward)
constexpr int kHopperStagesMax = 8;

SmemPipeline derive_hopper(const tr::Trace& trace, int kernel) {
  SmemPipeline L;
  const auto& m = trace.meta;
  const auto& k = trace.kernels[std::size_t(kernel)];
  if (k.name == "hopper_forward_kernel")
    L.kernel = SmemKernel::HopperForward;
  else if (k.name == "hopper_backward_kernel")
    L.kernel = SmemKernel::HopperBackward;
  else
    return L;  // the backward's preprocess and convert kernels are step 08's: no tiles through SRAM
  const bool fwd = L.kernel == SmemKernel::HopperForward;
  L.Br = m.Br;
  L.Bc = m.Bc;
  L.d = m.d;
  L.variant = m.variant;
  L.fp8 = fwd && m.variant == "fp8";
  L.elem_bytes = L.fp8 ? 1 : 2;
  L.consumers = kHopperLanes - 1;
  L.smem_bytes = k.smem_bytes > 0 ? k.smem_bytes : m.smem_per_cta_bytes;
  const std::int64_t threads = std::int64_t(k.block[0]) * k.block[1] * k.block[2];
  if (k.lanes != kHopperLanes) {
    L.why_not = "the kernel records its CTAs in " + std::to_string(k.lanes) +
                " lane(s), not the copies' and two consumers' (the trace predates lanes)";
    return L;
  }
  // Three warpgroups; or, in the forward's wgmma rung, the two consumers alone, consumer 0's first
  // thread issuing the copies (lane 0 holds the copies either way).
  if (threads != 128 * kHopperLanes && !(fwd && threads == 128 * (kHopperLanes - 1))) {
    L.why_not = "the block's " + std::to_string(threads) + " threads are not step 09's warpgroups";
    return L;
  }
  // The consumers' 64 rows (forward: of the 128 queries; backward: of the 128 keys).
  const int kept = fwd ? L.Br : L.Bc;
  const bool keys_ok = fwd ? hopper_keys_ok(L.fp8, L.d, L.Bc) : L.Bc % 64 == 0;
  if (L.d <= 0 || L.d % 64 != 0 || kept != L.consumers * kConsumerRows || L.Br % 64 != 0 || !keys_ok) {
    L.why_not = "the trace's tiles (Br = " + std::to_string(L.Br) + ", Bc = " + std::to_string(L.Bc) +
                ", d = " + std::to_string(L.d) + ") are not step 09's";
    return L;
  }
  L.warps = int(threads / 32);
  L.rows_per_warp = 16;  // a consumer warp's 16 rows (keys) of its warpgroup's 64
  L.o_in_smem = fwd && L.d <= 128;
  // kStages: the sizes with the alignment and barriers, and of the tiles alone, that fit.
  struct Fit {
    int stages;
    bool tiles_only;
  };
  std::vector<Fit> fits;
  for (int st = 1; st <= kHopperStagesMax; ++st)
    for (bool only : {false, true}) {
      SmemPipeline c = L;
      c.stages = st;
      c.tiles_only = only;
      if (only) c.o_in_smem = false;
      if (c.total_bytes() == L.smem_bytes) fits.push_back({st, only});
    }
  const KnownHopper* kh = fwd ? known_hopper(m) : nullptr;
  const int table_stages = fwd ? (kh ? kh->stages : 0) : 2;  // the backward's two stages at every d
  if (L.smem_bytes <= 0 && table_stages > 0) {
    fits = {{table_stages, false}};
    L.from_table = true;
  }
  const auto table_fit =
      std::find_if(fits.begin(), fits.end(), [&](const Fit& f) { return f.stages == table_stages; });
  if (fits.empty()) {
    L.why_not = "shared memory " + format_bytes(double(L.smem_bytes)) + " fits no number of stages of " +
                (fwd ? "K and V" : "Q, dO, LSE and D");
    return L;
  }
  if (fits.size() > 1 && table_fit == fits.end()) {
    L.why_not = "shared memory " + format_bytes(double(L.smem_bytes)) + " fits " + std::to_string(fits.size()) +
                " numbers of stages; the trace does not say which";
    return L;
  }
  const Fit f = table_fit != fits.end() ? *table_fit : fits.front();
  L.stages = f.stages;
  L.tiles_only = f.tiles_only;
  if (f.tiles_only) L.o_in_smem = false;
  L.from_variant = fits.size() > 1;
  L.valid = true;
  return L;
}

// A lane of the CTA at a moment: which of its events have begun and ended.
struct LaneAt {
  int track = -1;
  const std::vector<int>* list = nullptr;
  TrackCursor tc;
  bool begun(int i) const { return i >= 0 && tc.started && (i < tc.done || i == tc.active); }
  bool ended(int i) const { return i >= 0 && i < tc.done; }
  bool active(int i) const { return i >= 0 && i == tc.active; }
};

// A consumer's use of what a region holds: the Wait that gates it (or -1), the first event that
// reads it and the last (its release; -1: held to the end).
struct Use {
  int gate = -1, first = -1, last = -1;
};

// The state of a region's tile, issued or not, from each consumer's use of it.
StageView held(bool issued, const std::vector<std::pair<const LaneAt*, Use>>& uses, int tile, int key0, int keys) {
  StageView s;
  if (!issued) return s;
  s.tile = tile;
  s.key0 = key0;
  s.keys = keys;
  int users = 0, released = 0;
  bool in_use = false;
  for (const auto& [lane, u] : uses) {
    if (u.first < 0) continue;  // this consumer recorded nothing for it (its rows past N)
    ++users;
    if (u.last >= 0 && lane->ended(u.last))
      ++released;
    else if (u.gate >= 0 ? lane->ended(u.gate) : lane->begun(u.first))
      in_use = true;
    else if (lane->active(u.gate))
      s.waited_on = true;
  }
  s.state = users > 0 && released == users ? StageState::Free
            : in_use || released > 0      ? StageState::Computing
                                          : StageState::Loading;
  if (s.state != StageState::Loading) s.waited_on = false;
  return s;
}

// The gates of a consumer's products: a Wait gates the next product, and, where that is ComputeS,
// a P̃V issued with it (the overlap's: no Rescale between them). Returns the gate of a product at
// event i of kind `kind`.
struct Gates {
  int wait = -1, with_s = -1;
  bool pending = false;
  void on(tr::Kind kind, int i) {
    if (kind == tr::Kind::Wait) {
      wait = i;
      pending = true;
    } else if (kind == tr::Kind::Rescale) {
      with_s = -1;
    }
  }
  int product(tr::Kind kind) {
    int g = -1;
    if (pending) {
      g = wait;
      pending = false;
      with_s = kind == tr::Kind::ComputeS ? g : -1;
    } else if (kind == tr::Kind::AccumulateO && with_s >= 0) {
      g = with_s;
      with_s = -1;
    }
    return g;
  }
};

PipelineView hopper_at(const Replay& r, const SmemPipeline& L, int track, Cursor c) {
  PipelineView v;
  const bool fwd = L.kernel == SmemKernel::HopperForward;
  const int S = L.stages;
  v.stages.assign(std::size_t(S), StageView{});
  if (fwd) {
    v.v_stages.assign(std::size_t(S), StageView{});
    if (L.o_in_smem) v.o_halves.assign(std::size_t(L.consumers), StageView{});
  } else {
    v.ds_buffers.assign(2, StageView{});
    v.dq_blocks.assign(std::size_t(L.consumers), StageView{});
  }
  const auto& trace = r.trace();
  LaneAt prod;
  std::vector<LaneAt> cons(std::size_t(L.consumers));
  for (int t : r.lanes_of(track)) {
    const int lane = trace.tracks[std::size_t(t)].lane;
    LaneAt* a = lane == 0 ? &prod : lane <= L.consumers ? &cons[std::size_t(lane - 1)] : nullptr;
    if (a) *a = {t, &r.track_events(t), r.track_cursor(t, c)};
  }
  if (!prod.list) return v;
  auto ev = [&](const LaneAt& a, int i) -> const tr::Event& { return trace.events[std::size_t((*a.list)[std::size_t(i)])]; };
  auto count = [](const LaneAt& a) { return a.list ? int(a.list->size()) : 0; };
  // The producer's copies: the work tiles (their Load Q; the backward: the kept K) and the tiles
  // of each ring, in issue order (the i-th goes to stage i mod kStages).
  struct Load {
    int event, row0, rows, bh, first_tile;  // first_tile: a forward work tile's g
  };
  std::vector<Load> works, ks, vs;
  for (int i = 0; i < count(prod); ++i) {
    const auto& e = ev(prod, i);
    if (e.kind != tr::Kind::Load) continue;
    const Load l{i, e.row0, e.rows, e.bh, int(ks.size())};
    if (e.tensor == (fwd ? tr::Tensor::Q : tr::Tensor::K) && (fwd || works.empty())) works.push_back(l);
    if (e.tensor == (fwd ? tr::Tensor::K : tr::Tensor::Q)) ks.push_back(l);
    if (fwd && e.tensor == tr::Tensor::V) vs.push_back(l);
  }
  v.tiles = int(ks.size());
  // Each consumer's uses of each tile (by its ordinal), work tile (forward) and buffer.
  const std::size_t C = cons.size();
  std::vector<std::vector<Use>> kuse(C, std::vector<Use>(ks.size())), vuse(C, std::vector<Use>(vs.size())),
      wuse(C, std::vector<Use>(works.size())), dsuse(C, std::vector<Use>(ks.size())), dquse(C, std::vector<Use>(ks.size()));
  std::vector<int> o_store(C, -1), o_work(C, -1);
  for (std::size_t ci = 0; ci < C; ++ci) {
    const LaneAt& a = cons[ci];
    Gates gates;
    int w = -1, acc = 0, tile = -1;
    for (int i = 0; i < count(a); ++i) {
      const auto& e = ev(a, i);
      gates.on(e.kind, i);
      if (fwd) {
        // The work tile its rows are in (a persistent CTA's consumers walk the producer's list).
        auto in = [&](int k) { return e.bh == works[std::size_t(k)].bh && e.row0 >= works[std::size_t(k)].row0 &&
                                      e.row0 < works[std::size_t(k)].row0 + works[std::size_t(k)].rows; };
        if (w < 0 || !in(w))
          for (int k = std::max(0, w + 1); k < int(works.size()); ++k)
            if (in(k)) {
              w = k;
              acc = 0;
              break;
            }
        if (w < 0 || !in(w)) continue;
        const int g = works[std::size_t(w)].first_tile;
        if (e.kind == tr::Kind::ComputeS) {
          const int gi = g + (L.Bc > 0 ? e.col0 / L.Bc : 0);
          const int gate = gates.product(e.kind);
          if (gi < int(ks.size())) kuse[ci][std::size_t(gi)] = {gate, i, i};
          Use& q = wuse[ci][std::size_t(w)];
          if (q.first < 0) q = {gate, i, i};
          q.last = i;  // Q is freed after the work tile's last S
        } else if (e.kind == tr::Kind::AccumulateO) {
          const int gi = g + acc++;
          const int gate = gates.product(e.kind);
          if (gi < int(vs.size())) vuse[ci][std::size_t(gi)] = {gate, i, i};
        } else if (e.kind == tr::Kind::Store && e.tensor == tr::Tensor::O && a.begun(i)) {
          o_store[ci] = i;
          o_work[ci] = w;
        }
      } else {
        // The backward: the query tile an event names, by its first row (each once a CTA).
        if (e.kind == tr::Kind::ComputeS) {
          tile = -1;
          for (int k = 0; k < int(ks.size()) && tile < 0; ++k)
            if (ks[std::size_t(k)].row0 == e.row0) tile = k;
          const int gate = gates.product(e.kind);
          if (tile >= 0) kuse[ci][std::size_t(tile)] = {gate, i, -1};
          // K and V: read from the first Sᵀ on, never freed.
          if (!wuse[ci].empty() && wuse[ci][0].first < 0) wuse[ci][0] = {gate, i, -1};
        }
        if (tile < 0) continue;
        const auto t = std::size_t(tile);
        if (e.kind == tr::Kind::ComputeDS) dsuse[ci][t] = {i, i, -1};
        if (e.kind == tr::Kind::AccumulateDK) {
          kuse[ci][t].last = i;
          dsuse[ci][t].last = i;
          dquse[ci][t] = {i, i, -1};
        }
        if (e.kind == tr::Kind::Store && e.tensor == tr::Tensor::dQacc) dquse[ci][t].last = i;
      }
    }
  }
  for (const auto& a : cons) v.users += count(a) > 0 ? 1 : 0;
  bool started = prod.tc.started, retired = prod.tc.retired;
  for (const auto& a : cons) {
    started = started || a.tc.started;
    retired = retired && (!a.list || a.tc.retired);
  }
  if (!started || retired) return v;  // before it starts and after it exits, it holds nothing
  auto uses_of = [&](const std::vector<std::vector<Use>>& u, std::size_t i) {
    std::vector<std::pair<const LaneAt*, Use>> out;
    for (std::size_t ci = 0; ci < C; ++ci) out.emplace_back(&cons[ci], u[ci][i]);
    return out;
  };
  // A ring: stage s holds the last tile issued into it.
  auto ring = [&](std::vector<StageView>& stages, const std::vector<Load>& loads, const std::vector<std::vector<Use>>& u) {
    for (std::size_t i = 0; i < loads.size() && prod.begun(loads[i].event); ++i)
      stages[i % stages.size()] = held(true, uses_of(u, i), int(i), loads[i].row0, loads[i].rows);
  };
  ring(v.stages, ks, kuse);
  if (fwd) ring(v.v_stages, vs, vuse);
  for (std::size_t k = 0; k < works.size() && prod.begun(works[k].event); ++k)
    v.kept = held(true, uses_of(wuse, k), int(k), works[k].row0, fwd ? works[k].rows : L.Bc);
  if (!fwd && !works.empty()) v.kept.keys = works[0].rows;
  v.kept_loaded = v.q_loaded = v.kept.state == StageState::Computing || v.kept.state == StageState::Free;
  for (int i = 0; i < int(v.stages.size()); ++i)
    if (v.stages[std::size_t(i)].state == StageState::Computing) v.computing = v.stages[std::size_t(i)].tile;
  if (fwd) {
    for (std::size_t ci = 0; ci < v.o_halves.size(); ++ci)
      if (o_store[ci] >= 0) {
        const auto& e = ev(cons[ci], o_store[ci]);
        StageView& o = v.o_halves[ci];
        o.tile = o_work[ci];
        o.key0 = e.row0;
        o.keys = e.rows;
        o.state = cons[ci].ended(o_store[ci]) ? StageState::Free : StageState::Computing;
      }
    return v;
  }
  // dSᵀ's buffer i mod 2 and each consumer's dQ block hold the last tile written into them.
  for (std::size_t i = 0; i < ks.size(); ++i) {
    const auto u = uses_of(dsuse, i);
    const bool written = std::any_of(u.begin(), u.end(), [](const auto& p) { return p.first->ended(p.second.gate); });
    if (written) v.ds_buffers[i % 2] = held(true, u, int(i), ks[i].row0, ks[i].rows);
    for (std::size_t ci = 0; ci < C; ++ci)
      if (cons[ci].ended(dquse[ci][i].gate))
        v.dq_blocks[ci] = held(true, {{&cons[ci], dquse[ci][i]}}, int(i), ks[i].row0, ks[i].rows);
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

std::vector<SmemRegion> SmemPipeline::regions() const {
  std::vector<SmemRegion> out;
  if (!hopper()) return out;
  const std::int64_t e = elem_bytes;
  auto add = [&](tr::Tensor t, int stage, int rows, int cols, std::int64_t bytes_each) {
    out.push_back({t, stage, rows, cols, bytes_each * rows * cols});
  };
  if (!tiles_only) out.push_back({tr::Tensor::None, -1, 0, 0, 1024});  // the slack that aligns the tiles to 1024 bytes
  int barriers = 0;
  if (kernel == SmemKernel::HopperForward) {
    add(tr::Tensor::Q, -1, Br, d, e);
    for (int s = 0; s < stages; ++s) add(tr::Tensor::K, s, Bc, d, e);
    for (int s = 0; s < stages; ++s) {
      if (!fp8) {
        add(tr::Tensor::V, s, Bc, d, e);
        continue;
      }
      add(tr::Tensor::V, s, d, vt_keys(), e);  // Vᵀ: d rows of whole 128-key boxes
      out.back().cols_read = Bc;
    }
    if (o_in_smem) add(tr::Tensor::O, -1, Br, d, 2);
    barriers = 2 + 4 * stages;
  } else {
    add(tr::Tensor::K, -1, Bc, d, e);
    add(tr::Tensor::V, -1, Bc, d, e);
    for (tr::Tensor t : {tr::Tensor::Q, tr::Tensor::dO})
      for (int s = 0; s < stages; ++s) add(t, s, Br, d, e);
    for (int b = 0; b < 2; ++b) add(tr::Tensor::dS, b, Bc, Br, e);
    for (int c = 0; c < consumers; ++c) add(tr::Tensor::dQacc, c, kConsumerRows, kConsumerRows, 4);
    for (tr::Tensor t : {tr::Tensor::LSE, tr::Tensor::D})
      for (int s = 0; s < stages; ++s) add(t, s, Br, 1, 4);
    barriers = 1 + 2 * stages;
  }
  if (!tiles_only) out.push_back({tr::Tensor::None, -1, 0, 0, 8 * std::int64_t(barriers)});
  return out;
}

StageView region_view(const SmemPipeline& L, const PipelineView& v, const SmemRegion& g) {
  auto at = [&](const std::vector<StageView>& list) {
    return g.stage >= 0 && g.stage < int(list.size()) ? list[std::size_t(g.stage)] : StageView{};
  };
  const bool fwd = L.kernel == SmemKernel::HopperForward;
  switch (g.tensor) {
    case tr::Tensor::Q: return fwd ? v.kept : at(v.stages);
    case tr::Tensor::K: return fwd ? at(v.stages) : v.kept;
    case tr::Tensor::V: return fwd ? at(v.v_stages) : v.kept;
    case tr::Tensor::dO:
    case tr::Tensor::LSE:
    case tr::Tensor::D: return at(v.stages);
    case tr::Tensor::O: return g.stage >= 0 ? at(v.o_halves) : StageView{};
    case tr::Tensor::dS: return at(v.ds_buffers);
    case tr::Tensor::dQacc: return at(v.dq_blocks);
    default: return {};
  }
}

SmemPipeline derive_smem_pipeline(const tr::Trace& trace, int kernel) {
  SmemPipeline L;
  const auto& m = trace.meta;
  // Tensor cores take 16-bit inputs: an fp32 trace keeps its own drawing.
  if (m.dtype != "bf16" && m.dtype != "fp16") return L;
  // Step 10's split kernel (a decoding trace) has a layout of its own, not step 08's: its tiles are
  // drawn as they are loaded, gathered from the cache's pages.
  if (m.cache.on()) return L;
  if (kernel < 0 || kernel >= int(trace.kernels.size())) {
    L.why_not = "no kernel in the trace";
    return L;
  }
  const tr::Kernel& k = trace.kernels[std::size_t(kernel)];
  const std::int64_t threads = std::int64_t(k.block[0]) * k.block[1] * k.block[2];
  if (threads > kMaxCtaThreads) {
    L.why_not = "the block's " + std::to_string(threads) + " threads are more than a CTA has (" +
                std::to_string(kMaxCtaThreads) + ")";
    return L;
  }
  if (std::max(k.smem_bytes, m.smem_per_cta_bytes) > kMaxCtaSmemBytes) {
    L.why_not = "shared memory " + format_bytes(double(std::max(k.smem_bytes, m.smem_per_cta_bytes))) +
                " is more than any GPU gives a CTA";
    return L;
  }
  if (m.step == "09_hopper") return derive_hopper(trace, kernel);
  if (m.pass == "bwd") return derive_backward(trace, kernel);
  if (m.pass != "fwd") return L;
  L.Br = m.Br;
  L.Bc = m.Bc;
  L.d = m.d;
  L.elem_bytes = 2;
  L.variant = m.variant;
  L.smem_bytes = k.smem_bytes > 0 ? k.smem_bytes : m.smem_per_cta_bytes;
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
  if (!L.valid || track < 0 || track >= r.track_count() || L.hopper()) return v;  // step 09: at a Cursor
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

PipelineView pipeline_at(const Replay& r, const SmemPipeline& L, int track, Cursor c) {
  if (!L.valid || track < 0 || track >= r.track_count()) return {};
  if (L.hopper()) return hopper_at(r, L, track, c);
  return pipeline_at(r, L, track, r.track_cursor(track, c));
}

}  // namespace fs::viz
