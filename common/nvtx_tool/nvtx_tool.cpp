// The project's NVTX tool (nvtx_tool.hpp). Compiled twice: into fa_nvtx_tool (static, with
// FS_NVTX_TOOL_STATIC) and into libfs_nvtx_tool.so.
//
// Traps, each checked by tests/test_trace_nvtx*.cpp:
// - This file is the tool, not a client: NVTX_NO_IMPL, or it would carry its own copy of NVTX's
//   implementation and weak symbols.
// - The static form is found only through InitializeInjectionNvtx2_fnptr, a symbol no code
//   calls. From an archive the linker would leave it out and the tool would silently never
//   load: fa_common links fa_nvtx_tool with WHOLE_ARCHIVE.
// - NVTX's extension headers wrap their declarations in `#pragma GCC visibility push(internal)`
//   and the shared library is built with hidden visibility: every entry point NVTX looks up
//   with dlsym is marked FS_NVTX_EXPORT explicitly.
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>  // with nvToolsExt.h: the callback tables (nvtxDetail/nvtxTypes.h)

#include "common/nvtx_tool/nvtx_tool.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "common/trace/clock.hpp"
#include "common/trace/trace_io.hpp"

#define FS_NVTX_EXPORT __attribute__((visibility("default")))

namespace fs::nvtx_tool {

namespace {

struct Region {
  std::size_t bytes = 0;
  std::string name;
  nvtxMemHeapHandle_t heap = nullptr;
};

struct Open {
  std::string name;
  std::int64_t ts = 0;
  bool recorded = false;
};

struct State {
  std::mutex mu;
  std::atomic<bool> attached{false};
  std::atomic<bool> recording{false};
  std::vector<trace::HostRange> ranges;
  std::vector<trace::HostMark> marks;
  std::map<std::uintptr_t, Region> regions;            // registered memory, by address
  std::map<std::uintptr_t, Region> parts;              // name_part: parts of regions, by address
  std::map<nvtxMemHeapHandle_t, std::pair<std::uintptr_t, std::size_t>> pools;  // heap → its range
  std::vector<std::string> misuses;                    // what compute-sanitizer would reject
  std::map<std::uintptr_t, trace::NamedBuffer> named;  // named before or during the recording
  std::unordered_map<nvtxRangeId_t, Open> started;     // nvtxRangeStart ... nvtxRangeEnd
  nvtxRangeId_t next_id = 1;
  std::deque<std::string> strings;  // domain names and registered strings: handles point here
  std::uintptr_t next_heap = 1;
};

// Never destroyed: NVTX calls can come from other objects' static destructors.
State& state() {
  static State* s = new State;
  return *s;
}

// NVTX nests push/pop ranges per thread and per domain.
thread_local std::map<nvtxDomainHandle_t, std::vector<Open>> t_stacks;

std::string narrow(const wchar_t* w) {
  std::string s;
  for (; w && *w; ++w) s += (*w >= 0 && *w < 128) ? static_cast<char>(*w) : '?';
  return s;
}

std::string message(const nvtxEventAttributes_t* a) {
  if (!a) return {};
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      return a->message.ascii ? a->message.ascii : "";
    case NVTX_MESSAGE_TYPE_UNICODE:
      return narrow(a->message.unicode);
    case NVTX_MESSAGE_TYPE_REGISTERED:
      return a->message.registered ? *reinterpret_cast<const std::string*>(a->message.registered) : "";
    default:
      return {};
  }
}

std::string message(nvtxMessageType_t type, const nvtxMessageValue_t& v) {
  nvtxEventAttributes_t a{};
  a.messageType = type;
  a.message = v;
  return message(&a);
}

int push(nvtxDomainHandle_t domain, std::string name) {
  auto& stack = t_stacks[domain];
  Open o;
  if (state().recording.load(std::memory_order_relaxed)) {
    o.name = std::move(name);
    o.ts = trace::host_clock_ns();
    o.recorded = true;
  }
  stack.push_back(std::move(o));
  return static_cast<int>(stack.size()) - 1;
}

int pop(nvtxDomainHandle_t domain) {
  auto& stack = t_stacks[domain];
  if (stack.empty()) return -1;
  const std::int64_t now = trace::host_clock_ns();
  Open o = std::move(stack.back());
  stack.pop_back();
  State& s = state();
  if (o.recorded && s.recording.load(std::memory_order_relaxed)) {
    const std::lock_guard<std::mutex> lock(s.mu);
    s.ranges.push_back({std::move(o.name), double(o.ts), double(now - o.ts), 0});
  }
  return static_cast<int>(stack.size());
}

void mark(std::string name) {
  State& s = state();
  if (!s.recording.load(std::memory_order_relaxed)) return;
  const std::int64_t now = trace::host_clock_ns();
  const std::lock_guard<std::mutex> lock(s.mu);
  s.marks.push_back({std::move(name), double(now)});
}

nvtxRangeId_t start_range(std::string name) {
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mu);
  const nvtxRangeId_t id = s.next_id++;
  if (s.recording.load(std::memory_order_relaxed)) s.started[id] = {std::move(name), trace::host_clock_ns(), true};
  return id;
}

