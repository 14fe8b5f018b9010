// Synthetic traces: what step 01 (standard attention, S and P in HBM), step 04
// (FlashAttention: Q, K, V tiles through SRAM, O written once, running m and ℓ), step 07's
// forward (SMYRF: rows gathered through a round's sorted orders, attention inside each cluster),
// step 09's (FlashAttention-3: a producer warpgroup's copies and two consumers' ping-pong,
// each warpgroup a lane of its CTA) and step 10's (Flash-Decoding: a few new tokens against a
// paged KV cache, its keys split among CTAs and the splits combined) would record for a shape,
// without a GPU. The tests, the benchmark and a machine without recorded traces
// use them; the schedule follows each step's kernels, the timing is a simple model of an
// H200 (per-SM bandwidth and FP32 rate, 32 ns %globaltimer steps), not a measurement.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/trace/trace.hpp"

namespace fs::viz {

enum class SyntheticStep : std::uint8_t {
  Naive,  // 01_naive: scores_kernel, softmax_kernel, pv_kernel
  Flash,  // 04_online_softmax (fa2 loop order): one CTA per (head, query tile)
  Smyrf,  // 07_smyrf: norms, hashes, the sort (untraced), one kernel per round, a CTA per cluster
  Hopper, // 09_hopper (fa3, bf16): a producer and two consumer warpgroups per CTA, each a lane
  Decode, // 10_decode (bf16): the append (optional), the split kernel, the combine (more than one split)
};

enum class BlockMask : std::uint8_t {
  Dense,
  Butterfly,  // block (i, j) kept when i = j or i XOR j is a power of two (Algorithm 5)
};

struct SyntheticSpec {
  SyntheticStep step = SyntheticStep::Flash;
  int B = 1, H = 1, N = 1024, d = 64;
  int Br = 64, Bc = 64;   // Flash tile sizes (the naive kernels use 16×16 blocks)
  bool causal = false;
  BlockMask mask = BlockMask::Dense;  // Flash only
  int hashes = 8, cluster = 32;       // Smyrf: rounds, queries (and keys) per cluster
  // Decode: B sequences, H query heads over heads_kv K/V heads, new_tokens each (N is not used),
  // sequence b holding keys[b] keys (the last entry for the rest; with append, new_tokens more),
  // a cache of pages of page_size keys in shuffled order (0: contiguous), every sequence's keys
  // split `splits` ways. steps/10_decode's kernels at d = 64: tiles of 128 keys.
  int heads_kv = 2, new_tokens = 1, page_size = 16, splits = 3;
  std::vector<int> keys = {700};
  bool append = false;
  int sms = 132;          // H200
  int ctas_per_sm = 0;    // CTAs resident on one SM at once; 0: the kernel's own choice
  std::uint64_t seed = 1;
};

fs::trace::Trace make_synthetic_trace(const SyntheticSpec& spec);

// The decoding spec the app opens ("synthetic:decode"): batch 2, 8 query heads over 2 K/V heads, one
// new token against 700 keys, pages of 16 in shuffled order, 3 splits, d = 64; `paged` false: the
// same in a contiguous cache.
SyntheticSpec decode_spec(bool paged = true);

// A Flash spec whose trace has at least `events` events (for the benchmark).
SyntheticSpec spec_for_event_count(std::int64_t events);

// Parses "naive" / "01", "flash" / "04", "smyrf" / "07", "hopper" / "09" or "decode" / "10"
// (returns false on anything else).
bool parse_synthetic_step(const std::string& s, SyntheticStep& out);

}  // namespace fs::viz
