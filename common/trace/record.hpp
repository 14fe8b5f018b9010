// What a traced kernel writes to device memory, byte for byte: the host decoder
// (decode.hpp) reads these back. Plain structs shared by nvcc and the host compiler.
//
// A kernel's trace buffer is one CtaHeader per lane of a CTA and, per lane, a slice of `cap`
// records (a lane: a part of the CTA that records its own events, step 09's warpgroups; most
// kernels have one, the CTA itself):
//
//   headers  [ctas][lanes]        count, SM, the lane's start time
//   records  [ctas][lanes][cap]   one per event, in the order the lane recorded them
//
// The count keeps going past `cap` (those records are not written) so that the host knows how
// many events a full slice dropped.
#pragma once

#include <cstdint>

namespace fs::trace {

// One device event: the end of a phase (a load, a store, a compute step) of one CTA. The phase
// began where the CTA's previous event ended (or at the CTA's start).
struct DeviceRecord {
  std::uint64_t t_end;   // %globaltimer when the phase ended (ns, GPU clock)
  std::uint32_t bytes;    // bytes moved to or from HBM (loads and stores; 0 otherwise): low 32 bits
  std::uint8_t kind;      // Kind
  std::uint8_t tensor;    // Tensor
  std::uint8_t flags;     // kRecordCached; bits 3..7: the event's round + 1 (0: none)
  std::uint8_t bytes_hi;  // bits 32..39 of bytes (a tile of up to 1 TiB)
  std::int32_t bh;       // head (b·H + h)
  std::int32_t row0, rows, col0, cols;  // the tile: rows × cols at (row0, col0) of head bh
  std::int32_t sample_row;  // online softmax: the sampled row whose m, l follow; -1: none
  float m, l;               // that row's running max and normaliser after this event
};
static_assert(sizeof(DeviceRecord) == 48, "docs/trace-format.md promises 48-byte records");

constexpr std::uint8_t kRecordCached = 1;  // a re-read the IO model does not count
// A clustered step's round (Event::round), stored + 1 in the flags' top five bits.
constexpr int kRecordRoundShift = 3;

struct CtaHeader {
  std::uint32_t count;    // events recorded, including those past the slice's capacity
  std::uint32_t sm;       // %smid
  std::uint64_t t_start;  // %globaltimer when the CTA began; 0 if it never ran
};
static_assert(sizeof(CtaHeader) == 16, "one 16-byte header per CTA");

// Where one traced launch's CTAs write (DeviceSink::begin_kernel); passed by value to the
// kernel as its last argument. Empty when tracing is off.
struct Slices {
  CtaHeader* headers = nullptr;     // [CTAs][lanes]
  DeviceRecord* records = nullptr;  // [CTAs][lanes][cap]
  std::uint32_t cap = 0;            // records per lane
  std::uint32_t lanes = 1;          // lanes per CTA
};

}  // namespace fs::trace
