// The native backend of lib/cuda/device.h (backends.h): the CUDA runtime (linked statically,
// see docs/cuda.md), or stubs reporting COLLX_ERR_UNSUPPORTED when the build has no CUDA.
#include "lib/cuda/backends.h"

#include <chrono>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <thread>

// COLLX_CUDA_STUB: the stub even in a CUDA build (the static archive, see CMakeLists.txt).
#if COLLX_HAVE_CUDA && !COLLX_CUDA_STUB
#define COLLX_CUDA_REAL 1
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <link.h>
#endif

namespace collx {
namespace cuda {
namespace native {

#if COLLX_CUDA_REAL

namespace {

Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::Ok();
  const collx_status_t code = err == cudaErrorMemoryAllocation ? COLLX_ERR_NO_MEMORY
                              : (err == cudaErrorInvalidValue || err == cudaErrorInvalidDevicePointer)
                                  ? COLLX_ERR_INVALID_ARG
                                  : COLLX_ERR_CUDA;
  return make_status(code, "%s failed: %s (%s)", what, cudaGetErrorString(err), cudaGetErrorName(err));
}

#define COLLX_CUDA_CALL(expr) COLLX_RETURN_IF_ERROR(cuda_status((expr), #expr))

struct DeviceCount {
  int count = 0;
  std::string why;
};

const DeviceCount& probe() {
  static DeviceCount result;
  static std::once_flag once;
  std::call_once(once, [] {
    int n = 0;
    void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!driver) {
      result.why = "no CUDA driver (libcuda.so.1 cannot be loaded)";
      return;
    }
    dlclose(driver);  // the runtime keeps its own reference once it initializes
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      result.why = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(err);
      (void)cudaGetLastError();
      n = 0;
    } else if (n == 0) {
      result.why = "the CUDA driver reports no device";
    }
    result.count = n;
  });
  return result;
}

// How many shared objects this process has loaded so far (glibc's dlpi_adds, the same in
// every entry): unchanged since a probe found no driver means none can have appeared since.
unsigned long long objects_loaded_so_far() {
  unsigned long long adds = 0;
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t size, void* out) -> int {
        if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds) {
          *static_cast<unsigned long long*>(out) = info->dlpi_adds;
        }
        return 1;  // the first object is enough
      },
      &adds);
  return adds;
}

// Whether the process itself loaded the CUDA driver (only then can it hold device memory).
// Asked on every call with COLLX_MEM_AUTO, so a "no" is remembered until the process loads
// another shared object: dlopen(RTLD_NOLOAD) of a name without a slash walks the library
// search path (four failed openat calls here), microseconds on every host collective.
bool driver_loaded() {
  static std::atomic<bool> seen{false};
  static std::atomic<unsigned long long> absent_at{0};  // objects loaded at the last "no"; 0 = none
  if (seen.load(std::memory_order_relaxed)) return true;
  const unsigned long long loaded = objects_loaded_so_far();
  if (loaded != 0 && absent_at.load(std::memory_order_relaxed) == loaded) return false;
  void* handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!handle) {
    absent_at.store(loaded, std::memory_order_relaxed);
    return false;
  }
  dlclose(handle);
  seen.store(true, std::memory_order_relaxed);
  return true;
}

void pause(int polls) {
  if (polls < 64) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(polls < 1024 ? 20 : 200));
  }
}

}  // namespace

bool built_with_cuda() { return true; }

int device_count(std::string* why) {
  const DeviceCount& p = probe();
  if (why) *why = p.why;
  return p.count;
}

int pointer_kind(const void* ptr) {
  if (!ptr || !driver_loaded() || device_count(nullptr) == 0) return COLLX_MEM_HOST;
  cudaPointerAttributes attr;
  cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return COLLX_MEM_HOST;
  }
  return (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) ? COLLX_MEM_CUDA
                                                                                   : COLLX_MEM_HOST;
}

