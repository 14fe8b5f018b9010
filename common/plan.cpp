#include "common/plan.hpp"

#include <filesystem>

#include "common/errors.hpp"
#include "common/harness.hpp"

namespace fs {

namespace {

// The block mask `opt` asks a block-sparse step for: --mask FILE, else --pattern, over blocks
// of --block elements (default: the step's). Throws InputError on a bad mask or pattern.
BlockMask block_mask_for(const StepInfo& step, const Options& opt) {
  const int block = opt.block ? opt.block : step.mask_block(opt.shape.d);
  if (!opt.mask_path.empty()) return read_block_mask(opt.mask_path, opt.shape.N, block, block);
  return make_pattern(opt.pattern, opt.shape.N, block, opt.seed);
}

}  // namespace

void check_features(const StepInfo& step, const Options& opt) {
  validate_shape(opt.shape);
  const std::string who = "step " + step.id;
  if (opt.backward && !step.backward) throw InputError(who + " has no backward pass");
  if (opt.dropout > 0.f && !step.dropout) throw InputError(who + " has no dropout");
  if (!step.takes(opt.dtype))
    throw InputError(who + " has no " + dtype_name(opt.dtype) + " kernel; steps with one: " +
                     (is_16bit(opt.dtype) ? kSteps16Bit : kStepsFp32));
}

RunPlan::RunPlan(const StepInfo& step, const Options& opt) : step_(&step), opt_(opt) {
  check_features(step, opt_);
  const std::string who = "step " + step.id;
  if (step.block_sparse) mask_ = block_mask_for(step, opt_);
  if (std::string why = step.refusal(opt_.shape, settings()); !why.empty()) throw InputError(who + ": " + why);
}

PassSettings RunPlan::settings() const {
  return {opt_.effective_scale(), opt_.causal, opt_.variant, opt_.effective_dropout(), mask(), opt_.dtype};
}

std::string RunPlan::mask_label() const {
  if (!mask_) return {};
  return opt_.mask_path.empty() ? opt_.pattern : std::filesystem::path(opt_.mask_path).filename().string();
}

IoCount RunPlan::io(const std::string& pass) const { return pass_io(*step_, opt_.shape, settings(), pass); }

}  // namespace fs
