// Step 10's IO model: the HBM bytes a decoding run's kernels move, counted from the problem alone as
// the kernels schedule it (key_range.hpp, split_rule.hpp), the way the tiled steps' models count
// tile moves (common/io_model.hpp): a tile that several CTAs load counts each time.
//
//   append    (with k_new, v_new) each new row of K and V read once and written into the cache
//   split     per CTA (sequence, K/V head, block of 16 query rows, split): its query rows, and the
//             K and V rows of its tiles, read; its result written: O and LSE with one split, else a
//             partial O (float32) and LSE per row to the workspace
//   combine   (more than one split) per query row: its splits' LSEs read, and their partial O's
//             where the row sees any key (a row that sees none has LSE −inf and reads no O); O and
//             LSE written
//
// The cache's bytes, 2 · Σ_b L_b · H_kv · d · 2 bytes, dominate: Q, O and the partials are
// Θ(splits · B · H · n · d), a few per cent at the split rule's counts. A traced run's events add up
// to exactly this count (the trace validator checks it).
#pragma once

#include <cstdint>
#include <vector>

#include "common/dtype.hpp"
#include "common/problem.hpp"
#include "common/trace/trace.hpp"
#include "steps/10_decode/decode.hpp"

namespace fs::decoding {

// Keys per tile of the split kernel at head dimension d (DecodeConfig<d>::kBlockN, which
// decode_launch.cuh checks against this): host code without the kernels' headers.
constexpr int decode_tile_keys(int d) { return d == 64 ? 128 : 64; }

struct DecodeIoCase {
  DecodeShape shape;
  int elem_bytes = 2;                // of q, the cache, k_new, v_new and O
  std::vector<std::int32_t> base;    // per sequence: keys in the cache before the append (cache_seqlens)
  bool append = false;               // k_new and v_new written first: sequence b then holds base[b] + n keys
  bool causal = false;
  int window_left = -1, window_right = -1;
  int splits = 1;
  int tile_keys = 64;                // decode_tile_keys(d)

  // Keys sequence b attends over (the kernels' sequence_keys): base, + n when appending, at most
  // the room.
  int keys(int b) const;
};

IoCount decode_io(const DecodeIoCase& c);

// A traced run's problem as its trace describes it (common/trace/trace.hpp, KvCache).
struct DecodeTraceCase {
  DecodeIoCase io;
  DType dtype = DType::bf16;
  float scale = 0.f;
  int page_size = 0;                      // 0: contiguous
  int slots = 0;                          // rows of K and V per K/V head: pages · page_size, or sequences · seqlen_cache
  std::vector<std::int32_t> block_table;  // paged: (batch, blocks per sequence)
  std::vector<std::int32_t> batch_idx;    // contiguous: cache_batch_idx, or empty
};

// The metadata a decoding trace carries beside what every trace does (traced_run.hpp,
// trace_of_run): step, pass, shape (N: the new tokens), the cache, and decode_io's count.
void describe_decode(trace::Meta& m, const DecodeTraceCase& c);

// Records one CTA of the traced kernels may need (decode_trace.cuh): the split kernel's Q, each
// tile's K and V runs of slots (a tile over pages of fewer keys is several) and its two compute
// events, its results; the append's and the combine's fewer. The sink's capacity for the run.
std::int64_t decode_event_cap(const DecodeTraceCase& c);

}  // namespace fs::decoding
