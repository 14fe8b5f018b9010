#include "common/random.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "common/parallel.hpp"

namespace fs {

namespace {
std::uint64_t splitmix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
// Uniform in (0, 1]: never 0, so log() below is finite.
double uniform01(std::uint64_t& state) { return (double(splitmix64(state) >> 11) + 1.0) * 0x1.0p-53; }
}  // namespace

void fill_normal(std::vector<float>& out, std::uint64_t seed, std::uint64_t stream) {
  constexpr std::int64_t kChunk = 1 << 16;
  const std::int64_t n = static_cast<std::int64_t>(out.size());
  parallel_for((n + kChunk - 1) / kChunk, [&](std::int64_t c) {
    std::uint64_t state = seed * 0x100000001B3ull ^ (stream << 48) ^ std::uint64_t(c);
    splitmix64(state);
    const std::int64_t end = std::min(n, (c + 1) * kChunk);
    for (std::int64_t i = c * kChunk; i < end; i += 2) {
      // Box–Muller: two independent normals from two uniforms.
      const double r = std::sqrt(-2.0 * std::log(uniform01(state)));
      const double t = 6.283185307179586 * uniform01(state);
      out[i] = static_cast<float>(r * std::cos(t));
      if (i + 1 < end) out[i + 1] = static_cast<float>(r * std::sin(t));
    }
  });
}

std::vector<std::int64_t> sample_indices(std::int64_t total, std::int64_t n, std::uint64_t seed) {
  std::vector<std::int64_t> out;
  if (total <= 0) return out;
  if (n >= total) {
    out.resize(total);
    for (std::int64_t i = 0; i < total; ++i) out[i] = i;
    return out;
  }
  std::set<std::int64_t> picked{0, total - 1};
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> dist(0, total - 1);
  while (static_cast<std::int64_t>(picked.size()) < std::max<std::int64_t>(n, 2))
    picked.insert(dist(rng));
  return {picked.begin(), picked.end()};
}

}  // namespace fs
