#include "common/verify.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "common/e4m3.hpp"
#include "common/random.hpp"

namespace fs {

void ErrorStat::add(double got, double ref) {
  ++count;
  if (std::isfinite(ref)) {
    ref_max_abs = std::max(ref_max_abs, std::abs(ref));
    if (!std::isfinite(got)) {
      ++bad;
      return;
    }
    max_abs = std::max(max_abs, std::abs(got - ref));
  } else if (got != ref) {  // the reference is ±inf: only the same infinity agrees
    ++bad;
  }
}

TensorCheck judge(const std::string& name, const ErrorStat& kernel, const ErrorStat& fp32,
                  double factor, double floor, DType output) {
  TensorCheck t;
  t.name = name;
  t.err = kernel.max_abs;
  t.err_fp32 = fp32.max_abs;
  t.tol = factor * fp32.max_abs + std::max(floor * std::max(1.0, kernel.ref_max_abs), ulp(output, kernel.ref_max_abs));
  t.bad = kernel.bad;
  return t;
}

bool CheckReport::pass() const {
  return !tensors.empty() &&
         std::all_of(tensors.begin(), tensors.end(), [](const TensorCheck& t) { return t.pass(); });
}

double CheckReport::max_err() const {
  double e = 0;
  for (const auto& t : tensors)
    if (t.values) e = std::max(e, t.bad ? INFINITY : t.err);
  return e;
}

std::string CheckReport::summary() const {
  std::ostringstream out;
  out << "check against the fp64 CPU reference (" << coverage << "):\n";
  for (const auto& t : tensors) {
    out << "  " << std::left << std::setw(4) << t.name << std::right << std::setprecision(2);
    if (!t.judged)
      out << std::scientific << " max err " << t.err << "  (the given inputs' reference: not judged)";
    else if (t.values)
      out << std::scientific << " max err " << t.err << "  tolerance " << t.tol << " (" << t.yardstick << " err " << t.err_fp32 << ")";
    else  // the order check: the worst neighbours out of order, in what float sort keys allow
      out << std::fixed << " worst pair out of order " << t.err << " of what float keys allow (at most " << t.tol << ")";
    if (t.bad) out << "  " << t.bad << (t.values ? " non-finite" : " broken");
    if (t.judged) out << (t.pass() ? "  ok" : "  FAIL");
    out << "\n";
  }
  return out.str();
}

TensorCheck judge_orders(const OrderCheck& c) {
  TensorCheck t;
  t.name = "order";
  t.err = c.worst;
  t.tol = 1.0;
  t.bad = c.broken;
  t.values = false;
  return t;
}

namespace {

// Keys each query's row of the reference sums over: N, SMYRF's rounds × cluster keys, or with
// packed sequences its sequence's keys (on average over the rows, at least 1).
std::int64_t keys_per_query(const Shape& s, const AttnOptions& opt) {
  if (opt.cu_seqlens_q) {
    const auto &cq = *opt.cu_seqlens_q, &ck = *opt.cu_seqlens_k;
    std::int64_t pairs = 0;
    for (std::size_t b = 0; b + 1 < cq.size(); ++b) pairs += std::int64_t(cq[b + 1] - cq[b]) * (ck[b + 1] - ck[b]);
    return std::max<std::int64_t>(1, pairs / std::max(1, s.N));
  }
  if (!opt.clusters) return opt.keys(s);
  return std::min<std::int64_t>(s.N, std::int64_t(opt.clusters->hashes) * opt.clusters->geo.k_cluster);
}

// With packed sequences, the rows a sample must hold besides its random ones: every non-empty
// sequence's first and last token (cu: its offsets), where a kernel's span begins and ends.
// `heads` > 0: as rows of all heads, sequence b's in head b mod heads.
std::vector<std::int64_t> sequence_ends(const std::vector<std::int32_t>* cu, std::int64_t tokens,
                                        std::int64_t heads = 0) {
  std::vector<std::int64_t> out;
  if (!cu) return out;
  for (std::size_t b = 0; b + 1 < cu->size(); ++b) {
    if ((*cu)[b + 1] == (*cu)[b]) continue;
    const std::int64_t at = heads > 0 ? std::int64_t(b) % heads * tokens : 0;
    out.push_back(at + (*cu)[b]);
    out.push_back(at + (*cu)[b + 1] - 1);
  }
  return out;
}

// a and b together, sorted, each index once.
std::vector<std::int64_t> merged(std::vector<std::int64_t> a, const std::vector<std::int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  std::sort(a.begin(), a.end());
  a.erase(std::unique(a.begin(), a.end()), a.end());
  return a;
}

std::string coverage_text(std::int64_t checked, std::int64_t total, const char* what) {
  std::ostringstream out;
  if (checked == total)
    out << "all " << total << " " << what;
  else
    out << checked << " of " << total << " " << what << " (sampled)";
  return out.str();
}
}  // namespace

CheckReport verify_forward(const Shape& s, const AttnOptions& opt, const float* q,
                           const float* k, const float* v, const float* o, const float* lse,
                           std::uint64_t seed, std::int64_t budget) {
  if (opt.e4m3) {  // FP8: the reference of the inputs the kernel multiplied (verify.hpp)
    AttnOptions plain = opt;
    plain.e4m3 = false;
    plain.e4m3_mma_bits = kE4m3MmaBits;  // the yardstick: float, with the FP8 tensor core's adder
    const int Hkv = opt.kv_heads_of(s), Nk = opt.keys(s);
    const std::vector<float> q8 = e4m3_dequantized(q, s.heads(), s.N, s.d, kE4m3BlockQ),
                             k8 = e4m3_dequantized(k, std::int64_t(s.B) * Hkv, Nk, s.d, kE4m3BlockKV),
                             v8 = e4m3_dequantized(v, std::int64_t(s.B) * Hkv, Nk, s.d, kE4m3BlockKV);
    CheckReport report = verify_forward(s, plain, q8.data(), k8.data(), v8.data(), o, lse, seed, budget / 2);
    float v_max = 0.f;
    for (float x : v8) v_max = std::max(v_max, std::abs(x));
    report.tensors[0].tol += (0x1p-4 + double(Nk) * 0x1p-18) * v_max;  // P̃'s rounding to e4m3
    for (TensorCheck& t : report.tensors) t.yardstick = "fp32 CPU, FP8 adder,";
    const CheckReport given = verify_forward(s, plain, q, k, v, o, lse, seed, budget / 2);
    TensorCheck in = given.tensors[0];
    in.name = "O(in)";
    in.judged = false;
    report.tensors.push_back(in);
    return report;
  }
  const std::int64_t per_row = keys_per_query(s, opt) * s.d;
  const std::int64_t n_rows = std::max<std::int64_t>(64, budget / std::max<std::int64_t>(1, per_row));
  const auto rows = merged(sample_indices(s.rows(), n_rows, seed), sequence_ends(opt.cu_seqlens_q, s.N, s.heads()));

  std::vector<double> o64, lse64;
  std::vector<float> o32, lse32;
  reference_forward<double>(s, q, k, v, opt, rows, o64, lse64);
  reference_forward<float>(s, q, k, v, opt, rows, o32, lse32);

  ErrorStat eo, eo32, el, el32;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    for (int c = 0; c < s.d; ++c) {
      eo.add(o[rows[r] * s.d + c], o64[r * s.d + c]);
      eo32.add(o32[r * s.d + c], o64[r * s.d + c]);
    }
    el.add(lse[rows[r]], lse64[r]);
    el32.add(lse32[r], lse64[r]);
  }
  CheckReport report;
  report.coverage = coverage_text(static_cast<std::int64_t>(rows.size()), s.rows(), "rows");
  report.tensors.push_back(judge("O", eo, eo32, kForwardFactor, kForwardFloor, opt.dtype));
  report.tensors.push_back(judge("LSE", el, el32, kForwardFactor, kForwardFloor));
  return report;
}

