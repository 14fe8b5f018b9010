#include "visualizer/model/document.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace fs::viz {

std::string describe(const tr::Meta& m) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s %s %s · B=%d H=%d N=%d d=%d%s", m.step.c_str(), m.variant.c_str(),
                m.pass.c_str(), m.B, m.H, m.N, m.d, m.causal ? " · causal" : "");
  std::string out = buf;
  if (m.cache.on()) {  // decoding: N new tokens against a cache, its keys split among CTAs
    const tr::KvCache& c = m.cache;
    int longest = 0;
    for (int L : c.lengths) longest = std::max(longest, L);
    std::snprintf(buf, sizeof buf, " · H_kv=%d · up to %d keys · %s · %d split%s%s", c.heads_kv, longest,
                  c.paged() ? ("pages of " + std::to_string(c.page_size)).c_str() : "contiguous", c.splits,
                  c.splits == 1 ? "" : "s", c.append ? " · append" : "");
    out += buf;
  }
  if (m.dropout > 0) {
    std::snprintf(buf, sizeof buf, " · dropout %g", double(m.dropout));
    out += buf;
  }
  if (!m.block_mask.empty()) out += " · mask " + m.block_mask;
  return out + " · " + m.gpu;
}

bool parse_moment(const std::string& at, const Document& doc, Cursor& out, std::string& error) {
  const auto colon = at.find(':');
  const std::string kind = at.substr(0, colon), value = colon == std::string::npos ? "" : at.substr(colon + 1);
  const Replay& r = *doc.replay;
  auto bad = [&](const std::string& why) {
    error = "--at " + at + ": " + why;
    return false;
  };
  if (kind != "seq" && kind != "frac" && kind != "t") return bad("expected seq:N, frac:F (0…1) or t:NS");
  double v = 0;
  const char* end = value.data() + value.size();
  if (kind == "seq") {
    long long n = -1;
    const auto [p, ec] = std::from_chars(value.data(), end, n);
    if (value.empty() || ec != std::errc() || p != end || n < 0 || n > r.event_count())
      return bad("seq must be a decimal integer from 0 to " + std::to_string(r.event_count()) + ", the events of this trace");
    v = double(n);
  } else {
    const auto [p, ec] = std::from_chars(value.data(), end, v);
    if (value.empty() || ec != std::errc() || p != end || !std::isfinite(v))
      return bad("'" + value + "' is not a finite decimal number");
    if (kind == "frac" && !(v >= 0.0 && v <= 1.0)) return bad("frac must be between 0 and 1");
  }
  if (kind == "seq") {
    out = r.convert({Order::Logical, v}, doc.playback.order());
  } else if (kind == "t") {
    out = r.convert({Order::Real, v}, doc.playback.order());
  } else {
    Playback p = doc.playback;
    p.seek_fraction(r, v);
    out = p.cursor();
  }
  return true;
}

void Document::follow() {
  const Cursor c = playback.cursor();
  if (!follow_sm || (c.order == followed_at.order && c.x == followed_at.x)) return;
  followed_at = c;
  const auto& r = *replay;
  if (selected_track < 0 || selected_track >= r.track_count()) return;
  const TrackCursor tc = r.track_cursor(selected_track, c);
  if (tc.started && !tc.retired) return;
  const int g = r.sm_group_of_track(selected_track);
  if (g < 0) return;
  for (int t : r.sm_groups()[std::size_t(g)].tracks) {
    const TrackCursor o = r.track_cursor(t, c);
    if (o.started && !o.retired) {
      selected_track = t;
      return;
    }
  }
}

std::unique_ptr<Document> make_document(tr::Trace trace, std::string path) {
  auto doc = std::make_unique<Document>();
  doc->path = std::move(path);
  doc->replay = std::make_unique<Replay>(std::move(trace));
  doc->coverage = std::make_unique<Coverage>(*doc->replay);
  doc->title = describe(doc->replay->meta());
  const auto& r = *doc->replay;
  doc->selected_track = 0;
  // The CTA that starts first in the first kernel: the one a reader follows.
  for (int t = 0; t < r.track_count(); ++t) {
    const auto& cur = r.trace().tracks[std::size_t(t)];
    const auto& best = r.trace().tracks[std::size_t(doc->selected_track)];
    const bool has = !r.track_events(t).empty();
    const bool best_has = !r.track_events(doc->selected_track).empty();
    if (has && (!best_has || cur.kernel < best.kernel || (cur.kernel == best.kernel && cur.cta < best.cta)))
      doc->selected_track = t;
  }
  doc->playback.rewind(r);
  doc->sync();
  return doc;
}

}  // namespace fs::viz
