// A small trace that is right in every way the validator checks: step 01's forward at
// B=H=1, N=4, d=2 as the naive kernels would record it, with a re-read marked cached, two CTAs
// on one kernel, host ranges, a mark and named buffers. Tests corrupt copies of it. And the
// tile_event() every hand-built trace of the tests makes its events with.
#pragma once

#include <initializer_list>
#include <string>
#include <utility>

#include "common/io_model.hpp"
#include "common/trace/names.hpp"
#include "common/trace/trace.hpp"

namespace fs::test {

// One tile event: `rows` × `cols` of `tensor` from (row0, col0), on `track` over [ts_ns, ts_ns +
// dur_ns); a load or store moves the tile's bytes in the trace's element type `dtype`. Its seq is
// the caller's to set (its place in the trace's list).
inline trace::Event tile_event(int track, trace::Kind kind, trace::Tensor tensor, int row0, int rows, int col0, int cols,
                               double ts_ns, double dur_ns, const std::string& dtype = "fp32") {
  trace::Event e;
  e.track = track;
  e.kind = kind;
  e.tensor = tensor;
  e.row0 = row0;
  e.rows = rows;
  e.col0 = col0;
  e.cols = cols;
  if (kind == trace::Kind::Load || kind == trace::Kind::Store)
    e.bytes = std::int64_t(rows) * cols * trace::element_bytes(tensor, dtype);
  e.ts_ns = ts_ns;
  e.dur_ns = dur_ns;
  return e;
}

class TraceBuilder {
 public:
  explicit TraceBuilder(trace::Trace& t) : t_(t) {}

  int kernel(const std::string& name, int ctas, double ts_ns, double dur_ns) {
    trace::Kernel k;
    k.name = name;
    k.grid[0] = ctas;
    k.block[0] = 256;
    k.ts_ns = ts_ns;
    k.dur_ns = dur_ns;
    t_.kernels.push_back(k);
    return static_cast<int>(t_.kernels.size()) - 1;
  }
  int track(int kernel, int cta, int sm, int lane = 0) {
    trace::Track tr;
    tr.kernel = kernel;
    tr.cta = cta;
    tr.lane = lane;
    tr.sm = sm;
    t_.tracks.push_back(tr);
    clock_.push_back(t_.kernels[kernel].ts_ns);
    return static_cast<int>(t_.tracks.size()) - 1;
  }
  // An event of `dur_ns` on `track`, beginning where the track's previous one ended.
  trace::Event& event(int track, trace::Kind kind, trace::Tensor tensor, int row0, int rows, int col0,
                      int cols, double dur_ns, bool cached = false) {
    trace::Event e = tile_event(track, kind, tensor, row0, rows, col0, cols, clock_[track], dur_ns, t_.meta.dtype);
    e.cached = cached;
    clock_[track] += dur_ns;
    e.seq = static_cast<std::int64_t>(t_.events.size());
    t_.events.push_back(e);
    return t_.events.back();
  }

