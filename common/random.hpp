// Reproducible random inputs: the same seed gives the same tensors on every machine and
// any number of threads (each 64 Ki-element chunk draws from its own counter-seeded stream).
#pragma once

#include <cstdint>
#include <vector>

namespace fs {

// Standard normal samples; `stream` separates tensors drawn from one seed (q, k, v, dO).
void fill_normal(std::vector<float>& out, std::uint64_t seed, std::uint64_t stream);

// n distinct indices in [0, total), sorted; always includes 0 and total - 1.
std::vector<std::int64_t> sample_indices(std::int64_t total, std::int64_t n, std::uint64_t seed);

}  // namespace fs
