// Helpers of the GPU tests: exact test data for every datatype and device buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collx/collx.h"

namespace collx {
namespace testing {

// count elements of `datatype` whose every sum, product (of up to 4 ranks), min, max, average
// and doubling is exact in every datatype, so host and device results must agree bit for bit:
// small integers (-3..3, or 0..6 for unsigned types) derived from rank, index and salt.
std::vector<uint8_t> exact_data(collx_datatype_t datatype, size_t count, int rank, unsigned salt);

// A device buffer freed on scope exit; holds a copy of `bytes` host bytes when given.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes, const void* init = nullptr);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  char* get() const { return ptr_; }
  std::vector<uint8_t> read(size_t offset, size_t bytes) const;
  bool ok() const { return ptr_ != nullptr || bytes_ == 0; }

 private:
  char* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace testing
}  // namespace collx
