#include "common/trace/trace_io.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <new>
#include <numeric>
#include <sstream>

#include "common/files.hpp"
#include "common/host_memory.hpp"
#include "common/trace/names.hpp"

namespace fs::trace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;  // keeps "ph" first: the file reads like the spec

namespace {

// ---------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------

// Chrome's ts and dur are microseconds; ours carry whole nanoseconds.
double to_us(double ns) { return std::round(ns) / 1000.0; }

std::string hex_address(std::uint64_t a) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(a));
  return buf;
}

// "K[64:128)" for whole rows, "S[0:16, 16:32)" for a tile of some columns.
std::string tile_text(const Event& e, const Meta& m) {
  std::string s = tensor_name(e.tensor);
  s += "[" + std::to_string(e.row0) + ":" + std::to_string(std::int64_t(e.row0) + e.rows);
  const auto shape = tensor_shape(e.tensor, m);
  const bool whole_rows = shape.size() < 4 || (e.col0 == 0 && e.cols == shape.back());
  if (!whole_rows)
    s += ", " + std::to_string(e.col0) + ":" + std::to_string(std::int64_t(e.col0) + e.cols);
  return s + ")";
}

std::string event_name(const Event& e, const Meta& m) {
  std::string name = kind_name(e.kind);
  if (e.tensor != Tensor::None) name += " " + tile_text(e, m);
  if (e.round >= 0) name += " in round " + std::to_string(e.round) + "'s order";  // slots, not rows
  if (e.cached) name += " (cached)";
  return name;
}

ojson stat_json(float v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return static_cast<double>(v);
}

ojson meta_json(const Trace& t) {
  const Meta& m = t.meta;
  ojson o;
  o["schema"] = kSchemaName;
  o["schema_version"] = m.schema_version;
  o["gpu"] = m.gpu;
  o["driver"] = m.driver;
  o["commit"] = m.commit;
  o["date"] = m.date;
  o["step"] = m.step;
  o["variant"] = m.variant;
  o["pass"] = m.pass;
  o["shape"] = {{"B", m.B}, {"H", m.H}, {"N", m.N}, {"d", m.d}};
  o["causal"] = m.causal;
  o["scale"] = static_cast<double>(m.scale);
  if (m.dropout > 0) o["dropout"] = static_cast<double>(m.dropout);
  if (m.dtype != "fp32") o["dtype"] = m.dtype;
  if (!m.block_mask.empty()) o["block_mask"] = m.block_mask;
  o["tiles"] = {{"Br", m.Br}, {"Bc", m.Bc}};
  o["sram_budget_bytes"] = m.sram_budget_bytes;
  o["smem_per_cta_bytes"] = m.smem_per_cta_bytes;
  o["io_model"] = {{"read_bytes", m.io_read_bytes}, {"write_bytes", m.io_write_bytes}};
  o["event_cap"] = m.event_cap;
  o["events_dropped"] = m.events_dropped;
  ojson tensors = ojson::array();
  for (const auto& ti : m.tensors)
    tensors.push_back({{"name", tensor_name(ti.id)}, {"shape", ti.shape}, {"bytes", ti.bytes}});
  o["tensors"] = std::move(tensors);
  if (m.clusters.on())
    o["clusters"] = {{"hashes", m.clusters.hashes},
                     {"q_cluster", m.clusters.q_cluster},
                     {"k_cluster", m.clusters.k_cluster},
                     {"q_order", m.clusters.q_order},
                     {"k_order", m.clusters.k_order}};
  if (!m.untraced.empty()) {
    ojson untraced = ojson::array();
    for (const auto& u : m.untraced) {
      ojson writes = ojson::array();
      for (Tensor w : u.writes) writes.push_back(tensor_name(w));
      untraced.push_back({{"name", u.name}, {"read_bytes", u.read_bytes}, {"write_bytes", u.write_bytes},
                          {"writes", std::move(writes)}});
    }
    o["untraced"] = std::move(untraced);
  }
  if (m.cache.on()) {
    const KvCache& c = m.cache;
    ojson cj = {{"heads_kv", c.heads_kv}, {"seqlen_cache", c.seqlen_cache}, {"slots", c.slots},
                {"page_size", c.page_size}, {"splits", c.splits}, {"append", c.append}, {"lengths", c.lengths}};
    if (c.paged()) cj["block_table"] = c.block_table;
    if (!c.batch_idx.empty()) cj["batch_idx"] = c.batch_idx;
    o["cache"] = std::move(cj);
  }
  ojson kernels = ojson::array();
  for (const auto& k : t.kernels) {
    ojson kj = {{"name", k.name},
                {"grid", {k.grid[0], k.grid[1], k.grid[2]}},
                {"block", {k.block[0], k.block[1], k.block[2]}},
                {"smem_bytes", k.smem_bytes},
                {"ts", to_us(k.ts_ns)},
                {"dur", to_us(k.dur_ns)}};
    // Lanes are optional in the file: a kernel without them records one lane per CTA.
    if (k.lanes != 1 || !k.lane_names.empty()) kj["lanes"] = k.lanes;
    if (!k.lane_names.empty()) kj["lane_names"] = k.lane_names;
    kernels.push_back(std::move(kj));
  }
  o["kernels"] = std::move(kernels);
  ojson buffers = ojson::array();
  for (const auto& b : t.buffers)
    buffers.push_back({{"name", b.name}, {"address", hex_address(b.address)}, {"bytes", b.bytes}});
  o["buffers"] = std::move(buffers);
  return o;
}

