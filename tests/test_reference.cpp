// The fp64 CPU reference: hand-computed cases, the causal mask, LSE, and its backward
// against finite differences of its own forward.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/harness.hpp"
#include "common/philox.hpp"
#include "common/reference.hpp"
#include "tests/flash_checks.hpp"

using fs::AttnOptions;
using fs::Shape;
using fs::testing::batch_slopes;

namespace {

struct Forward {
  std::vector<double> o, lse;
  std::vector<double> p;  // explicit_head's: P of the head, N × N_k
};
Forward forward64(const Shape& s, const std::vector<float>& q, const std::vector<float>& k,
                  const std::vector<float>& v, const AttnOptions& opt) {
  Forward f;
  fs::reference_forward<double>(s, q.data(), k.data(), v.data(), opt, fs::all_indices(s.rows()), f.o, f.lse);
  return f;
}

// loss = Σ O ∘ dO, in double.
double loss(const Shape& s, const std::vector<float>& q, const std::vector<float>& k,
            const std::vector<float>& v, const std::vector<float>& dout, const AttnOptions& opt) {
  const Forward f = forward64(s, q, k, v, opt);
  double acc = 0;
  for (std::size_t i = 0; i < f.o.size(); ++i) acc += f.o[i] * double(dout[i]);
  return acc;
}

}  // namespace

TEST_CASE("a single key: O is that key's value and LSE its score", "[reference]") {
  const Shape s{1, 1, 1, 3};
  const std::vector<float> q{1, 2, 3}, k{0.5f, -1, 2}, v{7, -8, 9};
  const Forward f = forward64(s, q, k, v, {0.25f, false});
  REQUIRE(f.o == std::vector<double>{7, -8, 9});
  REQUIRE(f.lse[0] == Approx(0.25 * (0.5 - 2 + 6)).epsilon(1e-15));
}

TEST_CASE("two keys with scores 0 and ln 2 weigh their values 1/3 and 2/3", "[reference]") {
  const Shape s{1, 1, 2, 1};
  const float ln2 = std::log(2.0f);
  const std::vector<float> q{1, 1}, k{0, ln2}, v{3, 6};
  const Forward f = forward64(s, q, k, v, {1.0f, false});
  const double w = double(ln2);  // the float ln 2 the inputs actually hold
  const double p1 = std::exp(w) / (1 + std::exp(w));
  for (int i = 0; i < 2; ++i) {
    REQUIRE(f.o[i] == Approx(3 * (1 - p1) + 6 * p1).epsilon(1e-14));
    REQUIRE(f.lse[i] == Approx(std::log(1 + std::exp(w))).epsilon(1e-14));
  }
  REQUIRE(f.o[0] == Approx(5.0).epsilon(1e-6));  // 3·1/3 + 6·2/3
}

TEST_CASE("equal keys: O is the mean of V, LSE = score + log N", "[reference]") {
  const Shape s{1, 1, 4, 2};
  const std::vector<float> q{1, 0, 0, 1, 2, 2, -1, 3}, k{1, 1, 1, 1, 1, 1, 1, 1};
  const std::vector<float> v{1, 2, 3, 4, 5, 6, 7, 8};
  const Forward f = forward64(s, q, k, v, {0.5f, false});
  for (int i = 0; i < 4; ++i) {
    REQUIRE(f.o[i * 2 + 0] == Approx(4.0).epsilon(1e-14));
    REQUIRE(f.o[i * 2 + 1] == Approx(5.0).epsilon(1e-14));
    const double score = 0.5 * (double(q[i * 2]) + q[i * 2 + 1]);
    REQUIRE(f.lse[i] == Approx(score + std::log(4.0)).epsilon(1e-14));
  }
}

TEST_CASE("causal: row i sees keys 0..i only", "[reference]") {
  const Shape s{1, 1, 3, 1};
  const std::vector<float> q{1, 1, 1}, k{0, 0, 0}, v{2, 4, 9};
  const Forward f = forward64(s, q, k, v, {1.0f, true});
  REQUIRE(f.o[0] == Approx(2.0));                // only key 0
  REQUIRE(f.o[1] == Approx(3.0));                // mean of 2, 4
  REQUIRE(f.o[2] == Approx(5.0));                // mean of 2, 4, 9
  REQUIRE(f.lse[0] == Approx(0.0).margin(1e-15));
  REQUIRE(f.lse[2] == Approx(std::log(3.0)));
}

TEST_CASE("a row whose every score is -inf has O = 0 and LSE = -inf, not NaN", "[reference]") {
  // q_0 = (+inf, 0) against keys whose first component is negative: every S_0j = -inf, as an
  // additive -inf attention mask would make it. Row 1 is ordinary.
  const Shape s{1, 1, 2, 2};
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> q{inf, 0, 1, 1}, k{-1, 2, -0.5f, 1}, v{1, 2, 3, 4};
  const Forward f = forward64(s, q, k, v, {1.0f, false});
  REQUIRE(f.o[0] == 0.0);
  REQUIRE(f.o[1] == 0.0);
  REQUIRE(f.lse[0] == -std::numeric_limits<double>::infinity());
  REQUIRE(std::isfinite(f.o[2]));
  REQUIRE(std::isfinite(f.lse[1]));
}

