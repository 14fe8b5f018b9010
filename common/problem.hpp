// The problem every step solves, and the one interface every step implements.
//
// Layout (all steps): Q, O, dO, dQ are (B, H, N, d) and K, V, dK, dV (B, Hkv, Nk, d) — the same
// unless a step takes other K/V shapes (StepInfo::kv_shapes) —, row-major and contiguous, of the
// run's dtype (fp32; bf16 or fp16 for the tensor-core steps); LSE is (B, H, N) float32, natural
// log: LSE_i = m_i + log(ℓ_i) (docs/notation.md, Symbols). Causal masks key j > query i + δ,
// δ = Nk − N: aligned to the bottom-right corner, as FlashAttention does since 2.1 (δ = 0 when
// the shape is square).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.hpp"

namespace fs {

namespace trace {
class DeviceSink;  // common/recorder/sink.hpp
}

struct Shape {
  int B = 1;   // batch
  int H = 1;   // heads
  int N = 1;   // sequence length (queries; keys too unless Nk says otherwise)
  int d = 64;  // head dimension
  // K and V of their own length and head count, as flash_attn_func takes them (seqlen_k,
  // nheads_k); 0: N and H. H must be a multiple of the K/V heads (grouped-query attention; one
  // K/V head is multi-query attention). Steps with StepInfo::kv_shapes take them.
  int Nk = 0;
  int Hkv = 0;

