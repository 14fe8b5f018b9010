// Names for what the visualizer shows: tensors, event kinds and tiles, as text. (The trace
// library has its own names for the file format; these are the ones a person reads.)
#pragma once

#include <cstdint>
#include <string>

#include "common/trace/trace.hpp"

namespace fs::viz {

const char* tensor_label(fs::trace::Tensor t);  // "Q", "K", ..., "m", "l" ("ℓ" in the UI), "order"
const char* kind_label(fs::trace::Kind k);      // "load", "store", "compute S", ...

// "K[64:128)" for row tiles of (N, d) tensors, "S[0:64, 64:128)" for tiles of N×N ones;
// "K[64:128) · round 3 slots" for a clustered event, whose indices are slots of round 3's orders;
// "" for an event on no tensor (a wait).
std::string tile_label(const fs::trace::Event& e);

class Replay;
// "row 7"; for a clustered event, whose sampled row is a slot of its round's query order,
// "row 137 (slot 5 of round 2)" ("slot 5 of round 2" where the orders cannot place it).
std::string sample_row_label(const Replay& r, const fs::trace::Event& e);

// The element type in which the pass moves `t` through HBM, where it is not the one Meta::tensors
// lists (Replay::moved_element_bytes ≠ element_bytes): "e4m3" for the 1-byte Q, K and V of step
// 09's fp8 forward (fp8_forward), "1-byte" and the like for any other; "" where the pass moves
// the tensor as listed.
std::string moved_element_type(const Replay& r, fs::trace::Tensor t);

// Human units: "1.50 MiB", "640 B"; "12.3 µs", "850 ns"; "3.2 GFLOP".
std::string format_bytes(double bytes);
std::string format_ns(double ns);
std::string format_flops(double flops);
std::string format_count(double n);  // "1.09 M", "4,096"

}  // namespace fs::viz
