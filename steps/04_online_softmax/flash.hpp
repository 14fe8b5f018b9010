// Step 04: online softmax — the FlashAttention forward, in the paper's loop order
// (Algorithm 1) and in FlashAttention-2's.
#pragma once

#include <cstddef>

#include "common/problem.hpp"

namespace fs {

enum Step04Variant : int { kAlgorithm1 = 0, kFlash2 = 1 };

void flash_forward(const FwdParams& p);  // p.variant picks the kernel

// Algorithm 1's tile sizes from the SRAM budget M (in floats): Bc = ⌈M/4d⌉,
// Br = min(⌈M/4d⌉, d). When the S tile (Br × Bc) does not fit beside the Q, K, V, O tiles,
// M is lowered until it does; `M` is the value used.
struct Alg1Tiles {
  int Br = 0, Bc = 0;
  std::size_t M = 0;           // floats
  std::size_t smem_bytes = 0;  // what the kernel asks for
};
Alg1Tiles alg1_tiles(int d, std::size_t smem_budget_bytes);

// FlashAttention-2 kernel's tile: Br query rows per CTA, Bc keys per K/V tile; each thread
// holds rows_per_thread rows, split over threads_per_row adjacent threads.
struct Flash2Tiles {
  int Br = 0, Bc = 0;
  int rows_per_thread = 0, threads_per_row = 0;
};
Flash2Tiles flash2_tiles(int d);

StepInfo step04_info();

}  // namespace fs
