// Step 08's launchers, declared, and how a run picks their template arguments. One launcher per
// kernel family, for one configuration (its traits), dropout on or off and one policy of
// FlashAttention's features; each launches its kernel causal or not, traced where a trace is
// compiled (trace::kTracedAt). The dispatch (forward_configs.cuh, backward_configs.cuh) names the
// instantiations a variant runs; the translation units CMakeLists.txt generates from
// instances.cu.in compile them, a few to a unit, from the definitions (forward_launch.cuh,
// backward_launch.cuh), which the emulated tests include themselves. Nothing here compiles a
// kernel: a unit that dispatches includes this header alone.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "common/flash_features.cuh"
#include "common/problem.hpp"
#include "common/tile_policies.cuh"
#include "steps/08_tensor_cores/head_dims.hpp"

namespace fs::tc {

// What every kernel's traits start from: a named configuration Cfg (its fields; kWarps among them)
// at element type E and head dimension D, launched by Family's kernel.
template <typename E_, int D_, class Cfg, class Family_>
struct KernelTraits : Cfg {
  using E = E_;
  using Family = Family_;
  static constexpr int D = D_;
  static constexpr int kThreads = 32 * Cfg::kWarps;
};

// The kernels' traits: what a named configuration (forward_configs.cuh, backward_configs.cuh)
// implies at an element type and head dimension. Each is defined beside its kernel.
template <typename E, int D, class Cfg>
struct FwdTraits;  // tc_forward_kernel (flash_tc_forward.cuh)
template <int D, class Cfg, int kPasses>
struct F32Traits;  // tc_forward_f32_kernel (flash_tc_forward_f32.cuh)
template <typename E, int D, class Cfg>
struct DkdvTraits;  // tc_dkdv_kernel (tc_dkdv_kernel.cuh)
template <typename E, int D, class Cfg>
struct DkdvSmemTraits;  // tc_dkdv_smem_kernel (flash_tc_backward.cuh)
template <int D, class Cfg>
struct DkdvF32Traits;  // tc_dkdv_f32_kernel (flash_tc_backward_f32.cuh)
template <typename E, int D, class Cfg>
struct DqTraits;  // tc_dq_kernel (tc_dq_kernel.cuh)

// The forward of kernel traits Kt (FwdTraits or F32Traits).
template <class Kt, bool kDropout, class Features>
void launch_tc_forward(const FwdParams& p);
// The backward's dK/dV kernel of traits Kt (DkdvTraits, DkdvSmemTraits or DkdvF32Traits), adding
// dQ's share to dq_acc (kAtomicDQ) or not; delta: the preprocess's D and LSE (the workspace).
template <class Kt, bool kDropout, bool kAtomicDQ, class Features>
void launch_tc_dkdv(const BwdParams& p, const float* delta, float* dq_acc);
// The deterministic dQ kernel of traits Kt (DqTraits).
template <class Kt, bool kDropout, class Features>
void launch_tc_dq(const BwdParams& p, const float* delta);
// The backward's first and last kernels (preprocess_convert.cuh), for element type E; kTraced:
// their traced twins compiled, where the dK/dV kernel's are (trace::kTracedAt).
template <typename E, bool kZeroDQ, bool kTraced>
void launch_tc_bwd_preprocess(const BwdParams& p, float* delta, float* dq_acc);
template <typename E, bool kTraced>
void launch_tc_dq_convert(const BwdParams& p, const float* dq_acc);

// kDropout of a configuration compiled without dropout (the ladder's rungs).
inline constexpr bool kNoDropout = false;

// f(std::bool_constant<on>{}): a body compiled for each value, the branch taken at run time (causal
// or not, dropout or not, ...).
template <typename F>
void with_bool(bool on, F&& f) {
  if (on)
    f(std::true_type{});
  else
    f(std::false_type{});
}

// FlashAttention's features, as steps 04/05 choose them: f(FlashFeatures*) with a softcap,
// f(FlashFeaturesNoCap*) for the others (a window, ALiBi, Nk ≠ N, grouped K/V heads, packed
// sequences, a head dimension not compiled: tc_compiled_head_dim), else f(NoFeatures*).
template <typename F>
void with_features(const ScoreMods& mods, const Shape& s, const Packed& packed, F&& f) {
  if (mods.softcap > 0.f)
    f(static_cast<FlashFeatures*>(nullptr));
  else if (mods.on() || !s.square() || packed.on() || !is_tc_head_dim(s.d))
    f(static_cast<FlashFeaturesNoCap*>(nullptr));
  else
    f(static_cast<NoFeatures*>(nullptr));
}

// f(dropout, features): both of the above, for the variants compiled with every feature.
template <class Params, typename F>
void with_dropout_and_features(const Params& p, F&& f) {
  with_bool(p.dropout.on(), [&](auto dropout) {
    with_features(p.mods, p.shape, p.packed, [&](auto* features) { f(dropout, features); });
  });
}

// f(E*, std::integral_constant<int, D>{}) at a run's element type E (bf16, fp16; float for fp32) and
// head dimension D (32, 64, 96, 128, 256: the one compiled for d, tc_compiled_head_dim): the
// dispatch's template arguments from a run's values.
template <class Params, typename F>
void with_element_and_dim(const Params& p, F&& f) {
  const auto at = [&](auto* e) {
    switch (tc_compiled_head_dim(p.shape.d)) {
      case 32: return f(e, std::integral_constant<int, 32>{});
      case 64: return f(e, std::integral_constant<int, 64>{});
      case 96: return f(e, std::integral_constant<int, 96>{});
      case 128: return f(e, std::integral_constant<int, 128>{});
      default: return f(e, std::integral_constant<int, 256>{});
    }
  };
  if (p.dtype == DType::bf16)
    at(static_cast<__nv_bfloat16*>(nullptr));
  else if (p.dtype == DType::fp16)
    at(static_cast<__half*>(nullptr));
  else
    at(static_cast<float*>(nullptr));
}

// The policy type behind with_features' pointer.
template <typename P>
using FeaturesOf = std::remove_pointer_t<P>;

}  // namespace fs::tc
