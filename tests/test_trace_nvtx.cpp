// The project's NVTX tool in its static form, as every program that links fa_common has it:
// it loads (linked whole), records ranges, marks and named buffers of any domain while
// recording and nothing otherwise, and its capture is a host trace that validates.
#include <catch2/catch.hpp>

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>

#include "common/recorder/nvtx.hpp"
#include "common/nvtx_tool/nvtx_tool.hpp"
#include "common/trace/trace_io.hpp"
#include "common/trace/validate.hpp"

namespace {

const fs::trace::HostRange* find_range(const fs::nvtx_tool::Capture& c, const std::string& name) {
  for (const auto& r : c.ranges)
    if (r.name == name) return &r;
  return nullptr;
}

}  // namespace

TEST_CASE("the statically linked NVTX tool is loaded by the first NVTX call", "[trace][nvtx]") {
  nvtxMarkA("first NVTX call of the process");
  REQUIRE(fs::nvtx_tool::attached());
}

TEST_CASE("the NVTX tool records ranges, marks and named buffers while recording", "[trace][nvtx]") {
  static float q[64], k[32], unnamed[8];
  fs::nvtx::NamedBuffers before;
  before.add(q, sizeof q, "Q");  // named before recording starts: still listed
  {
    FS_NVTX_RANGE("not recorded: ends before start()");
  }
  nvtxRangePushA("not recorded: began before start()");
  fs::nvtx_tool::start();
  nvtxRangePop();
  {
    FS_NVTX_RANGE("forward");
    {
      FS_NVTX_RANGE("scores_kernel");
      fs::nvtx::mark("poison O");
    }
    nvtxRangePushA("default domain");
    nvtxMarkA("plain mark");
    nvtxRangePop();
    fs::nvtx::NamedBuffers during;
    during.add(k, sizeof k, "K");
    during.add(unnamed, 0, "empty: not registered");
    nvtxDomainHandle_t other = nvtxDomainCreateA("someone else");
    const nvtxStringHandle_t registered = nvtxDomainRegisterStringA(other, "registered string");
    nvtxEventAttributes_t a{};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = registered;
    nvtxDomainRangePushEx(other, &a);
    nvtxDomainRangePop(other);
    const nvtxRangeId_t id = nvtxRangeStartA("start/end range");
    nvtxRangeEnd(id);
  }
  const fs::nvtx_tool::Capture c = fs::nvtx_tool::stop();
  nvtxMarkA("after stop(): not recorded");

  REQUIRE(c.ranges.size() == 5);
  REQUIRE(find_range(c, "forward"));
  REQUIRE(find_range(c, "forward")->depth == 0);
  REQUIRE(find_range(c, "scores_kernel")->depth == 1);
  REQUIRE(find_range(c, "default domain")->depth == 1);
  REQUIRE(find_range(c, "registered string")->depth == 1);
  REQUIRE(find_range(c, "start/end range")->depth == 1);
  const auto* fwd = find_range(c, "forward");
  const auto* scores = find_range(c, "scores_kernel");
  REQUIRE(scores->ts_ns >= fwd->ts_ns);
  REQUIRE(scores->ts_ns + scores->dur_ns <= fwd->ts_ns + fwd->dur_ns);
  for (std::size_t i = 1; i < c.ranges.size(); ++i) REQUIRE(c.ranges[i - 1].ts_ns <= c.ranges[i].ts_ns);

  REQUIRE(c.marks.size() == 2);
  REQUIRE(c.marks[0].name == "poison O");
  REQUIRE(c.marks[1].name == "plain mark");
  REQUIRE(c.marks[0].ts_ns >= scores->ts_ns);

  REQUIRE(c.buffers.size() == 2);
  bool saw_q = false, saw_k = false;
  for (const auto& b : c.buffers) {
    if (b.name == "Q") saw_q = b.address == reinterpret_cast<std::uintptr_t>(q) && b.bytes == sizeof q;
    if (b.name == "K") saw_k = b.address == reinterpret_cast<std::uintptr_t>(k) && b.bytes == sizeof k;
  }
  REQUIRE(saw_q);
  REQUIRE(saw_k);
}

TEST_CASE("a buffer unregistered before recording is not listed", "[trace][nvtx]") {
  static float v[16];
  {
    fs::nvtx::NamedBuffers names;
    names.add(v, sizeof v, "V");
  }
  fs::nvtx_tool::start();
  const auto c = fs::nvtx_tool::stop();
  for (const auto& b : c.buffers) REQUIRE(b.name != "V");
}

