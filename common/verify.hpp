// Checking a kernel's outputs against the fp64 reference (DESIGN.md, "Numbers and checks").
//
// The rule, after FlashAttention's own tests: for each output tensor,
//     max |kernel − fp64|  ≤  factor · max |fp32 CPU − fp64|  +  floor · max(1, max |fp64|)
// with factor 2 for the forward (O, LSE) and 3 for the gradients (dQ, dK, dV). A NaN or an
// infinity where the reference is finite never passes.
//
// A 16-bit output (O and the gradients of a bf16 or fp16 run) has one more term in its floor:
// one unit in the last place of the dtype at max |fp64|. The CPU version rounds its output
// too, but where the exact value lies near a rounding boundary the two round to neighbours on
// any difference in fp32 at all, and the CPU's own error can be 0 there by luck (a one-hot
// softmax makes O a row of V: exact). FlashAttention's tests allow the same, an output
// rounding step ("out_ref + 0.3 - 0.3 - out_ref") on top of twice PyTorch's error.
//
// FP8 (AttnOptions::e4m3: the kernels rounded Q, K, V to e4m3 per block of rows, common/e4m3.hpp).
// The reference is that of the rounded inputs — what the kernel multiplied. The yardstick is not
// plain fp32 there: the FP8 tensor core adds S's products with fewer bits than an fp32 FMA keeps
// (on the H200, bits more than 13 below the largest term of a k32 instruction are lost), an error
// fp32 would not show. So the float implementation adds S's products as the tensor core does
// (common/e4m3.hpp's model, kE4m3MmaBits; test_hopper_gpu measures the GPU's adder against it), and
// O and LSE are held to the rule above with that yardstick. O has one more rounding the reference
// has not: P̃ to e4m3 before P̃V, by at most 2⁻⁴ of each P̃ (2⁻¹⁰ absolute below e4m3's normal
// range), while ℓ sums the unrounded P̃, and ℓ ≥ 2⁸ (the P̃ of a row's largest score is at least
// 2⁸). So |ΔO| ≤ Σ_j |ΔP̃_j| |v_j| / ℓ ≤ (2⁻⁴ + N_k·2⁻¹⁸) · max |V|, added to O's tolerance. (Where
// V's block scale is folded into P̃, as step 09's lazy softmax does, P̃ is multiplied by an r ≤ 1
// before it is rounded and v_j is in units 1/r times larger: the bound is the same.) A bound for the worst case, not a model of
// the typical error: the tests also run problems where a wrong kernel errs by far more than it
// (tests/test_hopper_emulated.cpp). The error against the reference of the given inputs, which
// quantization adds to, is reported beside it ("O(in)"), not judged.
//
// The floor covers what the fp32 CPU error cannot see: where the CPU sums two quantities in
// the same order it can cancel them exactly, while a kernel summing in another order cannot.
// The backward's dS = P ∘ (dP − D) is such a case: at N = 1, dP = dO·v and D = dO·o are the
// same number, the CPU's error is 0, and any other order leaves ~d·u·|dO||v| ≈ 1e-6. Large problems are checked on a
// sample of rows (forward) or heads and rows (backward), and the report says how many. With packed
// sequences (AttnOptions::cu_seqlens_q/k) a sample holds every sequence's first and last row
// beside its random ones (forward: in head b mod H; backward: of Q and of K, V in every head checked).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/problem.hpp"
#include "common/reference.hpp"
#include "common/smyrf.hpp"

namespace fs {

// Max absolute difference of `got` against `ref`, counting elements that are not finite
// where the reference is (equal infinities, e.g. the LSE of a fully masked row, agree).
struct ErrorStat {
  double max_abs = 0;
  std::int64_t bad = 0;    // NaN, or infinite where the reference is not
  std::int64_t count = 0;
  double ref_max_abs = 0;  // largest finite |ref|: the floor scales with it
  void add(double got, double ref);
};

struct TensorCheck {
  std::string name;      // "O", "LSE", "dQ", ...
  double err = 0;        // the kernel's max abs error against fp64
  double err_fp32 = 0;   // the plain float32 CPU implementation's
  double tol = 0;        // factor · err_fp32 + floor · max(1, max |ref|)
  std::int64_t bad = 0;  // non-finite where the reference is finite
  // false: a check that is no error against fp64 values (SMYRF's "order": the worst pair of
  // neighbouring slots out of order, as a fraction of what float sort keys allow), which
  // max_err() leaves out.
  bool values = true;
  // false: an error reported (and in max_err()) but held to no tolerance (FP8's O(in)).
  bool judged = true;
  // What err_fp32 is the error of, as the summary names it: fp32, or (FP8) fp32 adding S's
  // products as the FP8 tensor core does.
  std::string yardstick = "fp32 CPU";
  bool pass() const { return !judged || (bad == 0 && err <= tol); }
};

struct CheckReport {
  std::vector<TensorCheck> tensors;
  std::string coverage;  // "all 6144 rows" / "512 of 2097152 rows (sampled)"
  bool pass() const;
  double max_err() const;  // over the value checks: the outputs' largest error against fp64
  std::string summary() const;  // one line per tensor
};

constexpr double kForwardFactor = 2.0;
constexpr double kBackwardFactor = 3.0;
constexpr double kForwardFloor = 1e-6;
constexpr double kBackwardFloor = 1e-5;

TensorCheck judge(const std::string& name, const ErrorStat& kernel, const ErrorStat& fp32,
                  double factor, double floor, DType output = DType::fp32);

// SMYRF: the clusters a GPU made (smyrf_check_orders) as a line of the report, "order": its err
// is how far the orders stray from a sort of the fp64 hashes, as a fraction of what float keys
// allow (tolerance 1); an order that is no permutation is `bad`.
TensorCheck judge_orders(const OrderCheck& c);

// Budgets in multiply-adds of the reference, so a check takes seconds at any size.
constexpr std::int64_t kForwardCheckBudget = std::int64_t(1) << 31;
constexpr std::int64_t kBackwardCheckBudget = std::int64_t(1) << 33;

// o, lse: the kernel's full outputs, copied to the host.
CheckReport verify_forward(const Shape& s, const AttnOptions& opt, const float* q,
                           const float* k, const float* v, const float* o, const float* lse,
                           std::uint64_t seed, std::int64_t budget = kForwardCheckBudget);

CheckReport verify_backward(const Shape& s, const AttnOptions& opt, const float* q,
                            const float* k, const float* v, const float* dout, const float* dq,
                            const float* dk, const float* dv, std::uint64_t seed,
                            std::int64_t budget = kBackwardCheckBudget);

}  // namespace fs
