// Step 02: kernel fusion. S is computed, masked and normalised on chip; only P reaches HBM.
#pragma once

#include "common/problem.hpp"

namespace fs {

void fused_forward(const FwdParams& p);   // P, LSE in one kernel; O = PV as step 01
void fused_backward(const BwdParams& p);  // dP, D, dS in one kernel; the rest as step 01

// The longest sequence whose rows of S fit in `smem_bytes` of shared memory (with one row of
// Q beside each): where fusion stops.
int fused_max_seq(int d, std::size_t smem_bytes);
// The query rows R one scores_softmax_kernel CTA holds at sequence length N (0: none fit).
int fused_rows_per_cta(int N, int d, std::size_t smem_bytes);

StepInfo step02_info();

}  // namespace fs
