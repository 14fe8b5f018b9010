// Step 07 (SMYRF) on the GPU against the host: the clusters it makes are a sort of the fp64
// hashes (common/smyrf.hpp, smyrf_check_orders), and its outputs and gradients are those of the
// fp64 reference of the attention inside those clusters, under the project's fp32 rule — on odd
// shapes, every head dimension, clusters of every CTA size, equal and unequal; with one cluster
// of every key it is dense attention; clusters given back give the same bits; repeats are
// bit-identical; a traced run validates and changes no bit.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "common/device.hpp"
#include "common/driver.hpp"
#include "common/harness.hpp"
#include "common/npy.hpp"
#include "common/nvtx_tool/nvtx_tool.hpp"
#include "common/recorder/sink.hpp"
#include "common/smyrf.hpp"
#include "common/trace/validate.hpp"
#include "common/traced_run.hpp"
#include "common/verify.hpp"
#include "steps/registry.hpp"
#include "tests/gpu_cases.hpp"
#include "tests/smyrf_checks.hpp"

using fs::testing::clustering;
using fs::testing::require_smyrf_reference;
using fs::testing::same_bits;
using fs::testing::SmyrfOutputs;

namespace {

const fs::StepInfo& step07() { return *fs::find_step("07"); }

fs::PassSettings settings(const fs::Shape& s, const fs::SmyrfParams& c, const fs::SmyrfClusters* given = nullptr) {
  return {fs::default_scale(s.d), false, 0, {}, nullptr, fs::DType::fp32, c, given};
}

SmyrfOutputs run(const fs::Shape& s, const fs::HostProblem& p, const fs::SmyrfParams& c, bool backward,
                 const fs::SmyrfClusters* given = nullptr) {
  fs::DeviceRun r(step07(), p, settings(s, c, given), backward);
  r.forward();
  if (backward) r.backward();
  r.sync();
  SmyrfOutputs out{r.clusters(), r.o(), r.lse(), {}, {}, {}};
  if (backward) {
    out.dq = r.dq();
    out.dk = r.dk();
    out.dv = r.dv();
  }
  return out;
}

std::string name(const fs::Shape& s, const fs::SmyrfParams& c) {
  return "B=" + std::to_string(s.B) + " H=" + std::to_string(s.H) + " N=" + std::to_string(s.N) +
         " d=" + std::to_string(s.d) + " smyrf " + fs::smyrf_spec(c);
}

}  // namespace

TEST_CASE("SMYRF's clusters are a sort of the fp64 hashes, and its outputs and gradients match the fp64 reference "
          "of those clusters",
          "[gpu][smyrf]") {
  const int N = GENERATE(1, 17, 257, 1025);
  const int d = GENERATE(16, 32, 64, 128);
  for (const fs::SmyrfParams& c : {clustering(1, 32, 32), clustering(8, 32, 32), clustering(3, 24, 40),
                                   clustering(2, 100, 70), clustering(4, 64, 64), clustering(2, 256, 256)}) {
    const fs::Shape s{2, N > 512 ? 2 : 3, N, d};
    DYNAMIC_SECTION(name(s, c)) {
      const fs::HostProblem p = fs::random_problem(s, 1000003ull * N + 17ull * d + c.hashes, true);
      const SmyrfOutputs g = run(s, p, c, true);
      require_smyrf_reference(s, p, c, g);
      // The dense reference is another function: SMYRF's outputs fail it once clusters are smaller than N.
      if (N >= 257) {
        const auto dense = fs::verify_forward(s, {fs::default_scale(d)}, p.q.data(), p.k.data(), p.v.data(),
                                              g.o.data(), g.lse.data(), 7);
        REQUIRE_FALSE(dense.pass());
      }
    }
  }
}