Status pointer_device(const void* ptr, int* device) {
  cudaPointerAttributes attr;
  COLLX_CUDA_CALL(cudaPointerGetAttributes(&attr, ptr));
  *device = attr.device;
  return Status::Ok();
}

Status set_device(int device) {
  COLLX_CUDA_CALL(cudaSetDevice(device));
  return Status::Ok();
}

Status current_device(int* device) {
  COLLX_CUDA_CALL(cudaGetDevice(device));
  return Status::Ok();
}

Status device_alloc(size_t bytes, void** out) {
  *out = nullptr;
  if (bytes == 0) return Status::Ok();
  COLLX_CUDA_CALL(cudaMalloc(out, bytes));
  return Status::Ok();
}

void device_free(void* ptr) {
  if (ptr) (void)cudaFree(ptr);
}

Status host_alloc_pinned(size_t bytes, void** out) {
  *out = nullptr;
  if (bytes == 0) return Status::Ok();
  COLLX_CUDA_CALL(cudaHostAlloc(out, bytes, cudaHostAllocPortable));
  return Status::Ok();
}

void host_free_pinned(void* ptr) {
  if (ptr) (void)cudaFreeHost(ptr);
}

static cudaMemcpyKind copy_kind(CopyKind kind) {
  switch (kind) {
    case CopyKind::kHostToDevice: return cudaMemcpyHostToDevice;
    case CopyKind::kDeviceToHost: return cudaMemcpyDeviceToHost;
    default: return cudaMemcpyDeviceToDevice;
  }
}

Status copy_async(void* dst, const void* src, size_t bytes, CopyKind kind, void* stream) {
  if (bytes == 0) return Status::Ok();
  COLLX_CUDA_CALL(cudaMemcpyAsync(dst, src, bytes, copy_kind(kind), static_cast<cudaStream_t>(stream)));
  return Status::Ok();
}

Status memset_async(void* dst, int value, size_t bytes, void* stream) {
  if (bytes == 0) return Status::Ok();
  COLLX_CUDA_CALL(cudaMemsetAsync(dst, value, bytes, static_cast<cudaStream_t>(stream)));
  return Status::Ok();
}

Status copy2d_async(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t rows,
                    CopyKind kind, void* stream) {
  COLLX_CUDA_CALL(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, copy_kind(kind),
                                    static_cast<cudaStream_t>(stream)));
  return Status::Ok();
}

Status copy(void* dst, const void* src, size_t bytes, CopyKind kind) {
  if (bytes == 0) return Status::Ok();
  COLLX_CUDA_CALL(cudaMemcpy(dst, src, bytes, copy_kind(kind)));
  return Status::Ok();
}

Status stream_create(void** stream) {
  cudaStream_t s = nullptr;
  COLLX_CUDA_CALL(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  *stream = s;
  return Status::Ok();
}

void stream_destroy(void* stream) {
  if (stream) (void)cudaStreamDestroy(static_cast<cudaStream_t>(stream));
}

Status event_create(void** event) {
  cudaEvent_t e = nullptr;
  COLLX_CUDA_CALL(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  *event = e;
  return Status::Ok();
}

Status event_create_timed(void** event) {
  cudaEvent_t e = nullptr;
  COLLX_CUDA_CALL(cudaEventCreate(&e));
  *event = e;
  return Status::Ok();
}

void event_destroy(void* event) {
  if (event) (void)cudaEventDestroy(static_cast<cudaEvent_t>(event));
}

Status event_record(void* event, void* stream) {
  COLLX_CUDA_CALL(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)));
  return Status::Ok();
}

Status stream_wait_event(void* stream, void* event) {
  COLLX_CUDA_CALL(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event), 0));
  return Status::Ok();
}

Status event_done(void* event, bool* done) {
  cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(event));
  if (err == cudaErrorNotReady) {
    *done = false;
    return Status::Ok();
  }
  *done = err == cudaSuccess;
  return cuda_status(err, "cudaEventQuery");
}

