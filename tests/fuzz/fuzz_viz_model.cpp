// The visualizer's document model (visualizer/model, no ImGui) on any trace the reader
// accepts: indexing, the coverage grids, playback and seeking in both orders, --at moments.
// Never a crash, a sanitizer report, or an exception other than the InputError of a trace too
// large for memory.
#include <cmath>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/errors.hpp"
#include "common/trace/trace_io.hpp"
#include "visualizer/model/document.hpp"
#include "tests/fuzz/fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fs::viz;
  // The input: a --at moment up to the first newline, then the trace's text.
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const std::size_t cut = all.find('\n');
  const std::string at(all.substr(0, cut == std::string_view::npos ? 0 : cut));
  const std::string_view text = cut == std::string_view::npos ? all : all.substr(cut + 1);
  std::unique_ptr<Document> doc;
  try {
    doc = make_document(fs::trace::parse_trace(text, "fuzz"), "fuzz");
  } catch (const fs::InputError&) {  // TraceError, or the coverage's "needs X GiB"
    return 0;
  }
  const Replay& r = *doc->replay;
  for (Order order : {Order::Real, Order::Logical}) {
    doc->playback.set_order(r, order);
    for (double f : {0.0, 0.37, 1.0, 0.5, 0.0}) {
      Playback p = doc->playback;
      p.seek_fraction(r, f);
      doc->playback.seek(r, p.cursor());
      doc->sync();
      doc->follow();
      if (doc->replay->track_count() > 0) (void)r.track_cursor(doc->selected_track, doc->cursor());
    }
    doc->playback.step(r, +1);
    doc->sync();
    doc->playback.step(r, -1);
    doc->sync();
  }
  Cursor c;
  std::string error;
  if (parse_moment(at, *doc, c, error)) {
    if (!std::isfinite(c.x)) std::abort();  // --at never puts the cursor at NaN or infinity
    doc->playback.seek(r, c);
    doc->sync();
  } else if (error.empty()) {
    std::abort();
  }
  for (const auto& g : doc->coverage->grids())
    for (int bh : g.touched) (void)g.at(bh, g.grid_rows - 1, g.grid_cols - 1);
  return 0;
}
