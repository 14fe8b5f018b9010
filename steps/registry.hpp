// The table of steps: every step this build has (CMake's FS_STEPS; all by default), in order.
// The tour, the GPU tests and the benchmarks iterate over this instead of naming steps one by one.
#pragma once

#include <string>
#include <vector>

#include "common/problem.hpp"

namespace fs {

const std::vector<StepInfo>& all_steps();

// The step whose id is `id` ("01_naive") or whose number is `id` ("01", "1"); nullptr if none.
const StepInfo* find_step(const std::string& id);

}  // namespace fs