Status event_wait(void* event, Deadline deadline, const std::atomic<bool>* abort, const char* what) {
  for (int polls = 0;; ++polls) {
    bool done = false;
    COLLX_RETURN_IF_ERROR(event_done(event, &done));
    if (done) return Status::Ok();
    if (abort && abort->load(std::memory_order_acquire)) {
      return make_status(COLLX_ERR_ABORTED, "aborted while waiting for %s", what);
    }
    if (deadline.expired()) {
      return make_status(COLLX_ERR_TIMEOUT, "timed out waiting for %s on the GPU (work queued on the stream "
                         "before it has not finished)", what);
    }
    pause(polls);
  }
}

Status stream_wait(void* stream, Deadline deadline, const std::atomic<bool>* abort, const char* what) {
  // An event of its own per call: several threads (ranks as threads) may wait at once.
  void* event = nullptr;
  COLLX_RETURN_IF_ERROR(event_create(&event));
  Status st = event_record(event, stream);
  if (st.ok()) st = event_wait(event, deadline, abort, what);
  event_destroy(event);
  return st;
}

Status event_elapsed_ms(void* start, void* end, float* ms) {
  COLLX_CUDA_CALL(cudaEventElapsedTime(ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)));
  return Status::Ok();
}

Status device_synchronize() {
  COLLX_CUDA_CALL(cudaDeviceSynchronize());
  return Status::Ok();
}

Status stream_capturing(void* stream, bool* capturing) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  COLLX_CUDA_CALL(cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status));
  *capturing = status != cudaStreamCaptureStatusNone;  // active, or invalidated but not ended
  return Status::Ok();
}

Status stream_begin_capture(void* stream) {
  COLLX_CUDA_CALL(cudaStreamBeginCapture(static_cast<cudaStream_t>(stream), cudaStreamCaptureModeRelaxed));
  return Status::Ok();
}

Status stream_end_capture(void* stream) {
  cudaGraph_t graph = nullptr;
  COLLX_CUDA_CALL(cudaStreamEndCapture(static_cast<cudaStream_t>(stream), &graph));
  if (graph) COLLX_CUDA_CALL(cudaGraphDestroy(graph));
  return Status::Ok();
}

int multiprocessor_count() {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return sms;
}

static_assert(sizeof(cudaIpcMemHandle_t) == kIpcHandleBytes, "CUDA IPC handle size");

namespace {
// A driver API function looked up through the runtime (libcollx links no libcuda), or nullptr.
void* driver_entry(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q;
#if CUDART_VERSION >= 12050
  // The versioned lookup (CUDA 12.5+; CUDA 13 has only this one): the 12.0 ABI of the call.
  const cudaError_t found = cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q);
#else
  // CUDA 12.0-12.4 runtimes lack the versioned lookup; theirs returns the runtime's version.
  const cudaError_t found = cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &q);
#endif
  return found == cudaSuccess && q == cudaDriverEntryPointSuccess ? fn : nullptr;
}
}  // namespace

Status ipc_get_handle(const void* ptr, IpcHandle* handle, uintptr_t* base, size_t* offset) {
  using AddressRangeFn = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
  static const auto range_fn = reinterpret_cast<AddressRangeFn>(driver_entry("cuMemGetAddressRange"));
  if (!range_fn) return make_status(COLLX_ERR_SYSTEM, "the CUDA driver has no cuMemGetAddressRange");
  CUdeviceptr b = 0;
  size_t size = 0;
  if (range_fn(&b, &size, reinterpret_cast<CUdeviceptr>(ptr)) != CUDA_SUCCESS) {
    return make_status(COLLX_ERR_INVALID_ARG, "%p is not in a cudaMalloc allocation (CUDA IPC needs one)", ptr);
  }
  cudaIpcMemHandle_t h;
  COLLX_CUDA_CALL(cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(b)));
  std::memcpy(handle->bytes, &h, kIpcHandleBytes);
  *base = static_cast<uintptr_t>(b);
  *offset = reinterpret_cast<uintptr_t>(ptr) - static_cast<uintptr_t>(b);
  return Status::Ok();
}

