// The IO model's counts against hand counts at small shapes.
#include <catch2/catch.hpp>

#include "common/io_model.hpp"
#include "steps/registry.hpp"

TEST_CASE("standard attention forward: 3Nd + 2N² floats read, 2N² + Nd + N written, per head", "[io]") {
  // N = 2, d = 3: reads Q, K (12) + S (4) + P (4) + V (6) = 26 floats; writes S, P (8) + LSE (2) + O (6) = 16.
  const fs::IoCount one = fs::io_standard_forward({1, 1, 2, 3});
  REQUIRE(one.read_bytes == 26 * 4);
  REQUIRE(one.write_bytes == 16 * 4);
  const fs::IoCount six = fs::io_standard_forward({2, 3, 2, 3});
  REQUIRE(six.read_bytes == 6 * one.read_bytes);
  REQUIRE(six.write_bytes == 6 * one.write_bytes);
}

TEST_CASE("standard attention backward: 5N² + 7Nd + N read, 2N² + 3Nd + N written, per head", "[io]") {
  // N = 2, d = 3: reads 5·4 + 7·6 + 2 = 64 floats; writes 2·4 + 3·6 + 2 = 28.
  const fs::IoCount io = fs::io_standard_backward({1, 1, 2, 3});
  REQUIRE(io.read_bytes == 64 * 4);
  REQUIRE(io.write_bytes == 28 * 4);
}

TEST_CASE("the N² term dominates standard attention at long sequences", "[io]") {
  const fs::IoCount io = fs::io_standard_forward({1, 1, 4096, 64});
  const double n2_bytes = 4.0 * 4096.0 * 4096.0 * 4;  // S and P, each written and read once
  REQUIRE(double(io.total()) == Approx(n2_bytes).epsilon(0.07));
}

TEST_CASE("every step's IO model is wired into the table of steps", "[io]") {
  for (const auto& step : fs::all_steps()) {
    INFO(step.id);
    REQUIRE(step.io_forward({1, 1, 64, 64}, false, 0).total() > 0);
    if (step.backward) REQUIRE(step.io_backward({1, 1, 64, 64}, false, 0).total() > 0);
  }
}
