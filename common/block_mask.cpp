#include "common/block_mask.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <set>
#include <utility>

#include "common/errors.hpp"
#include "common/npy.hpp"

namespace fs {

namespace {

// Blocks of `block` elements that cover N: ⌈N/block⌉.
int blocks_for(int N, int block) { return int((std::int64_t(N) + block - 1) / block); }

// The bits a group index below `groups` needs: ⌈log2 groups⌉ (0 for one group).
int bits_for(std::int64_t groups) {
  int bits = 0;
  while ((std::int64_t(1) << bits) < groups) ++bits;
  return bits;
}

bool is_power_of_two(std::int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

// splitmix64 (Steele, Lea, Flood 2014): a fixed sequence of 64-bit integers for each seed, the
// same with every compiler and standard library.
struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n), n ≥ 1, without modulo bias: draws below 2^64 mod n are rejected, so
  // every residue is hit by the same number of accepted draws.
  std::uint64_t below(std::uint64_t n) {
    const std::uint64_t reject_under = (0 - n) % n;  // 2^64 mod n
    for (;;) {
      const std::uint64_t r = next();
      if (r >= reject_under) return r % n;
    }
  }
};

// A number as a person would write it: "2", "-3", "0.5", "nan".
std::string number_text(double v) {
  char buf[64];
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e18)
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  else
    std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string grid_text(const BlockMask& m) { return "(" + std::to_string(m.Tr) + ", " + std::to_string(m.Tc) + ")"; }

}  // namespace

const char* const kPatternForms =
    "dense | local:W | global:G,W | causal | random:DENSITY | butterfly | butterfly:K | butterfly:K,W | "
    "butterfly@DENSITY";

std::int64_t BlockMask::nonzero() const {
  std::int64_t n = 0;
  for (auto v : dense) n += v != 0;
  return n;
}

double BlockMask::density() const {
  return dense.empty() ? 0.0 : double(nonzero()) / double(std::int64_t(Tr) * Tc);
}

bool operator==(const BlockMask& a, const BlockMask& b) {
  return a.block_r == b.block_r && a.block_c == b.block_c && a.Tr == b.Tr && a.Tc == b.Tc && a.dense == b.dense;
}