Status ipc_open(const IpcHandle& handle, void** base) {
  cudaIpcMemHandle_t h;
  std::memcpy(&h, handle.bytes, kIpcHandleBytes);
  COLLX_CUDA_CALL(cudaIpcOpenMemHandle(base, h, cudaIpcMemLazyEnablePeerAccess));
  return Status::Ok();
}

Status ipc_close(void* base) {
  COLLX_CUDA_CALL(cudaIpcCloseMemHandle(base));
  return Status::Ok();
}

Status device_uuid(int device, uint8_t out[16]) {
  cudaDeviceProp prop;
  COLLX_CUDA_CALL(cudaGetDeviceProperties(&prop, device));
  std::memcpy(out, &prop.uuid, 16);
  return Status::Ok();
}

// --- Peer access ---
Status device_can_access_peer(int device, int peer, bool* can) {
  *can = device == peer;
  if (*can) return Status::Ok();
  int yes = 0;
  COLLX_CUDA_CALL(cudaDeviceCanAccessPeer(&yes, device, peer));
  *can = yes != 0;
  return Status::Ok();
}

Status device_enable_peer_access(int peer) {
  int current = 0;
  COLLX_CUDA_CALL(cudaGetDevice(&current));
  if (current == peer) return Status::Ok();
  const cudaError_t err = cudaDeviceEnablePeerAccess(peer, 0);
  if (err == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();  // not sticky, but cleared so later checks do not see it
    return Status::Ok();
  }
  return cuda_status(err, "cudaDeviceEnablePeerAccess");
}

// --- Stream-ordered host work ---
Status launch_host_func(void* stream, void (*fn)(void*), void* arg) {
  COLLX_CUDA_CALL(cudaLaunchHostFunc(static_cast<cudaStream_t>(stream), fn, arg));
  return Status::Ok();
}

Status stream_wait_flag(void* stream, const uint32_t* flag, uint32_t value) {
  // A driver call (stream memory operations).
  using WaitValueFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
  static const auto wait_fn = reinterpret_cast<WaitValueFn>(driver_entry("cuStreamWaitValue32"));
  if (!wait_fn) return make_status(COLLX_ERR_SYSTEM, "the CUDA driver has no cuStreamWaitValue32");
  // Pinned memory is mapped at the same address on the device (unified addressing).
  void* device_flag = nullptr;
  COLLX_CUDA_CALL(cudaHostGetDevicePointer(&device_flag, const_cast<uint32_t*>(flag), 0));
  const CUresult r = wait_fn(static_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(device_flag), value,
                             CU_STREAM_WAIT_VALUE_GEQ);
  if (r != CUDA_SUCCESS) {
    return make_status(COLLX_ERR_CUDA, "cuStreamWaitValue32 failed (CUresult %d): this GPU or driver may not "
                       "support stream memory operations", static_cast<int>(r));
  }
  return Status::Ok();
}

#else  // !COLLX_CUDA_REAL

namespace {
Status no_cuda() {
#if COLLX_CUDA_STUB
  return make_status(COLLX_ERR_UNSUPPORTED, "CUDA device buffers need libcollx.so (the static libcollx.a has no CUDA)");
#else
  return make_status(COLLX_ERR_UNSUPPORTED,
                     "CUDA device buffers need a collx built with CUDA (nvcc found at configure time)");
#endif
}
}  // namespace

