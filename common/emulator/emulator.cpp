// The fiber scheduler behind common/emulator/emulator.hpp: a CTA's threads are fibers, resumed in
// turn by the scheduler (the host thread's own stack). A fiber runs until it waits at a barrier,
// waits for a condition (wait_until) or returns; when no fiber can run, either every thread has
// reached the barrier it waits at or some condition holds (they are released), or neither (a
// deadlock, reported).
//
// A fiber starts on its own stack through makecontext/swapcontext, and from then on the switches
// are _setjmp/_longjmp, which save no signal mask: swapcontext makes a system call each time, and
// an emulated CTA switches at every barrier of every thread. _FORTIFY_SOURCE's longjmp check
// refuses a jump to another stack, so it is off in this file.
#undef _FORTIFY_SOURCE
#include "common/emulator/emulator.hpp"

#include <setjmp.h>
#include <ucontext.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

// The emulation's shared memory: a kernel's `extern __shared__ float smem[]` (__shared__ is nothing
// here) declares this array, fs::smem, and dynamic_smem<T>() returns it too. One CTA runs at a time.
// Step 08's kernels declare `extern __shared__ __align__(128) unsigned char smem[]` in fs::tc: the
// same bytes under that name (a GCC/Clang alias of fs::smem), as do step 10's (fs::decoding), and
// step 09's fs::hopper::smem_raw.
// 1024-byte aligned: step 09 aligns its tiles to 1024 bytes by address, and its wgmma descriptors
// and swizzles see byte offsets from the start, which must then agree modulo 1024.
namespace fs {
alignas(1024) float smem[emu::kMaxSmemBytes / sizeof(float)];
}
namespace fs::tc {
extern unsigned char smem[emu::kMaxSmemBytes] __attribute__((alias("_ZN2fs4smemE")));
}
namespace fs::decoding {
extern unsigned char smem[emu::kMaxSmemBytes] __attribute__((alias("_ZN2fs4smemE")));
}
namespace fs::hopper {
extern unsigned char smem_raw[emu::kMaxSmemBytes] __attribute__((alias("_ZN2fs4smemE")));
}