TEST_CASE("heads and batches are independent problems", "[reference]") {
  const Shape one{1, 1, 5, 4}, many{2, 3, 5, 4};
  const fs::HostProblem p = fs::random_problem(many, 11, false);
  const AttnOptions opt{0.5f, true};
  const Forward all = forward64(many, p.q, p.k, p.v, opt);
  for (std::int64_t bh = 0; bh < many.heads(); ++bh) {
    const std::size_t off = bh * 5 * 4;
    auto slice = [&](const std::vector<float>& t) {
      return std::vector<float>(t.begin() + off, t.begin() + off + 20);
    };
    const Forward single = forward64(one, slice(p.q), slice(p.k), slice(p.v), opt);
    for (int e = 0; e < 20; ++e) REQUIRE(all.o[off + e] == single.o[e]);
  }
}

TEST_CASE("the float32 reference differs from the fp64 one, but only by rounding", "[reference]") {
  const Shape s{1, 2, 257, 64};
  const fs::HostProblem p = fs::random_problem(s, 5, false);
  const AttnOptions opt{fs::default_scale(64), false};
  const auto rows = fs::all_indices(s.rows());
  std::vector<double> o64, l64;
  std::vector<float> o32, l32;
  fs::reference_forward<double>(s, p.q.data(), p.k.data(), p.v.data(), opt, rows, o64, l64);
  fs::reference_forward<float>(s, p.q.data(), p.k.data(), p.v.data(), opt, rows, o32, l32);
  double err = 0;
  for (std::size_t i = 0; i < o64.size(); ++i) err = std::max(err, std::abs(o32[i] - o64[i]));
  REQUIRE(err > 0);     // the tolerance is built from this: it must not be zero
  REQUIRE(err < 1e-5);  // and it is float rounding, not a different formula
}

TEST_CASE("backward matches finite differences of the forward", "[reference]") {
  // With dropout the loss is still smooth in Q, K, V: the mask is fixed by (seed, position).
  // The block mask (blocks of 2 over N = 5) leaves query rows 2 and 3 without any key: their
  // gradients are 0, and finite differences agree.
  // The interface features too: a window with ALiBi, a softcap (its derivative in dS) with ALiBi.
  const bool causal = GENERATE(false, true);
  const float dropout = GENERATE(0.f, 0.3f);
  const bool masked = GENERATE(false, true);
  const int features = GENERATE(0, 1, 2);
  const Shape s{1, 2, 5, 3};
  const fs::HostProblem p = fs::random_problem(s, 3 + causal, true);
  const std::uint8_t blocks[9] = {1, 0, 1,  //
                                  0, 0, 0,  //
                                  1, 1, 1};
  const fs::BlockMaskView view{blocks, 2, 2, 3};
  AttnOptions opt{0.7f, causal, {dropout, 1234}, masked ? &view : nullptr};
  const std::vector<float> slopes = {0.5f, 0.125f};
  if (features == 1) {
    opt.window_left = 1;
    opt.window_right = 2;
    opt.alibi_slopes = slopes.data();
  } else if (features == 2) {
    opt.softcap = 0.8f;  // scores of these inputs reach a few units: the cap bends them
    opt.alibi_slopes = slopes.data();
  }

  std::vector<double> dq, dk, dv;
  const auto rows = fs::all_indices(s.N);
  for (std::int64_t bh = 0; bh < s.heads(); ++bh) {
    fs::reference_backward_head<double>(s, p.q.data(), p.k.data(), p.v.data(), p.dout.data(), opt,
                                        bh, rows, rows, dq, dk, dv);
    const std::vector<double>* grads[3] = {&dq, &dk, &dv};
    for (int t = 0; t < 3; ++t) {
      for (int e = 0; e < s.N * s.d; ++e) {
        // Perturb the input in float (what the reference reads) by h, central difference.
        fs::HostProblem hp = p, hm = p;
        std::vector<float>* plus[3] = {&hp.q, &hp.k, &hp.v};
        std::vector<float>* minus[3] = {&hm.q, &hm.k, &hm.v};
        const std::size_t at = bh * s.N * s.d + e;
        const float x = (*plus[t])[at];
        const float h = 1e-3f;
        (*plus[t])[at] = x + h;
        (*minus[t])[at] = x - h;
        const double hd = double(x + h) - double(x - h);  // the step as float actually holds it
        const double fd = (loss(s, hp.q, hp.k, hp.v, p.dout, opt) - loss(s, hm.q, hm.k, hm.v, p.dout, opt)) / hd;
        INFO("tensor " << "qkv"[t] << " head " << bh << " element " << e);
        REQUIRE((*grads[t])[e] == Approx(fd).margin(1e-5).epsilon(1e-4));
      }
    }
  }
}

