// What step 10's tests (emulated and GPU) share: a case's name for its DYNAMIC_SECTION, a run's
// O and LSE held to the project's rule against the fp64 reference, the score modifiers' cases, and
// a cache_batch_idx problem's cache gathered by hand.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "common/dtype.hpp"
#include "common/reference.hpp"
#include "steps/10_decode/decode.hpp"
#include "steps/10_decode/decode_reference.hpp"
#include "tests/flash_checks.hpp"

namespace fs::testing {

// "bf16 d=128 batch=2 H=8/2 n=4 L=300.. page=16 causal splits=3 (one length)"; page 0: contiguous.
inline std::string decode_case(const decoding::DecodeShape& s, const std::vector<std::int32_t>& lens, DType dtype,
                               bool causal, int splits, bool per_sequence = true, int page = 0) {
  std::ostringstream name;
  name << dtype_name(dtype) << " d=" << s.d << " batch=" << s.batch << " H=" << s.heads << "/" << s.heads_kv
       << " n=" << s.new_tokens << " L=" << lens.front() << (lens.size() > 1 ? ".." : "");
  if (page > 0) name << " page=" << page;
  name << (causal ? " causal" : "") << " splits=" << splits << (per_sequence ? "" : " (one length)");
  return name.str();
}

// O and LSE of h's problem (scale 1/√d) within the project's rule of the fp64 reference, on at
// most `budget` sampled elements (verify_decode).
inline void require_decode_within_rule(const decoding::DecodeHost& h, bool causal, const std::vector<float>& o,
                                       const std::vector<float>& lse, std::uint64_t seed,
                                       std::int64_t budget = kForwardCheckBudget) {
  const CheckReport report =
      decoding::verify_decode(h, 1.f / std::sqrt(float(h.shape.d)), causal, o.data(), lse.data(), seed, budget);
  INFO(report.summary());
  REQUIRE(report.pass());
}

// A case of the score modifiers (DecodeParams::mods): the window (−1: that side unbounded), the
// softcap (0: none), ALiBi or none: the standard slopes, (heads), or with per_batch a row of
// slopes per sequence, (batch, heads), each row other than the rest (batch_slopes).
struct ModsCase {
  int left, right;
  float softcap;
  bool alibi;
  bool per_batch = false;
  void apply(decoding::DecodeHost& h) const {
    h.mods.window_left = left;
    h.mods.window_right = right;
    h.mods.softcap = softcap;
    if (alibi) h.mods.alibi_slopes = per_batch ? batch_slopes(h.shape.batch, h.shape.heads) : alibi_slopes(h.shape.heads);
    h.mods.alibi_batch_stride = alibi && per_batch ? h.shape.heads : 0;
  }
  std::string name(bool causal, int splits) const {
    std::ostringstream out;
    out << "window (" << left << ", " << right << ") softcap " << softcap
        << (alibi ? per_batch ? " alibi (batch, heads)" : " alibi" : "") << (causal ? " causal" : "") << " splits=" << splits;
    return out.str();
  }
};

// h (a batch reading `cache`'s sequences through h.cache_batch_idx, batch_from_cache) with those
// sequences copied into batch order: the same problem without cache_batch_idx.
inline decoding::DecodeHost gathered_by_hand(const decoding::DecodeHost& h, const decoding::DecodeHost& cache) {
  decoding::DecodeHost g = h;
  g.cache_batch_idx.clear();
  g.k.clear();
  g.v.clear();
  const std::size_t seq = std::size_t(cache.shape.seqlen_cache) * cache.shape.heads_kv * cache.shape.d;
  for (std::int32_t i : h.cache_batch_idx) {
    g.k.insert(g.k.end(), cache.k.begin() + i * seq, cache.k.begin() + (i + 1) * seq);
    g.v.insert(g.v.end(), cache.v.begin() + i * seq, cache.v.begin() + (i + 1) * seq);
  }
  return g;
}

}  // namespace fs::testing