void end_range(nvtxRangeId_t id) {
  const std::int64_t now = trace::host_clock_ns();
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mu);
  const auto it = s.started.find(id);
  if (it == s.started.end()) return;
  if (s.recording.load(std::memory_order_relaxed))
    s.ranges.push_back({std::move(it->second.name), double(it->second.ts), double(now - it->second.ts), 0});
  s.started.erase(it);
}

const char* intern(std::string text) {
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mu);
  s.strings.push_back(std::move(text));
  return reinterpret_cast<const char*>(&s.strings.back());
}

// --- core callbacks --------------------------------------------------------------------

void NVTX_API mark_ex(const nvtxEventAttributes_t* a) { mark(message(a)); }
void NVTX_API mark_a(const char* m) { mark(m ? m : ""); }
void NVTX_API mark_w(const wchar_t* m) { mark(narrow(m)); }
nvtxRangeId_t NVTX_API range_start_ex(const nvtxEventAttributes_t* a) { return start_range(message(a)); }
nvtxRangeId_t NVTX_API range_start_a(const char* m) { return start_range(m ? m : ""); }
nvtxRangeId_t NVTX_API range_start_w(const wchar_t* m) { return start_range(narrow(m)); }
void NVTX_API range_end(nvtxRangeId_t id) { end_range(id); }
int NVTX_API range_push_ex(const nvtxEventAttributes_t* a) { return push(nullptr, message(a)); }
int NVTX_API range_push_a(const char* m) { return push(nullptr, m ? m : ""); }
int NVTX_API range_push_w(const wchar_t* m) { return push(nullptr, narrow(m)); }
int NVTX_API range_pop() { return pop(nullptr); }

void NVTX_API domain_mark_ex(nvtxDomainHandle_t, const nvtxEventAttributes_t* a) { mark(message(a)); }
nvtxRangeId_t NVTX_API domain_range_start_ex(nvtxDomainHandle_t, const nvtxEventAttributes_t* a) {
  return start_range(message(a));
}
void NVTX_API domain_range_end(nvtxDomainHandle_t, nvtxRangeId_t id) { end_range(id); }
int NVTX_API domain_range_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) { return push(d, message(a)); }
int NVTX_API domain_range_pop(nvtxDomainHandle_t d) { return pop(d); }
nvtxStringHandle_t NVTX_API domain_register_string_a(nvtxDomainHandle_t, const char* str) {
  return reinterpret_cast<nvtxStringHandle_t>(const_cast<char*>(intern(str ? str : "")));
}
nvtxStringHandle_t NVTX_API domain_register_string_w(nvtxDomainHandle_t, const wchar_t* str) {
  return reinterpret_cast<nvtxStringHandle_t>(const_cast<char*>(intern(narrow(str))));
}
nvtxDomainHandle_t NVTX_API domain_create_a(const char* name) {
  return reinterpret_cast<nvtxDomainHandle_t>(const_cast<char*>(intern(name ? name : "")));
}
nvtxDomainHandle_t NVTX_API domain_create_w(const wchar_t* name) {
  return reinterpret_cast<nvtxDomainHandle_t>(const_cast<char*>(intern(narrow(name))));
}
void NVTX_API domain_destroy(nvtxDomainHandle_t) {}

