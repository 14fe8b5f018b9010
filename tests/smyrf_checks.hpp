// What step 07's outputs are held to, by the GPU test (test_smyrf_gpu.cpp) and the emulated one
// (test_smyrf_emulated.cpp) alike: the clusters a sort of the fp64 hashes, and O, LSE, dQ, dK, dV
// the fp64 reference's of those clusters under the fp32 rule (common/verify.hpp).
#pragma once

#include <catch2/catch.hpp>

#include <vector>

#include "common/harness.hpp"
#include "common/smyrf.hpp"
#include "common/verify.hpp"
#include "tests/flash_checks.hpp"

namespace fs::testing {

inline SmyrfParams clustering(int hashes, int q_cluster, int k_cluster, std::uint64_t seed = 5) {
  SmyrfParams p = kSmyrfDefault;
  p.hashes = hashes;
  p.q_cluster = q_cluster;
  p.k_cluster = k_cluster;
  p.seed = seed;
  return p;
}

// A pass's clusters and outputs, on the host.
struct SmyrfOutputs {
  SmyrfClusters clusters;
  std::vector<float> o, lse, dq, dk, dv;  // dq, dk, dv empty when no backward ran
};

inline void require_smyrf_reference(const Shape& s, const HostProblem& p, const SmyrfParams& c,
                                    const SmyrfOutputs& g) {
  INFO(g.clusters.error());
  REQUIRE(g.clusters.error().empty());
  const OrderCheck order = smyrf_check_orders(s, p.q.data(), p.k.data(), c, g.clusters);
  INFO("order: worst " << order.worst << " of the allowance over " << order.pairs << " pairs");
  REQUIRE(judge_orders(order).pass());
  const AttnOptions attn{default_scale(s.d), false, {}, nullptr, DType::fp32, &g.clusters};
  if (g.dq.empty()) return require_reference(s, attn, p, g.o.data(), g.lse.data());
  require_reference(s, attn, p, g.o.data(), g.lse.data(), g.dq.data(), g.dk.data(), g.dv.data());
}

}  // namespace fs::testing
