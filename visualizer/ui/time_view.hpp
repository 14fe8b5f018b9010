// The timeline's horizontal view: which span of the trace [x0, x1] the lanes show, in ns
// (real time) or in events (logical order). Zoom keeps the point under the cursor fixed,
// as Tracy's does. No ImGui here, so the arithmetic is tested on its own.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace fs::viz {

struct TimeView {
  double x0 = 0, x1 = 1;

  double span() const { return x1 - x0; }
  // Shows [lo, hi] with a small margin on each side.
  void fit(double lo, double hi) {
    const double m = std::max(hi - lo, 1e-9) * 0.02;
    x0 = lo - m;
    x1 = hi + m;
  }
  // factor < 1 zooms in. The anchor (a trace coordinate) stays where it is on screen.
  void zoom_at(double anchor, double factor, double lo, double hi, double min_span) {
    const double max_span = std::max(hi - lo, min_span) * 1.2;
    const double s = std::clamp(span() * factor, min_span, max_span);
    const double f = span() > 0 ? (anchor - x0) / span() : 0.5;
    x0 = anchor - f * s;
    x1 = x0 + s;
    clamp(lo, hi);
  }
  void pan(double dx, double lo, double hi) {
    x0 += dx;
    x1 += dx;
    clamp(lo, hi);
  }
  // Keeps some of [lo, hi] in view: the view may run a tenth of its span past either end.
  void clamp(double lo, double hi) {
    const double s = span(), m = 0.1 * s;
    if (x0 < lo - m) {
      x0 = lo - m;
      x1 = x0 + s;
    }
    if (x1 > hi + m) {
      x1 = hi + m;
      x0 = x1 - s;
    }
  }
  double to_px(double x, double left, double width) const { return left + (x - x0) / span() * width; }
  double from_px(double px, double left, double width) const { return x0 + (px - left) / width * span(); }
};

// Tick positions for an axis over [x0, x1]: steps of 1, 2 or 5 × 10^k, at most `max_ticks`.
inline std::vector<double> nice_ticks(double x0, double x1, int max_ticks, double* step_out = nullptr) {
  std::vector<double> ticks;
  const double span = x1 - x0;
  if (!(span > 0) || max_ticks < 1) return ticks;
  const double raw = span / max_ticks;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  double step = p;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) {
      step = m * p;
      break;
    }
  for (double t = std::ceil(x0 / step) * step; t <= x1; t += step) ticks.push_back(t);
  if (step_out) *step_out = step;
  return ticks;
}

}  // namespace fs::viz