// --- memory extension ------------------------------------------------------------------

std::uintptr_t region_address(std::uint32_t ref_type, const nvtxMemRegionRef_t& ref) {
  // Our region handles are the regions' addresses, so both kinds of reference are addresses.
  return ref_type == NVTX_MEM_REGION_REF_TYPE_HANDLE ? reinterpret_cast<std::uintptr_t>(ref.handle)
                                                     : reinterpret_cast<std::uintptr_t>(ref.pointer);
}

// A call compute-sanitizer rejects (see misuses() in nvtx_tool.hpp). Called with s.mu held.
void misuse(State& s, std::string what) { s.misuses.push_back(std::move(what)); }

nvtxMemHeapHandle_t NVTX_API mem_heap_register(nvtxDomainHandle_t, const nvtxMemHeapDesc_t* d) {
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mu);
  const auto heap = reinterpret_cast<nvtxMemHeapHandle_t>(s.next_heap++);
  if (!d || d->extCompatID != NVTX_EXT_COMPATID_MEM || d->structSize < sizeof(nvtxMemHeapDesc_t)) {
    misuse(s, "nvtxMemHeapRegister: a descriptor without extCompatID and structSize");
    return heap;
  }
  if (d->usage != NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR || d->type != NVTX_MEM_TYPE_VIRTUAL_ADDRESS)
    misuse(s, "nvtxMemHeapRegister: usage " + std::to_string(d->usage) + ", type " + std::to_string(d->type) +
                  " (compute-sanitizer takes only SUB_ALLOCATOR pools of VIRTUAL_ADDRESS memory)");
  if (!d->typeSpecificDesc || d->typeSpecificDescSize < sizeof(nvtxMemVirtualRangeDesc_t)) {
    misuse(s, "nvtxMemHeapRegister: no virtual range for the pool");
    return heap;
  }
  nvtxMemVirtualRangeDesc_t r;
  std::memcpy(&r, d->typeSpecificDesc, sizeof r);
  s.pools[heap] = {reinterpret_cast<std::uintptr_t>(r.ptr), r.size};
  return heap;
}

void NVTX_API mem_heap_unregister(nvtxDomainHandle_t, nvtxMemHeapHandle_t heap) {
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mu);
  if (!s.pools.erase(heap)) misuse(s, "nvtxMemHeapUnregister: a heap that is not a registered pool");
  for (auto it = s.regions.begin(); it != s.regions.end();)  // its regions go with it
    it = it->second.heap == heap ? s.regions.erase(it) : std::next(it);
}

void NVTX_API mem_heap_reset(nvtxDomainHandle_t, nvtxMemHeapHandle_t heap) {
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mu);
  for (auto it = s.regions.begin(); it != s.regions.end();)
    it = it->second.heap == heap ? s.regions.erase(it) : std::next(it);
}