namespace {

// O and LSE of one head written out as the definitions say, an N×N_k matrix at a time: S = τ QKᵀ,
// softcapped, ALiBi's bias, the causal mask and the window aligned to the bottom-right corner
// (δ = N_k − N), softmax, P V; query head bh reading K/V head bh / (H / H_kv). Independent of
// reference_forward_row's loop.
Forward explicit_head(const Shape& s, const std::vector<float>& qs, const std::vector<float>& ks,
                      const std::vector<float>& vs, const AttnOptions& opt, int bh) {
  const int N = s.N, d = s.d, Nk = opt.kv_len ? opt.kv_len : N, Hkv = opt.kv_heads ? opt.kv_heads : s.H;
  const int delta = Nk - N, kv = bh / s.H * Hkv + bh % s.H / (s.H / Hkv);
  const float* q = qs.data() + std::size_t(bh) * N * d;
  const float* k = ks.data() + std::size_t(kv) * Nk * d;
  const float* v = vs.data() + std::size_t(kv) * Nk * d;
  const double neg_inf = -std::numeric_limits<double>::infinity();
  std::vector<double> S(std::size_t(N) * Nk, neg_inf);
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < Nk; ++j) {
      const int at = i + delta;
      const bool kept = (!opt.causal || j <= at) && (opt.window_left < 0 || at - j <= opt.window_left) &&
                        (opt.window_right < 0 || j - at <= opt.window_right);
      if (!kept) continue;
      double x = 0;
      for (int c = 0; c < d; ++c) x += double(q[i * d + c]) * double(k[j * d + c]);
      x *= opt.scale;
      if (opt.softcap > 0) x = opt.softcap * std::tanh(x / opt.softcap);
      // ALiBi: head h's slope, of batch b's row when the slopes are (B, H) (one row for (H)).
      if (opt.alibi_slopes) x -= opt.alibi_slopes[bh / s.H * opt.alibi_batch_stride + bh % s.H] * std::abs(at - j);
      S[std::size_t(i) * Nk + j] = x;
    }
  Forward f;
  f.o.assign(std::size_t(N) * d, 0.0);
  f.lse.assign(N, neg_inf);
  f.p.assign(std::size_t(N) * Nk, 0.0);
  for (int i = 0; i < N; ++i) {
    double m = neg_inf, l = 0;
    for (int j = 0; j < Nk; ++j) m = std::max(m, S[std::size_t(i) * Nk + j]);
    if (m == neg_inf) continue;  // no key kept: O = 0, LSE = −inf, P = 0
    for (int j = 0; j < Nk; ++j) l += std::exp(S[std::size_t(i) * Nk + j] - m);
    for (int j = 0; j < Nk; ++j) {
      f.p[std::size_t(i) * Nk + j] = std::exp(S[std::size_t(i) * Nk + j] - m) / l;
      for (int c = 0; c < d; ++c) f.o[std::size_t(i) * d + c] += f.p[std::size_t(i) * Nk + j] * v[j * d + c];
    }
    f.lse[i] = m + std::log(l);
  }
  return f;
}

// Uniform random floats in [−2, 2), n of them.
std::vector<float> random_values(std::size_t n, std::uint32_t seed) {
  std::vector<float> out(n);
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& e : out) {
    x = x * 1664525u + 1013904223u;
    e = float(x >> 8) / float(1 << 24) * 4.f - 2.f;
  }
  return out;
}

void require_same_as_explicit(const Shape& s, const std::vector<float>& q, const std::vector<float>& k,
                              const std::vector<float>& v, const AttnOptions& opt) {
  const Forward f = forward64(s, q, k, v, opt);
  for (int bh = 0; bh < s.B * s.H; ++bh) {
    const Forward e = explicit_head(s, q, k, v, opt, bh);
    INFO("head " << bh);
    for (int i = 0; i < s.N; ++i) {
      const double lse = f.lse[std::size_t(bh) * s.N + i];
      if (std::isinf(e.lse[i])) REQUIRE(lse == e.lse[i]);
      else REQUIRE(lse == Approx(e.lse[i]).epsilon(1e-12));
      for (int c = 0; c < s.d; ++c)
        REQUIRE(f.o[(std::size_t(bh) * s.N + i) * s.d + c] == Approx(e.o[std::size_t(i) * s.d + c]).margin(1e-12));
      // The probabilities (S_dmask without dropout) are the explicit softmax's, every key of the row.
      std::vector<double> p;
      fs::reference_probs_row<double>(s, q.data(), k.data(), opt, std::int64_t(bh) * s.N + i, p);
      const std::size_t Nk = e.p.size() / std::size_t(s.N);
      REQUIRE(p.size() == Nk);
      for (std::size_t j = 0; j < Nk; ++j) REQUIRE(p[j] == Approx(e.p[std::size_t(i) * Nk + j]).margin(1e-12));
    }
  }
}

}  // namespace