TEST_CASE("SMYRF with one cluster of every key is dense attention, forward and backward", "[gpu][smyrf]") {
  const int d = GENERATE(32, 64, 128);
  const int hashes = GENERATE(1, 3);
  const fs::Shape s{1, 3, 200, d};
  const fs::HostProblem p = fs::random_problem(s, 99 + d, true);
  const SmyrfOutputs g = run(s, p, clustering(hashes, 256, 256), true);  // 256 ≥ N: every key in the one cluster
  // Every round sees every key: O is dense attention's, and LSE is dense's + log(hashes).
  std::vector<float> lse = g.lse;
  for (float& x : lse) x -= std::log(float(hashes));
  const fs::AttnOptions dense{fs::default_scale(d)};
  const auto fwd = fs::verify_forward(s, dense, p.q.data(), p.k.data(), p.v.data(), g.o.data(), lse.data(), 3);
  INFO(fwd.summary());
  REQUIRE(fwd.pass());
  const auto bwd = fs::verify_backward(s, dense, p.q.data(), p.k.data(), p.v.data(), p.dout.data(), g.dq.data(),
                                       g.dk.data(), g.dv.data(), 3);
  INFO(bwd.summary());
  REQUIRE(bwd.pass());
}

TEST_CASE("SMYRF is bit-identical over repeats, and clusters given back give the same bits as hashing them",
          "[gpu][smyrf]") {
  const fs::Shape s{2, 2, 777, 64};
  const fs::HostProblem p = fs::random_problem(s, 4, true);
  for (const fs::SmyrfParams& c : {clustering(8, 32, 32), clustering(3, 48, 96)}) {
    DYNAMIC_SECTION(fs::smyrf_spec(c)) {
      const SmyrfOutputs a = run(s, p, c, true);
      for (int repeat = 0; repeat < 3; ++repeat) {
        const SmyrfOutputs b = run(s, p, c, true);
        REQUIRE(b.clusters.q_order == a.clusters.q_order);
        REQUIRE(b.clusters.k_order == a.clusters.k_order);
        for (auto [x, y] : {std::pair{&a.o, &b.o}, std::pair{&a.lse, &b.lse}, std::pair{&a.dq, &b.dq},
                            std::pair{&a.dk, &b.dk}, std::pair{&a.dv, &b.dv}})
          REQUIRE(same_bits(*x, *y));
      }
      const SmyrfOutputs given = run(s, p, c, true, &a.clusters);
      REQUIRE(given.clusters.q_order == a.clusters.q_order);
      for (auto [x, y] : {std::pair{&a.o, &given.o}, std::pair{&a.lse, &given.lse}, std::pair{&a.dq, &given.dq},
                          std::pair{&a.dk, &given.dk}, std::pair{&a.dv, &given.dv}})
        REQUIRE(same_bits(*x, *y));
    }
  }
}

TEST_CASE("a step 07 run checks the order of its clusters and saves them, and --load takes them back",
          "[gpu][smyrf]") {
  const auto dir = std::filesystem::temp_directory_path() / "flashsteps_test_smyrf_gpu";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  fs::Options opt;
  opt.shape = {1, 2, 300, 64};
  opt.smyrf = clustering(4, 32, 32, 1);
  opt.check = opt.backward = true;
  opt.save_dir = dir.string();
  const fs::HostProblem p = fs::random_problem(opt.shape, opt.seed, true);
  const fs::CaseReport first = fs::run_case(fs::RunPlan(step07(), opt), p, fs::testing::test_device());
  REQUIRE(first.pass());
  bool has_order = false;
  for (const auto& t : first.passes.front().check->tensors) has_order = has_order || t.name == "order";
  REQUIRE(has_order);
  REQUIRE(fs::has_smyrf_clusters(dir.string()));
  // The inputs and the clusters from the directory: the same outputs, bit for bit.
  fs::write_npy((dir / "q.npy").string(), p.q.data(), {1, 2, 300, 64});
  fs::write_npy((dir / "k.npy").string(), p.k.data(), {1, 2, 300, 64});
  fs::write_npy((dir / "v.npy").string(), p.v.data(), {1, 2, 300, 64});
  const fs::NpyArray o1 = fs::read_npy((dir / "o.npy").string());
  // As the program does: the shape comes from the loaded arrays, then the plan reads the clusters.
  const fs::HostProblem loaded = fs::load_problem(dir.string(), false);
  fs::Options again;
  again.load_dir = dir.string();
  again.shape = loaded.shape;
  again.check = true;
  const fs::RunPlan plan(step07(), again);
  REQUIRE(plan.given_clusters() != nullptr);
  REQUIRE(plan.settings().smyrf.hashes == 4);  // from clusters.npy
  fs::DeviceRun r(step07(), loaded, plan.settings(), false);
  r.forward();
  r.sync();
  REQUIRE(same_bits(r.o(), o1.data));
  std::filesystem::remove_all(dir);
}