  __host__ __device__ int keys() const { return Nk > 0 ? Nk : N; }
  __host__ __device__ int kv_heads() const { return Hkv > 0 ? Hkv : H; }
  bool square() const { return keys() == N && kv_heads() == H; }  // the problem of steps 01-08
  std::int64_t heads() const { return std::int64_t(B) * H; }
  std::int64_t rows() const { return heads() * N; }        // elements of LSE
  std::int64_t elems() const { return rows() * d; }        // elements of Q (or O, dO, dQ)
  std::int64_t kv_elems() const { return std::int64_t(B) * kv_heads() * keys() * d; }  // of K (or V, dK, dV)
  std::int64_t score_elems() const { return heads() * N * std::int64_t(keys()); }  // of S or P
};

// Where row n of head h of batch b of a tensor starts, in elements from the tensor's start:
// b·batch + h·head + n·row; the d elements of a row are contiguous. Left at zero, the layout
// above — (B, heads, rows, d) contiguous —, which every step's kernels take; flash_attn_func's
// (B, rows, heads, d) is {rows·heads·d, d, heads·d}, and a slice of a packed QKV tensor has
// others again. Steps with StepInfo::strides take any (the Python module passes a tensor's own).
struct Strides {
  std::int64_t batch = 0, head = 0, row = 0;
  bool dense() const { return batch == 0 && head == 0 && row == 0; }
  // These, or the contiguous (B, heads, rows, d) layout's when left at zero.
  Strides or_dense(int heads, int rows, int d) const {
    if (!dense()) return *this;
    return {std::int64_t(heads) * rows * d, std::int64_t(rows) * d, d};
  }
  // The offset of row 0 of head bh (b · heads + h) of a tensor with `heads` heads.
  __host__ __device__ std::int64_t of_head(std::int64_t bh, int heads) const {
    return bh / heads * batch + bh % heads * head;
  }
};

// Sequences packed along the tokens, as flash_attn_varlen_func takes them (cu_seqlens_q,
// cu_seqlens_k): the Shape is then one batch (B = 1) of N query tokens and Nk key tokens, and
// sequence b's queries [cu_q[b], cu_q[b+1]) see only its keys [cu_k[b], cu_k[b+1]), every mask
// aligned to that sequence's own bottom-right corner (δ_b = its keys − its queries). Q, O, dO, dQ
// stay (1, H, N, d) and LSE (H, N): a sequence's rows are its tokens' rows; the dropout mask is
// indexed by token (query token, key token), as the reference does. A sequence may be empty.
// The offsets are device arrays of count + 1 int32 prefix sums from 0 to N and to Nk; max_q and
// max_k are the longest sequence's lengths (the kernels' grids are cut to them). Steps with
// StepInfo::packed take them.
struct Packed {
  const std::int32_t* cu_q = nullptr;  // (count + 1)
  const std::int32_t* cu_k = nullptr;  // (count + 1)
  int count = 0;                       // sequences; 0: none packed (the Shape's B batches)
  int max_q = 0, max_k = 0;
  __host__ __device__ bool on() const { return count > 0; }
};

// The same sequences as a run asks for them (the command line's --varlen, --load's cu_seqlens
// files), on the host: the prefix sums as values, count + 1 each, uploaded where the kernels run
// as Packed (whose count, max_q and max_k come from here). Empty: none packed.
struct PackedSeqs {
  std::vector<std::int32_t> cu_q, cu_k;
  bool on() const { return !cu_q.empty(); }
  int count() const { return on() ? static_cast<int>(cu_q.size()) - 1 : 0; }
  int queries(int b) const { return cu_q[b + 1] - cu_q[b]; }  // sequence b's lengths
  int keys(int b) const { return cu_k[b + 1] - cu_k[b]; }
  int max_queries() const;  // the longest sequence's (Packed::max_q, max_k)
  int max_keys() const;
  // Sequence b as a problem of its own: B = 1, its queries and keys (Nk set, even where equal),
  // the heads and head dimension of the packed problem `s`. Both lengths must be at least 1 (a
  // Shape cannot say "no keys": Nk = 0 means N).
  Shape sequence(const Shape& s, int b) const;
};

// Default softmax scale τ = 1/√d.
float default_scale(int d);

// FLOPs by the FlashAttention papers' convention: forward 4·B·H·N²·d (two matmuls of
// 2·N²·d each), halved when causal; backward 2.5× the forward.
double forward_flops(const Shape& s, bool causal);
double backward_flops(const Shape& s, bool causal);
// ... with packed sequences (off: the above): the sum over the sequences of 4·H·n·n_k·d, and
// causal, of 4·H·d times the area below each one's bottom-right diagonal, n·n_k − n²/2 where
// n_k ≥ n and n_k²/2 where n_k < n (N²/2 for a square sequence, as above).
double forward_flops(const Shape& s, bool causal, const PackedSeqs& packed);
double backward_flops(const Shape& s, bool causal, const PackedSeqs& packed);

// Dropout on the attention probabilities (docs/notation.md, Algorithms 2 and 4): each P_ij is
// kept with probability 1 − p and scaled by 1/(1 − p). The mask is a function of (seed, head,
// i, j) through Philox (common/philox.hpp), regenerated wherever it is needed, never stored.
struct Dropout {
  float p = 0.f;               // 0: no dropout
  std::uint64_t seed = 0;
  bool on() const { return p > 0.f; }
};

// A block-sparse mask as the kernels walk it (docs/notation.md, Algorithm 5; common/block_mask.hpp
// builds it): device arrays of the nonzero key blocks of each query block row (forward) and
// of the nonzero query blocks of each key block column (backward), ascending. One mask is
// shared by every (batch, head).
struct BlockSparse {
  int block_r = 0, block_c = 0;   // elements per block: queries, keys
  int Tr = 0, Tc = 0;             // ⌈N/block_r⌉, ⌈N/block_c⌉
  const int* row_ptr = nullptr;   // (Tr + 1)
  const int* col_idx = nullptr;   // (nonzero blocks)
  const int* col_ptr = nullptr;   // (Tc + 1)
  const int* row_idx = nullptr;   // (nonzero blocks)
  bool on() const { return row_ptr != nullptr; }
};

// SMYRF's clustering (step 07; common/smyrf.hpp): `hashes` rounds of asymmetric LSH, each
// sorting the queries and the keys by their hash and cutting the orders into balanced clusters;
// a query attends only to its cluster's keys, and the rounds are merged by the LSE rule.
struct SmyrfParams {
  int hashes = 0;          // rounds; 0: no clustering (dense attention)
  int q_cluster = 64;      // queries per cluster
  int k_cluster = 64;      // keys per cluster
  float r = 1.f;           // E2LSH width: β ~ U(0, r)
  std::uint64_t seed = 0;  // draws the projections α and β
  bool on() const { return hashes > 0; }
};

// FlashAttention's interface features that change the scores (flash_attn_func's window_size,
// softcap, alibi_slopes; common/reference.hpp defines them for the fp64 reference): for query i
// and key j of head h, with τ the softmax scale,
//   softcap  > 0: S_ij = softcap · tanh(τ q_i·k_j / softcap)          (else S_ij = τ q_i·k_j)
//   ALiBi    S_ij −= slope_h · |i − j|       (slopes: one per head, (H), or per batch and head, (B, H))
//   window   key j is visible only when i − window_left ≤ j ≤ i + window_right; −1 leaves that
//            side unbounded (window_left = −1, window_right = 0 is the causal mask)
// Square shapes only, so far: N queries and N keys, the masks' diagonal i = j.
struct ScoreMods {
  int window_left = -1, window_right = -1;
  float softcap = 0.f;
  const float* alibi_slopes = nullptr;  // where the kernels run (device memory on a GPU); null: none
  // The slopes' shape, as flash_attn_func takes them: 0 for (H), one slope per head that every
  // batch shares; H for (B, H), a row of H slopes per batch — with packed sequences (B = 1) a row
  // per sequence, as flash_attn_varlen_func takes them (FlashAttention's alibi_slopes_batch_stride).
  int alibi_batch_stride = 0;
  bool windowed() const { return window_left >= 0 || window_right >= 0; }
  bool on() const { return windowed() || softcap > 0.f || alibi_slopes != nullptr; }
  // The slope of head h of batch b (packed: of sequence b). Steps 04-08 read it once per CTA and
  // step 10 once per row of a warp's scores: the (B, H) form adds one integer multiply-add there.
  __host__ __device__ float alibi_slope(std::int64_t b, int h) const { return alibi_slopes[b * alibi_batch_stride + h]; }
};

// The same features as a run asks for them (the command line's --window, --softcap, --alibi),
// on the host: the slopes are values here, uploaded where the kernels run.
struct ScoreFeatures {
  int window_left = -1, window_right = -1;
  float softcap = 0.f;
  std::vector<float> alibi_slopes;  // (H), one per head, or (B, H), a row per batch; empty: none
  int alibi_batch_stride = 0;       // which of the two: 0 for (H), H for (B, H) (ScoreMods's)
  bool windowed() const { return window_left >= 0 || window_right >= 0; }
  bool on() const { return windowed() || softcap > 0.f || !alibi_slopes.empty(); }
};

// The batches ALiBi's (B, H) slopes have a row for: the Shape's B, or with packed sequences their
// count (each sequence its own batch, as flash_attn_varlen_func takes alibi_slopes).
inline int alibi_batches(const Shape& s, const PackedSeqs& packed) { return packed.on() ? packed.count() : s.B; }

// A window's reach over tiles, the same on the host (IO models) and in the kernels: query rows
// [first, last] see the keys [window_lo(first, left), window_end(last, right)), and keys
// [first, last] are seen by the queries [window_lo(first, right), window_end(last, left)). A
// reach of −1 is unbounded. Reaches are at most N (a wider window is the same window).
__host__ __device__ inline int window_lo(int first, int reach) { return reach >= 0 ? first - reach : 0; }
__host__ __device__ inline int window_end(int last, int reach) { return reach >= 0 ? last + reach + 1 : 0x7fffffff; }
// A reach as the kernels and the IO models take it: a query's diagonal key and any key are less
// than max(N, Nk) apart, so a longer reach sees no more (and cannot overflow window_end).
inline int clamp_reach(int reach, int N, int Nk) {
  const int most = N > Nk ? N : Nk;
  return reach < most ? reach : most;
}

// The tiles of a run of `count` tiles of `tile` elements from `first` (a multiple of `tile`)
// that meet [lo, end): the first of them and how many.
struct TileRun {
  int first = 0, count = 0;
};
__host__ __device__ inline TileRun clip_tiles(int first, int count, int tile, int lo, int end) {
  const int lo_tile = (lo > 0 ? lo : 0) / tile * tile;
  const int from = first > lo_tile ? first : lo_tile;
  const int run_end = first + count * tile, stop = run_end < end ? run_end : end;
  return stop > from ? TileRun{from, (stop - from + tile - 1) / tile} : TileRun{from, 0};
}

// HBM traffic of one pass, as a step's IO model counts it.
struct IoCount {
  std::int64_t read_bytes = 0;
  std::int64_t write_bytes = 0;
  std::int64_t total() const { return read_bytes + write_bytes; }
};

// HBM traffic of a pass that none of the step's kernels records in a trace: a library's kernels
// (CUB's sort), memsets, device-to-device copies. It is part of the step's IO model; a trace
// lists it beside the events (trace.hpp, Meta::untraced). `writes`: the tensors it writes whole,
// by their trace names ("dK", "order").
struct UntracedIo {
  std::string name;
  std::int64_t read_bytes = 0, write_bytes = 0;
  std::vector<std::string> writes;
};

// A tensor of the params as its element type: as<float>(p.q), as<__nv_bfloat16>(p.o).
template <typename T>
__host__ __device__ inline const T* as(const void* p) { return static_cast<const T*>(p); }
template <typename T>
__host__ __device__ inline T* as(void* p) { return static_cast<T*>(p); }

// Every forward launcher takes this. The tensors are of `dtype`, LSE float32.
// Which part of a forward a call runs, for the variants that prepare their inputs before their
// kernel (StepInfo::e4m3: step 09's fp8 quantizes Q, K and V into the workspace). kBoth is the
// forward. kPrepare and kKernel split it so that the benchmark can time each: the kernel then
// reads what the last call that prepared left in the workspace, for the same inputs (a model
// that keeps its activations in e4m3 pays the kernel alone). Other variants take kBoth only.
enum class FwdPart : std::uint8_t { kBoth, kPrepare, kKernel };

struct FwdParams {
  const void* q = nullptr;   // (B, H, N, d)
  const void* k = nullptr;   // (B, H, N, d)
  const void* v = nullptr;   // (B, H, N, d)
  void* o = nullptr;         // (B, H, N, d)
  float* lse = nullptr;      // (B, H, N)
  DType dtype = DType::fp32;
  Shape shape;
  float scale = 0.f;
  bool causal = false;
  int variant = 0;              // index into StepInfo::variants
  Dropout dropout;              // steps with StepInfo::dropout only
  BlockSparse sparse;           // steps with StepInfo::block_sparse only; off: dense
  SmyrfParams smyrf;            // steps with StepInfo::clustered only
  ScoreMods mods;               // kernels instantiated with FlashFeatures only (common/flash_features.cuh)
  // Clustered steps: the clusters to use instead of hashing (--load), on the device: the query
  // orders (B·H, hashes, N), then the key orders likewise; null: the step hashes and sorts.
  const std::int32_t* smyrf_orders = nullptr;
  void* workspace = nullptr;    // StepInfo::fwd_workspace_bytes(shape, settings) bytes; kept for the backward
  cudaStream_t stream = nullptr;
  // Tracing (common/recorder/launch.cuh): null runs the plain kernels; set, the launcher runs
  // their traced instantiations and the sink collects what each CTA recorded.
  trace::DeviceSink* trace = nullptr;
  // The tensors' layouts: zero, the one above; other strides only for steps with StepInfo::strides.
  // Last, so that the fields above keep their offsets in the kernels' parameters.
  Strides q_strides, k_strides, v_strides, o_strides;
  Packed packed;  // steps with StepInfo::packed only; off: the Shape's B batches
  FwdPart part = FwdPart::kBoth;
};

// Every backward launcher takes this. The forward's O and LSE are inputs.
struct BwdParams {
  const void* q = nullptr;      // (B, H, N, d)
  const void* k = nullptr;      // (B, H, N, d)
  const void* v = nullptr;      // (B, H, N, d)
  const void* o = nullptr;      // (B, H, N, d)
  const float* lse = nullptr;   // (B, H, N)
  const void* dout = nullptr;   // (B, H, N, d)  dO = ∂loss/∂O
  void* dq = nullptr;           // (B, H, N, d)
  void* dk = nullptr;           // (B, H, N, d)
  void* dv = nullptr;           // (B, H, N, d)
  DType dtype = DType::fp32;    // of every tensor but LSE
  Shape shape;
  float scale = 0.f;
  bool causal = false;
  int variant = 0;
  Dropout dropout;              // as the forward's: the same mask is regenerated
  BlockSparse sparse;           // as the forward's
  SmyrfParams smyrf;            // as the forward's (its clusters are in fwd_workspace)
  ScoreMods mods;               // as the forward's
  const void* fwd_workspace = nullptr;  // what the forward left there (step 01: S and P)
  void* workspace = nullptr;            // StepInfo::bwd_workspace_bytes(shape, settings) bytes
  cudaStream_t stream = nullptr;
  trace::DeviceSink* trace = nullptr;   // as FwdParams::trace
  // As FwdParams's; dq, dk and dv are written in their own layouts.
  Strides q_strides, k_strides, v_strides, o_strides, dout_strides, dq_strides, dk_strides, dv_strides;
  Packed packed;  // as the forward's
};

struct BlockMask;      // common/block_mask.hpp
struct SmyrfClusters;  // common/smyrf.hpp

// How a run passes over its problem, beside the shape: decided once per run (RunPlan,
// common/plan.hpp) and handed to the step's support check and IO model, the timed run and the
// traced run.
struct PassSettings {
  PassSettings(float scale_ = 0.f, bool causal_ = false, int variant_ = 0, Dropout dropout_ = {},
               const BlockMask* mask_ = nullptr, DType dtype_ = DType::fp32, SmyrfParams smyrf_ = {},
               const SmyrfClusters* clusters_ = nullptr)
      : scale(scale_), causal(causal_), variant(variant_), dropout(dropout_), mask(mask_), dtype(dtype_),
        smyrf(smyrf_), clusters(clusters_) {}
  float scale = 0.f;
  bool causal = false;
  int variant = 0;                  // index into StepInfo::variants
  Dropout dropout;                  // steps with StepInfo::dropout
  const BlockMask* mask = nullptr;  // block-sparse steps; null: every block (must outlive the run)
  DType dtype = DType::fp32;        // of the tensors (StepInfo::dtypes)
  SmyrfParams smyrf;                // clustered steps: the clustering
  const SmyrfClusters* clusters = nullptr;  // clustered steps: clusters given (--load); null: hashed on the GPU
  ScoreFeatures features;           // steps with StepInfo::score_mods: window, softcap, ALiBi
  PackedSeqs packed;                // steps with StepInfo::packed: the sequences; off: the Shape's B batches
};

// The head dimension at which steps 04-08 compile their traced kernels (trace::kTracedAt,
// common/recorder/launch.cuh): the traced runs' (kTraceShape, common/cli.hpp), which the tour, the
// tests and the shipped traces record. untraced_head_dim, their StepInfo::untraced, refuses others.
constexpr int kTracedHeadDim = 64;
std::string untraced_head_dim(const Shape& s, const PassSettings& settings);

// One row of the table of steps that the tour, the tests and the benchmarks iterate over. A
// hook left null means: no workspace, any shape.
struct StepInfo {
  std::string id;                     // "01_naive"
  std::string title;                  // one line for tables and --help
  std::vector<std::string> variants;  // kernels the step holds; variant 0 is the default
  void (*forward)(const FwdParams&) = nullptr;
  void (*backward)(const BwdParams&) = nullptr;  // nullptr: the step has no backward
  // Device memory beyond inputs and outputs.
  std::size_t (*fwd_workspace_bytes)(const Shape&, const PassSettings&) = nullptr;
  std::size_t (*bwd_workspace_bytes)(const Shape&, const PassSettings&) = nullptr;
  // Empty when the step's kernels run this shape with these settings (on the GPU of this
  // machine, or an H200's shared memory without one); otherwise why not, in one line.
  std::string (*unsupported)(const Shape&, const PassSettings&) = nullptr;
  // Where the backward takes fewer problems than the forward: why it does not take this one.
  std::string (*unsupported_backward)(const Shape&, const PassSettings&) = nullptr;
  // Where traced kernels are compiled for fewer problems than the plain ones (trace::launch<false>
  // compiles no traced twin; untraced_head_dim is steps 04-08's rule): why this one has none.
  std::string (*untraced)(const Shape&, const PassSettings&) = nullptr;
  // The step's IO model: the HBM bytes one pass moves. With packed sequences pass_io
  // (common/harness.hpp) sums it over the sequences, each as a problem of its own: the hooks
  // never see PassSettings::packed.
  IoCount (*io_forward)(const Shape&, const PassSettings&) = nullptr;
  IoCount (*io_backward)(const Shape&, const PassSettings&) = nullptr;
  // Said when a shape does not fit the GPU: what the step's memory grows with.
  std::string memory_note;
  bool dropout = false;       // the kernels take FwdParams/BwdParams::dropout
  bool block_sparse = false;  // the kernels take FwdParams/BwdParams::sparse
  bool score_mods = false;    // the kernels take FwdParams/BwdParams::mods (StepInfo::refusal says which variants)
  bool kv_shapes = false;     // the kernels take Shape::Nk and Shape::Hkv (likewise)
  bool strides = false;       // the kernels take FwdParams/BwdParams's Strides (tensors in any layout)
  bool packed = false;        // the kernels take FwdParams/BwdParams::packed (sequences packed along the tokens)
  int (*mask_block)(int d) = nullptr;  // block-sparse steps: the default block size at head dimension d
  std::vector<DType> dtypes{DType::fp32};  // the element types its kernels take
  // Variants whose backward adds dQ with atomics: correct, but the rounding depends on the
  // order the adds land in, so repeats are not bit-identical.
  std::vector<std::string> order_dependent;
  // Variants whose kernels round Q, K and V to e4m3 first (step 09's fp8): checked against the
  // reference of the rounded inputs under the FP8 rule (AttnOptions::e4m3, common/verify.hpp).
  // Their forward has two parts (FwdParams::part), which the benchmark also times alone.
  std::vector<std::string> e4m3;
  // Clustered steps (SMYRF, step 07): approximate attention inside the clusters of
  // PassSettings::smyrf, checked against the reference of those clusters. The hook finds, in
  // the forward's workspace, the clusters the pass used: the query orders (B·H, hashes, N), then
  // the key orders (device memory).
  bool clustered = false;
  const std::int32_t* (*cluster_orders)(const void* fwd_workspace, const Shape&, const PassSettings&) = nullptr;
  // The part of a pass's IO model (pass "fwd" or "bwd") that its trace has no events for.
  std::vector<UntracedIo> (*untraced_io)(const Shape&, const PassSettings&, const std::string& pass) = nullptr;

