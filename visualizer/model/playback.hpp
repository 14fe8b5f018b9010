// Playback: the replay's clock — play, pause, speed, one event forward or back, scrub, and
// the switch between real time and logical order. No ImGui: the transport bar and the
// keyboard drive it, the tests drive it directly.
#pragma once

#include "visualizer/model/replay.hpp"

namespace fs::viz {

class Playback {
 public:
  // At speed 1 the device part of a trace plays in this many seconds, whatever its length.
  static constexpr double kSecondsAt1x = 20;

  Cursor cursor() const { return cursor_; }
  Order order() const { return cursor_.order; }
  bool playing() const { return playing_; }
  double speed() const { return speed_; }
  bool loop() const { return loop_; }
  // Real time only: while playing, jump over stretches where no event is in progress (a
  // recorded trace spends most of its time between kernels, waiting for the host).
  bool skip_idle() const { return skip_idle_; }
  void set_skip_idle(bool s) { skip_idle_ = s; }

  void set_playing(bool p) { playing_ = p; }
  void toggle() { playing_ = !playing_; }
  void set_speed(double s);
  void set_loop(bool l) { loop_ = l; }

  // Where playing starts: the first device event.
  void rewind(const Replay& r);
  void to_end(const Replay& r);
  void seek(const Replay& r, Cursor c);
  // 0 … 1 over the part of the trace that playback covers (the device span in real time).
  void seek_fraction(const Replay& r, double f);
  double fraction(const Replay& r) const;
  // Switches order, keeping the same moment (converted through the events done).
  void set_order(const Replay& r, Order o);
  // One event forward (+1) or back (−1): logical order moves to the next or previous
  // position; real time moves to the next or previous time an event ends.
  void step(const Replay& r, int direction);
  // Advances by a wall-clock interval while playing; stops (or loops) at the end.
  void advance(const Replay& r, double seconds);

  // The span playback covers in the current order, and how far it moves per wall second at 1×.
  double lo(const Replay& r) const;
  double hi(const Replay& r) const;
  double units_per_second(const Replay& r) const;

 private:
  Cursor cursor_{};
  bool playing_ = false;
  bool loop_ = false;
  bool skip_idle_ = true;
  double speed_ = 1;
};

// Compare mode: two traces move together "by progress", so that the same share of the work
// is done in both. Work is the fraction of the pass's FLOPs (the natural common measure of
// two algorithms for one problem), Events the fraction of events, Time the fraction of the
// device span.
enum class SyncBy : std::uint8_t { Work, Events, Time };

double progress(const Replay& r, Cursor c, SyncBy by);
Cursor cursor_at_progress(const Replay& r, double p, SyncBy by, Order order);

}  // namespace fs::viz
