#include "common/varlen.hpp"

#include <algorithm>
#include <charconv>
#include <filesystem>

#include "common/errors.hpp"
#include "common/npy.hpp"

namespace fs {

namespace {

constexpr std::int64_t kMaxTokens = 0x7fffffff;  // int32 prefix sums

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::size_t from = 0;
  for (std::size_t at; (at = text.find(sep, from)) != std::string::npos; from = at + 1)
    out.push_back(text.substr(from, at - from));
  out.push_back(text.substr(from));
  return out;
}

// One length of a --varlen list: decimal digits, no sign.
std::int64_t length(const std::string& text, const std::string& item) {
  std::int64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [stop, ec] = std::from_chars(text.data(), end, v, 10);
  if (!text.empty() && text[0] == '-')
    throw InputError("--varlen: '" + item + "': a length is a number of tokens, 0 or more");
  if (text.empty() || ec != std::errc() || stop != end || v > kMaxTokens)
    throw InputError("--varlen: '" + item + "' is not a length (a decimal number of tokens, or QUERIES:KEYS)");
  return v;
}

// What is wrong with one cu_seqlens array, or empty.
std::string cu_problem(const std::vector<std::int32_t>& cu) {
  if (cu.size() < 2) return "holds no sequence (cu_seqlens are the sequences' prefix sums: at least 0 and one more)";
  if (cu.front() != 0) return "starts at " + std::to_string(cu.front()) + ", not 0";
  for (std::size_t b = 1; b < cu.size(); ++b)
    if (cu[b] < cu[b - 1])
      return "decreases at index " + std::to_string(b) + " (" + std::to_string(cu[b]) + " after " +
             std::to_string(cu[b - 1]) + "): a sequence's length cannot be negative";
  return {};
}

// The parts of packed_problem that need no shape, and the totals being tokens at all.
std::string sequences_problem(const PackedSeqs& p) {
  if (std::string why = cu_problem(p.cu_q); !why.empty()) return "cu_seqlens_q " + why;
  if (std::string why = cu_problem(p.cu_k); !why.empty()) return "cu_seqlens_k " + why;
  if (p.cu_q.size() != p.cu_k.size())
    return "cu_seqlens_q holds " + std::to_string(p.cu_q.size() - 1) + " sequences and cu_seqlens_k " +
           std::to_string(p.cu_k.size() - 1) + ": every sequence has its queries and its keys";
  if (p.count() > kMaxSequences)
    return std::to_string(p.count()) + " sequences; at most " + std::to_string(kMaxSequences) +
           " (one layer of the kernels' grid each)";
  if (p.cu_q.back() == 0) return "the sequences hold no query token";
  if (p.cu_k.back() == 0) return "the sequences hold no key token";
  return {};
}

}  // namespace

std::vector<std::int32_t> read_cu_seqlens(const std::string& path) {
  const NpyRaw raw =
      read_npy_raw(path, {"<i4", "<i8"}, "is not int32 or int64; save cu_seqlens with arr.astype(np.int32)");
  if (raw.shape.size() != 1)
    throw InputError(path + ": shape " + shape_string(raw.shape) +
                     " is not 1-D: cu_seqlens are the sequences' prefix sums, (sequences + 1,)");
  std::vector<std::int32_t> cu(std::size_t(raw.elements()));
  for (std::int64_t x = 0; x < raw.elements(); ++x) {
    const double v = raw.value(x);
    if (v < 0 || v > double(kMaxTokens))
      throw InputError(path + ": value " + std::to_string(std::int64_t(v)) + " at index " + std::to_string(x) +
                       " is outside 0 to 2147483647");
    cu[std::size_t(x)] = static_cast<std::int32_t>(v);
  }
  if (std::string why = cu_problem(cu); !why.empty()) throw InputError(path + ": " + why);
  return cu;
}

