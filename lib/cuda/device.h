// The CUDA layer as the rest of collx sees it: plain C++, no CUDA header, so every layer can
// include it whether or not the build has CUDA. Built with CUDA (COLLX_HAVE_CUDA), the
// functions call the CUDA runtime (linked statically: nothing is loaded until the first
// call); built without, they report COLLX_ERR_UNSUPPORTED naming the missing build option.
//
// Streams are passed as void* (a cudaStream_t; nullptr = the legacy default stream; the
// handle values of cudaStreamLegacy (1) and cudaStreamPerThread (2) work too).
// Every blocking wait polls with a deadline and yields between polls.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "collx/collx.h"
#include "lib/common/deadline.h"
#include "lib/common/status.h"

namespace collx {
namespace cuda {

// True when this build has CUDA code (the layer is not the stub), or when the emulated
// device is active.
bool built_with_cuda();

// True when the emulated test device replaces the real layer (COLLX_TEST_DEVICE=emulated,
// tests only; decided once per process, docs/cuda.md "Testing without a GPU"). Every function
// below then runs on the emulator (lib/cuda/emu_*.h) instead of the CUDA runtime.
bool emulated();

// Number of CUDA devices (checked once per process); 0 without a usable driver or device, with
// the reason in *why when given ("no CUDA driver", "built without CUDA", ...).
int device_count(std::string* why = nullptr);

// COLLX_MEM_CUDA when ptr is device (or managed) memory, COLLX_MEM_HOST otherwise. Never
// initializes CUDA in a process that has not loaded the CUDA driver itself: a program that
// never touched CUDA cannot hold a device pointer, so such a program pays nothing.
int pointer_kind(const void* ptr);
// The device that owns `ptr` (a device pointer).
Status pointer_device(const void* ptr, int* device);
Status set_device(int device);
Status current_device(int* device);

// Device memory (tests, benchmarks, scratch).
Status device_alloc(size_t bytes, void** out);
void device_free(void* ptr);
// Page-locked host memory (staging).
Status host_alloc_pinned(size_t bytes, void** out);
void host_free_pinned(void* ptr);

enum class CopyKind { kHostToDevice, kDeviceToHost, kDeviceToDevice };
// Ordered on `stream`; returns when queued.
Status copy_async(void* dst, const void* src, size_t bytes, CopyKind kind, void* stream);
Status memset_async(void* dst, int value, size_t bytes, void* stream);
// Blocking copy (tests).
Status copy(void* dst, const void* src, size_t bytes, CopyKind kind);

// Streams and events (opaque handles).
Status stream_create(void** stream);
void stream_destroy(void* stream);
Status event_create(void** event);
void event_destroy(void* event);
Status event_record(void* event, void* stream);
// Makes `stream` wait for `event` (no host block).
Status stream_wait_event(void* stream, void* event);
// true when the work before the event has finished; an error when it failed.
Status event_done(void* event, bool* done);
// Waits for the event by polling (yielding), until `deadline` or until *abort becomes true.
// `what` names the wait in a timeout message.
Status event_wait(void* event, Deadline deadline, const std::atomic<bool>* abort, const char* what);
// Waits for every operation queued on `stream` so far (an event recorded and waited for).
Status stream_wait(void* stream, Deadline deadline, const std::atomic<bool>* abort, const char* what);
// Elapsed milliseconds between two events recorded with timing (benchmarks).
Status event_create_timed(void** event);
Status event_elapsed_ms(void* start, void* end, float* ms);
Status device_synchronize();

// CUDA graph capture. *capturing = true while `stream` is being captured into a graph (work
// queued then is recorded, not run; host waits on the stream fail). collx uses it to refuse
// routes that wait on the host (staging, CUDA IPC) instead of corrupting a capture.
Status stream_capturing(void* stream, bool* capturing);
// Tests: start capturing `stream` (relaxed mode), and end it, discarding the graph.
Status stream_begin_capture(void* stream);
Status stream_end_capture(void* stream);

// Reductions on the device, queued on `stream`. dst[i] = a[i] OP b[i] for i < count; OP one
// of SUM, PROD, MIN, MAX, with the host kernels' semantics (lib/dtype/datatype.h): integers
// wrap, float16/bfloat16 compute in float32 and round once, MIN/MAX return b when either is
// NaN. dst may equal a or b exactly. 16-byte vector loads when all three pointers allow.
Status cuda_reduce(void* dst, const void* a, const void* b, size_t count, collx_datatype_t datatype,
                   collx_op_t op, void* stream);

// The most inputs one reduce_n call combines.
constexpr int kMaxReduceInputs = 16;
// outputs[o][i] = fold of OP over inputs[0..n)[i] in input order, for every o < n_out (the
// result is written to several buffers at once: CUDA IPC's all-reduce pushes each slice to
// every rank), with every op of collx:
// SUM/PROD/MIN/MAX; AVG (the sum divided by `divisor`, integers truncated toward zero);
// PREMUL_SUM (each input multiplied by `scalar` converted to the datatype, then summed).
// float16/bfloat16 accumulate all inputs in float32 and round once at the end. An output may
// equal an input exactly (each element is read by the thread that writes it, before).
Status cuda_reduce_n(void* const* outputs, int n_out, const void* const* inputs, int n, size_t count,
                     collx_datatype_t datatype, collx_op_t op, double scalar, int64_t divisor, void* stream);

// Element-wise math on device buffers (lib/cuda/elementwise.cu, emu_elementwise.cc), used by
// parallel/ to keep gradients, parameters and optimizer state on the device. Every function
// is queued on `stream` and returns when queued; n == 0 queues nothing and succeeds. Element
// datatypes are FLOAT32, BFLOAT16 or FLOAT16 (others: COLLX_ERR_INVALID_ARG); 16-bit values
// are computed in float32 and rounded once to nearest even. Every buffer must be device
// memory (a host pointer or NULL: COLLX_ERR_INVALID_ARG naming the argument). Multiplies and
// adds are rounded one by one (no fused multiply-add), so results match a host loop that
// writes the same expression bit for bit (lib/cuda/elementwise_math.h holds that arithmetic
// once for the kernels and the emulator).

// dst[i] = (float)src[i] * scale, rounded to dst_dtype: pre/post-scaling, rounding float32
// to a 16-bit copy, widening a 16-bit copy to float32. dst may equal src exactly when the
// datatypes are equal (in place); any other overlap is COLLX_ERR_INVALID_ARG.
Status cast_scale(void* dst, collx_datatype_t dst_dtype, const void* src, collx_datatype_t src_dtype, size_t n,
                  float scale, void* stream);
// dst[i] += scale * (float)src[i] (float32 accumulation of a 16-bit or float32 source). dst
// and src must not overlap.
Status accumulate(float* dst, const void* src, collx_datatype_t src_dtype, size_t n, float scale, void* stream);
// *dev_out += sum of (double)src[i]^2, accumulated in double; dev_out is one double of device
// memory (zero it first for a fresh sum; several calls may add to it). The emulator sums in
// index order (equal to the host loop); the GPU sums per-thread, per-block partials in a fixed
// order (deterministic run to run on one device; relative difference to the index-order sum
// below 1e-12 for sums of finite values).
Status sum_squares(const void* src, collx_datatype_t dtype, size_t n, double* dev_out, void* stream);
// *dev_flag = 1 when any values[i] (as read, before scaling) is inf or NaN; left as it was
// otherwise (zero it first; several calls may share one flag). Then values[i] *= inv_scale
// (skipped when inv_scale == 1), rounded to dtype. dev_flag is one int32 of device memory.
Status nonfinite_unscale(void* values, collx_datatype_t dtype, size_t n, float inv_scale, int32_t* dev_flag,
                         void* stream);

// One optimizer step's constants, with collx_zero_config_t's meaning (parallel/zero_step.cc
// computes the same step on the host: torch.optim's SGD and AdamW formulas).
struct OptimizerStep {
  double lr = 0, weight_decay = 0;
  double momentum = 0;                    // SGD
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // AdamW
  int64_t step = 1;                       // 1 for the first step (AdamW bias correction; SGD
                                          // momentum starts from the gradient at step 1)
  float grad_scale = 1.0f;                // gradients multiplied by it first (clip / unscale)
  bool zero_grad = false;                 // grad[i] = 0 after the step, as collx_zero_step does
};
// AdamW on float32 master weights, gradients and both moments (n elements each, no overlap).
// When param_out is not NULL, param_out[i] = master[i] after the step, rounded to
// param_dtype (FLOAT32, BFLOAT16 or FLOAT16): the working copy of the parameters.
Status adamw_step(float* master, float* grad, float* exp_avg, float* exp_avg_sq, size_t n, const OptimizerStep& s,
                  void* param_out, collx_datatype_t param_dtype, void* stream);
// SGD (weight decay, momentum with torch's first-step rule); momentum_buf may be NULL only
// when s.momentum == 0. param_out as for adamw_step.
Status sgd_step(float* master, float* grad, float* momentum_buf, size_t n, const OptimizerStep& s, void* param_out,
                collx_datatype_t param_dtype, void* stream);

// Strided copy: `rows` rows of `width` bytes, from src (row pitch spitch bytes) to dst (dpitch
// bytes), ordered on `stream` (cudaMemcpy2DAsync). Pitches at least width; any CopyKind.
Status copy2d_async(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t rows,
                    CopyKind kind, void* stream);

// Vocab-parallel cross-entropy on the device (parallel/tp_vocab_ce.cc's steps between its
// all-reduces): float32 logits [n x v_local] row-major, this rank's vocabulary columns
// [vocab_start, vocab_start + v_local), int64 targets, every buffer device memory; one thread
// per row for the row reductions (columns in order, as the host loop), so the emulator gives
// the host's bits; a GPU's expf/logf differ from the host's by a few ulp. n == 0 queues
// nothing; v_local == 0 allows NULL logits/softmax/dlogits.
// row_max[i] = max over j of logits[i][j] (-inf when v_local == 0).
Status ce_row_max(const float* logits, size_t n, size_t v_local, float* row_max, void* stream);
// target_logit[i] = logits[i][targets[i] - vocab_start] - row_max[i] when this rank holds the
// target, else 0; sum_exp[i] = sum over j of exp(logits[i][j] - row_max[i]).
Status ce_target_sum_exp(const float* logits, const int64_t* targets, size_t n, size_t v_local, int64_t vocab_start,
                         const float* row_max, float* target_logit, float* sum_exp, void* stream);
// loss[i] = log(sum_exp[i]) - target_logit[i]; when softmax is not NULL,
// softmax[i][j] = exp(logits[i][j] - row_max[i]) / sum_exp[i].
Status ce_loss_softmax(const float* logits, size_t n, size_t v_local, const float* row_max, const float* target_logit,
                       const float* sum_exp, float* loss, float* softmax, void* stream);
// dlogits[i][j] = (softmax[i][j] - [vocab_start + j == targets[i]]) * dloss[i].
Status ce_backward(const float* softmax, const int64_t* targets, const float* dloss, size_t n, size_t v_local,
                   int64_t vocab_start, float* dlogits, void* stream);

// Multiprocessor count of the current device (grid sizing, benchmarks).
int multiprocessor_count();

// Inter-process memory handles (CUDA IPC), as raw bytes.
constexpr size_t kIpcHandleBytes = 64;
struct IpcHandle {
  uint8_t bytes[kIpcHandleBytes];
};
// The handle of the allocation holding `ptr`, its base address and ptr's offset in it.
Status ipc_get_handle(const void* ptr, IpcHandle* handle, uintptr_t* base, size_t* offset);
// Maps a peer process's allocation; close with ipc_close.
Status ipc_open(const IpcHandle& handle, void** base);
Status ipc_close(void* base);
// 16 bytes naming the GPU a pointer's device is (its UUID), to tell shared GPUs apart.
Status device_uuid(int device, uint8_t out[16]);

// --- Peer access (CUDA IPC between two devices of one host) ---
// Whether kernels on `device` can read and write memory of `peer` (cudaDeviceCanAccessPeer);
// true for one device with itself.
Status device_can_access_peer(int device, int peer, bool* can);
// Lets the current device access `peer`'s memory (cudaDeviceEnablePeerAccess); OK when it
// already can (enabled before, or peer is the current device).
Status device_enable_peer_access(int peer);

// --- Stream-ordered host work (nonblocking device calls that return before the stream's
// earlier work ends; lib/core/comm_device_async.cc) ---
// Queues fn(arg) on `stream` (cudaLaunchHostFunc): it runs on a CUDA thread once the work
// queued before it has finished, and later work on the stream waits for it. fn must not
// block nor call CUDA: it only hands work over (sets a flag).
Status launch_host_func(void* stream, void (*fn)(void*), void* arg);
// Queues a wait on `stream`: later work on it runs once *flag >= value, a 32-bit word of
// pinned host memory (host_alloc_pinned) that host code sets (cuStreamWaitValue32, GEQ). The
// stream waits on the GPU side; the host never blocks. Whoever queues it must set the flag
// eventually (failure included), or the stream never drains.
Status stream_wait_flag(void* stream, const uint32_t* flag, uint32_t value);

}  // namespace cuda
}  // namespace collx
