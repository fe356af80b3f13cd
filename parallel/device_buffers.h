// Device buffers in the handle-less parallel calls (include/collx/parallel_device.h): the
// thread's current stream, the memory kind of a call's buffers, and the device layer's
// operations (lib/cuda/device.h) on the current stream with their errors turned into a
// status and the thread's message (free_fail), so the callers keep to collx's C types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "parallel/free_calls.h"

namespace collx {
namespace parallel {

// The calling thread's current parallel stream (NULL: the legacy default stream).
void* current_stream();
// Options of a collective on the current stream (memory kind detected).
collx_opts_t stream_opts();

// *device = whether the call's buffers are device memory (NULL entries are ignored). A call
// mixing host and device buffers is COLLX_ERR_INVALID_ARG naming `fn`.
collx_status_t buffers_on_device(const char* fn, std::initializer_list<const void*> buffers, bool* device);
// Whether one pointer is device memory.
bool is_device(const void* p);

// Queued on the current stream; the failure message is "fn: <device layer's message>".
enum class Dir { kDeviceToDevice, kDeviceToHost, kHostToDevice };
collx_status_t dev_copy(const char* fn, void* dst, const void* src, size_t bytes, Dir dir);
collx_status_t dev_copy2d(const char* fn, void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                          size_t rows);
collx_status_t dev_zero(const char* fn, void* dst, size_t bytes);
// *dev_out += sum of squares of n float32 values (device double).
collx_status_t dev_sum_squares(const char* fn, const float* src, size_t n, double* dev_out);
// *dev_flag = 1 when a value is not finite; values *= inv_scale.
collx_status_t dev_nonfinite_unscale(const char* fn, float* values, size_t n, float inv_scale, int32_t* dev_flag);
// The vocab-parallel cross-entropy steps of lib/cuda/device.h (same arguments).
collx_status_t dev_ce_row_max(const char* fn, const float* logits, size_t n, size_t v_local, float* row_max);
collx_status_t dev_ce_target_sum_exp(const char* fn, const float* logits, const int64_t* targets, size_t n,
                                     size_t v_local, int64_t vocab_start, const float* row_max, float* target_logit,
                                     float* sum_exp);
collx_status_t dev_ce_loss_softmax(const char* fn, const float* logits, size_t n, size_t v_local,
                                   const float* row_max, const float* target_logit, const float* sum_exp, float* loss,
                                   float* softmax);
collx_status_t dev_ce_backward(const char* fn, const float* softmax, const int64_t* targets, const float* dloss,
                               size_t n, size_t v_local, int64_t vocab_start, float* dlogits);
// Waits on the host for the work queued so far on the current stream.
collx_status_t dev_wait(const char* fn);

// Device memory this thread's calls reuse (gather_last, finalize_grads, the cross-entropy
// temporaries, host-bound results of the norm and the overflow flag), so a call neither
// allocates nor waits on the host for it: one block per thread, on the device of the call's
// buffers, grown when too small (the old block is freed: cudaFree waits for the device) and
// freed when the thread exits. Each use is ordered after the previous one by an event, so
// switching streams needs no host wait either. One use at a time per thread.
class Workspace {
 public:
  // *out = at least `bytes` of device memory on the device owning `near`, for work queued on
  // the current stream until done() is called.
  collx_status_t acquire(const char* fn, const void* near, size_t bytes, char** out);
  // The work using it is queued: later uses wait for it on their stream.
  collx_status_t done(const char* fn);
};

}  // namespace parallel
}  // namespace collx
