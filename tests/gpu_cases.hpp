// The GPU tests' cases: every step × kernel variant of the table of steps that runs a shape
// on this device, so that a new step is tested by adding it to steps/registry.cpp.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "common/device.hpp"
#include "common/problem.hpp"
#include "steps/registry.hpp"

namespace fs::testing {

struct Case {
  const StepInfo* step;
  int variant;
  Shape shape;
  bool causal;
  DType dtype = DType::fp32;
  std::string name() const {
    std::ostringstream out;
    out << step->id << "/" << step->variants[variant] << " B=" << shape.B << " H=" << shape.H
        << " N=" << shape.N << " d=" << shape.d << (causal ? " causal" : "");
    if (dtype != DType::fp32) out << " " << dtype_name(dtype);
    return out.str();
  }
  PassSettings settings(Dropout dropout = {}) const {
    return {default_scale(shape.d), causal, variant, dropout, nullptr, dtype};
  }
  // The variant's backward adds dQ with atomics: not bit-identical run to run.
  bool order_dependent() const {
    for (const auto& v : step->order_dependent)
      if (v == step->variants[variant]) return true;
    return false;
  }
  // Fresh inputs for every case: a seed from everything that names it.
  std::uint64_t seed() const {
    return 1000003ull * shape.N + 1009ull * shape.d + 17ull * variant + (causal ? 7 : 0) + step->id[1] +
           131ull * static_cast<int>(dtype);
  }
};

inline const DeviceInfo& test_device() {
  static const DeviceInfo dev = query_device();
  return dev;
}

// Steps × variants of exact attention that support shape `s` in `dtype` (with a backward, if asked).
// FS_TEST_STEPS="04 08" (environment): only the steps whose id starts with one of these, for a
// quicker run while working on one step; unset, every step.
inline const char* test_steps_filter() {
  const char* only = std::getenv("FS_TEST_STEPS");
  return only && *only ? only : nullptr;
}
inline bool step_selected(const StepInfo& step) {
  const char* only = test_steps_filter();
  if (!only) return true;
  std::istringstream in(only);
  for (std::string prefix; in >> prefix;)
    if (step.id.rfind(prefix, 0) == 0) return true;
  return false;
}
// A test that needs some case (the step it names is always there): true when it has one, or when
// FS_TEST_STEPS has left that step out.
inline bool has_cases_or_filtered(const std::vector<Case>& cases) { return !cases.empty() || test_steps_filter(); }

inline std::vector<Case> cases_for(const Shape& s, bool causal, bool need_backward = false, DType dtype = DType::fp32) {
  std::vector<Case> out;
  for (const auto& step : all_steps()) {
    if (!step.takes(dtype) || !step_selected(step)) continue;
    if (step.clustered) continue;  // approximate attention: tests/test_smyrf_gpu.cpp
    for (int v = 0; v < static_cast<int>(step.variants.size()); ++v) {
      if (step.rounds_to_e4m3(v)) continue;  // FP8's rule: tests/test_hopper_gpu.cpp
      const Case c{&step, v, s, causal, dtype};
      if (need_backward ? step.backward_refusal(s, c.settings()).empty() : step.refusal(s, c.settings()).empty()) out.push_back(c);
    }
  }
  return out;
}

// The cases of the steps that have a feature (&StepInfo::dropout, &StepInfo::block_sparse).
inline std::vector<Case> cases_with(bool StepInfo::*feature, const Shape& s, bool causal) {
  std::vector<Case> out;
  for (const Case& c : cases_for(s, causal, true))
    if (c.step->*feature) out.push_back(c);
  return out;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace fs::testing
