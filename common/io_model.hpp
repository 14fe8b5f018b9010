// The IO model: HBM bytes a step's algorithm moves for a shape, counting each kernel's
// compulsory traffic (every input it reads once, every output it writes once). It is the
// count of the FlashAttention paper's analysis (ALGORITHMS.md: Theorem 2, Theorem 5,
// Proposition 4) with the constants of our kernels; Nsight Compute's dram__bytes measures
// what actually reached DRAM, and the lessons put the two side by side.
#pragma once

#include "common/problem.hpp"

namespace fs {

// Standard attention (Algorithm 0) as step 01 runs it, per head, in floats:
//   S = τQKᵀ       reads Q, K (2Nd)       writes S (N²)
//   P = softmax(S) reads S (N²)           writes P (N²), LSE (N)
//   O = PV         reads P (N²), V (Nd)   writes O (Nd)
// Θ(Nd + N²): reads 3Nd + 2N², writes 2N² + Nd + N. The causal mask changes nothing here:
// the naive kernels write every masked entry too.
IoCount io_standard_forward(const Shape& s);

// Standard attention backward (Algorithm 3, with D = rowsum(dO ∘ O)), per head, in floats:
//   dV = Pᵀ dO          reads P (N²), dO (Nd)          writes dV (Nd)
//   dP = dO Vᵀ          reads dO, V (2Nd)              writes dP (N²)
//   D = rowsum(dO ∘ O)  reads dO, O (2Nd)              writes D (N)
//   dS = P ∘ (dP − D)   reads P, dP (2N²), D (N)       writes dS (N²)
//   dQ = τ dS K         reads dS (N²), K (Nd)          writes dQ (Nd)
//   dK = τ dSᵀ Q        reads dS (N²), Q (Nd)          writes dK (Nd)
// reads 5N² + 7Nd + N, writes 2N² + 3Nd + N.
IoCount io_standard_backward(const Shape& s);

}  // namespace fs
