// Names and shapes of the trace model's enums, shared by the file reader and writer, the
// validator, the device-record decoder and the visualizer. (kind_name and tensor_name are
// declared in trace.hpp; their definitions and inverses live here.)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/trace/trace.hpp"

namespace fs::trace {

// "load" → Kind::Load; std::nullopt for a name that is not a kind.
std::optional<Kind> kind_from_name(std::string_view name);
// "dS" → Tensor::dS, "m" → Tensor::M; std::nullopt for "none" and unknown names.
std::optional<Tensor> tensor_from_name(std::string_view name);

// A track's lane as a person reads it: its kernel's name for it ("consumer 0"), or "lane 2" when
// the kernel names none (or the track names no kernel of `t`).
std::string lane_name(const Trace& t, const Track& track);

// Whether a raw byte from a device record is a valid enum value.
inline bool valid_kind(unsigned v) { return v < unsigned(kKindCount); }
inline bool valid_tensor(unsigned v) { return v < unsigned(kTensorCount); }

// The shape of tensor `t` for a problem (B, H, N, d), per the layouts of common/problem.hpp:
// (B, H, N, d) for Q..dV, (B, H, N, N) for S, P, dP, dS, (B, H, N) for LSE, D, m, l,
// (B, H, N, 2·hashes) for a clustering's order and sort_key. Empty for Tensor::None.
std::vector<std::int64_t> tensor_shape(Tensor t, int B, int H, int N, int d, int hashes = 0);
// The same for a trace's metadata: with a KV cache (Meta::cache, a decoding trace) K, V, S and the
// decoding tensors as KvCache lays them out; else the shape above.
std::vector<std::int64_t> tensor_shape(Tensor t, const Meta& m);

// Whether a clustered event's slots of `t` go through the key order (K, V, dK, dV) rather than
// the query order (Event::round).
bool key_side(Tensor t);

// Element count of a shape (1 for an empty shape).
std::int64_t shape_elems(const std::vector<std::int64_t>& shape);

// Bytes of one element of tensor `t` in a run of `dtype` ("fp32", "bf16", "fp16"): the row
// statistics (LSE, D, m, l), the dQ accumulator (dQacc) and decoding's partials (o_part, lse_part)
// are float32 always, an order int32, a sort key a float and an int32; the rest are of the run's
// dtype.
int element_bytes(Tensor t, const std::string& dtype);
// Whether `dtype` names an element type a trace can have.
bool valid_dtype(const std::string& dtype);

}  // namespace fs::trace
