// The online softmax of one CTA, as its trace recorded it: after each K tile, the running max
// m and normaliser ℓ of the CTA's sampled row, and the factor exp(m_old − m_new) that the
// rescale applies to what was accumulated before (Algorithm 1 l.10-12).
#pragma once

#include <vector>

#include "visualizer/model/replay.hpp"

namespace fs::viz {

struct StatPoint {
  int event = -1;         // the softmax event that produced it (index into Trace::events)
  int position = 0;       // its index in the track's event list
  int key0 = 0, keys = 0; // the K tile: keys [key0, key0 + keys)
  int sample_row = -1;
  double m = 0, l = 0;
  // exp(m_old − m_new): 1 when the max did not move, < 1 when it did; 0 for the first tile
  // (m_old = −∞: nothing accumulated yet to rescale).
  double rescale = 0;
};

// One point per softmax event carrying statistics; empty when the track has none.
std::vector<StatPoint> running_stats(const Replay& r, int track);

}  // namespace fs::viz