// Host ranges' nesting depth from their extents (for files written without args.depth).
void compute_depths(std::vector<HostRange>& ranges) {
  std::vector<std::size_t> order(ranges.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (ranges[a].ts_ns != ranges[b].ts_ns) return ranges[a].ts_ns < ranges[b].ts_ns;
    return ranges[a].dur_ns > ranges[b].dur_ns;
  });
  std::vector<double> open_ends;
  for (std::size_t i : order) {
    while (!open_ends.empty() && open_ends.back() <= ranges[i].ts_ns) open_ends.pop_back();
    ranges[i].depth = static_cast<int>(open_ends.size());
    open_ends.push_back(ranges[i].ts_ns + ranges[i].dur_ns);
  }
}

}  // namespace

std::string trace_to_json(const Trace& t) {
  std::string out;
  out.reserve(256 * (t.events.size() + t.ranges.size() + 2 * t.tracks.size()) + 4096);
  out += "{\"displayTimeUnit\":\"ns\",\n\"otherData\":";
  out += meta_json(t).dump();
  out += ",\n\"traceEvents\":[\n";
  bool first = true;
  auto line = [&](const ojson& j) {
    if (!first) out += ",\n";
    first = false;
    out += j.dump();
  };

  line({{"ph", "M"}, {"pid", 0}, {"name", "process_name"}, {"args", {{"name", "host (NVTX)"}}}});
  line({{"ph", "M"}, {"pid", 0}, {"tid", 0}, {"name", "thread_name"}, {"args", {{"name", "NVTX ranges"}}}});
  line({{"ph", "M"}, {"pid", 1}, {"name", "process_name"},
        {"args", {{"name", "GPU: " + (t.meta.gpu.empty() ? std::string("unknown") : t.meta.gpu)}}}});

  // Tracks sorted by (SM, kernel, CTA, lane) for the viewer: CTAs of one SM sit together, and
  // the lanes of a CTA together in lane order.
  std::vector<std::size_t> by_sm(t.tracks.size());
  std::iota(by_sm.begin(), by_sm.end(), 0);
  std::stable_sort(by_sm.begin(), by_sm.end(), [&](std::size_t a, std::size_t b) {
    const Track &x = t.tracks[a], &y = t.tracks[b];
    if (x.sm != y.sm) return x.sm < y.sm;
    if (x.kernel != y.kernel) return x.kernel < y.kernel;
    if (x.cta != y.cta) return x.cta < y.cta;
    return x.lane < y.lane;
  });
  std::vector<std::int64_t> sort_index(t.tracks.size());
  for (std::size_t r = 0; r < by_sm.size(); ++r) sort_index[by_sm[r]] = static_cast<std::int64_t>(r);
  for (std::size_t i = 0; i < t.tracks.size(); ++i) {
    const Track& tr = t.tracks[i];
    const Kernel* kn = (tr.kernel >= 0 && std::size_t(tr.kernel) < t.kernels.size()) ? &t.kernels[tr.kernel] : nullptr;
    const std::string kname = kn ? kn->name : "kernel " + std::to_string(tr.kernel);
    std::string label = "SM " + std::to_string(tr.sm) + " · " + kname + " · CTA " + std::to_string(tr.cta);
    ojson args = {{"name", ""}, {"kernel", tr.kernel}, {"cta", tr.cta}};
    // A lane of a laned kernel: its own thread, named after the lane ("· consumer 0").
    if (tr.lane != 0 || (kn && kn->lanes > 1)) {
      label += " · " + lane_name(t, tr);
      args["lane"] = tr.lane;
    }
    args["name"] = label;
    args["sm"] = tr.sm;
    args["dropped"] = tr.dropped;
    const auto tid = static_cast<std::int64_t>(i) + 1;
    line({{"ph", "M"}, {"pid", 1}, {"tid", tid}, {"name", "thread_name"}, {"args", std::move(args)}});
    line({{"ph", "M"}, {"pid", 1}, {"tid", tid}, {"name", "thread_sort_index"},
          {"args", {{"sort_index", sort_index[i]}}}});
  }

  for (const auto& r : t.ranges)
    line({{"ph", "X"}, {"pid", 0}, {"tid", 0}, {"cat", "nvtx"}, {"name", r.name},
          {"ts", to_us(r.ts_ns)}, {"dur", to_us(r.dur_ns)}, {"args", {{"depth", r.depth}}}});
  for (const auto& m : t.marks)
    line({{"ph", "i"}, {"pid", 0}, {"tid", 0}, {"s", "t"}, {"cat", "nvtx"}, {"name", m.name},
          {"ts", to_us(m.ts_ns)}});

  for (const auto& e : t.events) {
    ojson args = {{"seq", e.seq}};
    if (e.tensor != Tensor::None) args["tensor"] = tensor_name(e.tensor);
    args["bh"] = e.bh;
    args["row0"] = e.row0;
    args["rows"] = e.rows;
    args["col0"] = e.col0;
    args["cols"] = e.cols;
    args["bytes"] = e.bytes;
    args["cached"] = e.cached;
    // NaN means "no statistics" and is not written; ±inf (a row max before any key) is not
    // JSON either and is written as the string "-inf" or "inf".
    if (!std::isnan(e.m)) args["m"] = stat_json(e.m);
    if (!std::isnan(e.l)) args["l"] = stat_json(e.l);
    if (e.sample_row >= 0) args["sample_row"] = e.sample_row;
    if (e.round >= 0) args["round"] = e.round;
    line({{"ph", "X"}, {"pid", 1}, {"tid", static_cast<std::int64_t>(e.track) + 1},
          {"cat", kind_name(e.kind)}, {"name", event_name(e, t.meta)},
          {"ts", to_us(e.ts_ns)}, {"dur", to_us(e.dur_ns)}, {"args", std::move(args)}});
  }

  // Cumulative HBM traffic (non-cached loads and stores), sampled when each one ends.
  std::vector<const Event*> moves;
  for (const auto& e : t.events)
    if ((e.kind == Kind::Load || e.kind == Kind::Store) && !e.cached) moves.push_back(&e);
  std::stable_sort(moves.begin(), moves.end(), [](const Event* a, const Event* b) {
    return a->ts_ns + a->dur_ns < b->ts_ns + b->dur_ns;
  });
  std::int64_t read = 0, written = 0;
  for (const Event* e : moves) {
    (e->kind == Kind::Load ? read : written) += e->bytes;
    line({{"ph", "C"}, {"pid", 1}, {"name", "HBM bytes"}, {"ts", to_us(e->ts_ns + e->dur_ns)},
          {"args", {{"read", read}, {"written", written}}}});
  }
  out += "\n]}\n";
  return out;
}