PackedSeqs parse_varlen(const std::string& spec) {
  const std::vector<std::string> items = split(spec, ',');
  const auto files =
      std::count_if(items.begin(), items.end(), [](const std::string& x) { return ends_with(x, ".npy"); });
  PackedSeqs p;
  if (files > 0) {
    if (files != std::int64_t(items.size()) || items.size() > 2)
      throw InputError("--varlen takes lengths (128,0,77:300), one cu_seqlens file (FILE.npy) or two (Q.npy,K.npy), "
                       "not '" + spec + "'");
    p.cu_q = read_cu_seqlens(items[0]);
    p.cu_k = items.size() == 2 ? read_cu_seqlens(items[1]) : p.cu_q;
    if (p.cu_q.size() != p.cu_k.size())
      throw InputError("--varlen: " + items[0] + " holds " + std::to_string(p.cu_q.size() - 1) + " sequences and " +
                       items[1] + " " + std::to_string(p.cu_k.size() - 1) +
                       ": every sequence has its queries and its keys");
  } else {
    p.cu_q = {0};
    p.cu_k = {0};
    for (const std::string& item : items) {
      const std::size_t colon = item.find(':');
      const std::int64_t n = length(item.substr(0, colon), item);
      const std::int64_t nk = colon == std::string::npos ? n : length(item.substr(colon + 1), item);
      if (p.cu_q.back() + n > kMaxTokens || p.cu_k.back() + nk > kMaxTokens)
        throw InputError("--varlen: the lengths add up to more than 2147483647 tokens");
      p.cu_q.push_back(static_cast<std::int32_t>(p.cu_q.back() + n));
      p.cu_k.push_back(static_cast<std::int32_t>(p.cu_k.back() + nk));
    }
  }
  if (std::string why = sequences_problem(p); !why.empty()) throw InputError("--varlen: " + why);
  return p;
}

bool has_cu_seqlens(const std::string& dir) {
  return std::filesystem::exists(dir + "/cu_seqlens_q.npy") || std::filesystem::exists(dir + "/cu_seqlens_k.npy");
}

PackedSeqs read_cu_seqlens_dir(const std::string& dir) {
  const bool q = std::filesystem::exists(dir + "/cu_seqlens_q.npy"),
             k = std::filesystem::exists(dir + "/cu_seqlens_k.npy");
  if (q != k)
    throw InputError(dir + ": " +
                     (q ? "cu_seqlens_q.npy without cu_seqlens_k.npy" : "cu_seqlens_k.npy without cu_seqlens_q.npy") +
                     ": packed sequences need both (the same file twice where each sequence's keys are its queries)");
  PackedSeqs p;
  p.cu_q = read_cu_seqlens(dir + "/cu_seqlens_q.npy");
  p.cu_k = read_cu_seqlens(dir + "/cu_seqlens_k.npy");
  if (std::string why = sequences_problem(p); !why.empty()) throw InputError(dir + ": " + why);
  return p;
}

void write_cu_seqlens_dir(const std::string& dir, const PackedSeqs& p) {
  write_npy_i32(dir + "/cu_seqlens_q.npy", p.cu_q.data(), {std::int64_t(p.cu_q.size())});
  write_npy_i32(dir + "/cu_seqlens_k.npy", p.cu_k.data(), {std::int64_t(p.cu_k.size())});
}

std::string packed_problem(const PackedSeqs& p, const Shape& s) {
  if (!p.on()) return {};
  if (std::string why = sequences_problem(p); !why.empty()) return why;
  if (s.B != 1) return "packed sequences are one batch of tokens: B must be 1 (got " + std::to_string(s.B) + ")";
  if (p.cu_q.back() != s.N)
    return "the sequences hold " + std::to_string(p.cu_q.back()) + " query tokens, but N = " + std::to_string(s.N);
  if (p.cu_k.back() != s.keys())
    return "the sequences hold " + std::to_string(p.cu_k.back()) + " key tokens, but Nk = " + std::to_string(s.keys());
  return {};
}

std::string describe(const PackedSeqs& p) {
  if (!p.on()) return "no packed sequences";
  int q_lo = p.queries(0), k_lo = p.keys(0), empty = 0;
  bool same = true;
  for (int b = 0; b < p.count(); ++b) {
    q_lo = std::min(q_lo, p.queries(b));
    k_lo = std::min(k_lo, p.keys(b));
    same = same && p.queries(b) == p.keys(b);
    empty += p.queries(b) == 0 && p.keys(b) == 0;
  }
  auto range = [](int lo, int hi) {
    return lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi);
  };
  std::string out = std::to_string(p.count()) + (p.count() == 1 ? " sequence of " : " sequences of ");
  out += same ? range(q_lo, p.max_queries()) + " tokens"
              : range(q_lo, p.max_queries()) + " queries and " + range(k_lo, p.max_keys()) + " keys";
  if (empty) out += " (" + std::to_string(empty) + " empty)";
  return out;
}

}  // namespace fs