bool built_with_cuda() { return false; }
int device_count(std::string* why) {
  if (why) *why = "collx was built without CUDA";
  return 0;
}
int pointer_kind(const void*) { return COLLX_MEM_HOST; }
Status pointer_device(const void*, int*) { return no_cuda(); }
Status set_device(int) { return no_cuda(); }
Status current_device(int*) { return no_cuda(); }
Status device_alloc(size_t, void** out) {
  *out = nullptr;
  return no_cuda();
}
void device_free(void*) {}
Status host_alloc_pinned(size_t, void** out) {
  *out = nullptr;
  return no_cuda();
}
void host_free_pinned(void*) {}
Status copy_async(void*, const void*, size_t, CopyKind, void*) { return no_cuda(); }
Status memset_async(void*, int, size_t, void*) { return no_cuda(); }
Status copy(void*, const void*, size_t, CopyKind) { return no_cuda(); }
Status stream_create(void** s) {
  *s = nullptr;
  return no_cuda();
}
void stream_destroy(void*) {}
Status event_create(void** e) {
  *e = nullptr;
  return no_cuda();
}
Status event_create_timed(void** e) { return event_create(e); }
void event_destroy(void*) {}
Status event_record(void*, void*) { return no_cuda(); }
Status stream_wait_event(void*, void*) { return no_cuda(); }
Status event_done(void*, bool*) { return no_cuda(); }
Status event_wait(void*, Deadline, const std::atomic<bool>*, const char*) { return no_cuda(); }
Status stream_wait(void*, Deadline, const std::atomic<bool>*, const char*) { return no_cuda(); }
Status event_elapsed_ms(void*, void*, float*) { return no_cuda(); }
Status device_synchronize() { return no_cuda(); }
Status stream_capturing(void*, bool*) { return no_cuda(); }
Status stream_begin_capture(void*) { return no_cuda(); }
Status stream_end_capture(void*) { return no_cuda(); }
int multiprocessor_count() { return 0; }
Status cuda_reduce(void*, const void*, const void*, size_t, collx_datatype_t, collx_op_t, void*) { return no_cuda(); }
Status cuda_reduce_n(void* const*, int, const void* const*, int, size_t, collx_datatype_t, collx_op_t, double, int64_t,
                     void*) {
  return no_cuda();
}
Status cast_scale(void*, collx_datatype_t, const void*, collx_datatype_t, size_t, float, void*) { return no_cuda(); }
Status accumulate(float*, const void*, collx_datatype_t, size_t, float, void*) { return no_cuda(); }
Status sum_squares(const void*, collx_datatype_t, size_t, double*, void*) { return no_cuda(); }
Status nonfinite_unscale(void*, collx_datatype_t, size_t, float, int32_t*, void*) { return no_cuda(); }
Status adamw_step(float*, float*, float*, float*, size_t, const OptimizerStep&, void*, collx_datatype_t, void*) {
  return no_cuda();
}
Status sgd_step(float*, float*, float*, size_t, const OptimizerStep&, void*, collx_datatype_t, void*) {
  return no_cuda();
}
Status copy2d_async(void*, size_t, const void*, size_t, size_t, size_t, CopyKind, void*) { return no_cuda(); }
Status ce_row_max(const float*, size_t, size_t, float*, void*) { return no_cuda(); }
Status ce_target_sum_exp(const float*, const int64_t*, size_t, size_t, int64_t, const float*, float*, float*, void*) {
  return no_cuda();
}
Status ce_loss_softmax(const float*, size_t, size_t, const float*, const float*, const float*, float*, float*, void*) {
  return no_cuda();
}
Status ce_backward(const float*, const int64_t*, const float*, size_t, size_t, int64_t, float*, void*) {
  return no_cuda();
}
Status ipc_get_handle(const void*, IpcHandle*, uintptr_t*, size_t*) { return no_cuda(); }
Status ipc_open(const IpcHandle&, void** base) {
  *base = nullptr;
  return no_cuda();
}
Status ipc_close(void*) { return no_cuda(); }
Status device_uuid(int, uint8_t*) { return no_cuda(); }
// Peer access.
Status device_can_access_peer(int, int, bool* can) {
  *can = false;
  return no_cuda();
}
Status device_enable_peer_access(int) { return no_cuda(); }
// Stream-ordered host work.
Status launch_host_func(void*, void (*)(void*), void*) { return no_cuda(); }
Status stream_wait_flag(void*, const uint32_t*, uint32_t) { return no_cuda(); }

#endif

}  // namespace native
}  // namespace cuda
}  // namespace collx
