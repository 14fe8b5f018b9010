// The problems that step 09's lazy fp8 softmax is tested on (test_hopper_emulated.cpp on the CPU,
// test_hopper_gpu.cpp on the GPU), made from a random bf16 problem whose N spans several key tiles
// of B = kE4m3BlockKV = 224 keys (the tests take N = 800: four tiles, the last of 128 keys):
//   climbing  K's rows grow with the key (times 1 + 6j/N), so that each row's max climbs through
//             every tile, by more than the slack in some tiles and less in others; V's keys 2B ..
//             3B − 1 times 32 and 3B .. N − 1 divided by 32, so that V's block scales lie 2⁵ above
//             and below the others';
//   zeros     V's keys B .. 2B − 1 zero among small values (|V| about 10⁻³: with e4m3_scale's 1 for
//             the zero block it would be the head's largest V scale by far, and every other tile's
//             P̃ would round to nothing), K's keys 2B .. 3B − 1 zero (their scores 0) and Q's rows
//             128 .. 255 zero (their softmax uniform).
#pragma once

#include <cuda_bf16.h>

#include <cstddef>

#include "common/e4m3.hpp"
#include "common/harness.hpp"

namespace fs::testing {

enum class Fp8Problem { climbing, zeros };

inline void shape_fp8_problem(HostProblem& p, Fp8Problem kind) {
  const Shape& s = p.shape;
  auto bf16 = [](float x) { return float(__nv_bfloat16(x)); };
  constexpr int B = kE4m3BlockKV;
  for (int bh = 0; bh < s.heads(); ++bh)
    for (int j = 0; j < s.N; ++j)
      for (int c = 0; c < s.d; ++c) {
        const std::size_t at = (std::size_t(bh) * s.N + j) * s.d + c;
        if (kind == Fp8Problem::climbing) {
          p.k[at] = bf16(p.k[at] * (1.f + 6.f * float(j) / float(s.N)));
          if (j >= 2 * B && j < 3 * B) p.v[at] = bf16(p.v[at] * 32.f);
          if (j >= 3 * B) p.v[at] = bf16(p.v[at] / 32.f);
        } else {
          p.v[at] = j >= B && j < 2 * B ? 0.f : bf16(p.v[at] * 1e-3f);
          if (j >= 2 * B && j < 3 * B) p.k[at] = 0.f;
          if (j >= 128 && j < 256) p.q[at] = 0.f;
        }
      }
}

}  // namespace fs::testing
