// What the launchers check of packed sequences (FwdParams/BwdParams::packed, common/problem.hpp)
// before a launch: step 04's forward (flash2_forward.cuh), step 05's backward (backward.cuh) and
// step 08's (tensor_cores.cu).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "common/check.hpp"

namespace fs {

// Packed sequences (FwdParams/BwdParams::packed) as the kernels take them: through Features that
// read a CTA's span (FlashFeatures), one batch of tokens, the sequences in grid z, not traced.
// Throws CudaError (invalid value) otherwise; `who` names the launcher.
template <class Features, class Params>
void require_packable(const Params& p, const char* who) {
  if (!p.packed.on()) return;
  const char* why = nullptr;
  if (!Features::kSequences) why = "packed sequences need the FlashFeatures kernels";
  else if (p.shape.B != 1) why = "packed sequences are one batch of tokens (B = 1)";
  else if (!p.packed.cu_q || !p.packed.cu_k || p.packed.max_q < 0 || p.packed.max_k < 0)
    why = "packed sequences need cu_q and cu_k, and max_q, max_k >= 0";
  else if (p.packed.count > 65535) why = "at most 65535 packed sequences (grid z)";
  else if (p.trace) why = "traces are not recorded for packed sequences";
  if (why) throw CudaError(cudaErrorInvalidValue, std::string(who) + ": " + why);
}

}  // namespace fs