TEST_CASE("windows, ALiBi and softcap are what their definitions say", "[reference][interface]") {
  const Shape s{2, 4, 13, 8};
  const fs::HostProblem p = fs::random_problem(s, 21, false);
  const std::vector<float> slopes = fs::alibi_slopes(s.H);
  const auto [left, right] = GENERATE(std::pair{-1, -1}, std::pair{3, 2}, std::pair{0, 0}, std::pair{-1, 0},
                                      std::pair{5, -1}, std::pair{20, 20});
  const bool causal = GENERATE(false, true);
  const bool alibi = GENERATE(false, true);
  const float softcap = GENERATE(0.f, 1.5f);
  AttnOptions opt{0.35f, causal};
  opt.window_left = left;
  opt.window_right = right;
  opt.alibi_slopes = alibi ? slopes.data() : nullptr;
  opt.softcap = softcap;
  INFO("window (" << left << ", " << right << ") causal " << causal << " alibi " << alibi << " softcap " << softcap);
  require_same_as_explicit(s, p.q, p.k, p.v, opt);
}

TEST_CASE("unequal lengths align the masks to the bottom-right corner, and grouped heads share K and V",
          "[reference][interface]") {
  const int B = 2, H = 4, N = 7, d = 5;
  const int kv_heads = GENERATE(4, 2, 1);  // MHA, GQA, MQA
  const int kv_len = GENERATE(7, 11, 3);   // N_k = N, more keys (decoding-like), fewer keys
  const bool causal = GENERATE(false, true);
  const auto [left, right] = GENERATE(std::pair{-1, -1}, std::pair{2, 1}, std::pair{-1, 0});
  const bool alibi = GENERATE(false, true);
  const Shape s{B, H, N, d};
  const std::vector<float> slopes = fs::alibi_slopes(H);
  const std::vector<float> q = random_values(std::size_t(B) * H * N * d, 1);
  const std::vector<float> k = random_values(std::size_t(B) * kv_heads * kv_len * d, 2);
  const std::vector<float> v = random_values(std::size_t(B) * kv_heads * kv_len * d, 3);
  AttnOptions opt{0.4f, causal};
  opt.kv_heads = kv_heads;
  opt.kv_len = kv_len;
  opt.window_left = left;
  opt.window_right = right;
  opt.alibi_slopes = alibi ? slopes.data() : nullptr;
  INFO("kv_heads " << kv_heads << " kv_len " << kv_len << " causal " << causal << " window (" << left << ", "
                   << right << ") alibi " << alibi);
  require_same_as_explicit(s, q, k, v, opt);
  // With 3 keys for 7 queries, causal: the first 4 queries see no key at all.
  if (causal && kv_len == 3) {
    const Forward f = forward64(s, q, k, v, opt);
    REQUIRE(f.lse[0] == -std::numeric_limits<double>::infinity());
    REQUIRE(f.lse[3] == -std::numeric_limits<double>::infinity());
    REQUIRE(std::isfinite(f.lse[4]));
  }
}

namespace {

// Batch b of a (B, heads, rows, d) tensor, as a tensor of one batch.
std::vector<float> batch_of(const std::vector<float>& x, int B, int b) {
  const std::size_t n = x.size() / std::size_t(B);
  return {x.begin() + std::ptrdiff_t(n * b), x.begin() + std::ptrdiff_t(n * (b + 1))};
}

}  // namespace

TEST_CASE("ALiBi slopes of shape (B, H) give batch b row b's slopes, forward and backward", "[reference][interface]") {
  const int B = 3, H = 4, N = 11, d = 6;
  const bool causal = GENERATE(false, true);
  const auto [left, right] = GENERATE(std::pair{-1, -1}, std::pair{3, 2});
  const float softcap = GENERATE(0.f, 1.5f);
  const int kv_len = GENERATE(11, 15);
  const Shape s{B, H, N, d};
  const std::vector<float> slopes = batch_slopes(B, H);
  const std::vector<float> q = random_values(std::size_t(B) * H * N * d, 31);
  const std::vector<float> k = random_values(std::size_t(B) * H * kv_len * d, 32);
  const std::vector<float> v = random_values(std::size_t(B) * H * kv_len * d, 33);
  const std::vector<float> dout = random_values(q.size(), 34);
  AttnOptions opt{0.45f, causal};
  opt.kv_len = kv_len;
  opt.window_left = left;
  opt.window_right = right;
  opt.softcap = softcap;
  opt.alibi_slopes = slopes.data();
  opt.alibi_batch_stride = H;
  INFO("causal " << causal << " window (" << left << ", " << right << ") softcap " << softcap << " kv_len " << kv_len);
  // The definitions, written out (explicit_head reads row b for head b·H + h).
  require_same_as_explicit(s, q, k, v, opt);

  // Batch b alone with (H) slopes, row b: the same outputs and gradients, to the last bit (the
  // reference computes a row the same way whichever batch holds it).
  const Forward all = forward64(s, q, k, v, opt);
  std::vector<double> dq, dk, dv, dq1, dk1, dv1;
  const auto q_rows = fs::all_indices(N), kv_rows = fs::all_indices(kv_len);
  bool differs = false;  // from row 0's slopes, which the (H) form would give every batch
  for (int b = 0; b < B; ++b) {
    const Shape one{1, H, N, d};
    AttnOptions alone = opt;
    alone.alibi_slopes = slopes.data() + std::size_t(b) * H;
    alone.alibi_batch_stride = 0;
    AttnOptions first_row = alone;
    first_row.alibi_slopes = slopes.data();
    const std::vector<float> qb = batch_of(q, B, b), kb = batch_of(k, B, b), vb = batch_of(v, B, b),
                             db = batch_of(dout, B, b);
    const Forward f = forward64(one, qb, kb, vb, alone), f0 = forward64(one, qb, kb, vb, first_row);
    const std::size_t at = std::size_t(b) * H * N;
    for (std::size_t r = 0; r < f.lse.size(); ++r) {
      INFO("batch " << b << " row " << r);
      REQUIRE(all.lse[at + r] == f.lse[r]);
      for (int c = 0; c < d; ++c) REQUIRE(all.o[(at + r) * d + c] == f.o[r * d + c]);
      differs = differs || f.lse[r] != f0.lse[r];
    }
    for (int h = 0; h < H; ++h) {
      fs::reference_backward_head<double>(s, q.data(), k.data(), v.data(), dout.data(), opt, std::int64_t(b) * H + h,
                                          q_rows, kv_rows, dq, dk, dv);
      fs::reference_backward_head<double>(one, qb.data(), kb.data(), vb.data(), db.data(), alone, h, q_rows, kv_rows,
                                          dq1, dk1, dv1);
      INFO("batch " << b << " head " << h);
      REQUIRE(dq == dq1);
      REQUIRE(dk == dk1);
      REQUIRE(dv == dv1);
    }
  }
  REQUIRE(differs);  // the rows matter: batches 1 and 2 with row 0's slopes give other outputs
}

