// Whether a statically linked NVTX tool loaded, seen from a program that calls nothing of it:
// a push answers the range's depth (0) with a tool attached and NVTX_NO_PUSH_POP_TRACKING
// without one. Exit code 0: a tool is attached; 1: none.
#include <nvtx3/nvToolsExt.h>

int main() {
  const int depth = nvtxRangePushA("probe");
  nvtxRangePop();
  return depth == 0 ? 0 : 1;
}
