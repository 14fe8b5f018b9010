// NVTX for the project: ranges, marks and named HBM buffers in one domain, "flashsteps".
// Nsight Systems shows them; without a tool attached each call is a check and a return.
// The project's own tool (nvtx_tool.hpp) records them into traces.
//
//   { FS_NVTX_RANGE("upload Q, K, V");  ...copies... }     // a range for the enclosing scope
//   fs::nvtx::mark("poison outputs");
//   fs::nvtx::NamedBuffers names;  names.add(ptr, bytes, "Q");   // unregistered on destruction
//
// NVTX's implementation (nvToolsExt.h without NVTX_NO_IMPL) is compiled into nvtx.cpp only,
// so this header can go anywhere, .cu files included.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace fs::nvtx {

// Pushes a range of the project's domain; pops it when destroyed.
class Range {
 public:
  explicit Range(const char* name);
  explicit Range(const std::string& name) : Range(name.c_str()) {}
  ~Range();
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;
};

void mark(const char* name);
inline void mark(const std::string& name) { mark(name.c_str()); }

// HBM buffers named through the NVTX memory extension (nvToolsExtMem.h) the way compute-sanitizer
// accepts them (its "NVTX API for Compute Sanitizer" guide): each buffer, a whole cudaMalloc
// allocation, is registered as a pool (nvtxMemHeapRegister, usage SUB_ALLOCATOR, type
// VIRTUAL_ADDRESS) holding one region that covers all of it, and that region is named. A region
// on the process-wide heap, as this file once registered, is rejected by compute-sanitizer
// ("one or more of the parameters is invalid"), so a sanitizer run could never pass.
//
// A part of a buffer named here already (the S and P inside a step's workspace, named by its
// launcher in traced runs) is described to the project's own NVTX tool only: compute-sanitizer
// names only allocations and suballocations, and registering the part as a second region would
// overlap the first and, for its initcheck, mark memory already written as uninitialised.
//
// Names stay registered until this object is destroyed: declare it after the buffers it names,
// so that it goes first.
class NamedBuffers {
 public:
  NamedBuffers() = default;
  ~NamedBuffers();
  NamedBuffers(const NamedBuffers&) = delete;
  NamedBuffers& operator=(const NamedBuffers&) = delete;
  NamedBuffers(NamedBuffers&& other) noexcept : entries_(std::move(other.entries_)) { other.entries_.clear(); }
  NamedBuffers& operator=(NamedBuffers&& other) noexcept;

  // Names [ptr, ptr + bytes): a whole buffer, or a part of one named by a live NamedBuffers.
  // Nothing happens for a null or empty buffer. Names longer than compute-sanitizer takes (49
  // printable characters) are cut to that.
  void add(const void* ptr, std::size_t bytes, const char* name);
  void clear();  // unregisters every buffer named here

 private:
  struct Entry {
    const void* ptr;
    void* heap;  // the pool's handle; null for a part
  };
  std::vector<Entry> entries_;
};

}  // namespace fs::nvtx

#define FS_NVTX_CONCAT_(a, b) a##b
#define FS_NVTX_CONCAT(a, b) FS_NVTX_CONCAT_(a, b)
#define FS_NVTX_RANGE(name) const ::fs::nvtx::Range FS_NVTX_CONCAT(fs_nvtx_range_, __LINE__)(name)