  // "04_online_softmax/fa2"; the id alone for a step of one kernel.
  std::string label(int variant) const { return variants.size() > 1 ? id + "/" + variants[variant] : id; }
  std::size_t fwd_workspace(const Shape& s, const PassSettings& settings) const {
    return fwd_workspace_bytes ? fwd_workspace_bytes(s, settings) : 0;
  }
  std::size_t bwd_workspace(const Shape& s, const PassSettings& settings) const {
    return bwd_workspace_bytes ? bwd_workspace_bytes(s, settings) : 0;
  }
  std::string refusal(const Shape& s, const PassSettings& settings) const {
    return unsupported ? unsupported(s, settings) : std::string();
  }
  // Empty when the step runs this problem's backward pass; otherwise why not, in one line.
  std::string backward_refusal(const Shape& s, const PassSettings& settings) const {
    if (!backward) return id + " has no backward pass";
    if (std::string why = refusal(s, settings); !why.empty()) return why;
    return unsupported_backward ? unsupported_backward(s, settings) : std::string();
  }
  // Empty when a traced run of this problem is compiled; otherwise why not, in one line.
  std::string trace_refusal(const Shape& s, const PassSettings& settings) const {
    return untraced ? untraced(s, settings) : std::string();
  }
  // Whether the backward takes a problem that the forward takes (refusal empty).
  bool backward_takes(const Shape& s, const PassSettings& settings) const {
    return backward && (!unsupported_backward || unsupported_backward(s, settings).empty());
  }
  bool rounds_to_e4m3(int variant) const {
    for (const std::string& v : e4m3)
      if (variant >= 0 && variant < static_cast<int>(variants.size()) && variants[variant] == v) return true;
    return false;
  }
  bool takes(DType t) const {
    for (DType d : dtypes)
      if (d == t) return true;
    return false;
  }
};

}  // namespace fs