void write_trace(const Trace& trace, const std::string& path) {
  const std::string text = trace_to_json(trace);
  try {
    write_file_atomic(path, text);
  } catch (const InputError& e) {
    throw TraceError(e.what());
  }
}

// ---------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------

namespace {

constexpr std::int64_t kMaxDim = 0x7fffffff;
constexpr std::int64_t kMaxElems = std::int64_t(1) << 40;  // as common/harness.cpp: beyond any GPU
constexpr std::int64_t kMaxBytes = std::int64_t(1) << 50;
constexpr std::int64_t kMaxCount = std::int64_t(1) << 62;
constexpr double kMaxTimeUs = kMaxTimeNs / 1000;  // 11.6 days after t0
constexpr int kMaxJsonDepth = 32;    // our files nest 4 deep; deeper is not a trace
constexpr std::int64_t kMaxOrderEntries = std::int64_t(1) << 28;  // per order: 1 GiB as int32

const char* type_of(const json& j) {
  if (j.is_number_integer()) return "an integer";
  if (j.is_number_float()) return "a number with a fraction";
  if (j.is_string()) return "a string";
  if (j.is_boolean()) return "a boolean";
  if (j.is_array()) return "an array";
  if (j.is_object()) return "an object";
  return "null";
}

class Reader {
 public:
  explicit Reader(const std::string& source) : source_(source) {}
  const std::string& source() const { return source_; }

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw TraceError(source_ + ": " + (where.empty() ? "" : where + ": ") + what);
  }

  const json& field(const json& obj, const char* key, const std::string& where) const {
    const auto it = obj.find(key);
    if (it == obj.end()) fail(where, std::string("missing field '") + key + "'");
    return *it;
  }
  const json* optional(const json& obj, const char* key) const {
    const auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }

  std::int64_t integer(const json& j, const std::string& where, std::int64_t lo, std::int64_t hi) const {
    if (!j.is_number_integer()) fail(where, std::string("expected an integer, got ") + type_of(j));
    if (j.is_number_unsigned() && j.get<std::uint64_t>() > std::uint64_t(hi))
      fail(where, std::to_string(j.get<std::uint64_t>()) + " is out of range (at most " + std::to_string(hi) + ")");
    const auto v = j.get<std::int64_t>();
    if (v < lo || v > hi)
      fail(where, std::to_string(v) + " is out of range (" + std::to_string(lo) + ".." + std::to_string(hi) + ")");
    return v;
  }
  std::int64_t integer(const json& obj, const char* key, const std::string& where, std::int64_t lo,
                       std::int64_t hi) const {
    return integer(field(obj, key, where), where + "." + key, lo, hi);
  }
  double number(const json& obj, const char* key, const std::string& where, double lo, double hi) const {
    const json& j = field(obj, key, where);
    if (!j.is_number()) fail(where + "." + key, std::string("expected a number, got ") + type_of(j));
    const double v = j.get<double>();
    if (!std::isfinite(v) || v < lo || v > hi)
      fail(where + "." + key, "value " + j.dump() + " is out of range");
    return v;
  }
  std::string string(const json& obj, const char* key, const std::string& where) const {
    const json& j = field(obj, key, where);
    if (!j.is_string()) fail(where + "." + key, std::string("expected a string, got ") + type_of(j));
    return j.get<std::string>();
  }
  bool boolean(const json& obj, const char* key, const std::string& where) const {
    const json& j = field(obj, key, where);
    if (!j.is_boolean()) fail(where + "." + key, std::string("expected true or false, got ") + type_of(j));
    return j.get<bool>();
  }
  const json& object(const json& obj, const char* key, const std::string& where) const {
    const json& j = field(obj, key, where);
    if (!j.is_object()) fail(where + "." + key, std::string("expected an object, got ") + type_of(j));
    return j;
  }
  const json& array(const json& obj, const char* key, const std::string& where) const {
    const json& j = field(obj, key, where);
    if (!j.is_array()) fail(where + "." + key, std::string("expected an array, got ") + type_of(j));
    return j;
  }
  // A running statistic: a float, or "inf" / "-inf".
  float statistic(const json& j, const std::string& where) const {
    if (j.is_string() && (j.get<std::string>() == "inf" || j.get<std::string>() == "-inf"))
      return j.get<std::string>() == "inf" ? INFINITY : -INFINITY;
    if (!j.is_number()) fail(where, std::string("expected a number, \"inf\" or \"-inf\", got ") + type_of(j));
    const double v = j.get<double>();
    if (!(std::fabs(v) <= 3.4028234663852886e38)) fail(where, "value " + j.dump() + " is out of float range");
    return static_cast<float>(v);
  }
  // A time in microseconds in the file → nanoseconds in the model.
  double time_ns(const json& obj, const char* key, const std::string& where, bool duration) const {
    const double us = number(obj, key, where, duration ? 0.0 : -kMaxTimeUs, kMaxTimeUs);
    return std::round(us * 1000.0);
  }
  std::vector<std::int64_t> int_array(const json& obj, const char* key, const std::string& where,
                                      std::size_t min_len, std::size_t max_len, std::int64_t lo,
                                      std::int64_t hi) const {
    const json& a = array(obj, key, where);
    const std::string w = where + "." + key;
    if (a.size() < min_len || a.size() > max_len)
      fail(w, "expected " + std::to_string(min_len) + (min_len == max_len ? "" : " to " + std::to_string(max_len)) +
                  " entries, got " + std::to_string(a.size()));
    std::vector<std::int64_t> v;
    for (std::size_t i = 0; i < a.size(); ++i) v.push_back(integer(a[i], w + "[" + std::to_string(i) + "]", lo, hi));
    return v;
  }

