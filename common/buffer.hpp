// Move-only device buffers, and a count of the device memory they hold.
//
// Every device allocation of the project goes through DeviceBuffer, so the peak it reports
// is the program's own: inputs, outputs and the step's workspace (the N×N matrices of the
// naive step, nothing of size N×N from step 03 on).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "common/check.hpp"
#include "common/dtype.hpp"

namespace fs {

namespace memory {
std::size_t current_bytes();  // held now by live DeviceBuffers
std::size_t peak_bytes();     // the most held at once since the last reset_peak()
void reset_peak();            // peak := current
void* allocate(std::size_t bytes);
void release(void* p, std::size_t bytes) noexcept;
}  // namespace memory

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count)
      : ptr_(static_cast<T*>(memory::allocate(count * sizeof(T)))), count_(count) {}
  ~DeviceBuffer() { memory::release(ptr_, bytes()); }

  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      memory::release(ptr_, bytes());
      ptr_ = std::exchange(other.ptr_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }

  T* get() const { return ptr_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }

  void upload(const T* host, std::size_t count) {
    FS_CUDA_CHECK(cudaMemcpy(ptr_, host, count * sizeof(T), cudaMemcpyHostToDevice));
  }
  void download(T* host, std::size_t count) const {
    FS_CUDA_CHECK(cudaMemcpy(host, ptr_, count * sizeof(T), cudaMemcpyDeviceToHost));
  }
  // Every byte 0xFF: as float that is a NaN, so an element a kernel never wrote fails the
  // check instead of passing as a leftover zero.
  void poison(cudaStream_t stream = nullptr) {
    if (ptr_) FS_CUDA_CHECK(cudaMemsetAsync(ptr_, 0xFF, bytes(), stream));
  }

 private:
  T* ptr_ = nullptr;
  std::size_t count_ = 0;
};

// A tensor of `dtype` on the device, filled from and read back as float32 values (encode and
// decode, common/dtype.hpp): the harness's Q, K, V, O, dO, dQ, dK, dV.
class DeviceTensor {
 public:
  DeviceTensor() = default;
  DeviceTensor(std::size_t count, DType dtype) : bytes_(count * dtype_bytes(dtype)), count_(count), dtype_(dtype) {}

  void* get() const { return bytes_.get(); }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return bytes_.bytes(); }
  DType dtype() const { return dtype_; }

  void upload(const std::vector<float>& host);  // host.size() == size()
  std::vector<float> download() const;
  // Every byte 0xFF: a NaN in fp32, bf16 and fp16 alike (see DeviceBuffer::poison).
  void poison(cudaStream_t stream = nullptr) { bytes_.poison(stream); }

 private:
  DeviceBuffer<unsigned char> bytes_;
  std::size_t count_ = 0;
  DType dtype_ = DType::fp32;
};

}  // namespace fs