void NVTX_API mem_regions_register(nvtxDomainHandle_t, const nvtxMemRegionsRegisterBatch_t* b) {
  if (!b || b->regionType != NVTX_MEM_TYPE_VIRTUAL_ADDRESS || !b->regionDescElements) return;
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mu);
  const auto pool = s.pools.find(b->heap);
  if (b->heap == NVTX_MEM_HEAP_HANDLE_PROCESS_WIDE)
    misuse(s, "nvtxMemRegionsRegister: a region on the process-wide heap (compute-sanitizer registers regions "
              "only inside a pool from nvtxMemHeapRegister)");
  else if (pool == s.pools.end())
    misuse(s, "nvtxMemRegionsRegister: a region on a heap that is not a registered pool");
  const auto* base = static_cast<const unsigned char*>(b->regionDescElements);
  const std::size_t stride = std::max(b->regionDescElementSize, sizeof(nvtxMemVirtualRangeDesc_t));
  for (std::size_t i = 0; i < b->regionCount; ++i) {
    nvtxMemVirtualRangeDesc_t r;
    std::memcpy(&r, base + i * stride, sizeof r);
    const auto addr = reinterpret_cast<std::uintptr_t>(r.ptr);
    if (pool != s.pools.end()) {
      const auto [start, bytes] = pool->second;
      if (addr < start || addr - start > bytes || r.size > bytes - (addr - start))
        misuse(s, "nvtxMemRegionsRegister: a region outside its pool");
    }
    s.regions[addr] = {r.size, "", b->heap};
    if (b->regionHandleElementsOut) b->regionHandleElementsOut[i] = reinterpret_cast<nvtxMemRegionHandle_t>(addr);
  }
}

void NVTX_API mem_regions_resize(nvtxDomainHandle_t, const nvtxMemRegionsResizeBatch_t* b) {
  if (!b || b->regionType != NVTX_MEM_TYPE_VIRTUAL_ADDRESS || !b->regionDescElements) return;
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mu);
  const auto* base = static_cast<const unsigned char*>(b->regionDescElements);
  const std::size_t stride = std::max(b->regionDescElementSize, sizeof(nvtxMemVirtualRangeDesc_t));
  for (std::size_t i = 0; i < b->regionDescCount; ++i) {
    nvtxMemVirtualRangeDesc_t r;
    std::memcpy(&r, base + i * stride, sizeof r);
    const auto it = s.regions.find(reinterpret_cast<std::uintptr_t>(r.ptr));
    if (it != s.regions.end()) it->second.bytes = r.size;
  }
}

void NVTX_API mem_regions_unregister(nvtxDomainHandle_t, const nvtxMemRegionsUnregisterBatch_t* b) {
  if (!b || !b->refElements) return;
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mu);
  const auto* base = reinterpret_cast<const unsigned char*>(b->refElements);
  const std::size_t stride = std::max(b->refElementSize, sizeof(nvtxMemRegionRef_t));
  for (std::size_t i = 0; i < b->refCount; ++i) {
    nvtxMemRegionRef_t ref;
    std::memcpy(&ref, base + i * stride, sizeof ref);
    if (!s.regions.erase(region_address(b->refType, ref)))
      misuse(s, "nvtxMemRegionsUnregister: a region that is not registered");
  }
}

void NVTX_API mem_regions_name(nvtxDomainHandle_t, const nvtxMemRegionsNameBatch_t* b) {
  if (!b || !b->regionElements) return;
  std::vector<std::pair<std::uintptr_t, std::string>> names;
  const auto* base = reinterpret_cast<const unsigned char*>(b->regionElements);
  const std::size_t stride = std::max(b->regionElementSize, sizeof(nvtxMemRegionNameDesc_t));
  std::vector<std::string> problems;
  for (std::size_t i = 0; i < b->regionCount; ++i) {
    nvtxMemRegionNameDesc_t d;
    std::memcpy(&d, base + i * stride, sizeof d);
    names.emplace_back(region_address(d.regionRefType, d.region),
                       message(static_cast<nvtxMessageType_t>(d.nameType), d.name));
    const std::string& name = names.back().second;
    const bool printable = std::all_of(name.begin(), name.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
    if (d.nameType != NVTX_MESSAGE_TYPE_ASCII || name.empty() || name.size() > 49 || !printable)
      problems.push_back("nvtxMemRegionsName: '" + name + "' (compute-sanitizer takes ASCII names of 1 to 49 printable "
                         "characters)");
  }
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mu);
  for (auto& p : problems) misuse(s, std::move(p));
  for (auto& [addr, name] : names) {
    const auto it = s.regions.find(addr);
    if (it == s.regions.end()) continue;  // naming memory that was never registered: ignored
    it->second.name = name;
    if (s.recording.load(std::memory_order_relaxed)) s.named[addr] = {name, addr, it->second.bytes};
  }
}

