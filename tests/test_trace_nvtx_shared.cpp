// The project's NVTX tool as a shared library, loaded by NVTX through NVTX_INJECTION64_PATH
// (CTest sets it to lib/libfs_nvtx_tool.so for this test). This program also has the static
// tool linked in, as every program that links fa_common does: the variable wins, and the
// static copy steps aside, which is what happens when Nsight is attached.
#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdlib>
#include <string>

#include "common/recorder/nvtx.hpp"
#include "common/nvtx_tool/nvtx_tool.hpp"
#include "common/trace/trace_io.hpp"

namespace {

void* tool_library() {
  const char* path = std::getenv("NVTX_INJECTION64_PATH");
  INFO("run this test through ctest, which sets NVTX_INJECTION64_PATH to libfs_nvtx_tool.so");
  REQUIRE(path);
  nvtxMarkA("first NVTX call: loads the tool");
  // Already loaded by NVTX: RTLD_NOLOAD only finds it.
  void* handle = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
  REQUIRE(handle);
  return handle;
}

template <typename F>
F symbol(void* handle, const char* name) {
  INFO(name);
  void* s = dlsym(handle, name);
  REQUIRE(s);
  return reinterpret_cast<F>(s);
}

}  // namespace

TEST_CASE("NVTX_INJECTION64_PATH loads the shared tool and the static one steps aside", "[trace][nvtx]") {
  void* handle = tool_library();
  REQUIRE(symbol<int (*)()>(handle, "fs_nvtx_tool_attached")() == 1);
  REQUIRE_FALSE(fs::nvtx_tool::attached());
  // The entry points NVTX looks up have default visibility despite the headers' internal push.
  symbol<void*>(handle, "InitializeInjectionNvtx2");
  symbol<void*>(handle, "InitializeInjectionNvtxExtension");
  REQUIRE(dlsym(handle, "_ZN2fs8nvtx_tool5startEv") == nullptr);  // nothing else is exported
  dlclose(handle);
}

TEST_CASE("the shared tool captures ranges, marks and buffer names", "[trace][nvtx]") {
  void* handle = tool_library();
  auto start = symbol<void (*)()>(handle, "fs_nvtx_tool_start");
  auto stop_json = symbol<char* (*)()>(handle, "fs_nvtx_tool_stop_json");
  static double table[128];
  start();
  {
    FS_NVTX_RANGE("outer");
    fs::nvtx::NamedBuffers names;
    names.add(table, sizeof table, "table");
    nvtxRangePushA("inner");
    fs::nvtx::mark("a mark");
    nvtxRangePop();
  }
  char* json = stop_json();
  REQUIRE(json);
  const fs::trace::Trace t = fs::trace::parse_trace(json);
  std::free(json);
  REQUIRE(t.ranges.size() == 2);
  REQUIRE((t.ranges[0].name == "outer" && t.ranges[0].depth == 0));
  REQUIRE((t.ranges[1].name == "inner" && t.ranges[1].depth == 1));
  REQUIRE(t.marks.size() == 1);
  REQUIRE(t.marks[0].name == "a mark");
  REQUIRE(t.buffers.size() == 1);
  REQUIRE(t.buffers[0].name == "table");
  REQUIRE(t.buffers[0].address == reinterpret_cast<std::uintptr_t>(table));
  REQUIRE(t.buffers[0].bytes == sizeof table);
  dlclose(handle);
}
