#include "common/recorder/nvtx.hpp"

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>

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

void unregister(const void* ptr) {
  nvtxMemRegionRef_t ref{};
  ref.pointer = ptr;
  nvtxMemRegionsUnregisterBatch_t batch{};
  batch.extCompatID = NVTX_EXT_COMPATID_MEM;
  batch.structSize = sizeof(batch);
  batch.refType = NVTX_MEM_REGION_REF_TYPE_POINTER;
  batch.refCount = 1;
  batch.refElementSize = sizeof(ref);
  batch.refElements = &ref;
  nvtxMemRegionsUnregister(domain(), &batch);
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
    pointers_ = std::move(other.pointers_);
    other.pointers_.clear();
  }
  return *this;
}

void NamedBuffers::add(const void* ptr, std::size_t bytes, const char* name) {
  if (!ptr || bytes == 0) return;
  nvtxMemVirtualRangeDesc_t range{};
  range.ptr = ptr;
  range.size = bytes;
  nvtxMemRegionHandle_t handle{};
  nvtxMemRegionsRegisterBatch_t reg{};
  reg.extCompatID = NVTX_EXT_COMPATID_MEM;
  reg.structSize = sizeof(reg);
  reg.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  reg.heap = NVTX_MEM_HEAP_HANDLE_PROCESS_WIDE;
  reg.regionCount = 1;
  reg.regionDescElementSize = sizeof(range);
  reg.regionDescElements = &range;
  reg.regionHandleElementsOut = &handle;
  nvtxMemRegionsRegister(domain(), &reg);

  nvtxMemRegionNameDesc_t desc{};
  desc.regionRefType = NVTX_MEM_REGION_REF_TYPE_POINTER;
  desc.nameType = NVTX_MESSAGE_TYPE_ASCII;
  desc.region.pointer = ptr;
  desc.name.ascii = name;
  nvtxMemRegionsNameBatch_t names{};
  names.extCompatID = NVTX_EXT_COMPATID_MEM;
  names.structSize = sizeof(names);
  names.regionCount = 1;
  names.regionElementSize = sizeof(desc);
  names.regionElements = &desc;
  nvtxMemRegionsName(domain(), &names);
  pointers_.push_back(ptr);
}

void NamedBuffers::clear() {
  for (const void* p : pointers_) unregister(p);
  pointers_.clear();
}

}  // namespace fs::nvtx
