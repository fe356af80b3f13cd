// The staged route of point-to-point on device buffers (see comm_p2p_device.h).
#include "lib/core/comm_p2p_device.h"

#include <algorithm>

#include "lib/cuda/device.h"

namespace collx {

namespace {
// Free buffers kept for reuse beyond this are freed on release.
constexpr size_t kMaxIdleBuffers = 8;
constexpr size_t kMinStagingBytes = 64u << 10;
}  // namespace

void P2pStagingPool::destroy(Buffer* buffer) {
  if (buffer->pending) {
    // A copy on a stream may still use the staging: it must end before the memory goes.
    cuda::event_wait(buffer->event, Deadline::after_ms(10000), nullptr, "a copy on a stream into or out of point-to-point staging")
        .ignore();
  }
  if (buffer->event) cuda::event_destroy(buffer->event);
  cuda::host_free_pinned(buffer->pinned);
  *buffer = Buffer();
}

P2pStagingPool::~P2pStagingPool() {
  for (Buffer& b : buffers_) destroy(&b);
}

Status P2pStagingPool::acquire(size_t bytes, Buffer* out) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t best = buffers_.size();
    for (size_t i = 0; i < buffers_.size(); ++i) {
      Buffer& b = buffers_[i];
      if (b.capacity < bytes) continue;
      if (b.pending) {
        bool done = false;
        if (!cuda::event_done(b.event, &done).ok() || !done) continue;
        b.pending = false;
      }
      if (best == buffers_.size() || b.capacity < buffers_[best].capacity) best = i;
    }
    if (best < buffers_.size()) {
      *out = buffers_[best];
      buffers_.erase(buffers_.begin() + static_cast<std::ptrdiff_t>(best));
      return Status::Ok();
    }
  }
  Buffer b;
  b.capacity = std::max(bytes, kMinStagingBytes);
  void* pinned = nullptr;
  COLLX_RETURN_IF_ERROR(cuda::host_alloc_pinned(b.capacity, &pinned));
  b.pinned = static_cast<char*>(pinned);
  Status st = cuda::event_create(&b.event);
  if (!st.ok()) {
    cuda::host_free_pinned(pinned);
    return st;
  }
  *out = b;
  return Status::Ok();
}

void P2pStagingPool::release(Buffer buffer) {
  if (!buffer.pinned) return;
  std::lock_guard<std::mutex> lock(mutex_);
  size_t idle = 0;
  for (const Buffer& b : buffers_) idle += b.pending ? 0 : 1;
  if (!buffer.pending && idle >= kMaxIdleBuffers) {
    destroy(&buffer);
    return;
  }
  buffers_.push_back(buffer);
}

Status P2pStaged::for_send(P2pStagingPool* pool, const void* device_src, size_t bytes, void* stream,
                           std::unique_ptr<P2pStaged>* out) {
  std::unique_ptr<P2pStaged> staged(new P2pStaged(pool, nullptr, bytes, stream));
  COLLX_RETURN_IF_ERROR(pool->acquire(bytes, &staged->buffer_));
  COLLX_RETURN_IF_ERROR(cuda::copy_async(staged->buffer_.pinned, device_src, bytes, cuda::CopyKind::kDeviceToHost, stream));
  // From here the stream may write the staging: the pool reuses it only once the event is
  // done (a request dropped before its copy ended included). Marked before the record, as
  // in deliver().
  staged->buffer_.pending = true;
  COLLX_RETURN_IF_ERROR(cuda::event_record(staged->buffer_.event, stream));
  *out = std::move(staged);
  return Status::Ok();
}

Status P2pStaged::for_recv(P2pStagingPool* pool, void* device_dst, size_t bytes, void* stream,
                           std::unique_ptr<P2pStaged>* out) {
  std::unique_ptr<P2pStaged> staged(new P2pStaged(pool, device_dst, bytes, stream));
  COLLX_RETURN_IF_ERROR(pool->acquire(bytes, &staged->buffer_));
  *out = std::move(staged);
  return Status::Ok();
}

Status P2pStaged::deliver() {
  if (!device_dst_) return Status::Ok();
  COLLX_RETURN_IF_ERROR(
      cuda::copy_async(device_dst_, buffer_.pinned, bytes_, cuda::CopyKind::kHostToDevice, stream_));
  // Marked before the record: if the record fails, release still waits (bounded) for the copy.
  buffer_.pending = true;
  return cuda::event_record(buffer_.event, stream_);
}

P2pStaged::~P2pStaged() { pool_->release(buffer_); }

}  // namespace collx
