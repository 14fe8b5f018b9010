// What step 10's emulated tests share: a run of the step's own kernels on the CPU (common/emulator;
// the kernels compiled by the host compiler in tests/decode_emulated.cpp, one unit per element
// type and head dimension), on host memory, outputs and workspace poisoned with NaN first.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "steps/10_decode/decode.hpp"
#include "steps/10_decode/decode_reference.hpp"
#include "tests/host_convert.hpp"

namespace fs::testing {

// launch_decode (the split kernel, then the combine with more than one split), and the combine
// kernel alone, at element type E and head dimension D, emulated.
template <typename E, int D>
void decode_emulated(const decoding::DecodeParams& p);
template <typename E, int D>
void decode_combine_emulated(const decoding::DecodeParams& p);

// f(E*, std::integral_constant<int, D>{}) at a run's dtype and d.
template <typename F>
void with_decode_type(DType dtype, int d, F&& f) {
  const auto at = [&](auto* e) {
    switch (d) {
      case 64: return f(e, std::integral_constant<int, 64>{});
      case 128: return f(e, std::integral_constant<int, 128>{});
      default: return f(e, std::integral_constant<int, 256>{});
    }
  };
  if (dtype == DType::bf16)
    at(static_cast<__nv_bfloat16*>(nullptr));
  else
    at(static_cast<__half*>(nullptr));
}

struct DecodeOutputs {
  std::vector<float> o, lse;  // (batch, new_tokens, heads, d), (batch, heads, new_tokens)
  std::vector<float> k, v;    // the cache after the run (changed only by an append), in h's layout
};

// The kernels on h with `splits` splits, its cache contiguous or paged (h.page_size > 0: through
// its block table); per_sequence: the lengths as a (batch) array (else
// h.seqlens[0] as the one length of every sequence, which h's lengths must then all be).
// k_new, v_new (both or neither, (batch, new_tokens, heads_kv, d)): appended by the kernels into
// h's cache (a copy of it) before attending; h's lengths are those before the append.
// rotary (with an append): the new keys and q turned by these tables (DecodeParams::rotary_*).
inline DecodeOutputs decode_run(const decoding::DecodeHost& h, bool causal, int splits, bool per_sequence = true,
                                const std::vector<float>* k_new = nullptr, const std::vector<float>* v_new = nullptr,
                                const decoding::RotaryTables* rotary = nullptr) {
  DecodeOutputs out;
  with_decode_type(h.dtype, h.shape.d, [&](auto* e, auto dim) {
    using E = std::remove_pointer_t<decltype(e)>;
    const auto q = to_16bit<E>(h.q);
    auto k = to_16bit<E>(h.k), v = to_16bit<E>(h.v);
    std::vector<E> kn, vn;
    if (k_new) kn = to_16bit<E>(*k_new), vn = to_16bit<E>(*v_new);
    std::vector<E> o(h.q.size(), E(NAN));
    std::vector<float> lse(static_cast<std::size_t>(h.shape.rows()), NAN);
    std::vector<float> ws((decoding::decode_workspace_bytes(h.shape, splits, rotary != nullptr) + 3) / sizeof(float), NAN);
    std::vector<E> rot_cos, rot_sin;
    decoding::DecodeParams p;
    p.q = q.data();
    p.k_cache = k.data();
    p.v_cache = v.data();
    if (h.page_size > 0) {
      p.block_table = h.block_table.data();
      p.page_size = h.page_size;
      p.max_blocks_per_seq = h.max_blocks_per_seq;
    }
    p.cache_seqlens = per_sequence ? h.seqlens.data() : nullptr;
    if (!h.cache_batch_idx.empty()) p.cache_batch_idx = h.cache_batch_idx.data();
    p.mods.window_left = h.mods.window_left;
    p.mods.window_right = h.mods.window_right;
    p.mods.softcap = h.mods.softcap;
    p.mods.alibi_slopes = h.mods.alibi_slopes.empty() ? nullptr : h.mods.alibi_slopes.data();
    p.mods.alibi_batch_stride = h.mods.alibi_batch_stride;
    p.cache_len = h.seqlens.front();
    p.o = o.data();
    p.lse = lse.data();
    p.dtype = h.dtype;
    p.shape = h.shape;
    p.scale = 1.f / std::sqrt(float(h.shape.d));
    p.causal = causal;
    p.num_splits = splits;
    p.workspace = ws.empty() ? nullptr : ws.data();
    if (k_new) {
      p.k_new = kn.data();
      p.v_new = vn.data();
    }
    if (rotary) {
      rot_cos = to_16bit<E>(rotary->cos), rot_sin = to_16bit<E>(rotary->sin);
      p.rotary_cos = rot_cos.data();
      p.rotary_sin = rot_sin.data();
      p.rotary_dim = rotary->dim;
      p.rotary_len = rotary->len;
      p.rotary_interleaved = rotary->interleaved;
    }
    decode_emulated<E, decltype(dim)::value>(p);
    out.o = to_float(o);
    out.lse = lse;
    out.k = to_float(k);
    out.v = to_float(v);
  });
  return out;
}

}  // namespace fs::testing
