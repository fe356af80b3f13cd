// Device buffers in the handle-less parallel calls: the current stream and the device
// layer's operations on it (device_buffers.h).
#include "parallel/device_buffers.h"

#include <functional>

#include "lib/cuda/device.h"
#include "parallel/device_mem.h"

namespace collx {
namespace parallel {
namespace {

void*& thread_stream() {
  static thread_local void* stream = nullptr;
  return stream;
}

// Host waits on a stream end by this deadline (a stuck device is an error, not a hang).
constexpr int64_t kStreamWaitMs = 10 * 60 * 1000;

collx_status_t device_fail(const char* fn, const Status& s) {
  if (s.ok()) return COLLX_OK;
  return free_fail(s.code(), std::string(fn) + ": " + s.message());
}

cuda::CopyKind copy_kind(Dir dir) {
  switch (dir) {
    case Dir::kDeviceToHost: return cuda::CopyKind::kDeviceToHost;
    case Dir::kHostToDevice: return cuda::CopyKind::kHostToDevice;
    default: return cuda::CopyKind::kDeviceToDevice;
  }
}

}  // namespace

void* current_stream() { return thread_stream(); }

collx_opts_t stream_opts() {
  collx_opts_t o;
  collx_opts_init(&o, sizeof o);
  o.stream = current_stream();
  return o;
}

bool is_device(const void* p) { return p && cuda::pointer_kind(p) == COLLX_MEM_CUDA; }

collx_status_t buffers_on_device(const char* fn, std::initializer_list<const void*> buffers, bool* device) {
  int host = 0, dev = 0;
  for (const void* p : buffers) {
    if (!p) continue;
    (is_device(p) ? dev : host)++;
  }
  if (host && dev)
    return free_fail(COLLX_ERR_INVALID_ARG, std::string(fn) + ": " + std::to_string(dev) + " device and " +
                                                std::to_string(host) +
                                                " host buffers; the buffers of one call must be of one kind");
  *device = dev > 0;
  return COLLX_OK;
}

collx_status_t dev_copy(const char* fn, void* dst, const void* src, size_t bytes, Dir dir) {
  return device_fail(fn, cuda::copy_async(dst, src, bytes, copy_kind(dir), current_stream()));
}

collx_status_t dev_copy2d(const char* fn, void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                          size_t rows) {
  return device_fail(fn, cuda::copy2d_async(dst, dpitch, src, spitch, width, rows, cuda::CopyKind::kDeviceToDevice,
                                            current_stream()));
}

collx_status_t dev_zero(const char* fn, void* dst, size_t bytes) {
  return device_fail(fn, cuda::memset_async(dst, 0, bytes, current_stream()));
}

collx_status_t dev_sum_squares(const char* fn, const float* src, size_t n, double* dev_out) {
  return device_fail(fn, cuda::sum_squares(src, COLLX_FLOAT32, n, dev_out, current_stream()));
}

collx_status_t dev_nonfinite_unscale(const char* fn, float* values, size_t n, float inv_scale, int32_t* dev_flag) {
  return device_fail(fn, cuda::nonfinite_unscale(values, COLLX_FLOAT32, n, inv_scale, dev_flag, current_stream()));
}

collx_status_t dev_ce_row_max(const char* fn, const float* logits, size_t n, size_t v_local, float* row_max) {
  return device_fail(fn, cuda::ce_row_max(logits, n, v_local, row_max, current_stream()));
}

collx_status_t dev_ce_target_sum_exp(const char* fn, const float* logits, const int64_t* targets, size_t n,
                                     size_t v_local, int64_t vocab_start, const float* row_max, float* target_logit,
                                     float* sum_exp) {
  return device_fail(fn, cuda::ce_target_sum_exp(logits, targets, n, v_local, vocab_start, row_max, target_logit,
                                                 sum_exp, current_stream()));
}

collx_status_t dev_ce_loss_softmax(const char* fn, const float* logits, size_t n, size_t v_local,
                                   const float* row_max, const float* target_logit, const float* sum_exp, float* loss,
                                   float* softmax) {
  return device_fail(fn, cuda::ce_loss_softmax(logits, n, v_local, row_max, target_logit, sum_exp, loss, softmax,
                                               current_stream()));
}

collx_status_t dev_ce_backward(const char* fn, const float* softmax, const int64_t* targets, const float* dloss,
                               size_t n, size_t v_local, int64_t vocab_start, float* dlogits) {
  return device_fail(fn, cuda::ce_backward(softmax, targets, dloss, n, v_local, vocab_start, dlogits,
                                           current_stream()));
}

collx_status_t dev_wait(const char* fn) {
  return device_fail(fn, cuda::stream_wait(current_stream(), Deadline::after_ms(kStreamWaitMs), nullptr, fn));
}

namespace {

// The thread's workspace block, its device and the event recorded after its last use.
struct ThreadBlock {
  char* ptr = nullptr;
  size_t bytes = 0;
  int device = -1;
  void* event = nullptr;
  bool used = false;  // the event has been recorded
  // Not device_free: it waits for the whole device, and with thread ranks on one device that
  // is another rank's stream too, which may wait for a collective this thread has not
  // joined (docs/cuda.md). The block's own last use is all that must be over.
  void release() {
    recycle_device_block(device, bytes, ptr, used ? event : nullptr);
    if (event) cuda::event_destroy(event);
    ptr = nullptr;
    event = nullptr;
    bytes = 0;
    device = -1;
    used = false;
  }
  ~ThreadBlock() { release(); }
};

ThreadBlock& thread_block() {
  static thread_local ThreadBlock block;
  return block;
}

// Runs fn with `device` current, restoring the thread's device after.
Status on_device(int device, const std::function<Status()>& fn) {
  int current = 0;
  COLLX_RETURN_IF_ERROR(cuda::current_device(&current));
  if (current == device) return fn();
  COLLX_RETURN_IF_ERROR(cuda::set_device(device));
  Status st = fn();
  Status back = cuda::set_device(current);
  return st.ok() ? back : st;
}

}  // namespace

collx_status_t Workspace::acquire(const char* fn, const void* near, size_t bytes, char** out) {
  ThreadBlock& b = thread_block();
  int device = 0;
  collx_status_t st = device_fail(fn, cuda::pointer_device(near, &device));
  if (st != COLLX_OK) return st;
  if (b.device != device) b.release();  // another device: start over there
  if (b.bytes < bytes) {
    recycle_device_block(b.device, b.bytes, b.ptr, b.used ? b.event : nullptr);  // once its uses are over
    b.ptr = nullptr;
    b.bytes = 0;
    b.used = false;
    st = device_fail(fn, on_device(device, [&] {
      if (!b.event) COLLX_RETURN_IF_ERROR(cuda::event_create(&b.event));
      void* p = nullptr;
      COLLX_RETURN_IF_ERROR(take_device_block(device, bytes, &p));
      b.ptr = static_cast<char*>(p);
      return Status::Ok();
    }));
    if (st != COLLX_OK) return st;
    b.bytes = bytes;
    b.device = device;
  }
  // After the last use, on whatever stream it ran (no host wait).
  if (b.used) st = device_fail(fn, cuda::stream_wait_event(current_stream(), b.event));
  *out = b.ptr;
  return st;
}

collx_status_t Workspace::done(const char* fn) {
  ThreadBlock& b = thread_block();
  collx_status_t st = device_fail(fn, cuda::event_record(b.event, current_stream()));
  b.used = st == COLLX_OK;
  return st;
}

}  // namespace parallel
}  // namespace collx

extern "C" {

COLLX_API collx_status_t collx_parallel_set_stream(void* stream) {
  collx::parallel::thread_stream() = stream;
  return COLLX_OK;
}

COLLX_API collx_status_t collx_parallel_get_stream(void** stream) {
  if (!stream)
    return collx::parallel::free_fail(COLLX_ERR_INVALID_ARG, "collx_parallel_get_stream: stream is NULL");
  *stream = collx::parallel::thread_stream();
  return COLLX_OK;
}

}  // extern "C"