 private:
  const std::string& source_;
};

// What a pass over the text learns before any of it is parsed: the deepest bracket nesting
// (stopping early past a limit), and a bound on the bytes parsing will allocate.
struct JsonScan {
  int depth = 0;
  std::uint64_t bytes = 0;
};

// The bound counts nlohmann::json's DOM as libstdc++ and glibc's malloc build it (16-byte chunks,
// 8 bytes of header): a value in an array takes its 16-byte slot, three while the vector grows
// (the old buffer and the new one); an object member 96 (the map's node: the key's string and the
// value, and the header); an object 64 and an array 32 (the map or vector itself); a string value
// 48 (the std::string) and, past 15 characters, its text; a key, its text. Then the lexer's buffers
// (five times the longest string), and the Trace built from the DOM while it lives: for every
// object, three Events (a vector's growth), its track id, and every string again. The text of a
// string counts its escapes, so it bounds the string. A JSON of empty objects needs about 130 times
// its size; a step program's trace about 15 (plus 1 MiB). A linear scan: nlohmann's parser callback would check the depth too
// but re-walks the parent array at every closed object, which made a 1M-event trace take minutes.
JsonScan scan_json(std::string_view text, int depth_limit) {
  JsonScan out;
  auto heap = [](std::uint64_t len) -> std::uint64_t { return len > 15 ? (len + 1 + 8 + 15) / 16 * 16 : 0; };
  std::vector<char> open;  // the containers around the cursor: '[' or '{'
  std::uint64_t string_len = 0, longest = 0, strings = 0, objects = 0;
  bool in_string = false, escaped = false, after_string = false;
  char prev = '\0';  // the last significant character outside strings
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      if (in_string) ++string_len;
      else {
        out.bytes += 48 + heap(string_len);  // a value, until a ':' says it was a key
        strings += string_len;
        longest = std::max(longest, string_len);
        after_string = true;
        prev = '"';
      }
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    const bool in_array = !open.empty() && open.back() == '[';
    if (in_array && c != ',' && c != ']' && (prev == '[' || prev == ',')) out.bytes += 48;  // a slot of the array
    if (c == '"') {
      in_string = true;
      string_len = 0;
    } else if (c == '[' || c == '{') {
      out.bytes += c == '[' ? 32 : 64;
      objects += c == '{' ? 1 : 0;
      open.push_back(c);
      out.depth = std::max(out.depth, int(open.size()));
      if (out.depth > depth_limit) return out;
    } else if (c == ']' || c == '}') {
      if (!open.empty()) open.pop_back();
    } else if (c == ':' && after_string) {
      out.bytes += 96 - 48;  // a member: its node; the string before it was its key, not a value
    }
    after_string = false;
    prev = c;
  }
  out.bytes += 5 * longest + objects * (3 * sizeof(Event) + sizeof(std::int64_t)) + 2 * strings + (std::uint64_t(1) << 20);
  return out;
}

// Empties `j` from the leaves up, allocating nothing: nlohmann's destructor moves a container's
// elements into a vector as large as the container first, and where memory ran out while parsing,
// that allocation failed again inside a noexcept destructor (std::terminate, exit 134). The
// recursion is as deep as the nesting, which scan_json has bounded.
void release(json& j) noexcept {
  if (j.is_array()) {
    json::array_t& a = *j.get_ptr<json::array_t*>();
    while (!a.empty()) {
      release(a.back());
      a.pop_back();
    }
  } else if (j.is_object()) {
    json::object_t& o = *j.get_ptr<json::object_t*>();
    while (!o.empty()) {
      const auto last = std::prev(o.end());
      release(last->second);
      o.erase(last);
    }
  }
}

// A parsed document that is released (above) however the reading ends.
class Document {
 public:
  Document() = default;
  Document(const Document&) = delete;
  Document& operator=(const Document&) = delete;
  ~Document() { release(root); }
  json root;
};

