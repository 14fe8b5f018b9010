// The project's NVTX tool: records NVTX ranges, marks and named memory regions (any domain) so
// that a trace's host track and buffer list come from the same NVTX calls Nsight sees.
//
// Two forms of one source (nvtx_tool.cpp):
//   static   linked whole into every program that links fa_common; NVTX finds it through
//            the InitializeInjectionNvtx2_fnptr symbol. Recording is off until start().
//   shared   lib/libfs_nvtx_tool.so, for any NVTX-instrumented program:
//              NVTX_INJECTION64_PATH=build/lib/libfs_nvtx_tool.so FS_NVTX_OUT=host.json ./prog
//            records from the first NVTX call and writes a host-only trace (docs/trace-format.md)
//            to $FS_NVTX_OUT at exit. Its C entry points are below.
//
// NVTX loads one tool per process, and NVTX_INJECTION64_PATH comes first: when Nsight Systems,
// Nsight Compute or another CUPTI tool is attached (they set it), the static tool is never
// initialised and steps aside; attached() then says false and traces have no host ranges.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/trace/trace.hpp"

namespace fs::nvtx_tool {

// What was recorded between start() and stop(). Times are on the host clock
// (trace::host_clock_ns), not yet relative to a trace's t0; depths are from nesting.
struct Capture {
  std::vector<trace::HostRange> ranges;   // ranges that ended while recording, by start time
  std::vector<trace::HostMark> marks;
  std::vector<trace::NamedBuffer> buffers;  // named before or during the recording
};

// Whether NVTX calls of this process reach this copy of the tool. Initialises NVTX if no NVTX
// call has yet.
bool attached();

// Starts recording (discarding anything recorded before).
void start();

// Stops recording and returns what was recorded.
Capture stop();

// A named part of a registered buffer (nvtx::NamedBuffers: the S and P inside a workspace),
// told to this tool directly since no NVTX call describes it the way compute-sanitizer accepts
// (common/recorder/nvtx.hpp). Listed among the capture's buffers like a named region; a part at a
// region's address takes the region's place there. Nothing happens when the tool is not attached.
void name_part(const void* ptr, std::size_t bytes, const std::string& name);
void forget_part(const void* ptr);

// The NVTX memory calls this tool has seen that compute-sanitizer rejects, one line each, in
// order, since the process started: a region on the process-wide heap or on an unknown heap, a
// pool of another usage or type than SUB_ALLOCATOR / VIRTUAL_ADDRESS, a region outside its pool,
// unregistering what was never registered, a name that is not 1 to 49 printable ASCII
// characters. The tests hold the project's own calls to none.
std::vector<std::string> misuses();

}  // namespace fs::nvtx_tool

// The shared library's C entry points (also in the static form), for callers that load it by
// path: dlsym(handle, "fs_nvtx_tool_stop_json").
extern "C" {
int fs_nvtx_tool_attached(void);
void fs_nvtx_tool_start(void);
// Stops recording; returns the capture as a host-only trace file's JSON text, allocated with
// malloc (the caller frees it).
char* fs_nvtx_tool_stop_json(void);
}