namespace {

// The grid of a mask without the mask: the checks of empty_mask, nothing allocated.
BlockMask grid_for(int N, int block_r, int block_c) {
  if (N < 1) throw InputError("block mask: N must be at least 1 (got " + std::to_string(N) + ")");
  if (block_r < 1 || block_c < 1)
    throw InputError("block mask: block sizes must be at least 1 (got " + std::to_string(block_r) + " × " +
                     std::to_string(block_c) + ")");
  BlockMask m;
  m.block_r = block_r;
  m.block_c = block_c;
  m.Tr = blocks_for(N, block_r);
  m.Tc = blocks_for(N, block_c);
  if (std::int64_t(m.Tr) * m.Tc > (std::int64_t(1) << 30))
    throw InputError("block mask: N=" + std::to_string(N) + " with " + std::to_string(block_r) + " × " +
                     std::to_string(block_c) + " blocks is a " + std::to_string(m.Tr) + " × " + std::to_string(m.Tc) +
                     " grid, more than 2^30 blocks; use larger blocks");
  return m;
}

// The patterns' parameter checks, on the grid alone: the pattern functions and check_pattern
// share them, so a bad spec is refused before any mask is allocated.
void check_local(int window) {
  if (window < 0) throw InputError("local pattern: window must be at least 0 blocks (got " + std::to_string(window) + ")");
}

void check_global(const BlockMask& grid, int N, int block, int n_global) {
  if (n_global < 0 || n_global > grid.Tr)
    throw InputError("global pattern: " + std::to_string(n_global) + " global blocks, but there are " +
                     std::to_string(grid.Tr) + " block rows (N=" + std::to_string(N) + ", block " +
                     std::to_string(block) + "); use 0.." + std::to_string(grid.Tr));
}

void check_random(double density) {
  if (!(density >= 0.0 && density <= 1.0))
    throw InputError("random pattern: density must be in [0, 1] (got " + number_text(density) + ")");
}

void check_butterfly(const BlockMask& grid, int N, int block, int group, int factors) {
  const int T = grid.Tr;
  if (group < 1 || group > T)
    throw InputError("butterfly pattern: group of " + std::to_string(group) + " blocks, but there are " +
                     std::to_string(T) + " blocks (N=" + std::to_string(N) + ", block " + std::to_string(block) +
                     "); use 1.." + std::to_string(T));
  // Group indices run below ⌈T/group⌉, so their XOR never reaches 2^max_factors.
  const int max_factors = bits_for(blocks_for(T, group));
  if (factors < 0 || factors > max_factors)
    throw InputError("butterfly pattern: " + std::to_string(factors) + " factors on " + std::to_string(T) +
                     " blocks in groups of " + std::to_string(group) + "; use 0.." + std::to_string(max_factors) +
                     " (log2 of the number of groups)");
}

// The (group, factors) of the butterfly with density exactly `density` (pattern_butterfly_density).
std::pair<int, int> butterfly_for_density(const BlockMask& grid, int N, int block, double density) {
  const int T = grid.Tr;
  if (!is_power_of_two(T))
    throw InputError("butterfly@density needs a power-of-two number of blocks, but N=" + std::to_string(N) +
                     " with block " + std::to_string(block) + " gives " + std::to_string(T));
  if (!(density > 0.0 && density <= 1.0))
    throw InputError("butterfly@density: density must be in (0, 1] (got " + number_text(density) + ")");
  std::set<std::int64_t> reachable;  // w·(k+1): the nonzero blocks per row of each butterfly
  for (int w = 1; w <= T; w *= 2) {
    const int max_k = bits_for(T / w);
    for (int k = 0; k <= max_k; ++k) reachable.insert(std::int64_t(w) * (k + 1));
    const double k1 = density * T / w;  // k + 1
    const double k1_int = std::round(k1);
    if (k1_int >= 1 && std::fabs(k1 - k1_int) <= 1e-9 * k1 && k1_int - 1 <= max_k) return {w, int(k1_int) - 1};
  }
  std::string list;
  for (auto n : reachable) list += (list.empty() ? "" : ", ") + std::to_string(n);
  throw InputError("butterfly@density: no butterfly on " + std::to_string(T) + " blocks has density " +
                   number_text(density) + "; the densities group·(factors+1)/T are n/" + std::to_string(T) +
                   " for n in {" + list + "}");
}

}  // namespace

BlockMask empty_mask(int N, int block_r, int block_c) {
  BlockMask m = grid_for(N, block_r, block_c);
  m.dense.assign(std::size_t(m.Tr) * m.Tc, 0);
  return m;
}

BlockLists to_lists(const BlockMask& m, bool causal) {
  // Tile (i, j) holds queries up to (i+1)·block_r − 1 and keys from j·block_c on: when the
  // first key is after the last query, causal masks all of it.
  auto kept = [&](int i, int j) {
    return m.at(i, j) && !(causal && std::int64_t(j) * m.block_c > (std::int64_t(i) + 1) * m.block_r - 1);
  };
  BlockLists l;
  l.Tr = m.Tr;
  l.Tc = m.Tc;
  l.row_ptr.assign(m.Tr + 1, 0);
  for (int i = 0; i < m.Tr; ++i) {
    for (int j = 0; j < m.Tc; ++j)
      if (kept(i, j)) l.col_idx.push_back(j);
    l.row_ptr[i + 1] = int(l.col_idx.size());
  }
  l.col_ptr.assign(m.Tc + 1, 0);
  for (int j = 0; j < m.Tc; ++j) {
    for (int i = 0; i < m.Tr; ++i)
      if (kept(i, j)) l.row_idx.push_back(i);
    l.col_ptr[j + 1] = int(l.row_idx.size());
  }
  return l;
}

