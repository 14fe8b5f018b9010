// Step 06 (and any block-sparse step): forward and backward against the fp64 reference with
// the same block mask, for every pattern, odd N, several d, causal on and off, dropout; an
// all-ones mask gives step 05's outputs bit for bit; rows and columns the mask empties.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>

#include "common/block_mask.hpp"
#include "common/driver.hpp"
#include "common/npy.hpp"
#include "common/harness.hpp"
#include "common/verify.hpp"
#include "steps/registry.hpp"
#include "tests/gpu_cases.hpp"

using fs::testing::Case;
using fs::testing::cases_for;
using fs::testing::same_bits;

namespace {

std::vector<Case> sparse_cases(const fs::Shape& s, bool causal) {
  return fs::testing::cases_with(&fs::StepInfo::block_sparse, s, causal);
}

fs::BlockMaskView view_of(const fs::BlockMask& m) { return {m.dense.data(), m.block_r, m.block_c, m.Tc}; }


}  // namespace

TEST_CASE("block-sparse forward and backward match the reference with the same mask", "[gpu][sparse]") {
  const int N = GENERATE(300, 1025);
  const int d = GENERATE(16, 32, 64, 128);
  const bool causal = GENERATE(false, true);
  const std::string spec = GENERATE("local:1", "global:1,0", "butterfly", "random:0.4", "causal", "butterfly:1");
  const float p_drop = spec == "random:0.4" ? 0.2f : 0.f;  // one pattern with dropout too
  const fs::Shape shape{2, 2, N, d};
  const auto cases = sparse_cases(shape, causal);
  REQUIRE(fs::testing::has_cases_or_filtered(cases));
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.name() << " " << spec) {
      const fs::BlockMask mask = fs::make_pattern(spec, N, c.step->mask_block(d), c.seed());
      const fs::HostProblem p = fs::random_problem(shape, c.seed(), true);
      const fs::Dropout drop{p_drop, 7};
      fs::DeviceRun run(*c.step, p, {fs::default_scale(d), causal, c.variant, drop, &mask}, true);
      run.forward();
      run.backward();
      run.sync();
      const fs::BlockMaskView view = view_of(mask);
      const fs::AttnOptions opt{fs::default_scale(d), causal, drop, &view};
      const auto o = run.o(), lse = run.lse();
      const auto fwd = fs::verify_forward(shape, opt, p.q.data(), p.k.data(), p.v.data(), o.data(), lse.data(), c.seed());
      INFO(fs::describe(mask) << "\n" << fwd.summary());
      REQUIRE(fwd.pass());
      const auto dq = run.dq(), dk = run.dk(), dv = run.dv();
      const auto bwd = fs::verify_backward(shape, opt, p.q.data(), p.k.data(), p.v.data(), p.dout.data(), dq.data(),
                                           dk.data(), dv.data(), c.seed());
      INFO(bwd.summary());
      REQUIRE(bwd.pass());
      if (!causal && mask.density() < 1) {  // the mask matters: against dense attention the outputs fail
        const auto dense = fs::verify_forward(shape, {fs::default_scale(d), causal, drop}, p.q.data(), p.k.data(),
                                              p.v.data(), o.data(), lse.data(), c.seed());
        REQUIRE_FALSE(dense.pass());
      }
    }
  }
}

TEST_CASE("an all-ones mask gives step 05's outputs bit for bit", "[gpu][sparse]") {
  const fs::StepInfo* dense = fs::find_step("05");
  REQUIRE(dense);
  const int N = GENERATE(300, 1024);
  const bool causal = GENERATE(false, true);
  const fs::Shape shape{2, 3, N, 64};
  for (const Case& c : sparse_cases(shape, causal)) {
    DYNAMIC_SECTION(c.name()) {
      const fs::HostProblem p = fs::random_problem(shape, c.seed(), true);
      const fs::BlockMask ones = fs::pattern_dense(N, c.step->mask_block(64));
      const fs::Dropout drop{0.1f, 3};
      fs::DeviceRun sparse(*c.step, p, {fs::default_scale(64), causal, c.variant, drop, &ones}, true);
      fs::DeviceRun full(*dense, p, {fs::default_scale(64), causal, c.variant, drop}, true);
      for (auto* r : {&sparse, &full}) {
        r->forward();
        r->backward();
        r->sync();
      }
      REQUIRE(same_bits(sparse.o(), full.o()));
      REQUIRE(same_bits(sparse.lse(), full.lse()));
      REQUIRE(same_bits(sparse.dk(), full.dk()));
      REQUIRE(same_bits(sparse.dv(), full.dv()));
      if (!c.order_dependent()) REQUIRE(same_bits(sparse.dq(), full.dq()));
    }
  }
}

