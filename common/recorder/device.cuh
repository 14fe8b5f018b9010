// Device side of tracing: one thread per CTA writes a 48-byte record (record.hpp) at the end of
// each phase of its CTA's work into that CTA's slice of a device buffer.
//
// A traced kernel takes the tracing switch as a template parameter and the slices as its last
// argument; with the switch off the tracer is an empty object whose calls compile to nothing,
// so the kernel's code is what it was without tracing:
//
//   template <bool kTrace>
//   __global__ void scores_kernel(const float* q, ..., fs::trace::Slices slices) {
//     fs::trace::CtaTracer<kTrace> tr(slices);           // notes the CTA's start and its SM
//     ...load K...
//     FS_TRACE_EVENT(tr, Kind::Load, Tensor::K, bh, row0, rows, 0, d, rows * d * 4);
//   }
//   // launcher (common/recorder/launch.cuh): the plain kernel when p.trace is null
//   fs::trace::launch(p.trace, "scores_kernel", scores_kernel<false>, scores_kernel<true>,
//                     grid, block, smem, p.stream, q, ...);
//
// What an event means: the recording thread (threadIdx 0, 0, 0) reached the end of a phase;
// the phase began where its previous event ended (the CTA's start for the first). Timestamps are
// those of the recording thread; the other threads of the CTA may be a little ahead or behind.
// The recording thread must reach every FS_TRACE_EVENT (no early return before one).
//
// Lanes (record.hpp): a kernel whose parts run different schedules (step 09's producer and
// consumer warpgroups) records each part as a lane of its own. Its launcher names them
// (DeviceSink::set_lanes) and each part holds a tracer of its lane:
//
//   fs::trace::CtaTracer<kTrace> tr(slices, lane, /*recorder=*/threadIdx.x == 128 * lane);
//
// Lane 0 is what the one-argument constructor records into.
#pragma once

#include <cuda_runtime.h>
#include <math_constants.h>

#include <cstdint>
#ifdef FS_EMULATION
#include <chrono>
#endif

#include "common/trace/record.hpp"
#include "common/trace/trace.hpp"

namespace fs {
// Bytes of one fp32 element: the kernels' events count the bytes they move with it.
constexpr std::int64_t kF = sizeof(float);
}  // namespace fs

namespace fs::trace {

#ifndef FS_EMULATION
// %globaltimer: nanoseconds, one clock for all SMs (on H100/H200 it ticks every 32 ns).
// The memory clobber keeps the compiler from moving loads and stores across the read.
__device__ __forceinline__ std::uint64_t global_timer() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
  return t;
}

__device__ __forceinline__ std::uint32_t sm_id() {
  std::uint32_t id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}
#else  // the CPU emulation (common/emulator): the host's clock, one SM; the times order a lane's events, no more
inline std::uint64_t global_timer() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}
inline std::uint32_t sm_id() { return 0; }
#endif

// Every round a clustering may have fits in the record's flags (round + 1 above the cached bit).
static_assert(kMaxRounds + 1 <= (0xff >> kRecordRoundShift), "rounds must fit in DeviceRecord::flags");

template <bool kOn>
class CtaTracer;

// Tracing off: nothing is stored, nothing is computed.
template <>
class CtaTracer<false> {
 public:
  __device__ __forceinline__ explicit CtaTracer(const Slices&) {}
  __device__ __forceinline__ CtaTracer(const Slices&, int, bool) {}
  __device__ __forceinline__ void event(Kind, Tensor, long long, long long, long long, long long, long long,
                                        long long, bool = false) const {}
  __device__ __forceinline__ void event_stats(Kind, Tensor, long long, long long, long long, long long,
                                              long long, float, float, int) const {}
  __device__ __forceinline__ bool records() const { return false; }
  __device__ __forceinline__ void in_round(int) {}
};