TEST_CASE("ALiBi slopes of shape (B, H) whose rows are equal give the (H) form's outputs exactly",
          "[reference][interface]") {
  const int B = 2, H = 4;
  const Shape s{B, H, 9, 5};
  const fs::HostProblem p = fs::random_problem(s, 41, true);
  const std::vector<float> heads = fs::alibi_slopes(H);
  std::vector<float> rows;
  for (int b = 0; b < B; ++b) rows.insert(rows.end(), heads.begin(), heads.end());
  const bool causal = GENERATE(false, true);
  AttnOptions per_head{0.5f, causal}, per_batch{0.5f, causal};
  per_head.alibi_slopes = heads.data();
  per_batch.alibi_slopes = rows.data();
  per_batch.alibi_batch_stride = H;
  for (AttnOptions* opt : {&per_head, &per_batch}) opt->window_left = 4;
  const Forward a = forward64(s, p.q, p.k, p.v, per_head), b = forward64(s, p.q, p.k, p.v, per_batch);
  REQUIRE(a.o == b.o);
  REQUIRE(a.lse == b.lse);
  const auto all = fs::all_indices(s.N);
  for (std::int64_t bh = 0; bh < s.heads(); ++bh) {
    std::vector<double> g[2][3];
    for (int form = 0; form < 2; ++form)
      fs::reference_backward_head<double>(s, p.q.data(), p.k.data(), p.v.data(), p.dout.data(),
                                          form ? per_batch : per_head, bh, all, all, g[form][0], g[form][1], g[form][2]);
    for (int t = 0; t < 3; ++t) REQUIRE(g[0][t] == g[1][t]);
  }
}

TEST_CASE("with grouped heads, the group's shares of dK and dV add up to finite differences", "[reference][interface]") {
  const int B = 1, H = 4, N = 4, d = 3, kv_heads = 2, kv_len = 6;
  const bool causal = GENERATE(false, true);
  const Shape s{B, H, N, d};
  std::vector<float> q = random_values(std::size_t(B) * H * N * d, 4);
  std::vector<float> k = random_values(std::size_t(B) * kv_heads * kv_len * d, 5);
  std::vector<float> v = random_values(std::size_t(B) * kv_heads * kv_len * d, 6);
  const std::vector<float> dout = random_values(q.size(), 7);
  AttnOptions opt{0.6f, causal};
  opt.kv_heads = kv_heads;
  opt.kv_len = kv_len;
  opt.window_left = 3;
  opt.softcap = 1.2f;
  // The group sums: query heads 2g and 2g + 1 read K/V head g.
  std::vector<double> dk_sum(k.size(), 0.0), dv_sum(v.size(), 0.0), dq_all(q.size(), 0.0);
  const auto q_rows = fs::all_indices(N), kv_rows = fs::all_indices(kv_len);
  for (int bh = 0; bh < H; ++bh) {
    std::vector<double> dq, dk, dv;
    fs::reference_backward_head<double>(s, q.data(), k.data(), v.data(), dout.data(), opt, bh, q_rows, kv_rows, dq,
                                        dk, dv);
    std::copy(dq.begin(), dq.end(), dq_all.begin() + std::size_t(bh) * N * d);
    const std::size_t g = std::size_t(bh / (H / kv_heads));
    for (std::size_t e = 0; e < dk.size(); ++e) {
      dk_sum[g * kv_len * d + e] += dk[e];
      dv_sum[g * kv_len * d + e] += dv[e];
    }
  }
  std::vector<float>* inputs[3] = {&q, &k, &v};
  const std::vector<double>* grads[3] = {&dq_all, &dk_sum, &dv_sum};
  for (int t = 0; t < 3; ++t)
    for (std::size_t e = 0; e < inputs[t]->size(); ++e) {
      const float x = (*inputs[t])[e], h = 1e-3f;
      (*inputs[t])[e] = x + h;
      const double up = loss(s, q, k, v, dout, opt);
      (*inputs[t])[e] = x - h;
      const double down = loss(s, q, k, v, dout, opt);
      (*inputs[t])[e] = x;
      INFO("tensor " << "qkv"[t] << " element " << e);
      REQUIRE((*grads[t])[e] == Approx((up - down) / (double(x + h) - double(x - h))).margin(1e-5).epsilon(1e-4));
    }
}