BlockMask from_lists(const BlockLists& l, int block_r, int block_c) {
  auto bad = [](const std::string& what) { throw InputError("block lists: " + what); };
  if (l.Tr < 1 || l.Tc < 1)
    bad("a grid of " + std::to_string(l.Tr) + " × " + std::to_string(l.Tc) + " blocks is empty");
  if (block_r < 1 || block_c < 1) bad("block sizes must be at least 1");
  if (l.row_ptr.size() != std::size_t(l.Tr) + 1)
    bad("row_ptr has " + std::to_string(l.row_ptr.size()) + " entries, Tr + 1 = " + std::to_string(l.Tr + 1) +
        " expected");
  if (l.row_ptr.front() != 0 || l.row_ptr.back() != std::int64_t(l.col_idx.size()))
    bad("row_ptr must run from 0 to the " + std::to_string(l.col_idx.size()) + " entries of col_idx");
  for (int i = 0; i < l.Tr; ++i)
    if (l.row_ptr[i + 1] < l.row_ptr[i]) bad("row_ptr decreases at row " + std::to_string(i));
  BlockMask m;
  m.block_r = block_r;
  m.block_c = block_c;
  m.Tr = l.Tr;
  m.Tc = l.Tc;
  m.dense.assign(std::size_t(m.Tr) * m.Tc, 0);
  for (int i = 0; i < l.Tr; ++i) {
    for (int k = l.row_ptr[i]; k < l.row_ptr[i + 1]; ++k) {
      const int j = l.col_idx[k];
      if (j < 0 || j >= l.Tc)
        bad("row " + std::to_string(i) + " names key block " + std::to_string(j) + " outside 0.." +
            std::to_string(l.Tc - 1));
      if (k > l.row_ptr[i] && j <= l.col_idx[k - 1]) bad("row " + std::to_string(i) + " is not strictly ascending");
      m.set(i, j, true);
    }
  }
  // The column lists, when present, must describe the same blocks.
  if (!l.col_ptr.empty() || !l.row_idx.empty()) {
    const BlockLists again = to_lists(m);
    if (l.col_ptr != again.col_ptr || l.row_idx != again.row_idx)
      bad("the column lists (col_ptr, row_idx) name other blocks than the row lists (row_ptr, col_idx)");
  }
  return m;
}

BlockMask pattern_dense(int N, int block) {
  BlockMask m = empty_mask(N, block, block);
  std::fill(m.dense.begin(), m.dense.end(), 1);
  return m;
}

BlockMask pattern_local(int N, int block, int window) {
  check_local(window);
  BlockMask m = empty_mask(N, block, block);
  for (int i = 0; i < m.Tr; ++i)
    for (int j = std::max(0, i - window); j <= std::min<std::int64_t>(m.Tc - 1, std::int64_t(i) + window); ++j)
      m.set(i, j, true);
  return m;
}

BlockMask pattern_global_local(int N, int block, int window, int n_global) {
  check_local(window);
  check_global(grid_for(N, block, block), N, block, n_global);
  BlockMask m = pattern_local(N, block, window);
  for (int g = 0; g < n_global; ++g)
    for (int k = 0; k < m.Tr; ++k) {
      m.set(g, k, true);  // global query block: sees every key
      m.set(k, g, true);  // global key block: seen by every query
    }
  return m;
}

BlockMask pattern_causal_block(int N, int block) {
  BlockMask m = empty_mask(N, block, block);
  for (int i = 0; i < m.Tr; ++i)
    for (int j = 0; j <= i; ++j) m.set(i, j, true);
  return m;
}

