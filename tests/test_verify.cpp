// The check itself: it must be able to fail. NaN never passes, an error above the fp32
// rule fails, the exact answer passes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/harness.hpp"
#include "common/varlen.hpp"
#include "common/verify.hpp"

TEST_CASE("a NaN never passes, whatever the tolerance", "[verify]") {
  fs::ErrorStat kernel, fp32;
  kernel.add(std::nan(""), 1.0);
  fp32.add(1.5, 1.0);  // a huge fp32 error would make any finite error pass
  REQUIRE_FALSE(fs::judge("O", kernel, fp32, 2.0, fs::kForwardFloor).pass());
}

TEST_CASE("infinities agree only with the same infinity", "[verify]") {
  const double inf = std::numeric_limits<double>::infinity();
  fs::ErrorStat same, other, finite;
  same.add(-inf, -inf);
  other.add(inf, -inf);
  finite.add(3.0, -inf);
  REQUIRE(same.bad == 0);
  REQUIRE(other.bad == 1);
  REQUIRE(finite.bad == 1);
}

TEST_CASE("the tolerance is factor times the fp32 error plus the floor", "[verify]") {
  fs::ErrorStat kernel, fp32;
  fp32.add(1.0 + 1e-6, 1.0);
  kernel.add(1.0 + 2.9e-6, 1.0);
  REQUIRE(fs::judge("O", kernel, fp32, 2.0, 1e-6).pass());  // 2.9e-6 ≤ 2·1e-6 + 1e-6·1
  fs::ErrorStat worse;
  worse.add(1.0 + 3.2e-6, 1.0);
  REQUIRE_FALSE(fs::judge("O", worse, fp32, 2.0, 1e-6).pass());
}

TEST_CASE("the floor scales with the tensor's largest magnitude", "[verify]") {
  fs::ErrorStat kernel, fp32;
  fp32.add(10.0, 10.0);  // the fp32 CPU result is exact here: only the floor is left
  kernel.add(10.0 + 9e-6, 10.0);
  REQUIRE(fs::judge("LSE", kernel, fp32, 2.0, 1e-6).pass());  // 9e-6 ≤ 1e-6 · 10
  fs::ErrorStat worse;
  worse.add(10.0 + 1.1e-5, 10.0);
  REQUIRE_FALSE(fs::judge("LSE", worse, fp32, 2.0, 1e-6).pass());
}

namespace {
struct Outputs {
  std::vector<float> o, lse;
};
Outputs fp64_outputs(const fs::HostProblem& p, const fs::AttnOptions& opt) {
  std::vector<double> o, lse;
  fs::reference_forward<double>(p.shape, p.q.data(), p.k.data(), p.v.data(), opt,
                                fs::all_indices(p.shape.rows()), o, lse);
  return {std::vector<float>(o.begin(), o.end()), std::vector<float>(lse.begin(), lse.end())};
}
}  // namespace

TEST_CASE("verify_forward passes the rounded exact answer and fails a wrong one", "[verify]") {
  const fs::Shape s{2, 2, 33, 16};
  const fs::HostProblem p = fs::random_problem(s, 21, false);
  const fs::AttnOptions opt{fs::default_scale(s.d), true};
  Outputs out = fp64_outputs(p, opt);
  const auto good = fs::verify_forward(s, opt, p.q.data(), p.k.data(), p.v.data(), out.o.data(), out.lse.data(), 1);
  INFO(good.summary());
  REQUIRE(good.pass());
  REQUIRE(good.coverage == "all 132 rows");

  SECTION("one output element off by 1e-3") {
    out.o[77] += 1e-3f;
    REQUIRE_FALSE(fs::verify_forward(s, opt, p.q.data(), p.k.data(), p.v.data(), out.o.data(), out.lse.data(), 1).pass());
  }
  SECTION("one LSE unwritten (NaN poison)") {
    out.lse[131] = std::nanf("");
    REQUIRE_FALSE(fs::verify_forward(s, opt, p.q.data(), p.k.data(), p.v.data(), out.o.data(), out.lse.data(), 1).pass());
  }
}

