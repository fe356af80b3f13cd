// Helpers of the GPU tests: exact test data for every datatype and device buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collx/collx.h"
#include "parallel/device_mem.h"

namespace collx {
namespace testing {

// count elements of `datatype` whose every sum, product (of up to 4 ranks), min, max, average
// and doubling is exact in every datatype, so host and device results must agree bit for bit:
// small integers (-3..3, or 0..6 for unsigned types) derived from rank, index and salt.
std::vector<uint8_t> exact_data(collx_datatype_t datatype, size_t count, int rank, unsigned salt);

// A device buffer freed on scope exit; holds a copy of `bytes` host bytes when given. The
// free waits for the whole device: thread ranks destroy one only once every rank has issued
// all of its stream-ordered collectives (else see RankDeviceMem).
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

// Device memory for ranks that are threads of one process and issue stream-ordered
// nonblocking collectives (the dp and ZeRO device tests): released after its own stream
// drained, then kept for reuse (parallel/device_mem.h), never given back with device_free.
// DeviceBuffer's device_free waits for every stream of the device, as cudaFree does, and so
// for another rank's stream that waits (stream-ordered, docs/cuda.md) for a collective this
// rank has not issued yet: a deadlock until that collective's deadline. That was issue 14's
// hang (a rank freeing its host run's device scratch while its peers' device run had begun).
using RankDeviceMem = parallel::DeviceMem;

}  // namespace testing
}  // namespace collx
