// The trace data model: what a traced run of a step recorded, in memory. The trace file
// (Chrome Trace Event JSON, docs/trace-format.md) is this model written out; the reader
// gives it back; the validator and the visualizer work on it. No ImGui, no CUDA here.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace fs::trace {

constexpr int kSchemaVersion = 1;
constexpr const char* kSchemaName = "flashsteps-trace";

// What a device event did. Load/Store move a tile between HBM and the CTA (SRAM or
// registers); the others are on-chip compute phases between them.
enum class Kind : std::uint8_t {
  Load = 0,      // HBM → chip: a tile of `tensor`
  Store = 1,     // chip → HBM: a tile of `tensor`
  ComputeS = 2,  // S_ij = τ Q_i K_jᵀ (and the mask) on chip
  Softmax = 3,   // row max / exp / row sum of a tile (P̃_ij, m̃, ℓ̃)
  Rescale = 4,   // online softmax: O, ℓ scaled by exp(m_old − m_new)
  AccumulateO = 5,   // O_i += P̃_ij V_j
  ComputeDP = 6,     // dP_ij = dO_i V_jᵀ
  ComputeDS = 7,     // dS_ij = P_ij ∘ (dP_ij − D_i)
  AccumulateDQ = 8,  // dQ_i += τ dS_ij K_j
  AccumulateDK = 9,  // dK_j += τ dS_ijᵀ Q_i
  AccumulateDV = 10, // dV_j += P_ijᵀ dO_i
  Skip = 11,         // a tile the algorithm skipped (causal / block-sparse), no work
  Wait = 12,         // a lane waiting at a barrier (data to land, a stage to free, its turn): no work
};
constexpr int kKindCount = 13;
const char* kind_name(Kind k);  // "load", "store", "compute_s", ...

// The HBM tensors a step reads and writes. M and L are Algorithm 1's running statistics,
// kept in HBM between its outer-loop iterations.
enum class Tensor : std::uint8_t {
  None = 0, Q, K, V, O, LSE, S, P, dO, dQ, dK, dV, dP, dS, D, M, L,
  dQacc,  // float32 (B, H, N, d): where a 16-bit backward adds dQ up with atomics
  // Step 07 (SMYRF), (B, H, N, 2·hashes): row i, column c < hashes of round c's query side,
  // c ≥ hashes of round c − hashes's key side.
  Order,    // int32: slot i of the round's sorted order holds row Order[i] (the sort's output)
  SortKey,  // a float hash and an int32 row index per row and round (8 bytes): the sort's input
  // Step 10 (decoding, KvCache below): the new tokens' keys and values that the append writes into
  // the cache, and the splits' partial results (float32) that the combine merges.
  KNew,     // (B, H_kv, N, d): flash_attn_with_kvcache's k, token t of sequence b at row t of head (b, h_kv)
  VNew,     // likewise v
  OPart,    // (B, H, N·splits, d) float32: row t·splits + s is split s's O of token t
  LSEPart,  // (B, H, N·splits) float32: its LSE
};
constexpr int kTensorCount = 24;
const char* tensor_name(Tensor t);  // "Q", "K", ..., "dS", "D", "m", "l", "dQacc"

// One HBM tensor of the run, for drawing it at its true size. Shapes are per the layouts in
// common/problem.hpp: (B, H, N, d) for Q..dV, (B, H, N, N) for S, P, dP, dS, (B, H, N) for
// LSE, D, m, l; a decoding trace's cache tensors as KvCache says.
struct TensorInfo {
  Tensor id = Tensor::None;
  std::vector<std::int64_t> shape;
  std::int64_t bytes = 0;
};

// One kernel launch of the traced pass.
struct Kernel {
  std::string name;          // "scores_kernel"
  int grid[3] = {1, 1, 1};
  int block[3] = {1, 1, 1};
  std::int64_t smem_bytes = 0;   // dynamic + static shared memory per CTA
  double ts_ns = 0, dur_ns = 0;  // placed on the host clock (its launch range)
  // Lanes: the parts of a CTA that record events of their own, each on its own track (step 09's
  // warpgroups: "producer", "consumer 0", "consumer 1"). 1 lane, unnamed: the CTA records as one.
  int lanes = 1;
  std::vector<std::string> lane_names;  // empty, or one per lane
};