BlockMask pattern_random(int N, int block, double density, std::uint64_t seed) {
  check_random(density);
  BlockMask m = empty_mask(N, block, block);
  const int T = m.Tc;
  const int per_row = density > 0.0 ? std::max(1, int(std::llround(density * T))) : 0;
  SplitMix64 rng{seed};
  std::vector<int> order(T);
  for (int i = 0; i < m.Tr; ++i) {
    // The first per_row entries of a partial Fisher–Yates shuffle: a uniform per_row-subset.
    for (int j = 0; j < T; ++j) order[j] = j;
    for (int c = 0; c < per_row; ++c) {
      std::swap(order[c], order[c + int(rng.below(std::uint64_t(T - c)))]);
      m.set(i, order[c], true);
    }
  }
  return m;
}

BlockMask pattern_butterfly(int N, int block, int group, int factors) {
  check_butterfly(grid_for(N, block, block), N, block, group, factors);
  BlockMask m = empty_mask(N, block, block);
  const int T = m.Tr;
  for (int i = 0; i < T; ++i)
    for (int j = 0; j < T; ++j) {
      const int g = (i / group) ^ (j / group);
      m.set(i, j, g == 0 || (is_power_of_two(g) && g < (1 << factors)));
    }
  return m;
}

BlockMask pattern_butterfly_density(int N, int block, double density) {
  const auto [group, factors] = butterfly_for_density(grid_for(N, block, block), N, block, density);
  return pattern_butterfly(N, block, group, factors);
}

