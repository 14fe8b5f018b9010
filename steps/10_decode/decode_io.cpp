#include "steps/10_decode/decode_io.hpp"

#include <algorithm>

#include "steps/10_decode/key_range.hpp"

namespace fs::decoding {

int DecodeIoCase::keys(int b) const {
  const int before = base[static_cast<std::size_t>(b)];
  return append ? std::min(before + shape.new_tokens, shape.seqlen_cache) : before;
}

IoCount decode_io(const DecodeIoCase& c) {
  const DecodeShape& s = c.shape;
  const std::int64_t d = s.d, e = c.elem_bytes, f = sizeof(float);
  IoCount io;
  for (int b = 0; b < s.batch; ++b) {
    const int keys = c.keys(b);
    if (c.append)  // the append kernel skips a row past the room (append.cuh)
      for (int t = 0; t < s.new_tokens; ++t) {
        const std::int64_t key = std::int64_t(c.base[static_cast<std::size_t>(b)]) + t;
        if (key < 0 || key >= s.seqlen_cache) continue;
        io.read_bytes += 2 * s.heads_kv * d * e;   // k_new's and v_new's rows
        io.write_bytes += 2 * s.heads_kv * d * e;  // into the cache
      }
    for (int rb = 0; rb < s.row_blocks(); ++rb) {
      const CtaKeys cta(s, rb, keys, c.causal, c.window_left, c.window_right);
      for (int split = 0; split < c.splits; ++split) {  // and every K/V head alike
        const SplitTiles tiles = cta.tiles(c.tile_keys, split, c.splits);
        std::int64_t kv_rows = 0;
        for (int t = 0; t < tiles.count; ++t) {
          const int j0 = (tiles.first + t) * c.tile_keys;
          kv_rows += std::min(c.tile_keys, cta.key_end - j0);
        }
        io.read_bytes += s.heads_kv * (cta.rows * d * e + 2 * kv_rows * d * e);
        io.write_bytes += s.heads_kv * cta.rows * (c.splits == 1 ? d * e + f : d * f + f);
      }
    }
    if (c.splits > 1)
      for (int t = 0; t < s.new_tokens; ++t) {
        const bool sees = visible_begin(keys, s.new_tokens, t, c.window_left) <
                          visible_end(keys, s.new_tokens, t, c.causal, c.window_right);
        io.read_bytes += s.heads * (c.splits * f + (sees ? c.splits * d * f : 0));
        io.write_bytes += s.heads * (d * e + f);
      }
  }
  return io;
}

void describe_decode(trace::Meta& m, const DecodeTraceCase& c) {
  const DecodeShape& s = c.io.shape;
  m.step = "10_decode";
  m.variant = c.page_size ? "paged" : "contiguous";
  m.pass = "fwd";
  m.B = s.batch;
  m.H = s.heads;
  m.N = s.new_tokens;
  m.d = s.d;
  m.causal = c.io.causal;
  m.scale = c.scale;
  m.dtype = dtype_name(c.dtype);
  trace::KvCache& k = m.cache;
  k.heads_kv = s.heads_kv;
  k.seqlen_cache = s.seqlen_cache;
  k.slots = c.slots;
  k.page_size = c.page_size;
  k.splits = c.io.splits;
  k.append = c.io.append;
  k.lengths.clear();
  for (int b = 0; b < s.batch; ++b) k.lengths.push_back(c.io.keys(b));
  k.block_table = c.block_table;
  k.batch_idx = c.batch_idx;
  const IoCount io = decode_io(c.io);
  m.io_read_bytes = io.read_bytes;
  m.io_write_bytes = io.write_bytes;
}

std::int64_t decode_event_cap(const DecodeTraceCase& c) {
  const DecodeShape& s = c.io.shape;
  const int tiles = (s.seqlen_cache + c.io.tile_keys - 1) / c.io.tile_keys;
  const std::int64_t per_split = (tiles + c.io.splits - 1) / c.io.splits + 1;
  // Runs of slots per tile: one contiguous; paged, a tile's pages, and one more where it straddles.
  const std::int64_t runs = c.page_size ? c.io.tile_keys / std::min(c.page_size, c.io.tile_keys) + 1 : 1;
  const std::int64_t split_cta = 2 * kRowsPerCta + per_split * (2 * runs + 2) + 2 * kRowsPerCta;
  const std::int64_t append_cta = 2 * (256 * 8 / s.d + 2);  // kAppendThreads chunks of 8 columns
  return std::max<std::int64_t>({split_cta, append_cta, 16, 64});
}

}  // namespace fs::decoding