// Parses `text` into `into.root`, which owns whatever was built when parsing stops (an error, or
// memory running out), so that its release above is the one that runs.
void parse_json(std::string_view text, const Reader& r, Document& into) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) r.fail("", "empty file (truncated?)");
  // Deep nesting is refused before parsing: destroying a deeply nested json recurses.
  const JsonScan scan = scan_json(text, kMaxJsonDepth);
  if (scan.depth > kMaxJsonDepth)
    r.fail("", "JSON nested more than " + std::to_string(kMaxJsonDepth) + " levels deep: not a trace");
  // Whatever the JSON's shape, what parsing allocates is refused before it starts when it is more
  // than the memory there is (InputError: "needs X GiB", exit code 2).
  try {
    require_host_memory(scan.bytes, r.source() + ": parsing this trace");
  } catch (const InputError& e) {
    throw TraceUnreadable(e.what());
  }
  try {
    nlohmann::detail::json_sax_dom_parser<json> dom(into.root);
    json::sax_parse(text.begin(), text.end(), &dom);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    if (const auto p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    // The parser stops at the end of a cut-off file whatever it was in the middle of.
    const bool truncated = e.byte > text.size() || what.find("unexpected end of input") != std::string::npos;
    r.fail("", (truncated ? "truncated JSON: " : "invalid JSON: ") + what);
  } catch (const json::exception& e) {
    r.fail("", std::string("invalid JSON: ") + e.what());
  }
}

