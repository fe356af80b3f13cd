// Point-to-point on CUDA device buffers: the staged route (docs/cuda.md, "Point-to-point on
// device buffers"). A send queues the copy of the device buffer to pinned host staging on the
// caller's stream and returns without waiting for it: the communicator posts the send from
// the staging once copied() says the copy ended (p2p_deferred_sends.h). A receive lands in
// pinned staging and is copied to the device on the caller's stream when the message has
// arrived (the call completes when that copy is queued).
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "lib/common/status.h"
#include "lib/cuda/device.h"

namespace collx {

// Pinned staging buffers of one communicator, reused across calls. A buffer whose copy on a
// stream may still run is kept until its event says the copy ended. Thread-safe.
class P2pStagingPool {
 public:
  struct Buffer {
    char* pinned = nullptr;
    size_t capacity = 0;
    void* event = nullptr;  // recorded after the last copy on a stream into or out of `pinned`
    bool pending = false;   // that copy may still run
  };
  P2pStagingPool() = default;
  ~P2pStagingPool();  // waits (bounded) for pending copies, then frees every buffer
  P2pStagingPool(const P2pStagingPool&) = delete;
  P2pStagingPool& operator=(const P2pStagingPool&) = delete;

  // A free buffer of at least `bytes` (reused, or newly allocated with its event).
  Status acquire(size_t bytes, Buffer* out);
  void release(Buffer buffer);

 private:
  static void destroy(Buffer* buffer);
  std::mutex mutex_;
  std::vector<Buffer> buffers_;
};

// The staging of one point-to-point request; returns its buffer to the pool when destroyed.
class P2pStaged {
 public:
  // Send: the copy of the device buffer `device_src` (`bytes`) into staging queued on `stream`,
  // after the work already queued there, and not waited for: host() holds the message once
  // copied() says so.
  static Status for_send(P2pStagingPool* pool, const void* device_src, size_t bytes, void* stream,
                         std::unique_ptr<P2pStaged>* out);
  // Receive: staging for the message, delivered to `device_dst` by deliver().
  static Status for_recv(P2pStagingPool* pool, void* device_dst, size_t bytes, void* stream,
                         std::unique_ptr<P2pStaged>* out);
  ~P2pStaged();
  P2pStaged(const P2pStaged&) = delete;
  P2pStaged& operator=(const P2pStaged&) = delete;

  char* host() const { return buffer_.pinned; }
  // Send: whether the copy into host() ended (a non-blocking event query).
  Status copied(bool* done) const { return cuda::event_done(buffer_.event, done); }
  // Receive, once the message is in host(): queues the copy to the device on the stream (and
  // the event guarding the staging). Nothing for a send.
  Status deliver();

 private:
  P2pStaged(P2pStagingPool* pool, void* device_dst, size_t bytes, void* stream)
      : pool_(pool), device_dst_(device_dst), bytes_(bytes), stream_(stream) {}
  P2pStagingPool* pool_;
  P2pStagingPool::Buffer buffer_;
  void* device_dst_;  // receive only
  size_t bytes_;
  void* stream_;
};

}  // namespace collx
