#include "steps/10_decode/decode_reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/parallel.hpp"
#include "common/random.hpp"
#include "steps/10_decode/rotary.hpp"

namespace fs::decoding {

DecodeHost random_decode_problem(const DecodeShape& s, const std::vector<std::int32_t>& seqlens, DType dtype,
                                 std::uint64_t seed) {
  if (static_cast<int>(seqlens.size()) != s.batch)
    throw std::invalid_argument("random_decode_problem: one length per sequence");
  DecodeHost h;
  h.shape = s;
  h.dtype = dtype;
  h.seqlens = seqlens;
  h.q.resize(static_cast<std::size_t>(s.q_elems()));
  h.k.resize(static_cast<std::size_t>(s.cache_elems()));
  h.v.resize(static_cast<std::size_t>(s.cache_elems()));
  fill_normal(h.q, seed, 1);
  fill_normal(h.k, seed, 2);
  fill_normal(h.v, seed, 3);
  for (auto* t : {&h.q, &h.k, &h.v}) round_all(dtype, *t);
  return h;
}

DecodeHost batch_from_cache(const DecodeHost& cache, const std::vector<std::int32_t>& idx, std::uint64_t seed) {
  if (cache.page_size != 0 || !cache.cache_batch_idx.empty())
    throw std::invalid_argument("batch_from_cache: the cache must be contiguous, its sequences its own");
  DecodeHost h = cache;
  h.shape.batch = static_cast<int>(idx.size());
  h.cache_batch_idx = idx;
  h.seqlens.clear();
  for (std::int32_t i : idx) {
    if (i < 0 || i >= cache.shape.batch) throw std::invalid_argument("batch_from_cache: an index outside the cache");
    h.seqlens.push_back(cache.seqlens[std::size_t(i)]);
  }
  h.q.assign(static_cast<std::size_t>(h.shape.q_elems()), 0.f);
  fill_normal(h.q, seed, 5);
  round_all(h.dtype, h.q);
  return h;
}

std::int64_t DecodeHost::key_row(int b, int hk, int j) const {
  const DecodeShape& s = shape;
  if (page_size == 0) {
    const std::int64_t cb = cache_batch_idx.empty() ? b : cache_batch_idx[std::size_t(b)];
    return ((cb * s.seqlen_cache + j) * s.heads_kv + hk) * s.d;
  }
  const std::int64_t page = block_table[std::size_t(b) * max_blocks_per_seq + j / page_size];
  return ((page * page_size + j % page_size) * s.heads_kv + hk) * s.d;
}

RotaryTables rotary_tables(int len, int dim, bool interleaved, DType dtype) {
  if (len < 1 || dim < 2 || dim % 2 != 0) throw std::invalid_argument("rotary_tables: len ≥ 1 and an even dim ≥ 2");
  RotaryTables r;
  r.dim = dim;
  r.len = len;
  r.interleaved = interleaved;
  const int half = dim / 2;
  r.cos.resize(std::size_t(len) * half);
  r.sin.resize(r.cos.size());
  for (int pos = 0; pos < len; ++pos)
    for (int i = 0; i < half; ++i) {
      const double theta = pos * std::pow(10000.0, -2.0 * i / dim);
      r.cos[std::size_t(pos) * half + i] = round_to(dtype, float(std::cos(theta)));
      r.sin[std::size_t(pos) * half + i] = round_to(dtype, float(std::sin(theta)));
    }
  return r;
}

namespace {

// Row x (d values) turned at position pos (rotary.hpp), each value rounded to dtype.
std::vector<float> rotated_row(const float* x, int d, const RotaryTables& r, int pos, DType dtype) {
  std::vector<float> out(x, x + d);
  if (pos < 0 || pos >= r.len) throw std::invalid_argument("rotated_row: a position past the rotary tables");
  const int half = r.dim / 2;
  for (int c = 0; c < r.dim; ++c) {
    const RotaryPair p = rotary_pair(c, r.dim, r.interleaved);
    const std::size_t at = std::size_t(pos) * half + p.angle;
    out[c] = round_to(dtype, rotary_value(x[c], x[p.partner], r.cos[at], r.sin[at], p.first));
  }
  return out;
}

}  // namespace

DecodeHost DecodeHost::appended(const std::vector<float>& k_new, const std::vector<float>& v_new,
                                const RotaryTables* rotary, bool causal) const {
  const DecodeShape& s = shape;
  const std::size_t rows = std::size_t(s.batch) * s.new_tokens * s.heads_kv * s.d;
  if (k_new.size() != rows || v_new.size() != rows)
    throw std::invalid_argument("DecodeHost::appended: k_new and v_new are (batch, new_tokens, heads_kv, d)");
  if (std::string why = append_unsupported(s, seqlens.data(), 0); !why.empty())
    throw std::invalid_argument("DecodeHost::appended: " + why);
  DecodeHost h = *this;
  for (int b = 0; b < s.batch; ++b) {
    for (int t = 0; t < s.new_tokens; ++t) {
      for (int hk = 0; hk < s.heads_kv; ++hk) {
        const std::size_t from = ((std::size_t(b) * s.new_tokens + t) * s.heads_kv + hk) * s.d;
        const std::int64_t to = key_row(b, hk, seqlens[b] + t);
        if (rotary) {
          const std::vector<float> kr = rotated_row(k_new.data() + from, s.d, *rotary, seqlens[b] + t, dtype);
          std::copy(kr.begin(), kr.end(), h.k.begin() + to);
        } else {
          std::copy_n(k_new.begin() + std::ptrdiff_t(from), s.d, h.k.begin() + to);
        }
        std::copy_n(v_new.begin() + std::ptrdiff_t(from), s.d, h.v.begin() + to);
      }
      if (rotary)  // the token's queries, every head: causal at its own position, else at the sequence's length
        for (int head = 0; head < s.heads; ++head) {
          const std::size_t at = ((std::size_t(b) * s.new_tokens + t) * s.heads + head) * s.d;
          const std::vector<float> qr = rotated_row(q.data() + at, s.d, *rotary, seqlens[b] + (causal ? t : 0), dtype);
          std::copy(qr.begin(), qr.end(), h.q.begin() + std::ptrdiff_t(at));
        }
    }
    h.seqlens[b] += s.new_tokens;
  }
  return h;
}

std::vector<float> random_new_rows(const DecodeShape& s, DType dtype, std::uint64_t seed) {
  std::vector<float> x(std::size_t(s.batch) * s.new_tokens * s.heads_kv * s.d);
  fill_normal(x, seed, 4);
  round_all(dtype, x);
  return x;
}

std::vector<std::int32_t> shuffled_block_table(int entries, int pages, std::uint64_t seed) {
  if (entries < 0 || entries > pages) throw std::invalid_argument("shuffled_block_table: more entries than pages");
  std::vector<std::int32_t> order(static_cast<std::size_t>(pages));
  for (int i = 0; i < pages; ++i) order[i] = i;
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  order.resize(static_cast<std::size_t>(entries));
  return order;
}

DecodeHost paged_layout(const DecodeHost& c, int page_size, std::uint64_t seed, int spare) {
  if (c.page_size != 0) throw std::invalid_argument("paged_layout: the problem is paged already");
  if (!paging_unsupported(c.shape, true, page_size, 1 << 30).empty())
    throw std::invalid_argument("paged_layout: the page size must be a power of two, at least 16");
  const DecodeShape& s = c.shape;
  DecodeHost h;
  h.shape = s;
  h.dtype = c.dtype;
  h.q = c.q;
  h.seqlens = c.seqlens;
  h.page_size = page_size;
  h.max_blocks_per_seq = (s.seqlen_cache + page_size - 1) / page_size;
  const int pages = s.batch * h.max_blocks_per_seq + spare;
  h.block_table = shuffled_block_table(s.batch * h.max_blocks_per_seq, pages, seed);
  const std::size_t row = std::size_t(s.heads_kv) * s.d;  // a key's elements, every K/V head
  h.k.assign(std::size_t(pages) * page_size * row, NAN);
  h.v.assign(h.k.size(), NAN);
  for (int b = 0; b < s.batch; ++b)
    for (int j = 0; j < c.seqlens[b]; ++j) {  // the sequence's keys; the rest stay NaN
      const std::int64_t from = c.key_row(b, 0, j), to = h.key_row(b, 0, j);
      std::copy_n(c.k.begin() + from, row, h.k.begin() + to);
      std::copy_n(c.v.begin() + from, row, h.v.begin() + to);
    }
  return h;
}

template <typename T>
void decode_reference_row(const DecodeHost& h, float scale, bool causal, std::int64_t row, T* o_row, T* lse) {
  const DecodeShape& s = h.shape;
  const int d = s.d, n = s.new_tokens;
  const int t = static_cast<int>(row % n);                    // the new token
  const int head = static_cast<int>(row / n % s.heads);       // its query head
  const int b = static_cast<int>(row / n / s.heads);          // its sequence
  const int hk = head / s.group();                            // the K/V head it reads
  const int L = h.seqlens[b];
  // Keys [begin, end): the sequence's; causal, none after token t's diagonal key L − n + t; a
  // window, none outside [diagonal − left, diagonal + right].
  const int diag = L - n + t;
  const ScoreFeatures& mods = h.mods;
  int end = causal ? std::clamp(diag + 1, 0, L) : L;
  if (mods.window_right >= 0) end = std::clamp(diag + mods.window_right + 1, 0, end);
  const int begin = mods.window_left >= 0 ? std::clamp(diag - mods.window_left, 0, L) : 0;
  const float* q = h.q.data() + ((std::int64_t(b) * n + t) * s.heads + head) * d;                       // (d)
  // Key j's row (d), contiguous or through the block table (DecodeHost::key_row).
  auto key_row = [&](const std::vector<float>& c, int j) { return c.data() + h.key_row(b, hk, j); };
  // Where a 16-bit kernel rounds (P̃ before P̃V, O): in the float32 implementation only.
  auto rounded = [&](T x) -> T {
    if constexpr (std::is_same_v<T, float>) return round_to(h.dtype, x);
    return x;
  };

  for (int c = 0; c < d; ++c) o_row[c] = 0;
  const T neg_inf = -std::numeric_limits<T>::infinity();
  if (end <= begin) {  // no key: O = 0, LSE = −inf
    *lse = neg_inf;
    return;
  }
  // S = τ q Kᵀ over the visible keys (capped, then ALiBi's bias), m = max, P̃ = e^{S − m}, ℓ = Σ P̃,
  // O = P̃V / ℓ, LSE = m + ln ℓ.
  const T slope = mods.alibi_slopes.empty()
                      ? T(0)
                      : T(mods.alibi_slopes[std::size_t(b) * std::size_t(mods.alibi_batch_stride) + std::size_t(head)]);
  std::vector<T> srow(end);
  T m = neg_inf;
  for (int j = begin; j < end; ++j) {
    const float* kj = key_row(h.k, j);
    T dot = 0;
    for (int c = 0; c < d; ++c) dot += T(q[c]) * T(kj[c]);
    T x = T(scale) * dot;
    if (mods.softcap > 0.f) x = T(mods.softcap) * std::tanh(x / T(mods.softcap));
    srow[j] = x - slope * T(std::abs(diag - j));
    m = std::max(m, srow[j]);
  }
  T l = 0;
  for (int j = begin; j < end; ++j) {
    const T p = std::exp(srow[j] - m);
    l += p;
    const T pr = rounded(p);  // as P̃V reads it
    const float* vj = key_row(h.v, j);
    for (int c = 0; c < d; ++c) o_row[c] += pr * T(vj[c]);
  }
  for (int c = 0; c < d; ++c) o_row[c] = rounded(o_row[c] / l);
  *lse = m + std::log(l);
}

template void decode_reference_row<double>(const DecodeHost&, float, bool, std::int64_t, double*, double*);
template void decode_reference_row<float>(const DecodeHost&, float, bool, std::int64_t, float*, float*);

CheckReport verify_decode(const DecodeHost& h, float scale, bool causal, const float* o, const float* lse,
                          std::uint64_t seed, std::int64_t budget) {
  const DecodeShape& s = h.shape;
  const int d = s.d, n = s.new_tokens;
  std::int64_t keys = 0;  // on average per sequence, at least 1
  for (std::int32_t L : h.seqlens) keys += L;
  keys = std::max<std::int64_t>(1, keys / std::max(1, s.batch));
  const std::int64_t n_rows = std::max<std::int64_t>(64, budget / std::max<std::int64_t>(1, keys * d));
  std::vector<std::int64_t> rows = sample_indices(s.rows(), n_rows, seed);
  if (static_cast<std::int64_t>(rows.size()) < s.rows()) {  // a sample: every sequence's first and last token too
    for (int b = 0; b < s.batch; ++b) {
      const std::int64_t head = b % s.heads, at = (std::int64_t(b) * s.heads + head) * n;
      rows.push_back(at);
      rows.push_back(at + n - 1);
    }
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  }

  const std::size_t R = rows.size();
  std::vector<double> o64(R * d), lse64(R);
  std::vector<float> o32(R * d), lse32(R);
  parallel_for(static_cast<std::int64_t>(R), [&](std::int64_t r) {
    decode_reference_row<double>(h, scale, causal, rows[r], &o64[r * d], &lse64[r]);
    decode_reference_row<float>(h, scale, causal, rows[r], &o32[r * d], &lse32[r]);
  });

  ErrorStat eo, eo32, el, el32;
  for (std::size_t r = 0; r < R; ++r) {
    const std::int64_t row = rows[r];  // (b, head, t)
    const std::int64_t t = row % n, head = row / n % s.heads, b = row / n / s.heads;
    const float* got = o + ((b * n + t) * s.heads + head) * d;  // O is (batch, new_tokens, heads, d)
    for (int c = 0; c < d; ++c) {
      eo.add(got[c], o64[r * d + c]);
      eo32.add(o32[r * d + c], o64[r * d + c]);
    }
    el.add(lse[row], lse64[r]);
    el32.add(lse32[r], lse64[r]);
  }
  CheckReport report;
  report.coverage = static_cast<std::int64_t>(R) == s.rows()
                        ? "all " + std::to_string(R) + " rows"
                        : std::to_string(R) + " of " + std::to_string(s.rows()) + " rows (sampled)";
  report.tensors.push_back(judge("O", eo, eo32, kForwardFactor, kForwardFloor, h.dtype));
  report.tensors.push_back(judge("LSE", el, el32, kForwardFactor, kForwardFloor));
  return report;
}

}  // namespace fs::decoding
