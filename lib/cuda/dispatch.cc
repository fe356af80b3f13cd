// lib/cuda/device.h: each function goes to the emulated device when COLLX_TEST_DEVICE selects
// it (decided once per process), else to the native layer (CUDA runtime or stub). The check
// is one load of a static flag.
#include "lib/cuda/backends.h"
#include "lib/cuda/elementwise_checks.h"
#include "lib/dtype/datatype.h"

namespace collx {
namespace cuda {

bool emulated() {
  static const bool on = emu::active();
  return on;
}

#define COLLX_CUDA_BACKEND(fn, ...) (emulated() ? emu::fn(__VA_ARGS__) : native::fn(__VA_ARGS__))

bool built_with_cuda() { return emulated() || native::built_with_cuda(); }
int device_count(std::string* why) { return COLLX_CUDA_BACKEND(device_count, why); }
int pointer_kind(const void* ptr) { return COLLX_CUDA_BACKEND(pointer_kind, ptr); }
Status pointer_device(const void* ptr, int* device) { return COLLX_CUDA_BACKEND(pointer_device, ptr, device); }
Status set_device(int device) { return COLLX_CUDA_BACKEND(set_device, device); }
Status current_device(int* device) { return COLLX_CUDA_BACKEND(current_device, device); }
Status device_alloc(size_t bytes, void** out) { return COLLX_CUDA_BACKEND(device_alloc, bytes, out); }
void device_free(void* ptr) { COLLX_CUDA_BACKEND(device_free, ptr); }
Status host_alloc_pinned(size_t bytes, void** out) { return COLLX_CUDA_BACKEND(host_alloc_pinned, bytes, out); }
void host_free_pinned(void* ptr) { COLLX_CUDA_BACKEND(host_free_pinned, ptr); }
Status copy_async(void* dst, const void* src, size_t bytes, CopyKind kind, void* stream) {
  return COLLX_CUDA_BACKEND(copy_async, dst, src, bytes, kind, stream);
}
Status memset_async(void* dst, int value, size_t bytes, void* stream) {
  return COLLX_CUDA_BACKEND(memset_async, dst, value, bytes, stream);
}
Status copy(void* dst, const void* src, size_t bytes, CopyKind kind) {
  return COLLX_CUDA_BACKEND(copy, dst, src, bytes, kind);
}
Status stream_create(void** stream) { return COLLX_CUDA_BACKEND(stream_create, stream); }
void stream_destroy(void* stream) { COLLX_CUDA_BACKEND(stream_destroy, stream); }
Status event_create(void** event) { return COLLX_CUDA_BACKEND(event_create, event); }
void event_destroy(void* event) { COLLX_CUDA_BACKEND(event_destroy, event); }
Status event_record(void* event, void* stream) { return COLLX_CUDA_BACKEND(event_record, event, stream); }
Status stream_wait_event(void* stream, void* event) { return COLLX_CUDA_BACKEND(stream_wait_event, stream, event); }
Status event_done(void* event, bool* done) { return COLLX_CUDA_BACKEND(event_done, event, done); }
Status event_wait(void* event, Deadline deadline, const std::atomic<bool>* abort, const char* what) {
  return COLLX_CUDA_BACKEND(event_wait, event, deadline, abort, what);
}
Status stream_wait(void* stream, Deadline deadline, const std::atomic<bool>* abort, const char* what) {
  return COLLX_CUDA_BACKEND(stream_wait, stream, deadline, abort, what);
}
Status event_create_timed(void** event) { return COLLX_CUDA_BACKEND(event_create_timed, event); }
Status event_elapsed_ms(void* start, void* end, float* ms) { return COLLX_CUDA_BACKEND(event_elapsed_ms, start, end, ms); }
Status device_synchronize() { return COLLX_CUDA_BACKEND(device_synchronize); }
Status stream_capturing(void* stream, bool* capturing) {
  return COLLX_CUDA_BACKEND(stream_capturing, stream, capturing);
}
Status stream_begin_capture(void* stream) { return COLLX_CUDA_BACKEND(stream_begin_capture, stream); }
Status stream_end_capture(void* stream) { return COLLX_CUDA_BACKEND(stream_end_capture, stream); }
Status cuda_reduce(void* dst, const void* a, const void* b, size_t count, collx_datatype_t datatype, collx_op_t op,
                   void* stream) {
  return COLLX_CUDA_BACKEND(cuda_reduce, dst, a, b, count, datatype, op, stream);
}
Status cuda_reduce_n(void* const* outputs, int n_out, const void* const* inputs, int n, size_t count,
                     collx_datatype_t datatype, collx_op_t op, double scalar, int64_t divisor, void* stream) {
  return COLLX_CUDA_BACKEND(cuda_reduce_n, outputs, n_out, inputs, n, count, datatype, op, scalar, divisor, stream);
}
int multiprocessor_count() { return COLLX_CUDA_BACKEND(multiprocessor_count); }
Status ipc_get_handle(const void* ptr, IpcHandle* handle, uintptr_t* base, size_t* offset) {
  return COLLX_CUDA_BACKEND(ipc_get_handle, ptr, handle, base, offset);
}
Status ipc_open(const IpcHandle& handle, void** base) { return COLLX_CUDA_BACKEND(ipc_open, handle, base); }
Status ipc_close(void* base) { return COLLX_CUDA_BACKEND(ipc_close, base); }
Status device_uuid(int device, uint8_t out[16]) { return COLLX_CUDA_BACKEND(device_uuid, device, out); }
// Peer access.
Status device_can_access_peer(int device, int peer, bool* can) {
  return COLLX_CUDA_BACKEND(device_can_access_peer, device, peer, can);
}
Status device_enable_peer_access(int peer) { return COLLX_CUDA_BACKEND(device_enable_peer_access, peer); }
// Stream-ordered host work.
Status launch_host_func(void* stream, void (*fn)(void*), void* arg) {
  return COLLX_CUDA_BACKEND(launch_host_func, stream, fn, arg);
}
Status stream_wait_flag(void* stream, const uint32_t* flag, uint32_t value) {
  return COLLX_CUDA_BACKEND(stream_wait_flag, stream, flag, value);
}


// Element-wise math: arguments checked once here (elementwise_checks.cc), n == 0 queues nothing.
Status cast_scale(void* dst, collx_datatype_t dst_dtype, const void* src, collx_datatype_t src_dtype, size_t n,
                  float scale, void* stream) {
  if (n == 0) return Status::Ok();
  COLLX_RETURN_IF_ERROR(check_cast_scale(dst, dst_dtype, src, src_dtype, n));
  return COLLX_CUDA_BACKEND(cast_scale, dst, dst_dtype, src, src_dtype, n, scale, stream);
}
Status accumulate(float* dst, const void* src, collx_datatype_t src_dtype, size_t n, float scale, void* stream) {
  if (n == 0) return Status::Ok();
  COLLX_RETURN_IF_ERROR(check_accumulate(dst, src, src_dtype, n));
  return COLLX_CUDA_BACKEND(accumulate, dst, src, src_dtype, n, scale, stream);
}
Status sum_squares(const void* src, collx_datatype_t dtype, size_t n, double* dev_out, void* stream) {
  if (n == 0) return Status::Ok();
  COLLX_RETURN_IF_ERROR(check_sum_squares(src, dtype, n, dev_out));
  return COLLX_CUDA_BACKEND(sum_squares, src, dtype, n, dev_out, stream);
}
Status nonfinite_unscale(void* values, collx_datatype_t dtype, size_t n, float inv_scale, int32_t* dev_flag,
                         void* stream) {
  if (n == 0) return Status::Ok();
  COLLX_RETURN_IF_ERROR(check_nonfinite_unscale(values, dtype, n, dev_flag));
  return COLLX_CUDA_BACKEND(nonfinite_unscale, values, dtype, n, inv_scale, dev_flag, stream);
}
Status adamw_step(float* master, float* grad, float* exp_avg, float* exp_avg_sq, size_t n, const OptimizerStep& s,
                  void* param_out, collx_datatype_t param_dtype, void* stream) {
  if (n == 0) return Status::Ok();
  COLLX_RETURN_IF_ERROR(check_adamw_step(master, grad, exp_avg, exp_avg_sq, n, s, param_out, param_dtype));
  return COLLX_CUDA_BACKEND(adamw_step, master, grad, exp_avg, exp_avg_sq, n, s, param_out, param_dtype, stream);
}
Status sgd_step(float* master, float* grad, float* momentum_buf, size_t n, const OptimizerStep& s, void* param_out,
                collx_datatype_t param_dtype, void* stream) {
  if (n == 0) return Status::Ok();
  COLLX_RETURN_IF_ERROR(check_sgd_step(master, grad, momentum_buf, n, s, param_out, param_dtype));
  return COLLX_CUDA_BACKEND(sgd_step, master, grad, momentum_buf, n, s, param_out, param_dtype, stream);
}
Status ce_row_max(const float* logits, size_t n, size_t v_local, float* row_max, void* stream) {
  if (n == 0) return Status::Ok();
  COLLX_RETURN_IF_ERROR(check_ce("ce_row_max", n, v_local, {{"logits", logits, 4, true}, {"row_max", row_max, 4, false}}));
  return COLLX_CUDA_BACKEND(ce_row_max, logits, n, v_local, row_max, stream);
}
Status ce_target_sum_exp(const float* logits, const int64_t* targets, size_t n, size_t v_local, int64_t vocab_start,
                         const float* row_max, float* target_logit, float* sum_exp, void* stream) {
  if (n == 0) return Status::Ok();
  COLLX_RETURN_IF_ERROR(check_ce("ce_target_sum_exp", n, v_local,
                                 {{"logits", logits, 4, true}, {"targets", targets, 8, false},
                                  {"row_max", row_max, 4, false}, {"target_logit", target_logit, 4, false},
                                  {"sum_exp", sum_exp, 4, false}}));
  return COLLX_CUDA_BACKEND(ce_target_sum_exp, logits, targets, n, v_local, vocab_start, row_max, target_logit,
                            sum_exp, stream);
}
Status ce_loss_softmax(const float* logits, size_t n, size_t v_local, const float* row_max, const float* target_logit,
                       const float* sum_exp, float* loss, float* softmax, void* stream) {
  if (n == 0) return Status::Ok();
  const CeArg l{"logits", logits, 4, true}, m{"row_max", row_max, 4, false}, t{"target_logit", target_logit, 4, false},
      e{"sum_exp", sum_exp, 4, false}, o{"loss", loss, 4, false}, sm{"softmax", softmax, 4, true};
  COLLX_RETURN_IF_ERROR(softmax ? check_ce("ce_loss_softmax", n, v_local, {l, m, t, e, o, sm})
                                : check_ce("ce_loss_softmax", n, v_local, {l, m, t, e, o}));
  return COLLX_CUDA_BACKEND(ce_loss_softmax, logits, n, v_local, row_max, target_logit, sum_exp, loss, softmax, stream);
}
Status ce_backward(const float* softmax, const int64_t* targets, const float* dloss, size_t n, size_t v_local,
                   int64_t vocab_start, float* dlogits, void* stream) {
  if (n == 0 || v_local == 0) return Status::Ok();
  COLLX_RETURN_IF_ERROR(check_ce("ce_backward", n, v_local,
                                 {{"softmax", softmax, 4, true}, {"targets", targets, 8, false},
                                  {"dloss", dloss, 4, false}, {"dlogits", dlogits, 4, true}}));
  return COLLX_CUDA_BACKEND(ce_backward, softmax, targets, dloss, n, v_local, vocab_start, dlogits, stream);
}
Status copy2d_async(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t rows,
                    CopyKind kind, void* stream) {
  if (rows == 0 || width == 0) return Status::Ok();
  COLLX_RETURN_IF_ERROR(check_copy2d(dst, dpitch, src, spitch, width, rows));
  return COLLX_CUDA_BACKEND(copy2d_async, dst, dpitch, src, spitch, width, rows, kind, stream);
}

#undef COLLX_CUDA_BACKEND

Status check_reduce_n_args(void* const* outputs, int n_out, const void* const* inputs, int n, collx_op_t op,
                           int64_t divisor) {
  if (n < 1 || n > kMaxReduceInputs || n_out < 1 || n_out > kMaxReduceInputs) {
    return make_status(COLLX_ERR_INVALID_ARG, "cuda_reduce_n: %d inputs and %d outputs (1..%d each supported)", n,
                       n_out, kMaxReduceInputs);
  }
  if (!op_valid(op)) return make_status(COLLX_ERR_INVALID_ARG, "cuda_reduce_n: unknown op %d", static_cast<int>(op));
  if (op == COLLX_AVG && divisor < 1) {
    return make_status(COLLX_ERR_INVALID_ARG, "cuda_reduce_n: AVG divisor %lld < 1", static_cast<long long>(divisor));
  }
  for (int j = 0; j < n; ++j) {
    if (!inputs[j]) return make_status(COLLX_ERR_INVALID_ARG, "cuda_reduce_n: input %d is NULL", j);
  }
  for (int o = 0; o < n_out; ++o) {
    if (!outputs[o]) return make_status(COLLX_ERR_INVALID_ARG, "cuda_reduce_n: output %d is NULL", o);
  }
  return Status::Ok();
}

}  // namespace cuda
}  // namespace collx