CheckReport verify_backward(const Shape& s, const AttnOptions& opt, const float* q,
                            const float* k, const float* v, const float* dout, const float* dq,
                            const float* dk, const float* dv, std::uint64_t seed,
                            std::int64_t budget) {
  // Per head: LSE and D for all rows cost ~2·N·K·d for K keys per query (N: dense); each dQ row
  // ~3·K·d, each dK/dV row ~4·K·d. SMYRF's reference computes every row of a head.
  const std::int64_t Kd = keys_per_query(s, opt) * s.d;
  const std::int64_t head_stats = 2 * Kd * s.N;
  // Grouped K/V heads: a K/V head's dK, dV add up the shares of its G query heads, so the check
  // goes by K/V head, computing each of its query heads (G = 1: a K/V head is a query head).
  const int Hkv = opt.kv_heads_of(s), G = s.H / Hkv, Nk = opt.keys(s);
  const std::int64_t head_full = G * (head_stats + 7 * Kd * s.N);
  const std::int64_t kv_heads = std::int64_t(s.B) * Hkv;
  const std::int64_t n_heads = std::clamp<std::int64_t>(budget / head_full, 1, kv_heads);
  const auto heads = sample_indices(kv_heads, n_heads, seed);
  // When one head alone is over budget, check a sample of its rows.
  const std::int64_t row_budget = std::max<std::int64_t>(budget / G - head_stats, 7 * Kd * 64);
  const std::int64_t n_rows = opt.clusters ? s.N : std::clamp<std::int64_t>(row_budget / (7 * Kd), 64, s.N);
  const std::int64_t n_kv_rows = opt.clusters ? Nk : std::clamp<std::int64_t>(row_budget / (7 * Kd), 64, Nk);

  ErrorStat e[3], e32[3];
  std::int64_t rows_checked = 0;
  const float* got[3] = {dq, dk, dv};
  for (std::int64_t kvh : heads) {
    const auto rows =
        merged(sample_indices(s.N, n_rows, seed + 1 + std::uint64_t(kvh)), sequence_ends(opt.cu_seqlens_q, s.N));
    const auto kv_rows = Nk == s.N && !opt.cu_seqlens_k
                             ? rows
                             : merged(sample_indices(Nk, n_kv_rows, seed + 2 + std::uint64_t(kvh)),
                                      sequence_ends(opt.cu_seqlens_k, Nk));
    std::vector<double> kv64[2] = {std::vector<double>(kv_rows.size() * s.d), std::vector<double>(kv_rows.size() * s.d)};
    std::vector<float> kv32[2] = {std::vector<float>(kv_rows.size() * s.d), std::vector<float>(kv_rows.size() * s.d)};
    for (int g = 0; g < G; ++g) {
      const std::int64_t bh = (kvh / Hkv) * s.H + (kvh % Hkv) * G + g;
      std::vector<double> g64[3];
      std::vector<float> g32[3];
      reference_backward_head<double>(s, q, k, v, dout, opt, bh, rows, kv_rows, g64[0], g64[1], g64[2]);
      reference_backward_head<float>(s, q, k, v, dout, opt, bh, rows, kv_rows, g32[0], g32[1], g32[2]);
      for (std::size_t r = 0; r < rows.size(); ++r)
        for (int c = 0; c < s.d; ++c) {
          e[0].add(dq[(bh * s.N + rows[r]) * s.d + c], g64[0][r * s.d + c]);
          e32[0].add(g32[0][r * s.d + c], g64[0][r * s.d + c]);
        }
      for (int t = 0; t < 2; ++t)
        for (std::size_t x = 0; x < kv64[t].size(); ++x) {
          kv64[t][x] += g64[t + 1][x];
          kv32[t][x] += g32[t + 1][x];
        }
    }
    for (std::size_t r = 0; r < kv_rows.size(); ++r)
      for (int c = 0; c < s.d; ++c) {
        const std::int64_t at = (kvh * Nk + kv_rows[r]) * s.d + c;
        for (int t = 0; t < 2; ++t) {
          e[t + 1].add(got[t + 1][at], kv64[t][r * s.d + c]);
          e32[t + 1].add(kv32[t][r * s.d + c], kv64[t][r * s.d + c]);
        }
      }
    rows_checked += static_cast<std::int64_t>(rows.size()) * G;
  }
  CheckReport report;
  report.coverage = coverage_text(rows_checked, s.rows(), "rows of dQ, dK, dV");
  if (static_cast<std::int64_t>(heads.size()) < kv_heads)
    report.coverage += ", " + std::to_string(heads.size()) + " of " + std::to_string(kv_heads) +
                       (G > 1 ? " K/V heads" : " heads");
  const char* names[3] = {"dQ", "dK", "dV"};
  for (int t = 0; t < 3; ++t)
    report.tensors.push_back(judge(names[t], e[t], e32[t], kBackwardFactor, kBackwardFloor, opt.dtype));
  return report;
}

}  // namespace fs
