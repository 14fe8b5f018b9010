// A trace opened in the visualizer: the indexed replay, the coverage at the cursor, the
// playback clock and what the person selected. Panels read it; only the app writes it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "visualizer/model/coverage.hpp"
#include "visualizer/model/playback.hpp"
#include "visualizer/model/replay.hpp"

namespace fs::viz {

struct Document {
  std::string path;    // the file, or "synthetic:<what>" for a generated trace
  std::string title;   // "04_online_softmax fa2 fwd · N=1024 d=64 · NVIDIA H200"
  std::unique_ptr<Replay> replay;
  std::unique_ptr<Coverage> coverage;
  Playback playback;
  int selected_track = 0;
  // Follow the SM rather than the CTA: once the followed CTA is done (or before it starts),
  // the panels move to the CTA running on the same SM, so the chip view is never empty while
  // that SM works. A click on a CTA follows it until the cursor moves again.
  bool follow_sm = true;
  Cursor followed_at{Order::Real, -1};
  // A decoding trace: the sequence under the mouse in the cache's picture (its pages and block table
  // row highlighted in place of the followed CTA's), or −1.
  int hovered_sequence = -1;
  std::vector<std::string> warnings;  // what the validator found; the trace still replays

  // Brings the coverage to the playback cursor (call after moving the cursor).
  void sync() { coverage->seek(*replay, playback.cursor()); }
  // Applies follow_sm when the cursor has moved since the last call.
  void follow();
  // Follows `track` until the cursor moves.
  void select(int track) {
    selected_track = track;
    followed_at = playback.cursor();
  }
  Cursor cursor() const { return playback.cursor(); }
};

// Indexes a trace and puts the cursor at its first device event, with a CTA of the first
// kernel selected.
std::unique_ptr<Document> make_document(fs::trace::Trace trace, std::string path);

// Reads, checks and indexes a trace file. On failure returns nullptr and sets `error` to one
// line naming the file and what is wrong with it. Never throws.
std::unique_ptr<Document> load_document(const std::string& path, std::string& error);

// The moment "--at" names, as a cursor in the document's order: seq:N (N events done, a
// decimal integer from 0 to the event count), frac:F (the fraction F of the run, 0 to 1) or
// t:NS (a time on the trace's clock, finite). False, with one line in `error`, for anything
// else: another form, a number that is not decimal, out of range, NaN or infinite.
bool parse_moment(const std::string& at, const Document& doc, Cursor& out, std::string& error);

// "04_online_softmax fa2 fwd · B=1 H=1 N=1024 d=64 · causal · NVIDIA H200"; a decoding trace's
// cache too: "… N=1 d=64 · H_kv=2 · up to 700 keys · pages of 16 · 3 splits · …"
std::string describe(const fs::trace::Meta& m);

}  // namespace fs::viz