namespace {

// make_pattern and check_pattern in one: parses `spec` and checks its parameters on the grid;
// with `build` returns the mask, without it only the grid (dense left empty) and whether the
// pattern selects no block at all.
BlockMask pattern_from_spec(const std::string& spec, int N, int block, std::uint64_t seed, bool build,
                            bool* no_block) {
  const std::string forms = std::string("; valid forms: ") + kPatternForms;
  auto error = [&](const std::string& what) { return InputError("pattern '" + spec + "': " + what + forms); };
  const std::size_t cut = spec.find_first_of(":@");
  const std::string name = spec.substr(0, cut);
  const char sep = cut == std::string::npos ? '\0' : spec[cut];
  const std::string arg = cut == std::string::npos ? "" : spec.substr(cut + 1);

  // The comma-separated integers of `arg`: exactly `min_n`..`max_n` of them.
  auto ints = [&](std::size_t min_n, std::size_t max_n) {
    std::vector<int> out;
    std::size_t at = 0;
    for (;;) {
      const std::size_t comma = arg.find(',', at);
      const std::string item = arg.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
      std::size_t used = 0;
      int v = 0;
      try {
        v = std::stoi(item, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (item.empty() || used != item.size() || !(std::isdigit(static_cast<unsigned char>(item[0])) || item[0] == '-'))
        throw error("'" + item + "' is not an integer");
      out.push_back(v);
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
    if (out.size() < min_n || out.size() > max_n)
      throw error(std::to_string(out.size()) + " numbers where " + name + " takes " +
          (min_n == max_n ? std::to_string(min_n) : std::to_string(min_n) + " or " + std::to_string(max_n)));
    return out;
  };
  auto number = [&]() {
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(arg, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (arg.empty() || used != arg.size() || !std::isfinite(v)) throw error("'" + arg + "' is not a number");
    return v;
  };

  try {
    const BlockMask grid = grid_for(N, block, block);
    if (no_block) *no_block = false;
    if (name == "dense" && sep == '\0') return build ? pattern_dense(N, block) : grid;
    if (name == "causal" && sep == '\0') return build ? pattern_causal_block(N, block) : grid;
    if (name == "local" && sep == ':') {
      const int window = ints(1, 1)[0];
      check_local(window);
      return build ? pattern_local(N, block, window) : grid;
    }
    if (name == "global" && sep == ':') {
      const auto gw = ints(2, 2);
      check_local(gw[1]);
      check_global(grid, N, block, gw[0]);
      return build ? pattern_global_local(N, block, gw[1], gw[0]) : grid;
    }
    if (name == "random" && sep == ':') {
      const double density = number();
      check_random(density);
      if (no_block) *no_block = density == 0.0;
      return build ? pattern_random(N, block, density, seed) : grid;
    }
    if (name == "butterfly" && sep == '\0') return build ? pattern_butterfly(N, block, 1, bits_for(grid.Tr)) : grid;
    if (name == "butterfly" && sep == ':') {
      const auto kw = ints(1, 2);
      const int group = kw.size() == 2 ? kw[1] : 1;
      check_butterfly(grid, N, block, group, kw[0]);
      return build ? pattern_butterfly(N, block, group, kw[0]) : grid;
    }
    if (name == "butterfly" && sep == '@') {
      const double density = number();
      butterfly_for_density(grid, N, block, density);
      return build ? pattern_butterfly_density(N, block, density) : grid;
    }
  } catch (const InputError& e) {
    const std::string what = e.what();
    if (what.rfind("pattern '", 0) == 0) throw;  // already ours
    throw InputError("pattern '" + spec + "': " + what);
  }
  if (name == "dense" || name == "causal" || name == "local" || name == "global" || name == "random" ||
      name == "butterfly")
    throw error(sep == '\0' ? name + " needs parameters" : name + " takes no '" + std::string(1, sep) + "'");
  throw error("unknown pattern");
}

}  // namespace

BlockMask make_pattern(const std::string& spec, int N, int block, std::uint64_t seed) {
  return pattern_from_spec(spec, N, block, seed, true, nullptr);
}

PatternGrid check_pattern(const std::string& spec, int N, int block) {
  bool no_block = false;
  const BlockMask grid = pattern_from_spec(spec, N, block, 0, false, &no_block);
  return {grid.Tr, grid.Tc, no_block};
}

std::string describe(const BlockMask& m) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%d × %d blocks of %d × %d, %lld nonzero (density %.4g)", m.Tr, m.Tc, m.block_r,
                m.block_c, static_cast<long long>(m.nonzero()), m.density());
  return buf;
}

BlockMask read_block_mask(const std::string& path, int N, int block_r, int block_c) {
  BlockMask m = grid_for(N, block_r, block_c);  // nothing allocated until the file matches it
  const NpyRaw raw = read_npy_raw(path, {"|b1", "|u1", "<i4", "<i8", "<f4"},
                                  "is not a block mask dtype (bool, uint8, int32, int64 or float32); "
                                  "save it with mask.astype(np.uint8)");
  const std::vector<std::int64_t> want{m.Tr, m.Tc};
  if (raw.shape != want)
    throw InputError(path + ": shape " + shape_string(raw.shape) + (raw.shape.size() == 2 ? " but" : " is not 2-D:") +
                     " N=" + std::to_string(N) + " with " + std::to_string(block_r) + " × " +
                     std::to_string(block_c) + " blocks needs " + grid_text(m));
  m.dense.assign(std::size_t(m.Tr) * m.Tc, 0);
  for (int i = 0; i < m.Tr; ++i)
    for (int j = 0; j < m.Tc; ++j) {
      const double v = raw.value(std::int64_t(i) * m.Tc + j);
      if (v != 0.0 && v != 1.0)
        throw InputError(path + ": value " + number_text(v) + " at (" + std::to_string(i) + ", " + std::to_string(j) +
                         ") is not 0 or 1");
      m.set(i, j, v == 1.0);
    }
  return m;
}

void write_block_mask(const std::string& path, const BlockMask& m) {
  if (m.Tr < 1 || m.Tc < 1 || m.dense.size() != std::size_t(m.Tr) * m.Tc)
    throw InputError(path + ": cannot write a block mask of " + std::to_string(m.dense.size()) + " entries as a " +
                     grid_text(m) + " grid");
  for (auto v : m.dense)
    if (v > 1) throw InputError(path + ": cannot write a block mask with an entry " + std::to_string(v) + " (not 0 or 1)");
  write_npy_u8(path, m.dense.data(), {m.Tr, m.Tc});
}

}  // namespace fs