Meta read_meta(const json& o, const Reader& r) {
  const std::string w = "otherData";
  Meta m;
  // Schema first: a file of another kind or version gets that error, not a missing field.
  const std::string schema = r.string(o, "schema", w);
  if (schema != kSchemaName) r.fail(w + ".schema", "'" + schema + "' is not a flashsteps trace");
  m.schema_version = static_cast<int>(r.integer(o, "schema_version", w, 0, kMaxDim));
  if (m.schema_version != kSchemaVersion)
    r.fail(w + ".schema_version", "version " + std::to_string(m.schema_version) +
                                      " is not known to this reader (it reads version " +
                                      std::to_string(kSchemaVersion) + ")");
  m.gpu = r.string(o, "gpu", w);
  m.driver = r.string(o, "driver", w);
  m.commit = r.string(o, "commit", w);
  m.date = r.string(o, "date", w);
  m.step = r.string(o, "step", w);
  m.variant = r.string(o, "variant", w);
  m.pass = r.string(o, "pass", w);
  const json& shape = r.object(o, "shape", w);
  m.B = static_cast<int>(r.integer(shape, "B", w + ".shape", 1, kMaxDim));
  m.H = static_cast<int>(r.integer(shape, "H", w + ".shape", 1, kMaxDim));
  m.N = static_cast<int>(r.integer(shape, "N", w + ".shape", 1, kMaxDim));
  m.d = static_cast<int>(r.integer(shape, "d", w + ".shape", 1, kMaxDim));
  if (double(m.B) * m.H * m.N * m.d > double(kMaxElems))
    r.fail(w + ".shape", "B·H·N·d = " + std::to_string(double(m.B) * m.H * m.N * m.d) +
                             " elements is beyond any GPU's memory");
  m.causal = r.boolean(o, "causal", w);
  m.scale = static_cast<float>(r.number(o, "scale", w, -3.4e38, 3.4e38));
  if (r.optional(o, "dropout")) m.dropout = static_cast<float>(r.number(o, "dropout", w, 0, 1));
  if (r.optional(o, "dtype")) m.dtype = r.string(o, "dtype", w);
  if (r.optional(o, "block_mask")) m.block_mask = r.string(o, "block_mask", w);
  const json& tiles = r.object(o, "tiles", w);
  m.Br = static_cast<int>(r.integer(tiles, "Br", w + ".tiles", 0, kMaxDim));
  m.Bc = static_cast<int>(r.integer(tiles, "Bc", w + ".tiles", 0, kMaxDim));
  m.sram_budget_bytes = r.integer(o, "sram_budget_bytes", w, 0, kMaxBytes);
  m.smem_per_cta_bytes = r.integer(o, "smem_per_cta_bytes", w, 0, kMaxBytes);
  const json& io = r.object(o, "io_model", w);
  m.io_read_bytes = r.integer(io, "read_bytes", w + ".io_model", 0, kMaxBytes);
  m.io_write_bytes = r.integer(io, "write_bytes", w + ".io_model", 0, kMaxBytes);
  m.event_cap = r.integer(o, "event_cap", w, 0, kMaxCount);
  m.events_dropped = r.integer(o, "events_dropped", w, 0, kMaxCount);

  const json& tensors = r.array(o, "tensors", w);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::string wt = w + ".tensors[" + std::to_string(i) + "]";
    if (!tensors[i].is_object()) r.fail(wt, std::string("expected an object, got ") + type_of(tensors[i]));
    TensorInfo ti;
    const std::string name = r.string(tensors[i], "name", wt);
    const auto id = tensor_from_name(name);
    if (!id) r.fail(wt + ".name", "'" + name + "' is not a tensor name");
    ti.id = *id;
    ti.shape = r.int_array(tensors[i], "shape", wt, 3, 4, 1, kMaxDim);
    if (double(shape_elems(ti.shape)) > double(kMaxElems))
      r.fail(wt + ".shape", "the tensor is beyond any GPU's memory");
    ti.bytes = r.integer(tensors[i], "bytes", wt, 0, kMaxBytes);
    m.tensors.push_back(std::move(ti));
  }
  if (const json* c = r.optional(o, "clusters")) {
    const std::string wc = w + ".clusters";
    if (!c->is_object()) r.fail(wc, std::string("expected an object, got ") + type_of(*c));
    Clustering& k = m.clusters;
    k.hashes = static_cast<int>(r.integer(*c, "hashes", wc, 1, kMaxRounds));
    k.q_cluster = static_cast<int>(r.integer(*c, "q_cluster", wc, 1, m.N));
    k.k_cluster = static_cast<int>(r.integer(*c, "k_cluster", wc, 1, m.N));
    // Orders are held whole in memory: a viewer's trace is small (B·H·hashes·N each).
    const std::int64_t n = std::int64_t(m.B) * m.H * k.hashes * m.N;
    if (n > kMaxOrderEntries) r.fail(wc, std::to_string(n) + " order entries are more than a trace holds");
    for (const char* key : {"q_order", "k_order"}) {
      const auto v = r.int_array(*c, key, wc, std::size_t(n), std::size_t(n), 0, m.N - 1);
      (std::string(key) == "q_order" ? k.q_order : k.k_order).assign(v.begin(), v.end());
    }
  }
  if (const json* u = r.optional(o, "untraced")) {
    const std::string wu = w + ".untraced";
    if (!u->is_array()) r.fail(wu, std::string("expected an array, got ") + type_of(*u));
    for (std::size_t i = 0; i < u->size(); ++i) {
      const std::string wi = wu + "[" + std::to_string(i) + "]";
      const json& e = (*u)[i];
      if (!e.is_object()) r.fail(wi, std::string("expected an object, got ") + type_of(e));
      Untraced x;
      x.name = r.string(e, "name", wi);
      x.read_bytes = r.integer(e, "read_bytes", wi, 0, kMaxBytes);
      x.write_bytes = r.integer(e, "write_bytes", wi, 0, kMaxBytes);
      const json& writes = r.array(e, "writes", wi);
      for (std::size_t j = 0; j < writes.size(); ++j) {
        const std::string wj = wi + ".writes[" + std::to_string(j) + "]";
        if (!writes[j].is_string()) r.fail(wj, std::string("expected a string, got ") + type_of(writes[j]));
        const auto t = tensor_from_name(writes[j].get<std::string>());
        if (!t) r.fail(wj, "'" + writes[j].get<std::string>() + "' is not a tensor name");
        x.writes.push_back(*t);
      }
      m.untraced.push_back(std::move(x));
    }
  }
  if (const json* c = r.optional(o, "cache")) {  // a decoding trace (step 10): its KV cache
    const std::string wc = w + ".cache";
    if (!c->is_object()) r.fail(wc, std::string("expected an object, got ") + type_of(*c));
    KvCache& k = m.cache;
    k.heads_kv = static_cast<int>(r.integer(*c, "heads_kv", wc, 1, m.H));
    if (m.H % k.heads_kv != 0) r.fail(wc + ".heads_kv", "the query heads H are not a multiple of it");
    k.seqlen_cache = static_cast<int>(r.integer(*c, "seqlen_cache", wc, 1, kMaxDim));
    k.slots = static_cast<int>(r.integer(*c, "slots", wc, 1, kMaxDim));
    k.page_size = static_cast<int>(r.integer(*c, "page_size", wc, 0, kMaxDim));
    k.splits = static_cast<int>(r.integer(*c, "splits", wc, 1, kMaxDim));
    k.append = r.boolean(*c, "append", wc);
    if (double(k.slots) * k.heads_kv * m.d > double(kMaxElems) ||
        double(m.B) * m.H * m.N * double(k.splits) * m.d > double(kMaxElems) ||
        double(m.B) * m.H * m.N * double(k.seqlen_cache) > double(kMaxElems))
      r.fail(wc, "the cache is beyond any GPU's memory");
    const auto lengths = r.int_array(*c, "lengths", wc, std::size_t(m.B), std::size_t(m.B), 0, k.seqlen_cache);
    k.lengths.assign(lengths.begin(), lengths.end());
    if (k.paged()) {
      const std::int64_t per = (std::int64_t(k.seqlen_cache) + k.page_size - 1) / k.page_size;
      const std::int64_t n = std::int64_t(m.B) * per, most = std::int64_t(m.B) * (k.slots / k.page_size + 1);
      if (n > kMaxOrderEntries) r.fail(wc, std::to_string(n) + " block table entries are more than a trace holds");
      const auto table = r.int_array(*c, "block_table", wc, std::size_t(n), std::size_t(std::max(n, most)), 0,
                                     k.slots / k.page_size - 1);
      if (table.size() % std::size_t(m.B) != 0)
        r.fail(wc + ".block_table", "expected a row of entries per sequence (B = " + std::to_string(m.B) + ")");
      k.block_table.assign(table.begin(), table.end());
    }
    if (r.optional(*c, "batch_idx")) {
      const auto idx = r.int_array(*c, "batch_idx", wc, std::size_t(m.B), std::size_t(m.B), 0,
                                   k.slots / k.seqlen_cache - 1);
      k.batch_idx.assign(idx.begin(), idx.end());
    }
  }
  return m;
}