// One CTA of one kernel: a track of the timeline.
// Times in a trace lie within this many nanoseconds of its t0 (11.6 days): a time past it is a
// torn record or a corrupt file, not a measurement.
constexpr double kMaxTimeNs = 1e15;

// The largest %smid a trace may hold (docs/trace-format.md): no GPU has as many SMs, and a
// viewer draws one box per SM.
constexpr int kMaxSm = 65535;

struct Track {
  int kernel = 0;      // index into Trace::kernels
  int cta = 0;         // linear block index within the kernel's grid
  int lane = 0;        // which of the kernel's lanes (Kernel::lanes) of that CTA: 0 when it has one
  int sm = -1;         // %smid it ran on
  std::int64_t dropped = 0;  // events this CTA could not record (its slice was full)
};

// The largest number of rounds a trace's clustering may have (step 07's --hashes).
constexpr int kMaxRounds = 16;

// One device event. Element ranges locate the tile in its tensor: rows [row0, row0+rows) and
// columns [col0, col0+cols) of head `bh` (for S/P-like tensors rows are queries and columns
// keys; for Q..dV columns are 0..d; for LSE-like tensors cols = 1).
//
// An event of a clustered step (round ≥ 0) names its rows by their slots in round `round`'s
// sorted orders (Meta::clusters): slot s of a query-side tensor (Q, O, LSE, dO, dQ, D) is row
// q_order[s], of a key-side one (K, V, dK, dV) row k_order[s]; for S-like tensors rows are query
// slots and columns key slots. Its tile is then the rows the orders gather, wherever they lie.
struct Event {
  int track = 0;        // index into Trace::tracks
  Kind kind = Kind::Load;
  Tensor tensor = Tensor::None;
  std::int32_t bh = 0;
  std::int32_t row0 = 0, rows = 0, col0 = 0, cols = 0;
  std::int64_t bytes = 0;   // bytes moved to or from HBM (Load/Store only)
  bool cached = false;      // a re-read that the IO model does not count (served by L2)
  double ts_ns = 0;         // begin, relative to the trace's t0, on the host clock
  double dur_ns = 0;
  std::int64_t seq = 0;     // logical order: 0, 1, 2, ... over the whole trace
  // Online-softmax steps: the running max m and normaliser ℓ of the CTA's sampled row after
  // this event, and that row's index; NaN / -1 when the event carries none.
  float m = std::numeric_limits<float>::quiet_NaN();
  float l = std::numeric_limits<float>::quiet_NaN();
  std::int32_t sample_row = -1;
  std::int32_t round = -1;  // clustered steps: the round whose orders map the rows; -1: rows are rows
};

// One NVTX range recorded on the host (allocation, copies, launches, sync, check).
struct HostRange {
  std::string name;
  double ts_ns = 0, dur_ns = 0;
  int depth = 0;  // nesting depth, 0 = outermost
};

struct HostMark {
  std::string name;
  double ts_ns = 0;
};

// An HBM buffer named through the NVTX memory extension.
struct NamedBuffer {
  std::string name;
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;
};

// The clustering of a clustered step's run (step 07, SMYRF): its rounds' orders, slot → row,
// per head. q_order[(bh·hashes + ρ)·N + s] is the query in slot s of round ρ; k_order likewise.
// Cluster c holds query slots [c·q_cluster, (c+1)·q_cluster) (the last may be short) and the
// k_cluster key slots centred on them, moved inside [0, N) (common/smyrf.hpp, SmyrfGeometry).
struct Clustering {
  int hashes = 0;  // 0: the run is not clustered
  int q_cluster = 0, k_cluster = 0;
  std::vector<std::int32_t> q_order, k_order;  // B·H·hashes·N each
  bool on() const { return hashes > 0; }
};

// HBM traffic of a pass that no device event records: a library's kernels (CUB's sort), memsets,
// device-to-device copies. Counted as the IO model counts them; `writes` are the tensors such a
// step writes whole (a memset of dK), which count as stored.
struct Untraced {
  std::string name;  // "cub::DeviceSegmentedRadixSort::SortPairs"
  std::int64_t read_bytes = 0, write_bytes = 0;
  std::vector<Tensor> writes;
};

