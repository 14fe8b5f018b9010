#include "steps/registry.hpp"

#include "steps/01_naive/naive.hpp"

namespace fs {

const std::vector<StepInfo>& all_steps() {
  static const std::vector<StepInfo> steps = {step01_info()};
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
