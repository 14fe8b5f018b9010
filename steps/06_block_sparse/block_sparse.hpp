// Step 06: block-sparse FlashAttention — the forward and the recomputation backward of steps
// 04–05, visiting only the (query block, key block) tiles a block mask keeps (docs/notation.md,
// Algorithm 5, Proposition 4).
#pragma once

#include "common/block_mask.hpp"
#include "common/problem.hpp"

namespace fs {

void block_sparse_forward(const FwdParams& p);   // p.sparse: the mask's lists (required)
void block_sparse_backward(const BwdParams& p);  // p.variant: atomic or deterministic dQ, as step 05

// Empty when the kernels can run `m` on shape `s` (the step's support check says it for the
// mask of a run): its blocks must be whole multiples of every
// kernel's tile (forward: Br query rows per CTA, Bc keys per tile; backward: the dK/dV CTA's
// keys, the dQ CTA's rows, and the 32-row stages), and its grid must cover N.
std::string mask_unsupported(const Shape& s, const BlockMask& m);
// The default block: the smallest multiple of those tiles that is at least 128.
int default_mask_block(int d);

// HBM traffic over the mask's lists, tile by tile as the kernels move it:
// Θ(Nd + N²d²M⁻¹s) for a fraction s of nonzero blocks (Proposition 4).
IoCount io_block_sparse_forward(const Shape& s, const BlockMask& m, const BlockLists& l);

StepInfo step06_info();

}  // namespace fs
