// The forward's launcher (launchers.cuh declares it): both forwards, the 16-bit one
// (flash_tc_forward.cuh) and the fp32 one (flash_tc_forward_f32.cuh), by the family their traits
// name. A unit that instantiates it includes the kernel it launches.
#pragma once

#include "common/problem.hpp"
#include "common/recorder/launch.cuh"
#include "steps/08_tensor_cores/launchers.cuh"

namespace fs::tc {

// Grid (query tiles, B·H), and with packed sequences (query tiles of the longest, H, sequences).
template <class Kt, bool kDropout, class Features>
void launch_tc_forward(const FwdParams& p) {
  using Family = typename Kt::Family;
  const int rows = p.packed.on() ? p.packed.max_q : p.shape.N;
  const dim3 grid((rows + Kt::kBlockM - 1) / Kt::kBlockM, static_cast<unsigned>(p.shape.heads()),
                  p.packed.on() ? p.packed.count : 1);
  if (grid.x == 0) return;  // packed sequences without a query
  if (p.trace) p.trace->set_tiles(Kt::kBlockM, Kt::kBlockN);
  constexpr bool kTraced = trace::kTracedAt<Kt::D>;  // traced twins at the traced runs' d only
  with_bool(p.causal, [&](auto causal) {
    trace::launch<kTraced>(
        p.trace, Family::kName,
        [](auto tr) { return Family::template kernel<Kt, decltype(causal)::value, kDropout, Features, tr>; }, grid,
        Kt::kThreads, Kt::kSmemBytes, p.stream, p);
  });
}

}  // namespace fs::tc
