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
