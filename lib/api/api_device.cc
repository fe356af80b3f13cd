// collx_device_*: the public device-memory utilities (include/collx/device.h), thin wrappers
// over lib/cuda/device.h, whose dispatch picks the CUDA runtime or the emulated device.
#include <string>

#include "lib/api/handles.h"
#include "lib/common/settings.h"
#include "lib/cuda/device.h"

namespace collx {
namespace api {
namespace {

// COLLX_ERR_UNSUPPORTED naming why there is no device (the device layer's own reason).
Status require_device(const char* fn) {
  std::string why;
  if (cuda::device_count(&why) > 0) return Status::Ok();
  return make_status(COLLX_ERR_UNSUPPORTED, "%s: no usable device (%s)", fn, why.empty() ? "none found" : why.c_str());
}

Status device_memcpy(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return Status::Ok();
  if (dst == nullptr) return make_status(COLLX_ERR_INVALID_ARG, "collx_device_memcpy: dst is NULL");
  if (src == nullptr) return make_status(COLLX_ERR_INVALID_ARG, "collx_device_memcpy: src is NULL");
  COLLX_RETURN_IF_ERROR(require_device("collx_device_memcpy"));
  const bool dst_dev = cuda::pointer_kind(dst) == COLLX_MEM_CUDA;
  const bool src_dev = cuda::pointer_kind(src) == COLLX_MEM_CUDA;
  if (!dst_dev && !src_dev)
    return make_status(COLLX_ERR_INVALID_ARG, "collx_device_memcpy: neither dst nor src is device memory");
  const cuda::CopyKind kind = !src_dev  ? cuda::CopyKind::kHostToDevice
                              : !dst_dev ? cuda::CopyKind::kDeviceToHost
                                         : cuda::CopyKind::kDeviceToDevice;
  return cuda::copy_async(dst, src, bytes, kind, stream).with_context("collx_device_memcpy: ");
}

Status stream_synchronize(void* stream) {
  COLLX_RETURN_IF_ERROR(require_device("collx_device_stream_synchronize"));
  int64_t timeout_ms = -1;
  COLLX_RETURN_IF_ERROR(setting_int(SettingId::TIMEOUT_MS, &timeout_ms));
  return cuda::stream_wait(stream, Deadline::after_ms(timeout_ms), nullptr, "collx_device_stream_synchronize");
}

}  // namespace
}  // namespace api
}  // namespace collx

extern "C" {

collx_status_t collx_device_alloc(size_t bytes, void** ptr) {
  using namespace collx;
  return api::guarded(nullptr, [&] {
    if (ptr == nullptr) return api::null_handle("collx_device_alloc: ptr");
    *ptr = nullptr;
    if (bytes == 0) return make_status(COLLX_ERR_INVALID_ARG, "collx_device_alloc: bytes is 0");
    COLLX_RETURN_IF_ERROR(api::require_device("collx_device_alloc"));
    return cuda::device_alloc(bytes, ptr).with_context("collx_device_alloc: ");
  });
}

collx_status_t collx_device_free(void* ptr) {
  return collx::api::guarded(nullptr, [&] {
    if (ptr != nullptr) collx::cuda::device_free(ptr);
    return collx::Status::Ok();
  });
}

collx_status_t collx_device_memcpy(void* dst, const void* src, size_t bytes, void* stream) {
  return collx::api::guarded(nullptr, [&] { return collx::api::device_memcpy(dst, src, bytes, stream); });
}

collx_status_t collx_device_stream_synchronize(void* stream) {
  return collx::api::guarded(nullptr, [&] { return collx::api::stream_synchronize(stream); });
}

}  // extern "C"
