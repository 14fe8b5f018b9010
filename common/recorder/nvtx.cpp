#include "common/recorder/nvtx.hpp"

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>

#include <cctype>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "common/nvtx_tool/nvtx_tool.hpp"

namespace fs::nvtx {

namespace {

// Created on first use; NVTX keeps domains for the life of the process.
nvtxDomainHandle_t domain() {
  static const nvtxDomainHandle_t d = nvtxDomainCreateA("flashsteps");
  return d;
}

nvtxEventAttributes_t attributes(const char* name) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = name;
  return a;
}

// Buffers registered as pools by live NamedBuffers: start → bytes. A buffer inside one of them
// is a part (nvtx.hpp).
struct Pools {
  std::mutex mu;
  std::map<std::uintptr_t, std::size_t> by_start;
};
Pools& pools() {
  static Pools* p = new Pools;  // never destroyed: NamedBuffers can outlive static destructors
  return *p;
}

bool inside_a_pool(const void* ptr, std::size_t bytes) {
  const auto a = reinterpret_cast<std::uintptr_t>(ptr);
  Pools& p = pools();
  const std::lock_guard<std::mutex> lock(p.mu);
  auto it = p.by_start.upper_bound(a);
  if (it == p.by_start.begin()) return false;
  --it;
  return a - it->first <= it->second && bytes <= it->second - (a - it->first);
}

// The Sanitizer guide's limit on names: 1 to 49 printable ASCII characters.
std::string sanitizer_name(const char* name) {
  std::string out;
  for (const char* c = name; c && *c && out.size() < 49; ++c) out += std::isprint(static_cast<unsigned char>(*c)) ? *c : '?';
  return out.empty() ? "buffer" : out;
}

}  // namespace

Range::Range(const char* name) {
  const nvtxEventAttributes_t a = attributes(name);
  nvtxDomainRangePushEx(domain(), &a);
}

Range::~Range() { nvtxDomainRangePop(domain()); }

void mark(const char* name) {
  const nvtxEventAttributes_t a = attributes(name);
  nvtxDomainMarkEx(domain(), &a);
}

NamedBuffers::~NamedBuffers() { clear(); }

NamedBuffers& NamedBuffers::operator=(NamedBuffers&& other) noexcept {
  if (this != &other) {
    clear();
    entries_ = std::move(other.entries_);
    other.entries_.clear();
  }
  return *this;
}

void NamedBuffers::add(const void* ptr, std::size_t bytes, const char* name) {
  if (!ptr || bytes == 0) return;
  const std::string label = sanitizer_name(name);
  if (inside_a_pool(ptr, bytes)) {
    nvtx_tool::name_part(ptr, bytes, label);
    entries_.push_back({ptr, nullptr});
    return;
  }
  nvtxMemVirtualRangeDesc_t range{};
  range.ptr = ptr;
  range.size = bytes;

  nvtxMemHeapDesc_t pool{};
  pool.extCompatID = NVTX_EXT_COMPATID_MEM;
  pool.structSize = sizeof(pool);
  pool.usage = NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR;
  pool.type = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  pool.typeSpecificDescSize = sizeof(range);
  pool.typeSpecificDesc = &range;
  const nvtxMemHeapHandle_t heap = nvtxMemHeapRegister(domain(), &pool);

  nvtxMemRegionsRegisterBatch_t reg{};  // the pool's one region: all of it
  reg.extCompatID = NVTX_EXT_COMPATID_MEM;
  reg.structSize = sizeof(reg);
  reg.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  reg.heap = heap;
  reg.regionCount = 1;
  reg.regionDescElementSize = sizeof(range);
  reg.regionDescElements = &range;
  nvtxMemRegionsRegister(domain(), &reg);

  nvtxMemRegionNameDesc_t desc{};
  desc.regionRefType = NVTX_MEM_REGION_REF_TYPE_POINTER;
  desc.nameType = NVTX_MESSAGE_TYPE_ASCII;
  desc.region.pointer = ptr;
  desc.name.ascii = label.c_str();
  nvtxMemRegionsNameBatch_t names{};
  names.extCompatID = NVTX_EXT_COMPATID_MEM;
  names.structSize = sizeof(names);
  names.regionCount = 1;
  names.regionElementSize = sizeof(desc);
  names.regionElements = &desc;
  nvtxMemRegionsName(domain(), &names);

  {
    Pools& p = pools();
    const std::lock_guard<std::mutex> lock(p.mu);
    p.by_start[reinterpret_cast<std::uintptr_t>(ptr)] = bytes;
  }
  entries_.push_back({ptr, heap});
}

void NamedBuffers::clear() {
  // Parts first, then their pools: newest first.
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (!it->heap) {
      nvtx_tool::forget_part(it->ptr);
      continue;
    }
    {
      Pools& p = pools();
      const std::lock_guard<std::mutex> lock(p.mu);
      p.by_start.erase(reinterpret_cast<std::uintptr_t>(it->ptr));
    }
    // Unregistering the pool unregisters its region too.
    nvtxMemHeapUnregister(domain(), static_cast<nvtxMemHeapHandle_t>(it->heap));
  }
  entries_.clear();
}

}  // namespace fs::nvtx
