// The project's NVTX tool in its static form, as every program that links fa_common has it:
// it loads (linked whole), records ranges, marks and named buffers of any domain while
// recording and nothing otherwise, and its capture is a host trace that validates.
#include <catch2/catch.hpp>

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>

#include <cstdlib>
#include <string>

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
