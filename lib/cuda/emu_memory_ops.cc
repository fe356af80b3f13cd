// Allocation, copies and memset of the emulated device: pointers are checked and translated
// to the emulator's aliases when the operation is queued (an error, not a crash, for a
// pointer that is not live device memory), and the copy runs on the stream's worker.
#include <cstdlib>
#include <cstring>

#include "lib/common/log.h"
#include "lib/cuda/backends.h"
#include "lib/cuda/emu_config.h"
#include "lib/cuda/emu_memory.h"
#include "lib/cuda/emu_stream.h"

namespace collx {
namespace cuda {
namespace emu {

namespace {

// The source and destination of a copy as the worker sees them.
struct CopyPlan {
  Resolved dst, src;
};

// dst_bytes and src_bytes differ for strided copies (each side's span).
Status plan_copy(void* dst, const void* src, size_t dst_bytes, size_t src_bytes, CopyKind kind, const char* what,
                 CopyPlan* plan) {
  const bool dst_device = kind != CopyKind::kDeviceToHost;
  const bool src_device = kind != CopyKind::kHostToDevice;
  if (!dst || !src) return make_status(COLLX_ERR_INVALID_ARG, "%s: a NULL buffer for %zu bytes", what, dst_bytes);
  if (dst_device) {
    COLLX_RETURN_IF_ERROR(resolve(dst, dst_bytes, what, &plan->dst));
  } else {
    COLLX_RETURN_IF_ERROR(check_host(dst, what));
    plan->dst.alias = static_cast<char*>(dst);
  }
  if (src_device) {
    COLLX_RETURN_IF_ERROR(resolve(src, src_bytes, what, &plan->src));
  } else {
    COLLX_RETURN_IF_ERROR(check_host(src, what));
    plan->src.alias = const_cast<char*>(static_cast<const char*>(src));
  }
  return Status::Ok();
}

}  // namespace

Status device_alloc(size_t bytes, void** out) { return allocate(bytes, current_index(), out); }

// cudaFree waits for the device's queued work; so does this (queued work keeps its pages
// mapped anyway, see Mapping).
void device_free(void* ptr) {
  if (!ptr) return;
  if (!find_mapping(ptr)) {
    COLLX_WARN(INIT, "emulated device: device_free(%p): not an emulated device allocation", ptr);
    return;
  }
  device_synchronize().ignore();
  if (!release(ptr)) COLLX_WARN(INIT, "emulated device: device_free(%p): not the base of an allocation", ptr);
}

Status host_alloc_pinned(size_t bytes, void** out) {
  *out = nullptr;
  if (bytes == 0) return Status::Ok();
  if (posix_memalign(out, 4096, bytes) != 0) {
    *out = nullptr;
    return make_status(COLLX_ERR_NO_MEMORY, "emulated device: %zu bytes of pinned host memory", bytes);
  }
  return Status::Ok();
}

void host_free_pinned(void* ptr) { std::free(ptr); }

Status copy_async(void* dst, const void* src, size_t bytes, CopyKind kind, void* stream) {
  if (bytes == 0) return Status::Ok();
  CopyPlan plan;
  COLLX_RETURN_IF_ERROR(plan_copy(dst, src, bytes, bytes, kind, "copy_async", &plan));
  return enqueue(stream, "copy_async", [plan, bytes] {
    std::memmove(plan.dst.alias, plan.src.alias, bytes);
    return Status::Ok();
  });
}

// Each side is resolved over its whole span (first row to the end of the last).
Status copy2d_async(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t rows,
                    CopyKind kind, void* stream) {
  const size_t dspan = (rows - 1) * dpitch + width, sspan = (rows - 1) * spitch + width;
  CopyPlan plan;
  COLLX_RETURN_IF_ERROR(plan_copy(dst, src, dspan, sspan, kind, "copy2d_async", &plan));
  return enqueue(stream, "copy2d_async", [plan, dpitch, spitch, width, rows] {
    for (size_t r = 0; r < rows; ++r) std::memmove(plan.dst.alias + r * dpitch, plan.src.alias + r * spitch, width);
    return Status::Ok();
  });
}

Status memset_async(void* dst, int value, size_t bytes, void* stream) {
  if (bytes == 0) return Status::Ok();
  Resolved d;
  COLLX_RETURN_IF_ERROR(resolve(dst, bytes, "memset_async", &d));
  return enqueue(stream, "memset_async", [d, value, bytes] {
    std::memset(d.alias, value, bytes);
    return Status::Ok();
  });
}

Status copy(void* dst, const void* src, size_t bytes, CopyKind kind) {
  if (bytes == 0) return Status::Ok();
  CopyPlan plan;
  COLLX_RETURN_IF_ERROR(plan_copy(dst, src, bytes, bytes, kind, "copy", &plan));
  return run_blocking("a blocking copy", [plan, bytes] {
    std::memmove(plan.dst.alias, plan.src.alias, bytes);
    return Status::Ok();
  });
}

}  // namespace emu
}  // namespace cuda
}  // namespace collx