template <>
class CtaTracer<true> {
 public:
  __device__ __forceinline__ explicit CtaTracer(const Slices& s)
      : CtaTracer(s, 0, threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {}
  // Lane `lane` of the CTA, recorded by the thread for which `recorder` is true (one per lane).
  __device__ __forceinline__ CtaTracer(const Slices& s, int lane, bool recorder) {
    recorder_ = recorder;
    if (!recorder_) return;
    const std::uint64_t cta =
        blockIdx.x + std::uint64_t(gridDim.x) * (blockIdx.y + std::uint64_t(gridDim.y) * blockIdx.z);
    const std::uint64_t slice = cta * s.lanes + std::uint64_t(lane);
    header_ = s.headers + slice;
    slice_ = s.records + slice * s.cap;
    cap_ = s.cap;
    header_->sm = sm_id();
    header_->count = 0;
    header_->t_start = global_timer();
  }

  // One event: `bytes` moved (loads and stores) for the rows × cols tile at (row0, col0) of
  // head bh of `tensor`; `cached` for a re-read the IO model does not count.
  __device__ __forceinline__ void event(Kind kind, Tensor tensor, long long bh, long long row0, long long rows,
                                        long long col0, long long cols, long long bytes, bool cached = false) {
    put(kind, tensor, bh, row0, rows, col0, cols, bytes, cached, CUDART_NAN_F, CUDART_NAN_F, -1);
  }
  // The same for a compute phase of an online-softmax step, with the running max m and
  // normaliser l of the CTA's sampled row after it.
  __device__ __forceinline__ void event_stats(Kind kind, Tensor tensor, long long bh, long long row0,
                                              long long rows, long long col0, long long cols, float m, float l,
                                              int sample_row) {
    put(kind, tensor, bh, row0, rows, col0, cols, 0, false, m, l, sample_row);
  }
  // Whether this thread is the CTA's recording thread: work done only to describe events
  // (splitting a range into tiles, say) can be skipped by the others.
  __device__ __forceinline__ bool records() const { return recorder_; }
  // A clustered step (07): the events that follow name their rows by slots of round `round`'s
  // orders (trace.hpp, Event::round); in_round(-1) goes back to rows.
  __device__ __forceinline__ void in_round(int round) { flags_ = static_cast<std::uint8_t>((round + 1) << kRecordRoundShift); }

 private:
  __device__ __forceinline__ void put(Kind kind, Tensor tensor, long long bh, long long row0, long long rows,
                                      long long col0, long long cols, long long bytes, bool cached, float m,
                                      float l, int sample_row) {
    if (!recorder_) return;
    const std::uint64_t now = global_timer();
    if (count_ < cap_) {  // past the capacity only the count goes on: overflow is reported, not silent
      DeviceRecord r;
      r.t_end = now;
      r.bytes = static_cast<std::uint32_t>(bytes);
      r.kind = static_cast<std::uint8_t>(kind);
      r.tensor = static_cast<std::uint8_t>(tensor);
      r.flags = flags_ | (cached ? kRecordCached : 0);
      r.bytes_hi = static_cast<std::uint8_t>(static_cast<unsigned long long>(bytes) >> 32);
      r.bh = static_cast<std::int32_t>(bh);
      r.row0 = static_cast<std::int32_t>(row0);
      r.rows = static_cast<std::int32_t>(rows);
      r.col0 = static_cast<std::int32_t>(col0);
      r.cols = static_cast<std::int32_t>(cols);
      r.sample_row = sample_row;
      r.m = m;
      r.l = l;
      slice_[count_] = r;
    }
    ++count_;
    header_->count = count_;
  }

  bool recorder_ = false;
  CtaHeader* header_ = nullptr;
  DeviceRecord* slice_ = nullptr;
  std::uint32_t cap_ = 0, count_ = 0;
  std::uint8_t flags_ = 0;  // the round's bits (in_round)
};

// Element ranges of a flat grid-stride chunk, for events that must name head-local rows.

// f(bh, row0, rows) for each head's share of the rows [r0, r1) of a (B·H·N)-row tensor: a
// block of rows (or a grid-stride chunk) can straddle heads.
template <typename F>
__device__ void for_each_head(std::int64_t r0, std::int64_t r1, int N, F f) {
  for (std::int64_t r = r0; r < r1;) {
    const std::int64_t bh = r / N, end = min(r1, (bh + 1) * N);
    f(bh, r - bh * N, end - r);
    r = end;
  }
}

// f(bh, row0, rows, col0, cols) for rectangles covering the flat elements [e0, e1) of a
// (B·H, N, C) tensor: a part row, whole rows, a part row, per head.
template <typename F>
__device__ void for_each_tile(std::int64_t e0, std::int64_t e1, int N, int C, F f) {
  const std::int64_t NC = std::int64_t(N) * C;
  for (std::int64_t e = e0; e < e1;) {
    const std::int64_t bh = e / NC, row = e % NC / C, col = e % C;
    if (col != 0 || e1 - e < C) {
      const std::int64_t n = min(C - col, e1 - e);
      f(bh, row, 1, col, n);
      e += n;
    } else {
      const std::int64_t rows = min((e1 - e) / C, N - row);
      f(bh, row, rows, 0, C);
      e += rows * C;
    }
  }
}

}  // namespace fs::trace

// One event, in one line:
//   FS_TRACE_EVENT(tr, Kind::Load, Tensor::K, bh, row0, rows, col0, cols, bytes);
//   FS_TRACE_EVENT(tr, Kind::Load, Tensor::Q, bh, i0, rows, 0, d, bytes, /*cached=*/j_block != 0);
//   FS_TRACE_EVENT(tr, Kind::ComputeS, Tensor::S, bh, i0, Br, j0, Bc, 0);
// An optional last argument says whether a load is a re-read the IO model does not count
// (served by L2); FS_TRACE_CACHED is the same with it true. FS_TRACE_STATS adds the sampled
// row's running m and l (online-softmax steps).
#define FS_TRACE_EVENT(tr, kind, tensor, ...) (tr).event(::fs::trace::kind, ::fs::trace::tensor, __VA_ARGS__)
#define FS_TRACE_CACHED(tr, kind, tensor, bh, row0, rows, col0, cols, bytes) \
  (tr).event(::fs::trace::kind, ::fs::trace::tensor, (bh), (row0), (rows), (col0), (cols), (bytes), true)
#define FS_TRACE_STATS(tr, kind, tensor, bh, row0, rows, col0, cols, m, l, sample_row) \
  (tr).event_stats(::fs::trace::kind, ::fs::trace::tensor, (bh), (row0), (rows), (col0), (cols), (m), (l), (sample_row))
