// CUDA device buffers in the communicator's collective path (docs/cuda.md). Three routes,
// chosen the same way on every rank:
//   * NCCL (transports/nccl): when the allowed transports include nccl and libnccl.so.2 loads
//     and every rank has a GPU of its own; the operation is enqueued on the caller's stream.
//   * CUDA IPC (transports/cuda_ipc): all-reduce, reduce-scatter and all-gather when every rank
//     is on this host and shm is allowed; peers read each other's device memory.
//   * Staging: everything else runs the host algorithm on pinned host copies.
// The hooks in comm_collective.cc: device_check() before validate(), and dispatch() handing
// device buffers to Communicator::dispatch_device().
#pragma once

#include "lib/common/status.h"
#include "lib/core/comm.h"

namespace collx {

// The call validate() should see: an explicit COLLX_MEM_CUDA is accepted when this build and
// machine have CUDA (COLLX_ERR_UNSUPPORTED naming why not otherwise).
Status device_check(const CollCall& call, CollCall* checked);

// Whether the call's buffers are device memory (the kind from the options, or detected for
// COLLX_MEM_AUTO). A call with no elements never is: every rank takes the host path for it.
bool device_buffers(const CollCall& call);

// The call as the NCCL backend takes it (collectives and point-to-point).
nccl::CollOp nccl_op(const CollCall& call);

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