TEST_CASE("heads that do not group are the caller's error", "[reference][interface]") {
  const Shape s{1, 3, 4, 2};
  const std::vector<float> x(24, 0.5f);
  AttnOptions opt{1.f};
  opt.kv_heads = 2;
  REQUIRE_THROWS_WITH(forward64(s, x, x, x, opt), Catch::Contains("H = 3 is not a multiple of kv_heads = 2"));
}

TEST_CASE("a window is the causal mask or a single key at its extremes", "[reference][interface]") {
  const Shape s{1, 2, 9, 4};
  const fs::HostProblem p = fs::random_problem(s, 5, false);
  AttnOptions causal{0.5f, true}, window{0.5f, false};
  window.window_left = s.N - 1;
  window.window_right = 0;
  const Forward a = forward64(s, p.q, p.k, p.v, causal), b = forward64(s, p.q, p.k, p.v, window);
  REQUIRE(a.o == b.o);
  REQUIRE(a.lse == b.lse);
  // (0, 0): query i sees key i alone, so O_i = V_i and LSE_i = τ q_i·k_i.
  AttnOptions diagonal{0.5f, false};
  diagonal.window_left = diagonal.window_right = 0;
  const Forward d = forward64(s, p.q, p.k, p.v, diagonal);
  for (std::int64_t r = 0; r < s.rows(); ++r) {
    double qk = 0;
    for (int c = 0; c < s.d; ++c) qk += double(p.q[r * s.d + c]) * double(p.k[r * s.d + c]);
    REQUIRE(d.lse[r] == Approx(0.5 * qk).epsilon(1e-14));
    for (int c = 0; c < s.d; ++c) REQUIRE(d.o[r * s.d + c] == double(p.v[r * s.d + c]));
  }
}

TEST_CASE("the standard ALiBi slopes", "[reference][interface]") {
  const std::vector<float> eight = fs::alibi_slopes(8);
  for (int h = 0; h < 8; ++h) REQUIRE(eight[h] == std::exp2(-float(h + 1)));  // 1/2, 1/4, ..., 1/256
  // 12 heads: the 8 of 8, then every other one of 16: 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5.
  const std::vector<float> twelve = fs::alibi_slopes(12);
  REQUIRE(twelve.size() == 12);
  for (int h = 0; h < 8; ++h) REQUIRE(twelve[h] == eight[h]);
  for (int h = 0; h < 4; ++h) REQUIRE(twelve[8 + h] == Approx(std::exp2(-0.5 - h)).epsilon(1e-7));
  REQUIRE(fs::alibi_slopes(1) == std::vector<float>{std::exp2(-8.f)});
}

namespace {

// Rows [r0, r0 + n) of each of `heads` heads of a (heads, total, d) tensor, as its own tensor.
std::vector<float> slice_rows(const std::vector<float>& x, int heads, int total, int d, int r0, int n) {
  std::vector<float> out;
  for (int h = 0; h < heads; ++h)
    out.insert(out.end(), x.begin() + (std::size_t(h) * total + r0) * d, x.begin() + (std::size_t(h) * total + r0 + n) * d);
  return out;
}

}  // namespace