 private:
  trace::Trace& t_;
  std::vector<double> clock_;
};

// A forward's metadata at B=H=1, N=4, d=2: where and from what it was recorded.
inline trace::Meta fixture_meta(const std::string& step, const std::string& variant) {
  trace::Meta m;
  m.gpu = "NVIDIA H200";
  m.driver = "13.0";
  m.commit = "abc1234";
  m.date = "2026-01-01";
  m.step = step;
  m.variant = variant;
  m.pass = "fwd";
  m.B = 1;
  m.H = 1;
  m.N = 4;
  m.d = 2;
  m.scale = 0.70710677f;
  return m;
}

// Lists tensors `ids` in `m`, shaped and sized for its shape, clustering and dtype.
inline void list_tensors(trace::Meta& m, std::initializer_list<trace::Tensor> ids) {
  for (trace::Tensor id : ids) {
    trace::TensorInfo ti;
    ti.id = id;
    ti.shape = trace::tensor_shape(id, m);
    ti.bytes = trace::shape_elems(ti.shape) * trace::element_bytes(id, m.dtype);
    m.tensors.push_back(ti);
  }
}

inline trace::Trace good_trace() {
  using trace::Kind;
  using trace::Tensor;
  trace::Trace t;
  trace::Meta& m = t.meta;
  m = fixture_meta("01_naive", "naive");
  m.sram_budget_bytes = 232448;
  m.event_cap = 64;
  const Shape shape{1, 1, 4, 2};
  const IoCount io = io_standard_forward(shape);
  m.io_read_bytes = io.read_bytes;
  m.io_write_bytes = io.write_bytes;
  for (Tensor id : {Tensor::Q, Tensor::K, Tensor::V, Tensor::O, Tensor::LSE, Tensor::S, Tensor::P}) {
    trace::TensorInfo ti;
    ti.id = id;
    ti.shape = trace::tensor_shape(id, 1, 1, 4, 2);
    ti.bytes = trace::shape_elems(ti.shape) * 4;
    m.tensors.push_back(ti);
  }

  t.ranges = {{"run", 0, 10000, 0}, {"allocate", 100, 900, 1}, {"forward", 1000, 8000, 1},
              {"scores_kernel", 1100, 2000, 2}, {"softmax_kernel", 3200, 2000, 2},
              {"pv_kernel", 5300, 3000, 2}, {"check", 9100, 800, 1}};
  t.marks = {{"poison O, LSE", 1050}};
  t.buffers = {{"Q", 0x7f0000000000ull, 32}, {"K", 0x7f0000000200ull, 32}, {"S", 0x7f0000000400ull, 64}};

  TraceBuilder b(t);
  const int ks = b.kernel("scores_kernel", 1, 1100, 2000);
  const int kp = b.kernel("softmax_kernel", 1, 3200, 2000);
  const int kv = b.kernel("pv_kernel", 2, 5300, 3000);
  const int t0 = b.track(ks, 0, 3);
  b.event(t0, Kind::Load, Tensor::Q, 0, 4, 0, 2, 64);
  b.event(t0, Kind::Load, Tensor::K, 0, 4, 0, 2, 64);
  b.event(t0, Kind::ComputeS, Tensor::S, 0, 4, 0, 4, 320);
  b.event(t0, Kind::Store, Tensor::S, 0, 4, 0, 4, 96);
  const int t1 = b.track(kp, 0, 5);
  b.event(t1, Kind::Load, Tensor::S, 0, 4, 0, 4, 96);
  b.event(t1, Kind::Softmax, Tensor::P, 0, 4, 0, 4, 320);
  b.event(t1, Kind::Store, Tensor::P, 0, 4, 0, 4, 96);
  b.event(t1, Kind::Store, Tensor::LSE, 0, 4, 0, 1, 32);
  // pv_kernel: two CTAs of two rows each; both read all of V, the second one's read is the
  // re-read that L2 serves.
  const int t2 = b.track(kv, 0, 1);
  const int t3 = b.track(kv, 1, 7);
  b.event(t2, Kind::Load, Tensor::P, 0, 2, 0, 4, 64);
  b.event(t3, Kind::Load, Tensor::P, 2, 2, 0, 4, 64);
  b.event(t2, Kind::Load, Tensor::V, 0, 4, 0, 2, 64);
  b.event(t3, Kind::Load, Tensor::V, 0, 4, 0, 2, 64, true);
  trace::Event& acc = b.event(t2, Kind::AccumulateO, Tensor::O, 0, 2, 0, 2, 320);
  acc.m = 1.5f;
  acc.l = 2.25f;
  acc.sample_row = 1;
  b.event(t3, Kind::AccumulateO, Tensor::O, 2, 2, 0, 2, 320);
  b.event(t2, Kind::Store, Tensor::O, 0, 2, 0, 2, 64);
  b.event(t3, Kind::Store, Tensor::O, 2, 2, 0, 2, 64);
  return t;
}

// A clustered trace (step 07's form, trace.hpp Event::round) at B=H=1, N=4, d=2: one round of
// two clusters of two, orders q = (2, 0, 3, 1), k = (1, 3, 0, 2); a CTA per cluster loads its
// query slots' indices and Q rows, its key slots' indices, K and V, and stores O and LSE, all
// named by slots; the sort is untraced traffic that writes the orders.
inline trace::Trace clustered_trace() {
  using trace::Kind;
  using trace::Tensor;
  trace::Trace t;
  trace::Meta& m = t.meta;
  m = fixture_meta("07_smyrf", "clusters");
  m.event_cap = 64;
  m.clusters = {1, 2, 2, {2, 0, 3, 1}, {1, 3, 0, 2}};
  m.untraced = {{"cub::DeviceSegmentedRadixSort::SortPairs", 2 * 4 * 8, 2 * 4 * 4, {Tensor::Order}}};
  list_tensors(m, {Tensor::Q, Tensor::K, Tensor::V, Tensor::O, Tensor::LSE, Tensor::S, Tensor::Order});
  TraceBuilder b(t);
  const int k = b.kernel("smyrf_round_forward_kernel", 2, 0, 5000);
  for (int c = 0; c < 2; ++c) {
    const int tr = b.track(k, c, c);
    b.event(tr, Kind::Load, Tensor::Order, 2 * c, 2, 0, 1, 10);
    b.event(tr, Kind::Load, Tensor::Q, 2 * c, 2, 0, 2, 10).round = 0;
    b.event(tr, Kind::Load, Tensor::Order, 2 * c, 2, 1, 1, 10);
    b.event(tr, Kind::Load, Tensor::K, 2 * c, 2, 0, 2, 10).round = 0;
    b.event(tr, Kind::Load, Tensor::V, 2 * c, 2, 0, 2, 10).round = 0;
    b.event(tr, Kind::ComputeS, Tensor::S, 2 * c, 2, 2 * c, 2, 10).round = 0;
    b.event(tr, Kind::Store, Tensor::O, 2 * c, 2, 0, 2, 10).round = 0;
    b.event(tr, Kind::Store, Tensor::LSE, 2 * c, 2, 0, 1, 10).round = 0;
  }
  for (const auto& e : t.events)
    (e.kind == Kind::Load ? m.io_read_bytes : m.io_write_bytes) += e.bytes;
  m.io_read_bytes += m.untraced[0].read_bytes;
  m.io_write_bytes += m.untraced[0].write_bytes;
  return t;
}

// A trace in lanes (step 09's form, trace.hpp Kernel::lanes) at B=H=1, N=4, d=2: two CTAs of two
// query rows, each a producer lane that loads Q, K and V (waiting for K to be consumed before V)
// and stores O and LSE, and two consumer lanes of one row each that wait for K, compute S and its
// softmax, wait for V and accumulate O.
inline trace::Trace laned_trace() {
  using trace::Kind;
  using trace::Tensor;
  trace::Trace t;
  trace::Meta& m = t.meta;
  m = fixture_meta("09_hopper", "fa3");
  m.event_cap = 64;
  list_tensors(m, {Tensor::Q, Tensor::K, Tensor::V, Tensor::O, Tensor::LSE, Tensor::S});
  TraceBuilder b(t);
  const int k = b.kernel("hopper_forward_kernel", 2, 0, 5000);
  t.kernels[std::size_t(k)].lanes = 3;
  t.kernels[std::size_t(k)].lane_names = {"producer", "consumer 0", "consumer 1"};
  for (int c = 0; c < 2; ++c) {
    const int producer = b.track(k, c, c, 0);
    b.event(producer, Kind::Load, Tensor::Q, 2 * c, 2, 0, 2, 40);
    b.event(producer, Kind::Load, Tensor::K, 0, 4, 0, 2, 60);
    b.event(producer, Kind::Wait, Tensor::None, 0, 4, 0, 0, 100);
    b.event(producer, Kind::Load, Tensor::V, 0, 4, 0, 2, 60);
    for (int w = 0; w < 2; ++w) {
      const int consumer = b.track(k, c, c, 1 + w), row = 2 * c + w;
      b.event(consumer, Kind::Wait, Tensor::None, 0, 4, 0, 0, 100);
      b.event(consumer, Kind::ComputeS, Tensor::S, row, 1, 0, 4, 30);
      b.event(consumer, Kind::Softmax, Tensor::P, row, 1, 0, 4, 20);
      b.event(consumer, Kind::Wait, Tensor::None, 0, 4, 0, 0, 10 + 20 * w);
      b.event(consumer, Kind::AccumulateO, Tensor::O, row, 1, 0, 2, 30);
    }
    b.event(producer, Kind::Store, Tensor::O, 2 * c, 2, 0, 2, 40);
    b.event(producer, Kind::Store, Tensor::LSE, 2 * c, 2, 0, 1, 20);
  }
  for (const auto& e : t.events)
    (e.kind == Kind::Load ? m.io_read_bytes : m.io_write_bytes) += e.bytes;
  return t;
}

// A decoding trace (step 10) that adds up: B = 2 sequences, H = 2 query heads over one K/V head,
// one new token, d = 2, bf16; a paged cache of five pages of 2 keys (slots 0..9), sequence 0's
// three keys on pages 3 and 1 (slots 6, 7, 2), sequence 1's four on pages 0 and 4 (slots 0, 1, 8,
// 9), page 2 unused; two splits of tiles of 2 keys, then the combine. Reads 184 bytes: Q 4 × 8,
// K and V 56, the combine's partials 96; writes 128: the partials 96, O and LSE 32.
inline trace::Trace decode_trace() {
  using trace::Kind;
  using trace::Tensor;
  trace::Trace t;
  trace::Meta& m = t.meta;
  m = fixture_meta("10_decode", "paged");
  m.B = 2;
  m.H = 2;
  m.N = 1;
  m.d = 2;
  m.dtype = "bf16";
  m.event_cap = 64;
  m.Br = 16;
  m.Bc = 2;
  trace::KvCache& c = m.cache;
  c.heads_kv = 1;
  c.seqlen_cache = 4;
  c.slots = 10;
  c.page_size = 2;
  c.splits = 2;
  c.lengths = {3, 4};
  c.block_table = {3, 1, 0, 4};
  m.io_read_bytes = 184;
  m.io_write_bytes = 128;
  list_tensors(m, {Tensor::Q, Tensor::K, Tensor::V, Tensor::O, Tensor::LSE, Tensor::S, Tensor::OPart, Tensor::LSEPart});
  t.ranges = {{"decode_forward (traced)", 0, 9000, 0}, {"decode_split_kernel", 100, 4000, 1},
              {"decode_combine_kernel", 4200, 3000, 1}};

  TraceBuilder b(t);
  const int split = b.kernel("decode_split_kernel", 4, 100, 4000);
  const int combine = b.kernel("decode_combine_kernel", 1, 4200, 3000);
  // CTA (sequence, split): its slots of K and V, and its tile's keys.
  struct Cta { int b, split, slot0, n_keys, key0; };
  const Cta ctas[] = {{0, 0, 6, 2, 0}, {0, 1, 2, 1, 2}, {1, 0, 0, 2, 0}, {1, 1, 8, 2, 2}};
  for (int i = 0; i < 4; ++i) {
    const Cta& x = ctas[i];
    const int tr = b.track(split, i, i);
    for (int h = 0; h < 2; ++h) b.event(tr, Kind::Load, Tensor::Q, 0, 1, 0, 2, 50).bh = 2 * x.b + h;
    b.event(tr, Kind::Load, Tensor::K, x.slot0, x.n_keys, 0, 2, 100);
    b.event(tr, Kind::Load, Tensor::V, x.slot0, x.n_keys, 0, 2, 100);
    b.event(tr, Kind::ComputeS, Tensor::S, 0, 2, x.key0, x.n_keys, 200).bh = x.b;
    for (int h = 0; h < 2; ++h) {
      b.event(tr, Kind::Store, Tensor::OPart, x.split, 1, 0, 2, 50).bh = 2 * x.b + h;
      b.event(tr, Kind::Store, Tensor::LSEPart, x.split, 1, 0, 1, 50).bh = 2 * x.b + h;
    }
  }
  const int tc = b.track(combine, 0, 0);
  for (int bh = 0; bh < 4; ++bh) {
    b.event(tc, Kind::Load, Tensor::LSEPart, 0, 2, 0, 1, 50).bh = bh;
    b.event(tc, Kind::Load, Tensor::OPart, 0, 2, 0, 2, 50).bh = bh;
    b.event(tc, Kind::Store, Tensor::O, 0, 1, 0, 2, 50).bh = bh;
    b.event(tc, Kind::Store, Tensor::LSE, 0, 1, 0, 1, 50).bh = bh;
  }
  return t;
}

}  // namespace fs::test