std::vector<Kernel> read_kernels(const json& o, const Reader& r) {
  std::vector<Kernel> out;
  const json& kernels = r.array(o, "kernels", "otherData");
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    const std::string w = "otherData.kernels[" + std::to_string(i) + "]";
    const json& k = kernels[i];
    if (!k.is_object()) r.fail(w, std::string("expected an object, got ") + type_of(k));
    Kernel kn;
    kn.name = r.string(k, "name", w);
    const auto grid = r.int_array(k, "grid", w, 3, 3, 1, kMaxDim);
    const auto block = r.int_array(k, "block", w, 3, 3, 1, 1024);
    if (double(grid[0]) * grid[1] * grid[2] > double(kMaxElems)) r.fail(w + ".grid", "more CTAs than any GPU runs");
    for (int a = 0; a < 3; ++a) {
      kn.grid[a] = static_cast<int>(grid[a]);
      kn.block[a] = static_cast<int>(block[a]);
    }
    kn.smem_bytes = r.integer(k, "smem_bytes", w, 0, kMaxBytes);
    kn.ts_ns = r.time_ns(k, "ts", w, false);
    kn.dur_ns = r.time_ns(k, "dur", w, true);
    if (r.optional(k, "lanes")) kn.lanes = static_cast<int>(r.integer(k, "lanes", w, 1, kMaxLanes));
    if (r.optional(k, "lane_names")) {
      const json& names = r.array(k, "lane_names", w);
      // One per lane: a viewer labels a track with lane_names[lane].
      if (names.size() != std::size_t(kn.lanes))
        r.fail(w + ".lane_names", std::to_string(names.size()) + " names for " + std::to_string(kn.lanes) + " lanes");
      for (std::size_t j = 0; j < names.size(); ++j) {
        if (!names[j].is_string())
          r.fail(w + ".lane_names[" + std::to_string(j) + "]", std::string("expected a string, got ") + type_of(names[j]));
        kn.lane_names.push_back(names[j].get<std::string>());
      }
    }
    out.push_back(std::move(kn));
  }
  return out;
}

std::vector<NamedBuffer> read_buffers(const json& o, const Reader& r) {
  std::vector<NamedBuffer> out;
  const json& buffers = r.array(o, "buffers", "otherData");
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const std::string w = "otherData.buffers[" + std::to_string(i) + "]";
    const json& b = buffers[i];
    if (!b.is_object()) r.fail(w, std::string("expected an object, got ") + type_of(b));
    NamedBuffer nb;
    nb.name = r.string(b, "name", w);
    const std::string addr = r.string(b, "address", w);
    const bool hex = addr.size() > 2 && addr.size() <= 18 && addr[0] == '0' && (addr[1] == 'x' || addr[1] == 'X') &&
                     addr.find_first_not_of("0123456789abcdefABCDEF", 2) == std::string::npos;
    if (!hex) r.fail(w + ".address", "'" + addr + "' is not a hexadecimal address like \"0x7f0000\"");
    nb.address = std::stoull(addr.substr(2), nullptr, 16);
    nb.bytes = static_cast<std::uint64_t>(r.integer(b, "bytes", w, 0, kMaxBytes));
    out.push_back(std::move(nb));
  }
  return out;
}