TEST_CASE("packed sequences are each their own problem, empty ones included", "[reference][interface]") {
  // Lengths of queries and keys per sequence: equal, more keys, fewer keys, no queries, no keys.
  const std::vector<std::int32_t> cu_q = {0, 5, 8, 14, 14, 16}, cu_k = {0, 5, 12, 16, 19, 19};
  const int H = 4, d = 3, total_q = cu_q.back(), total_k = cu_k.back();
  const int kv_heads = GENERATE(4, 2);
  const bool causal = GENERATE(false, true);
  const auto [left, right] = GENERATE(std::pair{-1, -1}, std::pair{1, 2});
  const int alibi = GENERATE(0, 1, 2);  // none; (H) slopes; (sequences, H), a row per sequence
  const int count = int(cu_q.size()) - 1;
  const std::vector<float> slopes = alibi == 2 ? batch_slopes(count, H) : fs::alibi_slopes(H);
  const std::vector<float> q = random_values(std::size_t(H) * total_q * d, 8);
  const std::vector<float> k = random_values(std::size_t(kv_heads) * total_k * d, 9);
  const std::vector<float> v = random_values(std::size_t(kv_heads) * total_k * d, 10);
  const std::vector<float> dout = random_values(q.size(), 11);
  AttnOptions packed{0.5f, causal};
  packed.kv_heads = kv_heads;
  packed.kv_len = total_k;
  packed.cu_seqlens_q = &cu_q;
  packed.cu_seqlens_k = &cu_k;
  packed.window_left = left;
  packed.window_right = right;
  packed.alibi_slopes = alibi ? slopes.data() : nullptr;
  packed.alibi_batch_stride = alibi == 2 ? H : 0;
  const Shape s{1, H, total_q, d};
  const Forward f = forward64(s, q, k, v, packed);
  std::vector<std::vector<double>> grads(3 * H);  // dq, dk, dv of each query head
  for (int bh = 0; bh < H; ++bh)
    fs::reference_backward_head<double>(s, q.data(), k.data(), v.data(), dout.data(), packed, bh,
                                        fs::all_indices(total_q), fs::all_indices(total_k), grads[3 * bh],
                                        grads[3 * bh + 1], grads[3 * bh + 2]);
  for (std::size_t b = 0; b + 1 < cu_q.size(); ++b) {
    const int q0 = cu_q[b], nq = cu_q[b + 1] - q0, k0 = cu_k[b], nk = cu_k[b + 1] - k0;
    INFO("sequence " << b << ": " << nq << " queries, " << nk << " keys; kv_heads " << kv_heads << " causal " << causal
                     << " window (" << left << ", " << right << ") alibi " << alibi);
    if (nq == 0) {  // its keys are no query's: zero gradients
      for (int bh = 0; bh < H; ++bh)
        for (int e = k0 * d; e < (k0 + nk) * d; ++e) REQUIRE((grads[3 * bh + 1][e] == 0 && grads[3 * bh + 2][e] == 0));
      continue;
    }
    if (nk == 0) {  // its queries see no key: O = 0, LSE = −inf, dQ = 0
      for (int bh = 0; bh < H; ++bh)
        for (int i = q0; i < q0 + nq; ++i) {
          REQUIRE(f.lse[std::size_t(bh) * total_q + i] == -std::numeric_limits<double>::infinity());
          for (int c = 0; c < d; ++c) {
            REQUIRE(f.o[(std::size_t(bh) * total_q + i) * d + c] == 0);
            REQUIRE(grads[3 * bh][std::size_t(i) * d + c] == 0);
          }
        }
      continue;
    }
    const Shape one{1, H, nq, d};
    AttnOptions alone = packed;
    alone.cu_seqlens_q = alone.cu_seqlens_k = nullptr;
    alone.kv_len = nk;
    if (alibi == 2) {  // the sequence's row, as (H) slopes
      alone.alibi_slopes = slopes.data() + b * H;
      alone.alibi_batch_stride = 0;
    }
    const std::vector<float> qs = slice_rows(q, H, total_q, d, q0, nq), dos = slice_rows(dout, H, total_q, d, q0, nq);
    const std::vector<float> ks = slice_rows(k, kv_heads, total_k, d, k0, nk), vs = slice_rows(v, kv_heads, total_k, d, k0, nk);
    for (int bh = 0; bh < H; ++bh) {
      const Forward e = explicit_head(one, qs, ks, vs, alone, bh);
      std::vector<double> dq, dk, dv;
      fs::reference_backward_head<double>(one, qs.data(), ks.data(), vs.data(), dos.data(), alone, bh,
                                          fs::all_indices(nq), fs::all_indices(nk), dq, dk, dv);
      for (int i = 0; i < nq; ++i) {
        const double lse = f.lse[std::size_t(bh) * total_q + q0 + i];
        if (std::isinf(e.lse[i])) REQUIRE(lse == e.lse[i]);
        else REQUIRE(lse == Approx(e.lse[i]).epsilon(1e-12));
        for (int c = 0; c < d; ++c) {
          REQUIRE(f.o[(std::size_t(bh) * total_q + q0 + i) * d + c] == Approx(e.o[std::size_t(i) * d + c]).margin(1e-12));
          REQUIRE(grads[3 * bh][std::size_t(q0 + i) * d + c] == Approx(dq[std::size_t(i) * d + c]).margin(1e-12));
        }
      }
      for (int j = 0; j < nk * d; ++j) {
        REQUIRE(grads[3 * bh + 1][std::size_t(k0) * d + j] == Approx(dk[j]).margin(1e-12));
        REQUIRE(grads[3 * bh + 2][std::size_t(k0) * d + j] == Approx(dv[j]).margin(1e-12));
      }
    }
  }
}

TEST_CASE("packed sequences that do not add up are the caller's error", "[reference][interface]") {
  const Shape s{1, 1, 6, 2};
  const std::vector<float> x(12, 0.5f);
  const std::vector<std::int32_t> cu_q = {0, 4, 6}, short_k = {0, 4, 5}, backwards = {0, 5, 4, 6};
  AttnOptions opt{1.f};
  opt.cu_seqlens_q = &cu_q;
  opt.cu_seqlens_k = &short_k;  // ends at 5, but there are 6 keys
  REQUIRE_THROWS_WITH(forward64(s, x, x, x, opt), Catch::Contains("ending at N and kv_len"));
  opt.cu_seqlens_k = nullptr;
  REQUIRE_THROWS_WITH(forward64(s, x, x, x, opt), Catch::Contains("go together"));
  opt.cu_seqlens_q = opt.cu_seqlens_k = &backwards;
  REQUIRE_THROWS_WITH(forward64(s, x, x, x, opt), Catch::Contains("non-decreasing"));
}