namespace fs::emu {

uint3 block_index;
dim3 block_dim, grid_dim;

namespace {

unsigned char* const shared_memory = reinterpret_cast<unsigned char*>(fs::smem);  // the running CTA's
constexpr std::size_t kStackBytes = 256 * 1024;  // a thread's registers and locals, and what it calls
constexpr int kWarp = 32;
constexpr int kWarpgroup = 128;
constexpr int kNamedBarriers = 16;

// AtGroupBarrier: the warpgroup's barrier of warpgroup_gather. Waiting: in wait_until, its
// condition not yet seen to hold.
enum class State { Ready, AtCtaBarrier, AtWarpBarrier, AtGroupBarrier, Waiting, Done };

struct Fiber {
  ucontext_t start{};  // its first entry
  jmp_buf resume{};    // where it waits, once started
  bool started = false;
  std::unique_ptr<char[]> stack;
  uint3 index{};
  int linear = 0;
  State state = State::Ready;
  const std::function<bool()>* ready = nullptr;  // Waiting: what it waits for
};

// A named barrier: arrivals in the current round, and how many rounds have completed.
struct NamedBarrier {
  int arrived = 0;
  unsigned completed = 0;
};

struct Cta {
  std::vector<Fiber> fibers;
  ucontext_t scheduler_context{};  // swapcontext needs somewhere to save the scheduler; unused after
  jmp_buf scheduler{};             // where the scheduler resumes
  int running = -1;
  const std::function<void()>* body = nullptr;
  std::vector<std::uint64_t> slots;  // shuffle values, a warp's 32 side by side
  std::vector<unsigned char> gather;  // warp_gather's and warpgroup_gather's, kGatherBytes a thread
  NamedBarrier named[kNamedBarriers];
};

Cta& cta() {
  static Cta c;
  return c;
}

Fiber& current() { return cta().fibers[std::size_t(cta().running)]; }

void entry() {
  Cta& c = cta();
  (*c.body)();
  current().state = State::Done;
  _longjmp(c.scheduler, 1);  // never resumed
}

// Back to the scheduler until released from `wait`.
void block_on(State wait) {
  Fiber& f = current();
  f.state = wait;
  if (!_setjmp(f.resume)) _longjmp(cta().scheduler, 1);
}

// Runs fiber i until it waits or returns.
void resume(Cta& c, std::size_t i) {
  c.running = static_cast<int>(i);
  Fiber& f = c.fibers[i];
  if (_setjmp(c.scheduler)) return;
  if (f.started) _longjmp(f.resume, 1);
  f.started = true;
  swapcontext(&c.scheduler_context, &f.start);
}

// Releases the groups of `size` consecutive threads (a warp, a warpgroup) whose threads all wait
// at barrier `at` or have returned. Returns whether anything was released.
bool release_groups(std::vector<Fiber>& fibers, State at, std::size_t size) {
  bool any = false;
  for (std::size_t w0 = 0; w0 < fibers.size(); w0 += size) {
    const std::size_t w1 = std::min(fibers.size(), w0 + size);
    bool met = true, waiting = false;
    for (std::size_t i = w0; i < w1; ++i) {
      met = met && (fibers[i].state == at || fibers[i].state == State::Done);
      waiting = waiting || fibers[i].state == at;
    }
    if (met && waiting)
      for (std::size_t i = w0; i < w1; ++i)
        if (fibers[i].state == at) fibers[i].state = State::Ready, any = true;
  }
  return any;
}

// Releases the threads of a barrier that everyone who will ever reach it has reached, and the
// waiters whose condition holds. A CTA barrier counts threads that have returned as arrived (as
// bar.sync counts exited threads); a warp or warpgroup barrier likewise for its own threads.
// Returns whether anything was released.
bool release(std::vector<Fiber>& fibers) {
  bool any = false;
  const bool cta_met = std::all_of(fibers.begin(), fibers.end(), [](const Fiber& f) {
    return f.state == State::AtCtaBarrier || f.state == State::Done;
  });
  if (cta_met)
    for (Fiber& f : fibers)
      if (f.state == State::AtCtaBarrier) f.state = State::Ready, any = true;
  any = release_groups(fibers, State::AtWarpBarrier, kWarp) || any;
  any = release_groups(fibers, State::AtGroupBarrier, kWarpgroup) || any;
  for (Fiber& f : fibers)
    if (f.state == State::Waiting && (*f.ready)()) f.state = State::Ready, any = true;
  return any;
}

std::string where(const std::vector<Fiber>& fibers) {
  int at_cta = 0, at_warp = 0, at_group = 0, waiting = 0, done = 0;
  for (const Fiber& f : fibers) {
    at_cta += f.state == State::AtCtaBarrier;
    at_warp += f.state == State::AtWarpBarrier;
    at_group += f.state == State::AtGroupBarrier;
    waiting += f.state == State::Waiting;
    done += f.state == State::Done;
  }
  return std::to_string(at_cta) + " threads at __syncthreads, " + std::to_string(at_warp) +
         " at a warp barrier, " + std::to_string(at_group) + " at a warpgroup barrier, " + std::to_string(waiting) +
         " waiting for a condition that no thread can make true (an mbarrier, a named barrier), " +
         std::to_string(done) + " returned";
}

}  // namespace

const uint3& thread_index() { return current().index; }

void sync_threads() { block_on(State::AtCtaBarrier); }

void sync_warp() { block_on(State::AtWarpBarrier); }

std::uint64_t shuffle_xor(std::uint64_t bits, int lane_mask) {
  Cta& c = cta();
  const int me = current().linear, lane = me % kWarp, base = me - lane;
  c.slots[std::size_t(me)] = bits;
  block_on(State::AtWarpBarrier);  // every lane has written
  const int partner = base + (lane ^ lane_mask);
  const std::uint64_t value = partner < int(c.fibers.size()) ? c.slots[std::size_t(partner)] : bits;
  block_on(State::AtWarpBarrier);  // every lane has read before any writes again
  return value;
}

namespace {
// warp_gather and warpgroup_gather: `size` threads, barrier `at`.
void gather(const void* mine, std::size_t bytes, void* all, int size, State at, const char* name) {
  if (bytes > kGatherBytes) throw std::runtime_error(std::string("emulator: ") + name + " of " + std::to_string(bytes) + " bytes");
  Cta& c = cta();
  const int me = current().linear, base = me - me % size;
  if (base + size > int(c.fibers.size())) throw std::runtime_error(std::string("emulator: ") + name + " in a partial group");
  std::memcpy(&c.gather[std::size_t(me) * kGatherBytes], mine, bytes);
  block_on(at);  // every thread has written
  for (int i = 0; i < size; ++i)
    std::memcpy(static_cast<unsigned char*>(all) + std::size_t(i) * bytes, &c.gather[std::size_t(base + i) * kGatherBytes],
                bytes);
  block_on(at);  // every thread has read before any writes again
}
}  // namespace

void warp_gather(const void* mine, std::size_t bytes, void* all) {
  gather(mine, bytes, all, kWarp, State::AtWarpBarrier, "warp_gather");
}

void warpgroup_gather(const void* mine, std::size_t bytes, void* all) {
  gather(mine, bytes, all, kWarpgroup, State::AtGroupBarrier, "warpgroup_gather");
}

void wait_until(const std::function<bool()>& ready) {
  while (!ready()) {
    current().ready = &ready;
    block_on(State::Waiting);
  }
  current().ready = nullptr;
}

void named_barrier(int id, int threads, bool wait) {
  if (id <= 0 || id >= kNamedBarriers || threads <= 0 || threads % kWarp != 0)
    throw std::runtime_error("emulator: named barrier " + std::to_string(id) + " of " + std::to_string(threads) +
                             " threads");
  NamedBarrier& b = cta().named[id];
  const unsigned round = b.completed;
  if (++b.arrived == threads) {
    b.arrived = 0;
    ++b.completed;
    return;
  }
  if (wait) wait_until([&b, round] { return b.completed != round; });
}

unsigned char* dynamic_smem() { return shared_memory; }

void run(dim3 grid, dim3 block, std::size_t smem, const std::function<void()>& body) {
  Cta& c = cta();
  const std::size_t n = std::size_t(block.x) * block.y * block.z;
  if (n == 0 || n > 1024) throw std::runtime_error("emulator: a CTA of " + std::to_string(n) + " threads");
  if (smem > kMaxSmemBytes) throw std::runtime_error("emulator: " + std::to_string(smem) + " bytes of shared memory");
  grid_dim = grid;
  block_dim = block;
  c.body = &body;
  c.fibers.resize(n);
  c.slots.assign(n, 0);
  c.gather.assign(n * kGatherBytes, 0);
  for (Fiber& f : c.fibers)
    if (!f.stack) f.stack = std::make_unique<char[]>(kStackBytes);
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        block_index = {bx, by, bz};
        std::memset(shared_memory, 0xff, smem);  // NaN bytes: a read of what no thread wrote shows
        for (NamedBarrier& b : c.named) b = NamedBarrier{};
        for (std::size_t i = 0; i < n; ++i) {
          Fiber& f = c.fibers[i];
          f.linear = static_cast<int>(i);
          f.index = {static_cast<unsigned>(i % block.x), static_cast<unsigned>(i / block.x % block.y),
                     static_cast<unsigned>(i / (std::size_t(block.x) * block.y))};
          f.state = State::Ready;
          f.ready = nullptr;
          f.started = false;
          getcontext(&f.start);
          f.start.uc_stack.ss_sp = f.stack.get();
          f.start.uc_stack.ss_size = kStackBytes;
          f.start.uc_link = nullptr;
          makecontext(&f.start, entry, 0);
        }
        for (;;) {
          bool ran = false;
          for (std::size_t i = 0; i < n; ++i)
            if (c.fibers[i].state == State::Ready) {
              resume(c, i);
              ran = true;
            }
          if (std::all_of(c.fibers.begin(), c.fibers.end(), [](const Fiber& f) { return f.state == State::Done; }))
            break;
          if (!release(c.fibers) && !ran)
            throw std::runtime_error("emulator: deadlock in CTA (" + std::to_string(bx) + ", " + std::to_string(by) +
                                     ", " + std::to_string(bz) + "): " + where(c.fibers));
        }
      }
  c.running = -1;
}

}  // namespace fs::emu
