#include "visualizer/model/running_stats.hpp"

#include <cmath>
#include <limits>

namespace fs::viz {

std::vector<StatPoint> running_stats(const Replay& r, int track) {
  std::vector<StatPoint> out;
  const auto& list = r.track_events(track);
  double m_old = -std::numeric_limits<double>::infinity();
  for (std::size_t k = 0; k < list.size(); ++k) {
    const auto& e = r.trace().events[std::size_t(list[k])];
    if (e.kind != tr::Kind::Softmax || !std::isfinite(e.m) || std::isnan(e.l)) continue;
    StatPoint p;
    p.event = list[k];
    p.position = int(k);
    p.key0 = e.col0;
    p.keys = e.cols;
    p.sample_row = e.sample_row;
    p.m = e.m;
    p.l = e.l;
    // The first tile has nothing to rescale; exp(−∞ − m) is 0, which is what it means.
    p.rescale = std::isfinite(m_old) ? std::exp(m_old - p.m) : 0.0;
    m_old = p.m;
    out.push_back(p);
  }
  return out;
}

}  // namespace fs::viz
