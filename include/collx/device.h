/* collx public API: a few device-memory utilities, so that a program linked with
 * libcollx.so only (no CUDA toolkit of its own, or the emulated test device) can place its
 * buffers in device memory and move data in and out. Included by collx/collx.h; do not
 * include directly.
 *
 * They wrap the same device layer the collectives use: the CUDA runtime in a CUDA build,
 * or the emulated device under COLLX_TEST_DEVICE=emulated (docs/cuda.md, "Testing without
 * a GPU"). Streams are cudaStream_t values passed as void*; NULL is the legacy default
 * stream. Every call is thread-safe (the CUDA runtime's guarantees). Without a usable device
 * (a build without CUDA, no driver, no GPU) every call but collx_device_free returns
 * COLLX_ERR_UNSUPPORTED, and collx_last_error(NULL) names why. Other failures are reported
 * the same way, with the message in collx_last_error(NULL) of the calling thread. */
#ifndef COLLX_DEVICE_H_
#define COLLX_DEVICE_H_

#ifdef __cplusplus
extern "C" {
#endif

/* *ptr = `bytes` (> 0) bytes of device memory on the calling thread's current device,
 * uninitialized. The caller owns it and releases it with collx_device_free. Host code must
 * not dereference it. Errors: COLLX_ERR_INVALID_ARG (ptr NULL, bytes 0),
 * COLLX_ERR_UNSUPPORTED (no usable device), COLLX_ERR_NO_MEMORY. */
COLLX_API collx_status_t collx_device_alloc(size_t bytes, void** ptr);

/* Releases memory from collx_device_alloc (waiting for the device work queued before, as
 * cudaFree does); NULL is a no-op. The memory must not be used by queued work afterwards. */
COLLX_API collx_status_t collx_device_free(void* ptr);

/* Copies `bytes` bytes from src to dst, ordered on `stream` after the work queued there
 * before, and returns once queued. The direction (host to device, device to host, device to
 * device) is detected from the pointers; at least one must be device memory. A host
 * destination may be read, and a host source reused, only after
 * collx_device_stream_synchronize(stream). bytes = 0 queues nothing. Errors:
 * COLLX_ERR_INVALID_ARG (dst or src NULL with bytes > 0, both host memory),
 * COLLX_ERR_UNSUPPORTED (no usable device), the device's error otherwise. */
COLLX_API collx_status_t collx_device_memcpy(void* dst, const void* src, size_t bytes, void* stream);

/* Waits until every operation queued on `stream` so far has finished (a copy, a collective,
 * a parallel-layer call on device buffers), polling and yielding. Errors:
 * COLLX_ERR_UNSUPPORTED (no usable device), the error of failed device work,
 * COLLX_ERR_TIMEOUT after COLLX_TIMEOUT_MS (docs/environment.md) naming the stream. */
COLLX_API collx_status_t collx_device_stream_synchronize(void* stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* COLLX_DEVICE_H_ */
