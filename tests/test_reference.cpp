// The fp64 CPU reference: hand-computed cases, the causal mask, LSE, and its backward
// against finite differences of its own forward.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/harness.hpp"
#include "common/reference.hpp"

using fs::AttnOptions;
using fs::Shape;

namespace {

struct Forward {
  std::vector<double> o, lse;
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
  const bool causal = GENERATE(false, true);
  const float dropout = GENERATE(0.f, 0.3f);
  const bool masked = GENERATE(false, true);
  const Shape s{1, 2, 5, 3};
  const fs::HostProblem p = fs::random_problem(s, 3 + causal, true);
  const std::uint8_t blocks[9] = {1, 0, 1,  //
                                  0, 0, 0,  //
                                  1, 1, 1};
  const fs::BlockMaskView view{blocks, 2, 2, 3};
  const AttnOptions opt{0.7f, causal, {dropout, 1234}, masked ? &view : nullptr};

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
