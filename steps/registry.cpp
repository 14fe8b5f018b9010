#include "steps/registry.hpp"

#include "steps/01_naive/naive.hpp"
#include "steps/02_fused/fused.hpp"
#include "steps/03_tiled/tiled.hpp"
#include "steps/04_online_softmax/flash.hpp"
#include "steps/05_recompute_backward/backward.hpp"
#include "steps/06_block_sparse/block_sparse.hpp"
#include "steps/07_smyrf/smyrf.hpp"
#include "steps/08_tensor_cores/tensor_cores.hpp"
#include "steps/09_hopper/hopper.hpp"

namespace fs {

// The steps this build has (CMake's FS_STEPS chooses them; all by default), in order.
const std::vector<StepInfo>& all_steps() {
  static const std::vector<StepInfo> steps = {
#ifdef FS_WITH_STEP_01
      step01_info(),
#endif
#ifdef FS_WITH_STEP_02
      step02_info(),
#endif
#ifdef FS_WITH_STEP_03
      step03_info(),
#endif
#ifdef FS_WITH_STEP_04
      step04_info(),
#endif
#ifdef FS_WITH_STEP_05
      step05_info(),
#endif
#ifdef FS_WITH_STEP_06
      step06_info(),
#endif
#ifdef FS_WITH_STEP_07
      step07_info(),
#endif
#ifdef FS_WITH_STEP_08
      step08_info(),
#endif
#ifdef FS_WITH_STEP_09
      step09_info(),
#endif
  };
  return steps;
}

const StepInfo* find_step(const std::string& id) {
  for (const auto& s : all_steps()) {
    const std::string number = s.id.substr(0, s.id.find('_'));
    if (s.id == id || number == id || (id.size() == 1 && number == "0" + id)) return &s;
  }
  return nullptr;
}

}  // namespace fs
