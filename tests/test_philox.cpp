// Philox-4x32-10 against the Random123 known-answer vectors, and the dropout mask built on it
// (common/philox.hpp): the same function the kernels and the fp64 reference call.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "common/philox.hpp"
#include "common/reference.hpp"
#include "common/harness.hpp"

TEST_CASE("Philox-4x32-10 gives the Random123 known answers", "[philox]") {
  // Random123 (github.com/DEShawResearch/random123) tests/kat_vectors, the "philox4x32 10"
  // lines: counter (4 words), key (2 words), expected output (4 words).
  struct Kat {
    fs::Philox4x32 ctr;
    std::uint32_t k0, k1;
    fs::Philox4x32 want;
  };
  const Kat kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}}},
      {{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu,
       {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}}},
      {{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u,
       {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}}},
  };
  for (const Kat& k : kats) {
    const fs::Philox4x32 got = fs::philox4x32_10(k.ctr, k.k0, k.k1);
    for (int w = 0; w < 4; ++w) {
      INFO("word " << w);
      REQUIRE(got.v[w] == k.want.v[w]);
    }
  }
}

TEST_CASE("dropout keeps 1 - p of the scores, for every p", "[philox]") {
  const float p = GENERATE(0.f, 0.1f, 0.5f, 0.9f);
  const std::uint32_t t = fs::dropout_threshold(p);
  std::int64_t kept = 0, total = 0;
  for (std::uint64_t bh = 0; bh < 4; ++bh)
    for (std::uint32_t i = 0; i < 512; ++i)
      for (std::uint32_t j = 0; j < 512; ++j, ++total) kept += fs::dropout_keep(7, t, bh, i, j);
  const double dropped = 1.0 - double(kept) / double(total);  // 1M scores: σ ≈ 0.0005
  INFO("p = " << p << ", dropped " << dropped);
  REQUIRE(std::abs(dropped - p) < 0.01);
  if (p == 0.f) REQUIRE(kept == total);  // p = 0 drops nothing, exactly
}

TEST_CASE("the dropout mask is a function of (seed, head, i, j) in 2 x 2 blocks", "[philox]") {
  const std::uint32_t t = fs::dropout_threshold(0.5f);
  // One Philox call per aligned 2 × 2 block; word 2·(i mod 2) + (j mod 2).
  for (std::uint32_t i = 0; i < 6; ++i)
    for (std::uint32_t j = 0; j < 6; ++j) {
      const fs::Philox4x32 x = fs::philox4x32_10({{i / 2, j / 2, 3, 0}}, 11, 0);
      REQUIRE(fs::dropout_keep(11, t, 3, i, j) == (x.v[2 * (i % 2) + j % 2] >= t));
    }
  // Another seed, another head: another mask.
  int differ_seed = 0, differ_head = 0;
  for (std::uint32_t i = 0; i < 64; ++i)
    for (std::uint32_t j = 0; j < 64; ++j) {
      differ_seed += fs::dropout_keep(1, t, 0, i, j) != fs::dropout_keep(2, t, 0, i, j);
      differ_head += fs::dropout_keep(1, t, 0, i, j) != fs::dropout_keep(1, t, 1, i, j);
    }
  REQUIRE(differ_seed > 1500);  // about half of 4096
  REQUIRE(differ_head > 1500);
  // The head's high 32 bits count too (B·H beyond 2^32 is not a real size, but the
  // counter must not alias).
  int differ_high = 0;
  for (std::uint32_t j = 0; j < 256; ++j)
    differ_high += fs::dropout_keep(1, t, 5, 0, j) != fs::dropout_keep(1, t, 5 + (std::uint64_t(1) << 32), 0, j);
  REQUIRE(differ_high > 64);
}

TEST_CASE("the reference applies exactly the generator's mask", "[philox][reference]") {
  // O_i = Σ_j P_ij Z_ij v_j with Z_ij = keep(i, j) / (1 − p): recomputed here from the
  // reference's own P (its no-dropout run gives exp(S − LSE)).
  const fs::Shape s{1, 2, 9, 4};
  const fs::HostProblem p = fs::random_problem(s, 5, false);
  const fs::Dropout drop{0.4f, 77};
  std::vector<double> o, lse, o0, lse0;
  const auto rows = fs::all_indices(s.rows());
  fs::reference_forward<double>(s, p.q.data(), p.k.data(), p.v.data(), {0.5f, false, drop}, rows, o, lse);
  fs::reference_forward<double>(s, p.q.data(), p.k.data(), p.v.data(), {0.5f, false}, rows, o0, lse0);
  const std::uint32_t t = fs::dropout_threshold(drop.p);
  for (std::int64_t r = 0; r < s.rows(); ++r) {
    const std::int64_t bh = r / s.N, i = r % s.N;
    REQUIRE(lse[r] == lse0[r]);  // LSE is the softmax's, before dropout
    for (int c = 0; c < s.d; ++c) {
      double want = 0;
      for (int j = 0; j < s.N; ++j) {
        double dot = 0;
        for (int x = 0; x < s.d; ++x) dot += double(p.q[r * s.d + x]) * double(p.k[(bh * s.N + j) * s.d + x]);
        const double pij = std::exp(0.5 * dot - lse0[r]);
        const bool keep = fs::dropout_keep(drop.seed, t, bh, std::uint32_t(i), std::uint32_t(j));
        want += keep ? pij / (1.0 - double(drop.p)) * double(p.v[(bh * s.N + j) * s.d + c]) : 0.0;
      }
      REQUIRE(o[r * s.d + c] == Approx(want).margin(1e-12));
    }
  }
  REQUIRE(o != o0);
}
