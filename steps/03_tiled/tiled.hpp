// Step 03: tiling. Q, K, V move through shared memory in tiles; no N×N matrix reaches HBM.
#pragma once

#include "common/problem.hpp"

namespace fs {

void tiled_forward(const FwdParams& p);

// The query rows per CTA (Br) and keys per tile (Bc) the kernel uses for head dimension d.
struct TileSizes {
  int Br = 0, Bc = 0;
};
TileSizes tiled_tile_sizes(int d);

StepInfo step03_info();

}  // namespace fs