TEST_CASE("large problems are checked on a sample of rows, and the report says so", "[verify]") {
  const fs::Shape s{1, 4, 300, 8};
  const fs::HostProblem p = fs::random_problem(s, 2, false);
  const fs::AttnOptions opt{fs::default_scale(s.d), false};
  const Outputs out = fp64_outputs(p, opt);
  // A budget of 100 rows' work: 300·8 multiply-adds per row.
  const auto r = fs::verify_forward(s, opt, p.q.data(), p.k.data(), p.v.data(), out.o.data(), out.lse.data(), 1, 100 * 300 * 8);
  REQUIRE(r.coverage == "100 of 1200 rows (sampled)");
  REQUIRE(r.pass());
}

TEST_CASE("verify_backward fails a wrong gradient", "[verify]") {
  const fs::Shape s{1, 2, 9, 4};
  const fs::HostProblem p = fs::random_problem(s, 8, true);
  const fs::AttnOptions opt{fs::default_scale(s.d), false};
  std::vector<float> g[3];
  for (auto& t : g) t.resize(s.elems());
  const auto rows = fs::all_indices(s.N);
  for (std::int64_t bh = 0; bh < s.heads(); ++bh) {
    std::vector<double> dq, dk, dv;
    fs::reference_backward_head<double>(s, p.q.data(), p.k.data(), p.v.data(), p.dout.data(), opt, bh, rows, rows, dq, dk, dv);
    std::copy(dq.begin(), dq.end(), g[0].begin() + bh * s.N * s.d);
    std::copy(dk.begin(), dk.end(), g[1].begin() + bh * s.N * s.d);
    std::copy(dv.begin(), dv.end(), g[2].begin() + bh * s.N * s.d);
  }
  auto check = [&] { return fs::verify_backward(s, opt, p.q.data(), p.k.data(), p.v.data(), p.dout.data(), g[0].data(), g[1].data(), g[2].data(), 1); };
  REQUIRE(check().pass());
  const int t = GENERATE(0, 1, 2);
  g[t][s.elems() - 1] += 1e-3f;
  REQUIRE_FALSE(check().pass());
}

TEST_CASE("the 16-bit rule: the float32 CPU version rounds where a 16-bit kernel must, and the rule still catches a wrong element", "[verify][dtype]") {
  const fs::Shape s{1, 2, 200, 64};
  const fs::HostProblem p = fs::random_problem(s, 5, false, fs::DType::bf16);
  for (float x : p.q) REQUIRE(x == fs::round_to(fs::DType::bf16, x));  // inputs are bf16 values
  const fs::AttnOptions fp32{fs::default_scale(64)};
  const fs::AttnOptions bf16{fs::default_scale(64), false, {}, nullptr, fs::DType::bf16};
  const auto rows = fs::all_indices(s.rows());
  std::vector<float> o16, l16, o32, l32;
  fs::reference_forward<float>(s, p.q.data(), p.k.data(), p.v.data(), bf16, rows, o16, l16);
  fs::reference_forward<float>(s, p.q.data(), p.k.data(), p.v.data(), fp32, rows, o32, l32);
  for (float x : o16) REQUIRE(x == fs::round_to(fs::DType::bf16, x));  // O comes out as bf16
  // The rounding version is the less accurate one: its error is what a bf16 kernel is held to.
  auto err = [&](const std::vector<float>& o) {
    std::vector<double> o64, l64;
    fs::reference_forward<double>(s, p.q.data(), p.k.data(), p.v.data(), fp32, rows, o64, l64);
    double e = 0;
    for (std::size_t i = 0; i < o.size(); ++i) e = std::max(e, std::abs(o[i] - o64[i]));
    return e;
  };
  REQUIRE(err(o16) > 10 * err(o32));
  REQUIRE(fs::verify_forward(s, bf16, p.q.data(), p.k.data(), p.v.data(), o16.data(), l16.data(), 5).pass());
  o16[123] += 0.05f;  // one element off by far more than bf16's rounding
  REQUIRE_FALSE(fs::verify_forward(s, bf16, p.q.data(), p.k.data(), p.v.data(), o16.data(), l16.data(), 5).pass());
}