// S_dmask with dropout (reference_probs_row): the sign bit of entry (i, j) is the Philox mask
// (common/philox.hpp: dropout_keep of head bh, query token i, key token j) and nothing else, and
// the forward's O is |P| with the dropped entries zeroed, over 1 − p, times V — the probabilities
// are those the forward applied its mask to. Square and unequal lengths, grouped heads, the
// features, and packed sequences (indexed by token, not by the sequence's own positions).
TEST_CASE("the probabilities with dropout carry the forward's mask in their sign and give back its O",
          "[reference][interface]") {
  const int H = 4, d = 5;
  const bool packed = GENERATE(false, true);
  const bool causal = GENERATE(false, true);
  const int features = GENERATE(0, 1);  // none; a window, softcap and ALiBi (B, H)
  const std::vector<std::int32_t> cu_q = {0, 5, 8, 14, 14, 17}, cu_k = {0, 5, 13, 16, 19, 19};
  const int B = packed ? 1 : 2, N = packed ? cu_q.back() : 9, Nk = packed ? cu_k.back() : 13, kv_heads = 2;
  const int rows_of_slopes = packed ? int(cu_q.size()) - 1 : B;
  const std::vector<float> slopes = batch_slopes(rows_of_slopes, H);
  const std::vector<float> q = random_values(std::size_t(B) * H * N * d, 41);
  const std::vector<float> k = random_values(std::size_t(B) * kv_heads * Nk * d, 42);
  const std::vector<float> v = random_values(std::size_t(B) * kv_heads * Nk * d, 43);
  const float p_drop = 0.3f;
  const std::uint64_t seed = 0x1234'5678'9abcull;
  AttnOptions opt{0.5f, causal, fs::Dropout{p_drop, seed}};
  opt.kv_heads = kv_heads;
  opt.kv_len = Nk;
  if (packed) {
    opt.cu_seqlens_q = &cu_q;
    opt.cu_seqlens_k = &cu_k;
  }
  if (features) {
    opt.window_left = 4;
    opt.window_right = 2;
    opt.softcap = 1.5f;
    opt.alibi_slopes = slopes.data();
    opt.alibi_batch_stride = H;
  }
  INFO("packed " << packed << " causal " << causal << " features " << features);
  const Shape s{B, H, N, d};
  const Forward f = forward64(s, q, k, v, opt);
  AttnOptions no_dropout = opt;
  no_dropout.dropout = {};
  const std::uint32_t threshold = fs::dropout_threshold(p_drop);
  std::int64_t dropped = 0, entries = 0;
  for (std::int64_t row = 0; row < s.rows(); ++row) {
    const std::int64_t bh = row / N, i = row % N;
    const std::int64_t kv = bh / H * kv_heads + bh % H / (H / kv_heads);
    std::int64_t k0 = 0;  // the first key token of the row's sequence
    if (packed) {
      std::size_t b = 0;
      while (cu_q[b + 1] <= i) ++b;
      k0 = cu_k[b];
    }
    std::vector<double> p, plain;
    fs::reference_probs_row<double>(s, q.data(), k.data(), opt, row, p);
    fs::reference_probs_row<double>(s, q.data(), k.data(), no_dropout, row, plain);
    REQUIRE(p.size() == plain.size());
    std::vector<double> o(std::size_t(d), 0.0);
    double sum = 0;
    for (std::size_t j = 0; j < p.size(); ++j) {
      const bool kept = fs::dropout_keep(seed, threshold, std::uint64_t(bh), std::uint32_t(i), std::uint32_t(k0 + j));
      REQUIRE(std::signbit(p[j]) == !kept);  // the sign is the mask, element by element (−0 included)
      REQUIRE(std::abs(p[j]) == plain[j]);    // |P| is the probability before dropout
      dropped += !kept;
      ++entries;
      sum += plain[j];
      if (!kept) continue;
      for (int c = 0; c < d; ++c) o[c] += p[j] / (1.0 - double(p_drop)) * double(v[((kv * Nk) + k0 + std::int64_t(j)) * d + c]);
    }
    if (f.lse[std::size_t(row)] == -std::numeric_limits<double>::infinity()) {
      REQUIRE(sum == 0);
    } else {
      REQUIRE(sum == Approx(1.0).epsilon(1e-12));
    }
    for (int c = 0; c < d; ++c) REQUIRE(o[c] == Approx(f.o[std::size_t(row) * d + c]).margin(1e-12));
  }
  // About p of them dropped (a mask of all or none would pass the loop above only by accident).
  REQUIRE(double(dropped) / double(entries) == Approx(p_drop).margin(0.1));
}
