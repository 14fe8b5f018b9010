// Step 01: standard attention (Algorithm 0), forward and backward, every N×N matrix in HBM.
#pragma once

#include "common/problem.hpp"

namespace fs {

void naive_forward(const FwdParams& p);   // S, P to the forward workspace; O, LSE
void naive_backward(const BwdParams& p);  // reads P from the forward workspace

StepInfo step01_info();

}  // namespace fs
