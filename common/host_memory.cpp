#include "common/host_memory.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "common/errors.hpp"

namespace fs {

namespace {

std::string gib(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(std::uint64_t(1) << 30));
  return buf;
}

}  // namespace

std::uint64_t available_host_memory() {
  std::uint64_t avail = std::numeric_limits<std::uint64_t>::max() / 4;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kib) == 1) {
      avail = std::uint64_t(kib) * 1024;
      break;
    }
  }
  struct rlimit lim {};
  if (::getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    unsigned long long pages = 0;  // the address space this process already holds
    std::ifstream statm("/proc/self/statm");
    statm >> pages;
    const std::uint64_t used = std::uint64_t(pages) * std::uint64_t(::sysconf(_SC_PAGESIZE));
    avail = std::min<std::uint64_t>(avail, lim.rlim_cur > used ? lim.rlim_cur - used : 0);
  }
  return avail;
}

void require_host_memory(std::uint64_t bytes, const std::string& what) {
  const std::uint64_t avail = available_host_memory();
  if (bytes > avail)
    throw InputError(what + " needs " + gib(bytes) + " of memory, but " + gib(avail) + " are available");
}

}  // namespace fs
