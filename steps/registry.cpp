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

const std::vector<StepInfo>& all_steps() {
  static const std::vector<StepInfo> steps = {step01_info(), step02_info(), step03_info(), step04_info(), step05_info(),
                                                step06_info(), step07_info(), step08_info(), step09_info()};
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
