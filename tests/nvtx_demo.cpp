// An NVTX-instrumented program that knows nothing of flashsteps (no fa_common, no static
// tool): run with NVTX_INJECTION64_PATH=lib/libfs_nvtx_tool.so FS_NVTX_OUT=FILE, it leaves a
// host trace in FILE, written by the tool at exit.
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>

namespace {

float table[256];

// As compute-sanitizer's guide has it: the table is a pool with one region, all of it.
void name_table(nvtxDomainHandle_t domain) {
  nvtxMemVirtualRangeDesc_t range{};
  range.ptr = table;
  range.size = sizeof table;
  nvtxMemHeapDesc_t pool{};
  pool.extCompatID = NVTX_EXT_COMPATID_MEM;
  pool.structSize = sizeof pool;
  pool.usage = NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR;
  pool.type = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  pool.typeSpecificDescSize = sizeof range;
  pool.typeSpecificDesc = &range;
  nvtxMemRegionsRegisterBatch_t reg{};
  reg.extCompatID = NVTX_EXT_COMPATID_MEM;
  reg.structSize = sizeof reg;
  reg.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  reg.heap = nvtxMemHeapRegister(domain, &pool);
  reg.regionCount = 1;
  reg.regionDescElementSize = sizeof range;
  reg.regionDescElements = &range;
  nvtxMemRegionsRegister(domain, &reg);

  nvtxMemRegionNameDesc_t name{};
  name.regionRefType = NVTX_MEM_REGION_REF_TYPE_POINTER;
  name.nameType = NVTX_MESSAGE_TYPE_ASCII;
  name.region.pointer = table;
  name.name.ascii = "table";
  nvtxMemRegionsNameBatch_t names{};
  names.extCompatID = NVTX_EXT_COMPATID_MEM;
  names.structSize = sizeof names;
  names.regionCount = 1;
  names.regionElementSize = sizeof name;
  names.regionElements = &name;
  nvtxMemRegionsName(domain, &names);
}

}  // namespace

int main() {
  nvtxDomainHandle_t domain = nvtxDomainCreateA("demo");
  nvtxRangePushA("main");
  name_table(domain);
  nvtxMarkA("table named");
  nvtxRangePushA("fill");
  for (int i = 0; i < 256; ++i) table[i] = static_cast<float>(i);
  nvtxRangePop();
  nvtxRangePop();
  return table[255] == 255.f ? 0 : 1;
}