// parse_trace, but for memory running out (a bound is a bound of what was counted; the machine's
// other processes take memory too).
Trace trace_of_text(std::string_view text, const std::string& source) {
  const Reader r(source);
  Document doc;
  parse_json(text, r, doc);
  const json& root = doc.root;
  if (!root.is_object()) r.fail("", std::string("expected a JSON object at the top, got ") + type_of(root));

  Trace t;
  if (const json* unit = r.optional(root, "displayTimeUnit"); unit && !unit->is_string())
    r.fail("displayTimeUnit", std::string("expected a string, got ") + type_of(*unit));
  const json& other = r.object(root, "otherData", "");
  t.meta = read_meta(other, r);
  t.kernels = read_kernels(other, r);
  t.buffers = read_buffers(other, r);

  const json& events = r.array(root, "traceEvents", "");
  std::map<std::int64_t, Track> tracks;  // by tid; a corrupt tid cannot size a vector
  std::vector<std::int64_t> event_tids;
  bool all_depths = true;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const std::string w = "traceEvents[" + std::to_string(i) + "]";
    const json& e = events[i];
    if (!e.is_object()) r.fail(w, std::string("expected an object, got ") + type_of(e));
    const std::string ph = r.string(e, "ph", w);
    if (ph == "M") {
      const std::string name = r.string(e, "name", w);
      const std::int64_t pid = r.integer(e, "pid", w, 0, 1);
      if (pid != 1 || name != "thread_name") continue;  // process names, sort indices: for viewers
      const std::int64_t tid = r.integer(e, "tid", w, 1, kMaxDim);
      const json& args = r.object(e, "args", w);
      Track tr;
      tr.kernel = static_cast<int>(r.integer(args, "kernel", w + ".args", 0, kMaxDim));
      if (std::size_t(tr.kernel) >= t.kernels.size())
        r.fail(w + ".args.kernel", std::to_string(tr.kernel) + " names no kernel (otherData.kernels has " +
                                       std::to_string(t.kernels.size()) + ")");
      tr.cta = static_cast<int>(r.integer(args, "cta", w + ".args", 0, kMaxDim));
      if (r.optional(args, "lane")) {
        const int lanes = t.kernels[std::size_t(tr.kernel)].lanes;
        tr.lane = static_cast<int>(r.integer(args, "lane", w + ".args", 0, kMaxLanes - 1));
        if (tr.lane >= lanes)
          r.fail(w + ".args.lane", std::to_string(tr.lane) + " is not a lane of kernel " + std::to_string(tr.kernel) +
                                       " (it has " + std::to_string(lanes) + ")");
      }
      tr.sm = static_cast<int>(r.integer(args, "sm", w + ".args", -1, kMaxSm));
      tr.dropped = r.integer(args, "dropped", w + ".args", 0, kMaxCount);
      if (!tracks.emplace(tid, tr).second) r.fail(w, "a second thread_name for tid " + std::to_string(tid));
    } else if (ph == "X") {
      const std::int64_t pid = r.integer(e, "pid", w, 0, 1);
      if (pid == 0) {
        HostRange hr;
        hr.name = r.string(e, "name", w);
        hr.ts_ns = r.time_ns(e, "ts", w, false);
        hr.dur_ns = r.time_ns(e, "dur", w, true);
        const json* args = r.optional(e, "args");
        const json* depth = args && args->is_object() ? r.optional(*args, "depth") : nullptr;
        if (depth)
          hr.depth = static_cast<int>(r.integer(*depth, w + ".args.depth", 0, 1 << 20));
        else
          all_depths = false;
        t.ranges.push_back(std::move(hr));
        continue;
      }
      Event ev;
      event_tids.push_back(r.integer(e, "tid", w, 1, kMaxDim));
      const std::string cat = r.string(e, "cat", w);
      const auto kind = kind_from_name(cat);
      if (!kind) r.fail(w + ".cat", "'" + cat + "' is not an event kind");
      ev.kind = *kind;
      ev.ts_ns = r.time_ns(e, "ts", w, false);
      ev.dur_ns = r.time_ns(e, "dur", w, true);
      const json& args = r.object(e, "args", w);
      const std::string wa = w + ".args";
      ev.seq = r.integer(args, "seq", wa, 0, kMaxCount);
      if (const json* tn = r.optional(args, "tensor")) {
        if (!tn->is_string()) r.fail(wa + ".tensor", std::string("expected a string, got ") + type_of(*tn));
        const auto tensor = tensor_from_name(tn->get<std::string>());
        if (!tensor) r.fail(wa + ".tensor", "'" + tn->get<std::string>() + "' is not a tensor name");
        ev.tensor = *tensor;
      }
      ev.bh = static_cast<std::int32_t>(r.integer(args, "bh", wa, 0, kMaxDim));
      ev.row0 = static_cast<std::int32_t>(r.integer(args, "row0", wa, 0, kMaxDim));
      ev.rows = static_cast<std::int32_t>(r.integer(args, "rows", wa, 0, kMaxDim));
      ev.col0 = static_cast<std::int32_t>(r.integer(args, "col0", wa, 0, kMaxDim));
      ev.cols = static_cast<std::int32_t>(r.integer(args, "cols", wa, 0, kMaxDim));
      ev.bytes = r.integer(args, "bytes", wa, 0, kMaxBytes);
      ev.cached = r.boolean(args, "cached", wa);
      if (const json* m = r.optional(args, "m")) ev.m = r.statistic(*m, wa + ".m");
      if (const json* l = r.optional(args, "l")) ev.l = r.statistic(*l, wa + ".l");
      if (const json* sr = r.optional(args, "sample_row"))
        ev.sample_row = static_cast<std::int32_t>(r.integer(*sr, wa + ".sample_row", -1, kMaxDim));
      if (const json* rd = r.optional(args, "round"))
        ev.round = static_cast<std::int32_t>(r.integer(*rd, wa + ".round", -1, kMaxRounds - 1));
      t.events.push_back(ev);
    } else if (ph == "i") {
      r.integer(e, "pid", w, 0, 0);
      HostMark hm;
      hm.name = r.string(e, "name", w);
      hm.ts_ns = r.time_ns(e, "ts", w, false);
      t.marks.push_back(std::move(hm));
    } else if (ph == "C") {
      r.object(e, "args", w);  // derived from the events; read for form only
    } else {
      r.fail(w + ".ph", "unknown phase '" + ph + "' (a trace has M, X, i and C events)");
    }
  }

  // Tracks are tids 1..T without gaps.
  std::int64_t expect = 1;
  for (const auto& [tid, tr] : tracks) {
    if (tid != expect) r.fail("traceEvents", "track tid " + std::to_string(expect) + " has no thread_name event");
    t.tracks.push_back(tr);
    ++expect;
  }
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    if (event_tids[i] > static_cast<std::int64_t>(t.tracks.size()))
      r.fail("traceEvents", "a device event (seq " + std::to_string(t.events[i].seq) + ") is on tid " +
                                std::to_string(event_tids[i]) + ", which names no track");
    t.events[i].track = static_cast<int>(event_tids[i] - 1);
  }
  std::stable_sort(t.events.begin(), t.events.end(),
                   [](const Event& a, const Event& b) { return a.seq < b.seq; });
  if (!all_depths) compute_depths(t.ranges);
  return t;
}

}  // namespace

Trace parse_trace(std::string_view text, const std::string& source) {
  try {
    return trace_of_text(text, source);
  } catch (const std::bad_alloc&) {  // the document is released by now (Document)
    throw TraceUnreadable(source + ": not enough memory to read this trace (it ran out while parsing)");
  }
}

Trace read_trace(const std::string& path) {
  std::uint64_t size = 0;
  try {
    size = require_input_file(path);
    if (size > std::uint64_t(kMaxTraceFileBytes))
      throw InputError(path + ": " + std::to_string(size) + " bytes is larger than any trace this reader accepts (" +
                       std::to_string(kMaxTraceFileBytes) + ")");
    require_host_memory(size, path + ": reading this trace");  // the text; parse_trace bounds the rest
  } catch (const InputError& e) {
    throw TraceUnreadable(e.what());
  }
  try {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw TraceUnreadable(path + ": cannot open (" + std::strerror(errno) + ")");
    std::string text(static_cast<std::size_t>(size), '\0');
    in.read(text.data(), static_cast<std::streamsize>(size));
    if (static_cast<std::uint64_t>(in.gcount()) != size) throw TraceUnreadable(path + ": read failed");
    return parse_trace(text, path);
  } catch (const std::bad_alloc&) {
    throw TraceUnreadable(path + ": not enough memory to read this trace (" + std::to_string(size) + " bytes)");
  }
}

}  // namespace fs::trace
