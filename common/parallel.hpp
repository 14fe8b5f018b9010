// parallel_for over [0, n) on all host cores: the CPU reference is O(N²d) and the check of
// a large problem should take seconds, not minutes.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace fs {

template <typename Fn>
void parallel_for(std::int64_t n, Fn&& fn) {
  if (n <= 0) return;
  const std::int64_t workers =
      std::min<std::int64_t>(n, std::max(1u, std::thread::hardware_concurrency()));
  if (workers == 1) {
    for (std::int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<std::int64_t> next{0};
  auto work = [&] {
    for (std::int64_t i = next++; i < n; i = next++) fn(i);
  };
  std::vector<std::thread> pool;
  for (std::int64_t t = 1; t < workers; ++t) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
}

}  // namespace fs