template <typename F>
void set_slot(NvtxFunctionTable table, unsigned size, unsigned id, F fn) {
  if (id <= size && table[id]) *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
}

trace::Trace host_trace(const Capture& c) {
  trace::Trace t;
  t.meta.pass = "host";
  t.meta.step = "nvtx";
  t.meta.B = t.meta.H = t.meta.N = t.meta.d = 1;
  double t0 = 0;
  bool any = false;
  for (const auto& r : c.ranges) t0 = any ? std::min(t0, r.ts_ns) : r.ts_ns, any = true;
  for (const auto& m : c.marks) t0 = any ? std::min(t0, m.ts_ns) : m.ts_ns, any = true;
  t.ranges = c.ranges;
  t.marks = c.marks;
  t.buffers = c.buffers;
  for (auto& r : t.ranges) r.ts_ns -= t0;
  for (auto& m : t.marks) m.ts_ns -= t0;
  return t;
}

void write_at_exit() {
  if (const char* path = std::getenv("FS_NVTX_OUT"); path && *path) {
    try {
      trace::write_trace(host_trace(stop()), path);
    } catch (const std::exception&) {
      // Nothing can be reported from an exit handler of an arbitrary program; the file is absent.
    }
  }
}

}  // namespace

bool attached() { return state().attached.load(); }

void start() {
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mu);
  s.ranges.clear();
  s.marks.clear();
  s.named.clear();
  for (const auto& [addr, r] : s.regions)
    if (!r.name.empty()) s.named[addr] = {r.name, addr, r.bytes};
  for (const auto& [addr, r] : s.parts) s.named[addr] = {r.name, addr, r.bytes};
  s.recording.store(true);
}

void name_part(const void* ptr, std::size_t bytes, const std::string& name) {
  if (!attached()) return;
  State& s = state();
  const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
  const std::lock_guard<std::mutex> lock(s.mu);
  s.parts[addr] = {bytes, name, nullptr};
  if (s.recording.load(std::memory_order_relaxed)) s.named[addr] = {name, addr, bytes};
}

void forget_part(const void* ptr) {
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mu);
  s.parts.erase(reinterpret_cast<std::uintptr_t>(ptr));
}

std::vector<std::string> misuses() {
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mu);
  return s.misuses;
}

Capture stop() {
  State& s = state();
  Capture c;
  {
    const std::lock_guard<std::mutex> lock(s.mu);
    s.recording.store(false);
    c.ranges = std::move(s.ranges);
    c.marks = std::move(s.marks);
    for (auto& [addr, b] : s.named) c.buffers.push_back(std::move(b));
    s.ranges.clear();
    s.marks.clear();
    s.named.clear();
  }
  // By start time, outer before inner; depth from nesting (push/pop and start/end alike).
  std::stable_sort(c.ranges.begin(), c.ranges.end(), [](const trace::HostRange& a, const trace::HostRange& b) {
    return a.ts_ns != b.ts_ns ? a.ts_ns < b.ts_ns : a.dur_ns > b.dur_ns;
  });
  std::vector<double> open_ends;
  for (auto& r : c.ranges) {
    while (!open_ends.empty() && open_ends.back() <= r.ts_ns) open_ends.pop_back();
    r.depth = static_cast<int>(open_ends.size());
    open_ends.push_back(r.ts_ns + r.dur_ns);
  }
  std::stable_sort(c.marks.begin(), c.marks.end(),
                   [](const trace::HostMark& a, const trace::HostMark& b) { return a.ts_ns < b.ts_ns; });
  return c;
}

}  // namespace fs::nvtx_tool

using namespace fs::nvtx_tool;