TEST_CASE("rows and columns the mask leaves empty get O = 0, LSE = -inf and zero gradients", "[gpu][sparse]") {
  const bool causal = GENERATE(false, true);
  const int N = 700;  // 6 × 6 blocks of 128, the last one cut at 700
  const fs::Shape shape{2, 2, N, 64};
  for (const Case& c : sparse_cases(shape, causal)) {
    DYNAMIC_SECTION(c.name()) {
      fs::BlockMask mask = fs::make_pattern("random:0.5", N, 128, 11);
      for (int j = 0; j < mask.Tc; ++j) mask.set(2, j, false);  // block row 2: queries 256..383 see nothing
      for (int i = 0; i < mask.Tr; ++i) mask.set(i, 4, false);  // block column 4: keys 512..639 seen by none
      mask.set(0, 0, true);
      const fs::HostProblem p = fs::random_problem(shape, c.seed(), true);
      fs::DeviceRun run(*c.step, p, {fs::default_scale(64), causal, c.variant, {}, &mask}, true);
      run.forward();
      run.backward();
      run.sync();
      const auto o = run.o(), lse = run.lse(), dq = run.dq(), dk = run.dk(), dv = run.dv();
      for (std::int64_t bh = 0; bh < shape.heads(); ++bh)
        for (int i = 256; i < 384; ++i) {
          const std::int64_t r = bh * N + i;
          INFO("head " << bh << " query " << i);
          REQUIRE(lse[r] == -std::numeric_limits<float>::infinity());
          for (int x = 0; x < 64; ++x) {
            REQUIRE(o[r * 64 + x] == 0.f);
            REQUIRE(dq[r * 64 + x] == 0.f);
          }
        }
      for (std::int64_t bh = 0; bh < shape.heads(); ++bh)
        for (int j = 512; j < 640; ++j)
          for (int x = 0; x < 64; ++x) {
            INFO("head " << bh << " key " << j);
            REQUIRE(dk[(bh * N + j) * 64 + x] == 0.f);
            REQUIRE(dv[(bh * N + j) * 64 + x] == 0.f);
          }
      const fs::BlockMaskView view = view_of(mask);
      const auto r = fs::verify_backward(shape, {fs::default_scale(64), causal, {}, &view}, p.q.data(), p.k.data(),
                                         p.v.data(), p.dout.data(), dq.data(), dk.data(), dv.data(), c.seed());
      INFO(r.summary());
      REQUIRE(r.pass());
    }
  }
}

TEST_CASE("saving writes the mask a run used, and that mask file runs it again to the same outputs", "[gpu][sparse]") {
  const fs::StepInfo* step = fs::find_step("06");
  REQUIRE(step);
  const std::string dir = (std::filesystem::temp_directory_path() / "flashsteps_mask_save").string();
  std::filesystem::remove_all(dir);
  fs::Options opt;
  opt.shape = {1, 2, 1000, 64};
  opt.pattern = "random:0.3";
  opt.backward = true;
  opt.check = true;
  opt.save_dir = dir;
  const fs::HostProblem p = fs::random_problem(opt.shape, opt.seed, true);
  const auto first = fs::run_case(fs::RunPlan(*step, opt), p, fs::testing::test_device());
  REQUIRE(first.pass());
  const fs::BlockMask used = fs::make_pattern("random:0.3", 1000, 128, opt.seed);
  REQUIRE(fs::read_block_mask(dir + "/mask.npy", 1000, 128, 128) == used);
  const auto o_first = fs::read_npy(dir + "/o.npy").data;

  fs::Options again = opt;
  again.pattern = "dense";  // overridden by the file
  again.mask_path = dir + "/mask.npy";
  again.save_dir = dir + "/again";
  REQUIRE(fs::run_case(fs::RunPlan(*step, again), p, fs::testing::test_device()).pass());
  REQUIRE(fs::read_npy(dir + "/again/o.npy").data == o_first);
  std::filesystem::remove_all(dir);
}
