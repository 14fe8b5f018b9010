// Step 08's forward kernels compiled for the CPU emulation (common/emulator), at one element type
// and head dimension: tests/CMakeLists.txt compiles this file once for each the emulated tests
// (test_tc_emulated*.cpp) run, FS_TC_EMULATED_E and FS_TC_EMULATED_D naming them, so that no unit
// takes long and a change to the backward leaves these units as they are.
#include "common/emulator/emulator.hpp"  // first: it defines threadIdx, __syncthreads, ... for the kernels

#include <type_traits>

#include "steps/08_tensor_cores/flash_tc_forward.cuh"
#include "steps/08_tensor_cores/flash_tc_forward_f32.cuh"
#include "steps/08_tensor_cores/forward_configs.cuh"
#include "steps/08_tensor_cores/forward_launch.cuh"
#include "common/problem.hpp"

namespace fs::testing {

// Declared in tests/tc_emulated.hpp, which the tests include.
template <typename E, int D>
void tc_emulated_forward(const FwdParams& p, int passes) {
  if constexpr (std::is_same_v<E, float>)
    tc::tc_forward_f32_dispatch<D>(p, passes);
  else
    tc::tc_forward_dispatch<E, D>(p);
}
template void tc_emulated_forward<FS_TC_EMULATED_E, FS_TC_EMULATED_D>(const FwdParams&, int);

}  // namespace fs::testing
