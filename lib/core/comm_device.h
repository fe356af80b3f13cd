// CUDA device buffers in the communicator's collective path (docs/cuda.md). Three routes,
// chosen the same way on every rank:
//   * NCCL (backends/nccl): when the allowed transports include nccl and libnccl.so.2 loads
//     and every rank has a GPU of its own; the operation is enqueued on the caller's stream.
//   * CUDA IPC (backends/cuda_ipc): all-reduce, reduce-scatter and all-gather when every rank
//     is on this host and shm is allowed; peers read each other's device memory.
//   * Staging: everything else runs the host algorithm on pinned host copies.
// The hooks: validate() asks device_check() for the memory-kind rule, and dispatch() in
// comm_collective.cc hands device buffers to Communicator::dispatch_device().
#pragma once

#include "lib/common/status.h"
#include "lib/core/comm.h"

namespace collx {

// The memory-kind rule of a call, part of validate(): mem_kind is one of collx_mem_kind_t
// (COLLX_ERR_INVALID_ARG); an explicit COLLX_MEM_CUDA needs a CUDA build and a usable device,
// and the v-collectives take host buffers only (COLLX_ERR_UNSUPPORTED naming why).
Status device_check(const CollCall& call);

// Whether the call's buffers are device memory (the kind from the options, or detected for
// COLLX_MEM_AUTO). A call with no elements never is: every rank takes the host path for it.
bool device_buffers(const CollCall& call);

// Resolves COLLX_MEM_AUTO once, when a call is accepted (prepare, check_recorded), after
// validation: it becomes COLLX_MEM_CUDA or COLLX_MEM_HOST as device_buffers() detects (the
// call's one pointer probe; without a CUDA driver a probe is a failed library search). Every
// later step (graph-capture check, stream-ordered route, dispatch, copies queued on the
// executor) then reads the kind instead of probing again. A stated kind is kept.
void resolve_mem_kind(CollCall* call);

// The call as a whole-collective backend takes it (collectives and point-to-point).
backend::DeviceOp device_op(const CollCall& call);

// Makes `device` the calling thread's current CUDA device until destroyed, when the thread
// gets its own back (device calls run on the buffers' device, whichever thread runs them).
class DeviceScope {
 public:
  DeviceScope() = default;
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  Status enter(int device);

 private:
  int previous_ = -1;
};

}  // namespace collx