extern "C" {

FS_NVTX_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (!callbacks || callbacks->struct_size < sizeof(NvtxExportTableCallbacks)) return 0;
  NvtxFunctionTable core = nullptr, core2 = nullptr;
  unsigned core_size = 0, core2_size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size) || !core) return 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size) || !core2) return 0;

  set_slot(core, core_size, NVTX_CBID_CORE_MarkEx, mark_ex);
  set_slot(core, core_size, NVTX_CBID_CORE_MarkA, mark_a);
  set_slot(core, core_size, NVTX_CBID_CORE_MarkW, mark_w);
  set_slot(core, core_size, NVTX_CBID_CORE_RangeStartEx, range_start_ex);
  set_slot(core, core_size, NVTX_CBID_CORE_RangeStartA, range_start_a);
  set_slot(core, core_size, NVTX_CBID_CORE_RangeStartW, range_start_w);
  set_slot(core, core_size, NVTX_CBID_CORE_RangeEnd, range_end);
  set_slot(core, core_size, NVTX_CBID_CORE_RangePushEx, range_push_ex);
  set_slot(core, core_size, NVTX_CBID_CORE_RangePushA, range_push_a);
  set_slot(core, core_size, NVTX_CBID_CORE_RangePushW, range_push_w);
  set_slot(core, core_size, NVTX_CBID_CORE_RangePop, range_pop);
  set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainMarkEx, domain_mark_ex);
  set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainRangeStartEx, domain_range_start_ex);
  set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainRangeEnd, domain_range_end);
  set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, domain_range_push_ex);
  set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, domain_range_pop);
  set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringA, domain_register_string_a);
  set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringW, domain_register_string_w);
  set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, domain_create_a);
  set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainCreateW, domain_create_w);
  set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainDestroy, domain_destroy);

  state().attached.store(true);
  if (const char* out = std::getenv("FS_NVTX_OUT"); out && *out) {
    start();
    std::atexit(write_at_exit);
  }
  return 1;
}

FS_NVTX_EXPORT int InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t* info) {
  if (!info) return 0;
  if (info->moduleId != NVTX_EXT_MODULEID_MEM || info->segmentsCount < 1 || !info->segments) return 1;
  nvtxExtModuleSegment_t& seg = info->segments[0];
  auto slot = [&](std::size_t id, auto fn) {
    if (id < seg.slotCount) seg.functionSlots[id] = reinterpret_cast<intptr_t>(fn);
  };
  slot(NVTX3EXT_CBID_nvtxMemHeapRegister, mem_heap_register);
  slot(NVTX3EXT_CBID_nvtxMemHeapUnregister, mem_heap_unregister);
  slot(NVTX3EXT_CBID_nvtxMemHeapReset, mem_heap_reset);
  slot(NVTX3EXT_CBID_nvtxMemRegionsRegister, mem_regions_register);
  slot(NVTX3EXT_CBID_nvtxMemRegionsResize, mem_regions_resize);
  slot(NVTX3EXT_CBID_nvtxMemRegionsUnregister, mem_regions_unregister);
  slot(NVTX3EXT_CBID_nvtxMemRegionsName, mem_regions_name);
  return 1;
}

FS_NVTX_EXPORT int fs_nvtx_tool_attached(void) { return attached() ? 1 : 0; }
FS_NVTX_EXPORT void fs_nvtx_tool_start(void) { start(); }
FS_NVTX_EXPORT char* fs_nvtx_tool_stop_json(void) {
  const std::string text = fs::trace::trace_to_json(host_trace(stop()));
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (out) std::memcpy(out, text.c_str(), text.size() + 1);
  return out;
}

#ifdef FS_NVTX_TOOL_STATIC
// What NVTX's loader looks for when no NVTX_INJECTION64_PATH is set (load sequence version 2):
// non-weak definitions of its weak pointers.
NvtxInitializeInjectionNvtxFunc_t InitializeInjectionNvtx2_fnptr = InitializeInjectionNvtx2;
NvtxExtInitializeInjectionFunc_t InitializeInjectionNvtxExtension_fnptr = InitializeInjectionNvtxExtension;
#endif

}  // extern "C"
