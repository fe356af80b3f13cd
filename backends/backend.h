// A whole-collective backend: something that runs an entire collective (or a group of
// point-to-point calls) on device buffers by itself, where a transport only moves bytes
// between two ranks and leaves the schedule to algorithms/. This is all lib/core asks of
// one (lib/core/comm_device.cc, comm_p2p_nccl.cc); backends/README.md says how to add one.
//
// Lifetime and threads: lib/core creates a backend per communicator (and per route) when
// the first device-buffer call needs it, runs one collective at a time on it, and destroys
// it with the communicator. Point-to-point groups (run_p2p) may come from the threads of
// the communicator's callers, as the communicator's own p2p calls do.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

#include "collx/collx.h"
#include "lib/common/deadline.h"
#include "lib/common/status.h"
#include "transports/transport.h"

namespace collx {
namespace backend {

// One operation on device buffers as a backend takes it.
struct DeviceOp {
  collx_coll_t coll = COLLX_COLL_ALLREDUCE;
  const void* sendbuf = nullptr;
  void* recvbuf = nullptr;
  size_t count = 0;  // as collx counts it (per rank for reduce_scatter, allgather, alltoall)
  collx_datatype_t datatype = COLLX_FLOAT32;
  collx_op_t op = COLLX_SUM;
  double premul_scalar = 1.0;
  int root = 0;   // broadcast, reduce
  int peer = -1;  // send, recv
  void* stream = nullptr;
  // The stream is capturing a CUDA graph: the operation runs at each replay, so no deadline
  // event is recorded for it (querying a captured event is an error).
  bool captured = false;
};

// What a backend is created with, for one communicator.
struct BackendSetup {
  int rank = 0, size = 1;
  int device = -1;  // this rank's CUDA device (a backend bound to one device needs it)
  // Exchanges at creation (NCCL's unique id); every rank makes the same calls. May be unused.
  transport::Bootstrap* bootstrap = nullptr;
  Deadline deadline = Deadline::never();  // bounds creation
  // The communicator's abort flag (outlives the backend): once true, the backend stops
  // waiting and fails its operations with COLLX_ERR_ABORTED, so collx_comm_abort holds over
  // it too. This is the whole of "abort": lib/core never aborts a backend otherwise.
  const std::atomic<bool>* abort_flag = nullptr;
};

class Backend {
 public:
  // Destroys the backend; operations still queued on a GPU past their deadline are aborted.
  virtual ~Backend() = default;

  // Runs one collective that supports() accepted. Enqueued on op.stream, or complete on it
  // when this returns, as the backend works; `deadline` bounds it either way. `exchange`:
  // a bootstrap over the communicator's host transport for backends that trade buffer
  // handles per call (every rank makes the same calls); others ignore it.
  virtual Status run(const DeviceOp& op, transport::Bootstrap* exchange, Deadline deadline) = 0;
  // Enqueues n point-to-point operations (coll SEND or RECV, each with its peer and stream)
  // as one group, so their order cannot deadlock. COLLX_ERR_UNSUPPORTED where the backend has
  // no point-to-point (supports(kind, COLLX_COLL_SEND, size) is false).
  virtual Status run_p2p(const DeviceOp* ops, size_t n, Deadline deadline) = 0;
  // The CUDA device the backend is bound to, or -1 when it follows each call's buffers.
  virtual int device() const = 0;
};

enum class BackendKind { kNccl, kCudaIpc };

// Whether `kind` runs `coll` over `size` ranks. Decided alike on every rank and before any
// backend exists (lib/core asks it to pick a route, e.g. while checking a graph capture).
bool supports(BackendKind kind, collx_coll_t coll, int size);

// Creates `kind`'s backend. COLLX_ERR_UNSUPPORTED when it cannot run here (its library does
// not load, two ranks share a GPU, a build without CUDA), on every rank alike: this is the
// availability check, and lib/core then takes another route. Other codes are failures.
Status create(BackendKind kind, const BackendSetup& setup, std::unique_ptr<Backend>* out);

}  // namespace backend
}  // namespace collx