TEST_CASE("a traced step 07 run validates, carries its clusters, names its rows by slots, and changes no output bit",
          "[gpu][smyrf][trace]") {
  // Odd sizes: a short last cluster, unequal query and key clusters, and clusters given back; d = 64,
  // the head dimension whose traced twins are compiled (kTracedHeadDim).
  const fs::Shape s{2, 1, 100, fs::kTracedHeadDim};
  const fs::HostProblem p = fs::random_problem(s, 11, true);
  for (const fs::SmyrfParams& c : {clustering(3, 32, 32), clustering(2, 24, 40)}) {
    for (const bool given : {false, true}) {
      DYNAMIC_SECTION(fs::smyrf_spec(c) << (given ? ", clusters given" : ", hashed")) {
        const SmyrfOutputs plain = run(s, p, c, true);
        const fs::PassSettings set = settings(s, c, given ? &plain.clusters : nullptr);
        fs::DeviceRun r(step07(), p, set, true);
        fs::trace::DeviceSink fwd_sink, bwd_sink;
        fs::nvtx_tool::start();
        r.set_trace(&fwd_sink);
        r.forward();
        r.sync();
        const fs::SmyrfClusters used = r.clusters();
        const auto fwd = fs::build_trace(step07(), s, set, fs::testing::test_device(), "fwd", fwd_sink,
                                         fs::nvtx_tool::stop(), &used);
        fs::nvtx_tool::start();
        r.set_trace(&bwd_sink);
        r.backward();
        r.sync();
        const auto bwd = fs::build_trace(step07(), s, set, fs::testing::test_device(), "bwd", bwd_sink,
                                         fs::nvtx_tool::stop(), &used);
        for (auto [x, y] : {std::pair{r.o(), plain.o}, std::pair{r.lse(), plain.lse}, std::pair{r.dq(), plain.dq},
                            std::pair{r.dk(), plain.dk}, std::pair{r.dv(), plain.dv}})
          REQUIRE(same_bits(x, y));
        REQUIRE(used.q_order == plain.clusters.q_order);
        for (const fs::trace::Trace* t : {&fwd, &bwd}) {
          INFO(t->meta.pass);
          const fs::trace::ValidationReport rep = fs::trace::validate(*t);
          INFO((rep.errors.empty() ? std::string() : rep.errors.front()));
          REQUIRE(rep.ok());
          REQUIRE(t->meta.clusters.hashes == c.hashes);
          REQUIRE(t->meta.clusters.q_order == used.q_order);
          REQUIRE(t->meta.clusters.k_order == used.k_order);
          REQUIRE(!t->meta.untraced.empty());  // the sort or the copy; the memsets
          // Every round's score tiles lie in its clusters: query slots × the cluster's key slots.
          const fs::SmyrfGeometry g = fs::smyrf_geometry(s.N, c);
          int rounds_seen = 0;
          std::vector<bool> seen(c.hashes, false);
          for (const fs::trace::Event& e : t->events) {
            if (e.kind != fs::trace::Kind::ComputeS) continue;
            REQUIRE(e.round >= 0);
            REQUIRE(e.round < c.hashes);
            if (!seen[e.round]) ++rounds_seen, seen[e.round] = true;
            const int cl = e.row0 / c.q_cluster;
            REQUIRE(e.row0 + e.rows <= g.query_end(cl));
            if (t->kernels[t->tracks[e.track].kernel].name == "smyrf_round_dkdv_kernel") {
              // A CTA's key slots against one cluster's queries: the cluster's keys meet them.
              REQUIRE(g.key_begin(cl) < e.col0 + e.cols);
              REQUIRE(e.col0 < g.key_end(cl));
            } else {  // the forward's and the dQ kernel's: inside the cluster's keys
              REQUIRE(e.col0 >= g.key_begin(cl));
              REQUIRE(e.col0 + e.cols <= g.key_end(cl));
            }
          }
          REQUIRE(rounds_seen == c.hashes);
        }
        // The forward's loads: hashing reads Q and K in rows, a given clustering does not hash.
        bool hashed = false;
        for (const fs::trace::Kernel& k : fwd.kernels) hashed = hashed || k.name == "smyrf_hash_kernel";
        REQUIRE(hashed == !given);
      }
    }
  }
}