TEST_CASE("packed sequences are checked against each sequence's own attention, a sample holding every sequence's first "
          "and last row",
          "[verify][varlen]") {
  // 41 sequences of 25 to 64 queries and 20 to 80 keys, one of them empty; two query heads sharing one K/V head.
  std::string lengths = "0";
  for (int b = 1; b < 41; ++b)
    lengths += "," + std::to_string(25 + b * 7 % 40) + ":" + std::to_string(20 + b * 13 % 61);
  const fs::PackedSeqs packed = fs::parse_varlen(lengths);
  const auto &cu_q = packed.cu_q, &cu_k = packed.cu_k;
  const fs::Shape s{1, 2, cu_q.back(), 16, cu_k.back(), 1};
  const fs::HostProblem p = fs::random_problem(s, 4, true);
  fs::AttnOptions opt{fs::default_scale(s.d), true};
  opt.cu_seqlens_q = &cu_q;
  opt.cu_seqlens_k = &cu_k;
  Outputs out = fp64_outputs(p, opt);
  // A budget of one multiply-add: the fewest random rows (64 of the 2·N), and the sequences' ends.
  auto forward = [&](const fs::AttnOptions& o) {
    return fs::verify_forward(s, o, p.q.data(), p.k.data(), p.v.data(), out.o.data(), out.lse.data(), 1, 1);
  };
  const auto good = forward(opt);
  INFO(good.summary());
  REQUIRE(good.pass());
  REQUIRE_THAT(good.coverage, Catch::Contains("(sampled)"));
  // The check is of the packed problem: attention over all the tokens at once is another.
  fs::AttnOptions whole{fs::default_scale(s.d), true};
  REQUIRE_FALSE(forward(whole).pass());

  std::vector<float> g[3] = {std::vector<float>(s.elems()), std::vector<float>(s.kv_elems()), std::vector<float>(s.kv_elems())};
  for (std::int64_t bh = 0; bh < s.heads(); ++bh) {  // dK and dV: the two query heads' shares added
    std::vector<double> dq, dk, dv;
    fs::reference_backward_head<double>(s, p.q.data(), p.k.data(), p.v.data(), p.dout.data(), opt, bh,
                                        fs::all_indices(s.N), fs::all_indices(s.keys()), dq, dk, dv);
    std::copy(dq.begin(), dq.end(), g[0].begin() + bh * s.N * s.d);
    for (std::size_t x = 0; x < dk.size(); ++x) {
      g[1][x] += static_cast<float>(dk[x]);
      g[2][x] += static_cast<float>(dv[x]);
    }
  }
  auto backward = [&] {
    return fs::verify_backward(s, opt, p.q.data(), p.k.data(), p.v.data(), p.dout.data(), g[0].data(), g[1].data(),
                               g[2].data(), 1, 1);
  };
  REQUIRE(backward().pass());

  // One wrong element at a sequence's end fails, wherever the random rows fell.
  SECTION("O at the last row of sequence 17 (in head 17 mod 2)") {
    out.o[(s.N + cu_q[18] - 1) * s.d + 3] += 1e-3f;
    REQUIRE_FALSE(forward(opt).pass());
  }
  SECTION("LSE at the first row of sequence 30 (in head 0)") {
    out.lse[cu_q[30]] += 1e-3f;
    REQUIRE_FALSE(forward(opt).pass());
  }
  SECTION("dQ at the first row of sequence 9, head 1") {
    g[0][(s.N + cu_q[9]) * s.d] += 1e-3f;
    REQUIRE_FALSE(backward().pass());
  }
  SECTION("dK at the last key of sequence 23") {
    g[1][(cu_k[24] - 1) * s.d + 5] += 1e-3f;
    REQUIRE_FALSE(backward().pass());
  }
}
