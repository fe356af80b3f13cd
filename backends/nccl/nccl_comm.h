// The NCCL backend: a communicator of NCCL over the same ranks as a collx communicator, its
// collectives and point-to-point enqueued natively on the caller's stream.
//
// libnccl.so.2 is loaded at run time (dlopen), so libcollx.so needs NCCL only where it is
// used. The unique id travels through collx's bootstrap. NCCL has no timeouts: every blocking
// step polls ncclCommGetAsyncError with collx's deadline, and a watchdog thread checks the
// operations queued on the GPU against their deadlines, aborting the NCCL communicator
// (ncclCommAbort) when one passes or NCCL reports an error; later calls then fail with that
// status, so collx's promises (timeout, dead peer, abort) hold over NCCL too. One watchdog
// thread serves every NCCL communicator of the process (lib/common/periodic_thread.h).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

#include "backends/backend.h"
#include "collx/collx.h"
#include "lib/common/deadline.h"
#include "lib/common/status.h"
#include "transports/transport.h"

namespace collx {
namespace nccl {

// Whether libnccl.so.2 can be loaded (checked once); the reason in *why otherwise.
bool available(std::string* why = nullptr);
// "2.28.3" of the loaded library, or "" when not loaded.
std::string library_version();

// One collective or point-to-point call as the backend needs it. Buffers are device pointers.
using CollOp = backend::DeviceOp;

class Comm {
 public:
  // Collective over the ranks of `bootstrap`: rank 0 makes the unique id, the bootstrap
  // carries it (with every rank's GPU UUID: two ranks on one GPU give
  // COLLX_ERR_UNSUPPORTED on every rank, as NCCL refuses them). `device` is the CUDA device
  // of this rank. Ends by `deadline`. The watchdog aborts the NCCL communicator once
  // *abort_flag (the collx communicator's abort flag, which must outlive this) becomes true.
  static Status create(transport::Bootstrap* bootstrap, int rank, int size, int device, Deadline deadline,
                       const std::atomic<bool>* abort_flag, std::unique_ptr<Comm>* out);
  ~Comm();  // aborts if operations are still pending past their deadline, else destroys
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  // Enqueues the operation on op.stream and returns (NCCL's semantics). `deadline` bounds
  // the operation on the GPU: the watchdog aborts the communicator when it passes first.
  Status enqueue(const CollOp& op, Deadline deadline);
  // Point-to-point: the n sends and receives (coll SEND or RECV, each with its peer and
  // stream) enqueued as one NCCL group (ncclGroupStart/End, so their order cannot deadlock)
  // and returns; `deadline` bounds them on the GPU, as for enqueue.
  Status enqueue_p2p(const CollOp* ops, size_t n, Deadline deadline);
  // Aborts the NCCL communicator now (any thread); later calls fail with COLLX_ERR_ABORTED.
  void abort(const Status& why);
  // OK, or the status that broke the communicator (watchdog, abort, NCCL error).
  Status health() const;
  int device() const;

  struct Impl;

 private:
  explicit Comm(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// For backends/backend.cc: the collectives NCCL runs natively (any size), and a Comm over
// setup.bootstrap wrapped as a backend::Backend (COLLX_ERR_UNSUPPORTED as Comm::create).
bool supports(collx_coll_t coll, int size);
Status create_backend(const backend::BackendSetup& setup, std::unique_ptr<backend::Backend>* out);

}  // namespace nccl
}  // namespace collx
