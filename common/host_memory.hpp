// Host memory this process can still take: what lets a reader refuse a file it could not hold
// with a clear "needs X GiB" instead of dying in std::bad_alloc.
#pragma once

#include <cstdint>
#include <string>

namespace fs {

// The smaller of the system's available memory (MemAvailable in /proc/meminfo) and what the
// address-space limit (ulimit -v) leaves this process; a large number where neither is known.
std::uint64_t available_host_memory();

// Throws InputError("<what> needs <X> GiB of memory, but <Y> GiB are available") when `bytes`
// is more than available_host_memory().
void require_host_memory(std::uint64_t bytes, const std::string& what);

}  // namespace fs
