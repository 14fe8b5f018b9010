// A run is planned once, before any GPU work: what a step cannot do is refused there, in one
// line, whether or not the machine has a GPU.
#include <catch2/catch.hpp>

#include "common/errors.hpp"
#include "common/plan.hpp"
#include "steps/registry.hpp"

namespace {

fs::Options options(fs::Shape shape) {
  fs::Options opt;
  opt.shape = shape;
  return opt;
}

}  // namespace

TEST_CASE("a plan refuses what its step cannot do, naming the step", "[plan]") {
  fs::Options opt = options({1, 2, 256, 64});
  opt.backward = true;
  REQUIRE_THROWS_WITH(fs::RunPlan(*fs::find_step("04"), opt), Catch::Contains("step 04_online_softmax has no backward"));
  opt.backward = false;
  opt.dropout = 0.1f;
  REQUIRE_THROWS_WITH(fs::RunPlan(*fs::find_step("04"), opt), Catch::Contains("has no dropout"));
  REQUIRE_NOTHROW(fs::RunPlan(*fs::find_step("05"), opt));
  REQUIRE_THROWS_WITH(fs::RunPlan(*fs::find_step("03"), options({1, 1, 256, 48})), Catch::Contains("d must be"));
  REQUIRE_THROWS_WITH(fs::RunPlan(*fs::find_step("03"), options({256, 256, 16, 64})), Catch::Contains("B·H"));
  REQUIRE_THROWS_AS(fs::RunPlan(*fs::find_step("01"), options({1, 0, 16, 64})), fs::InputError);
}

TEST_CASE("a mask whose blocks do not fit the kernels' tiles is refused, naming the tiles", "[plan][sparse]") {
  const fs::StepInfo& step = *fs::find_step("06");
  const fs::BlockMask odd = fs::pattern_dense(256, 48);
  for (int variant : {0, 1}) {
    REQUIRE_THAT(step.refusal({1, 1, 256, 64}, {0.125f, false, variant, {}, &odd}),
                 Catch::Contains("multiples of the kernels' tiles"));
    fs::Options opt = options({1, 1, 256, 64});
    opt.variant = variant;
    opt.block = 48;
    REQUIRE_THROWS_WITH(fs::RunPlan(step, opt), Catch::Contains("try --block 128"));
  }
}

TEST_CASE("a plan builds the block mask once and hands it to every pass", "[plan][sparse]") {
  fs::Options opt = options({1, 1, 1000, 64});
  opt.pattern = "random:0.25";
  const fs::RunPlan plan(*fs::find_step("06"), opt);
  REQUIRE(plan.mask());
  REQUIRE(plan.settings().mask == plan.mask());
  REQUIRE(plan.density() == Approx(plan.mask()->density()));
  REQUIRE(plan.mask_label() == "random:0.25");
  const fs::RunPlan copy = plan;  // a copy's settings point at the copy's own mask
  REQUIRE(copy.settings().mask == copy.mask());
  REQUIRE(copy.io("fwd").total() == plan.io("fwd").total());
  const fs::RunPlan dense(*fs::find_step("04"), options({1, 1, 1000, 64}));
  REQUIRE(!dense.mask());
  REQUIRE(dense.label() == "04_online_softmax/alg1");
  REQUIRE(dense.density() == 1.0);
}

TEST_CASE("a dtype a step has no kernel for is refused, naming the steps that have one", "[plan][dtype]") {
  std::string with16, with32;
  for (const auto& step : fs::all_steps()) {
    if (step.takes(fs::DType::bf16)) with16 += (with16.empty() ? "" : ", ") + step.id.substr(0, 2);
    if (step.takes(fs::DType::fp32)) with32 += (with32.empty() ? "" : ", ") + step.id.substr(0, 2);
  }
  REQUIRE(with16 == fs::kSteps16Bit);  // the messages' lists are the table's
  REQUIRE(with32 == fs::kStepsFp32);
  fs::Options opt = options({1, 1, 64, 64});
  opt.dtype = fs::DType::bf16;
  REQUIRE_THROWS_WITH(fs::RunPlan(*fs::find_step("04"), opt),
                      Catch::Contains("has no bf16 kernel; steps with one: ") && Catch::Contains(fs::kSteps16Bit));
}
