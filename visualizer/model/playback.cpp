#include "visualizer/model/playback.hpp"

#include <algorithm>
#include <cmath>

namespace fs::viz {

void Playback::set_speed(double s) { speed_ = std::clamp(s, 1.0 / 64, 64.0); }

double Playback::lo(const Replay& r) const {
  return cursor_.order == Order::Real ? r.device_begin_ns() : 0.0;
}

double Playback::hi(const Replay& r) const {
  return cursor_.order == Order::Real ? r.device_end_ns() : double(r.event_count());
}

double Playback::units_per_second(const Replay& r) const {
  return std::max(hi(r) - lo(r), 1e-9) / kSecondsAt1x;
}

void Playback::rewind(const Replay& r) { cursor_.x = lo(r); }
void Playback::to_end(const Replay& r) {
  cursor_.x = hi(r);
  playing_ = false;
}

void Playback::seek(const Replay& r, Cursor c) {
  cursor_ = r.convert(c, cursor_.order);
  cursor_.x = std::clamp(cursor_.x, 0.0, r.extent(cursor_.order));
}

void Playback::seek_fraction(const Replay& r, double f) {
  cursor_.x = lo(r) + std::clamp(f, 0.0, 1.0) * (hi(r) - lo(r));
}

double Playback::fraction(const Replay& r) const {
  const double span = hi(r) - lo(r);
  return span > 0 ? std::clamp((cursor_.x - lo(r)) / span, 0.0, 1.0) : 0.0;
}

void Playback::set_order(const Replay& r, Order o) { cursor_ = r.convert(cursor_, o); }

void Playback::step(const Replay& r, int direction) {
  playing_ = false;
  const std::int64_t E = r.event_count();
  if (E == 0) return;
  if (cursor_.order == Order::Logical) {
    cursor_.x = direction > 0 ? std::floor(cursor_.x) + 1 : std::ceil(cursor_.x) - 1;
    cursor_.x = std::clamp(cursor_.x, 0.0, double(E));
    return;
  }
  // Real time: forward to the next time an event ends; back to the last end before the
  // latest finished event's, which undoes it (and any that ended with it).
  const std::int64_t k = r.done_count(cursor_);
  if (direction > 0) {
    if (k < E) cursor_.x = r.end_in_time_order(k);
    return;
  }
  if (k == 0) return;
  const double latest = r.end_in_time_order(k - 1);
  std::int64_t j = k - 1;
  while (j >= 0 && r.end_in_time_order(j) >= latest) --j;
  cursor_.x = j >= 0 ? r.end_in_time_order(j) : r.device_begin_ns();
}

void Playback::advance(const Replay& r, double seconds) {
  if (!playing_) return;
  cursor_.x += seconds * speed_ * units_per_second(r);
  if (skip_idle_ && cursor_.order == Order::Real && cursor_.x < hi(r) && !r.busy_at(cursor_.x))
    cursor_.x = std::min(r.next_begin_after(cursor_.x), hi(r));
  if (cursor_.x >= hi(r)) {
    if (loop_)
      cursor_.x = lo(r);
    else {
      cursor_.x = hi(r);
      playing_ = false;
    }
  }
}

double progress(const Replay& r, Cursor c, SyncBy by) {
  switch (by) {
    case SyncBy::Work: return r.flops_fraction(c);
    case SyncBy::Events: {
      const double E = double(r.event_count());
      return E > 0 ? std::clamp(r.convert(c, Order::Logical).x / E, 0.0, 1.0) : 0.0;
    }
    case SyncBy::Time: {
      const double span = r.device_end_ns() - r.device_begin_ns();
      const double t = r.convert(c, Order::Real).x;
      return span > 0 ? std::clamp((t - r.device_begin_ns()) / span, 0.0, 1.0) : 0.0;
    }
  }
  return 0;
}

Cursor cursor_at_progress(const Replay& r, double p, SyncBy by, Order order) {
  p = std::clamp(p, 0.0, 1.0);
  switch (by) {
    case SyncBy::Work: return r.cursor_at_flops_fraction(p, order);
    case SyncBy::Events: return r.convert({Order::Logical, p * double(r.event_count())}, order);
    case SyncBy::Time:
      return r.convert({Order::Real, r.device_begin_ns() + p * (r.device_end_ns() - r.device_begin_ns())}, order);
  }
  return {order, 0};
}

}  // namespace fs::viz
