// The parallel layer's use of device memory (issue 14): an owned device allocation that frees
// itself, the memory-kind check of a config, and the float32 element operations the dp and
// zero layers queue on a caller's stream. Everything here only queues work on the stream:
// nothing waits for the device unless its name says so.
#pragma once

#include <cstddef>
#include <string>

#include "collx/collx.h"
#include "lib/common/status.h"

namespace collx {
namespace parallel {

// "" when device buffers can be used in this process (a CUDA build with a usable device, or
// the emulated test device); otherwise why not, for a COLLX_ERR_UNSUPPORTED message.
std::string device_unavailable();

// Resolves a config's mem_kind: COLLX_MEM_AUTO is the kind of `buffer` (host when NULL).
// Returns COLLX_MEM_HOST or COLLX_MEM_CUDA, or -1 for a value that is no collx_mem_kind_t.
int32_t resolve_mem_kind(int32_t mem_kind, const void* buffer);

// One device allocation, released on destruction after `stream` drained (work queued on it may
// still use the memory; the wait is bounded and logged when it fails). Released blocks are
// kept for reuse by later allocations of the same size on the same device, never given back
// to CUDA (cudaFree synchronizes the device: device_mem.cc says why that deadlocks).
class DeviceMem {
 public:
  DeviceMem() = default;
  ~DeviceMem();
  DeviceMem(const DeviceMem&) = delete;
  DeviceMem& operator=(const DeviceMem&) = delete;
  // Allocates `bytes` on the current device and queues a memset to zero on `stream`.
  Status allocate_zeroed(size_t bytes, void* stream);
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
  void* stream_ = nullptr;
  size_t bytes_ = 0;
  int device_ = 0;
};

// The block cache for scratch that outlives one DeviceMem (parallel/device_buffers.cc's
// per-thread workspace): a block of `bytes` on `device` from the cache, else a new one.
Status take_device_block(int device, size_t bytes, void** out);
// Gives `ptr` back to the cache once `last_use` (an event recorded after its last use; null
// when it was never used) has completed, never through device_free (see DeviceMem). A block
// whose event cannot be waited for in time is freed instead (logged).
void recycle_device_block(int device, size_t bytes, void* ptr, void* last_use);

// Page-locked host memory (copies to and from it are asynchronous), freed on destruction
// after `stream` drained, as DeviceMem.
class PinnedMem {
 public:
  PinnedMem() = default;
  ~PinnedMem();
  PinnedMem(const PinnedMem&) = delete;
  PinnedMem& operator=(const PinnedMem&) = delete;
  Status allocate(size_t bytes, void* stream);
  float* floats() const { return static_cast<float*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  void* stream_ = nullptr;
};

// Options of a collective on device buffers ordered on `stream`.
collx_opts_t device_opts(void* stream);

// p[i] *= scale on the device, queued on `stream`; nothing when scale == 1 (as the host
// scale_in_place, so the two paths round alike: one float32 product per element).
Status device_scale(float* p, size_t n, float scale, void* stream);
// dst[i] += src[i] on the device (float32), queued on `stream`.
Status device_add(float* dst, const float* src, size_t n, void* stream);
// Zeroes n floats at p, queued on `stream`.
Status device_zero(float* p, size_t n, void* stream);

}  // namespace parallel
}  // namespace collx