TEST_CASE("the tool's capture is a host trace that reads back and validates", "[trace][nvtx]") {
  fs_nvtx_tool_start();
  {
    FS_NVTX_RANGE("outer");
    FS_NVTX_RANGE("inner");
    fs::nvtx::mark("m");
  }
  char* json = fs_nvtx_tool_stop_json();
  REQUIRE(json);
  const std::string text = json;
  std::free(json);
  const fs::trace::Trace t = fs::trace::parse_trace(text);
  REQUIRE(t.meta.pass == "host");
  REQUIRE(t.ranges.size() == 2);
  REQUIRE(t.ranges[0].name == "outer");
  REQUIRE(t.ranges[0].ts_ns == 0);  // relative to the first range
  REQUIRE(t.ranges[1].depth == 1);
  REQUIRE(t.marks.size() == 1);
  const auto report = fs::trace::validate(t);
  INFO((report.errors.empty() ? "" : report.errors.front()));
  REQUIRE(report.ok());
}

// compute-sanitizer rejects a region on the process-wide heap ("one or more of the parameters
// is invalid"), which is how NamedBuffers once named every buffer: no sanitizer run could pass.
// The tool flags what compute-sanitizer would reject, so this is checked without a GPU.
TEST_CASE("buffers are named as compute-sanitizer accepts them: a pool, its one region, a name", "[trace][nvtx]") {
  static float ws[64], q[32];
  const auto misuses_before = fs::nvtx_tool::misuses().size();
  fs::nvtx_tool::start();
  {
    fs::nvtx::NamedBuffers names;
    names.add(q, sizeof q, "Q");
    names.add(ws, sizeof ws, "forward workspace");
    fs::nvtx::NamedBuffers parts;  // what a launcher names inside the workspace in traced runs
    parts.add(ws, 16 * sizeof(float), "S");
    parts.add(ws + 16, 48 * sizeof(float), "P");
  }
  const auto c = fs::nvtx_tool::stop();
  const auto misuses = fs::nvtx_tool::misuses();
  INFO((misuses.size() > misuses_before ? misuses[misuses_before] : std::string("no misuse")));
  REQUIRE(misuses.size() == misuses_before);
  std::map<std::string, std::pair<std::uintptr_t, std::uint64_t>> listed;
  for (const auto& b : c.buffers) listed[b.name] = {b.address, b.bytes};
  REQUIRE(listed.count("Q"));
  REQUIRE(listed["Q"] == std::make_pair(reinterpret_cast<std::uintptr_t>(q), std::uint64_t(sizeof q)));
  // A part at the workspace's address takes its place in the list, as in a traced run of step 01.
  REQUIRE(listed.count("S"));
  REQUIRE(listed["S"] == std::make_pair(reinterpret_cast<std::uintptr_t>(ws), std::uint64_t(16 * sizeof(float))));
  REQUIRE(listed["P"] == std::make_pair(reinterpret_cast<std::uintptr_t>(ws + 16), std::uint64_t(48 * sizeof(float))));
  REQUIRE_FALSE(listed.count("forward workspace"));

  // Once destroyed, nothing of them is left to list.
  fs::nvtx_tool::start();
  const auto after = fs::nvtx_tool::stop();
  for (const auto& b : after.buffers) REQUIRE((b.name != "Q" && b.name != "S" && b.name != "P"));
  REQUIRE(fs::nvtx_tool::misuses().size() == misuses_before);
}

TEST_CASE("the tool flags a region on the process-wide heap, as compute-sanitizer rejects it", "[trace][nvtx]") {
  static float t[8];
  const auto before = fs::nvtx_tool::misuses().size();
  nvtxDomainHandle_t domain = nvtxDomainCreateA("flashsteps");
  nvtxMemVirtualRangeDesc_t range{};
  range.ptr = t;
  range.size = sizeof t;
  nvtxMemRegionsRegisterBatch_t reg{};
  reg.extCompatID = NVTX_EXT_COMPATID_MEM;
  reg.structSize = sizeof reg;
  reg.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  reg.heap = NVTX_MEM_HEAP_HANDLE_PROCESS_WIDE;
  reg.regionCount = 1;
  reg.regionDescElementSize = sizeof range;
  reg.regionDescElements = &range;
  nvtxMemRegionsRegister(domain, &reg);
  const auto misuses = fs::nvtx_tool::misuses();
  REQUIRE(misuses.size() == before + 1);
  REQUIRE_THAT(misuses.back(), Catch::Contains("process-wide heap"));

  nvtxMemRegionRef_t ref{};
  ref.pointer = t;
  nvtxMemRegionsUnregisterBatch_t un{};
  un.extCompatID = NVTX_EXT_COMPATID_MEM;
  un.structSize = sizeof un;
  un.refType = NVTX_MEM_REGION_REF_TYPE_POINTER;
  un.refCount = 1;
  un.refElementSize = sizeof ref;
  un.refElements = &ref;
  nvtxMemRegionsUnregister(domain, &un);
  REQUIRE(fs::nvtx_tool::misuses().size() == before + 1);  // unregistering what was registered is fine
}