// A decoding trace's KV cache (step 10; flash_attn_with_kvcache's layouts): N is then the new
// tokens per sequence, and the tensors are
//   Q, O        (B, H, N, d)      the new tokens' queries and outputs; LSE (B, H, N)
//   K, V        (1, H_kv, slots, d): the cache, one row per slot of each K/V head. A contiguous cache
//               has batch_cache · seqlen_cache slots, key j of cache sequence c at slot c·seqlen_cache + j;
//               a paged one num_blocks · page_size, key j of sequence b at slot
//               block_table[b][j / page_size] · page_size + j mod page_size
//   S           (B, H_kv, (H / H_kv)·N, seqlen_cache): the scores of one K/V head's group of query rows
//               (row t·g + i is token t of query head h_kv·g + i) against its sequence's keys
//   k_new, v_new, o_part, lse_part  as the Tensor enum says
// Sequence b holds lengths[b] keys when the pass attends (after the append).
struct KvCache {
  int heads_kv = 0;      // H_kv; 0: not a decoding trace
  int seqlen_cache = 0;  // keys of room per sequence
  int slots = 0;         // rows of K and V per K/V head
  int page_size = 0;     // 0: contiguous
  int splits = 1;        // of every sequence's keys; above 1 the partials go through o_part, lse_part
  bool append = false;   // k_new and v_new were written into the cache first
  std::vector<std::int32_t> lengths;      // B: keys per sequence as the attention sees them
  std::vector<std::int32_t> block_table;  // paged: B × (entries per sequence), row-major
  std::vector<std::int32_t> batch_idx;    // contiguous: the cache sequence of each sequence (B); empty: b
  bool on() const { return heads_kv > 0; }
  bool paged() const { return page_size > 0; }
  int blocks_per_seq(int B) const { return B > 0 ? int(block_table.size()) / B : 0; }
  // The slot of key `key` of sequence b (the layout above): through the block table, or batch_idx.
  // b in [0, B = lengths.size()), key below the room, the table consistent (the validator's checks).
  std::int64_t slot(int b, int key) const {
    if (paged()) {
      const std::size_t row = std::size_t(b) * std::size_t(blocks_per_seq(int(lengths.size())));
      return std::int64_t(block_table[row + std::size_t(key / page_size)]) * page_size + key % page_size;
    }
    return std::int64_t(batch_idx.empty() ? b : batch_idx[std::size_t(b)]) * seqlen_cache + key;
  }
};

struct Meta {
  int schema_version = kSchemaVersion;
  std::string gpu, driver, commit, date;
  std::string step;      // "04_online_softmax"
  std::string variant;   // "fa2"
  std::string pass;      // "fwd" or "bwd"
  int B = 0, H = 0, N = 0, d = 0;
  bool causal = false;
  float scale = 0;
  float dropout = 0;                     // dropout probability (steps 05+; optional in the file)
  std::string dtype = "fp32";            // of Q..dV: fp32, bf16, fp16 (optional in the file: fp32)
  std::string block_mask;                // block-sparse steps: "8 × 8 blocks of 128 × 128, 24 nonzero
                                         // (density 0.375)"; empty when dense (optional in the file)
  int Br = 0, Bc = 0;                    // tile sizes (0 when the step does not tile)
  std::int64_t sram_budget_bytes = 0;    // the device's shared memory per CTA (opt-in max)
  std::int64_t smem_per_cta_bytes = 0;   // what the step's main kernel uses
  std::int64_t io_read_bytes = 0;        // the IO model's count for this step, shape, pass
  std::int64_t io_write_bytes = 0;
  std::int64_t event_cap = 0;            // device records per CTA
  std::int64_t events_dropped = 0;       // over all CTAs; never silent
  std::vector<TensorInfo> tensors;
  Clustering clusters;             // clustered steps (optional in the file)
  std::vector<Untraced> untraced;  // traffic no event records (optional in the file)
  KvCache cache;                   // decoding traces (optional in the file)
};

struct Trace {
  Meta meta;
  std::vector<Kernel> kernels;
  std::vector<Track> tracks;
  std::vector<Event> events;   // sorted by seq
  std::vector<HostRange> ranges;
  std::vector<HostMark> marks;
  std::vector<NamedBuffer> buffers;
};

}  // namespace fs::trace
