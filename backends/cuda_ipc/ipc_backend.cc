// CUDA IPC as lib/core sees a backend (backends/backend.h): a thin adapter over Peers, so
// ipc_coll.cc stays about the direct schedule itself.
#include "backends/cuda_ipc/ipc_coll.h"

namespace collx {
namespace cuda_ipc {
namespace {

class IpcBackend final : public backend::Backend {
 public:
  IpcBackend(int rank, int size, const std::atomic<bool>* abort_flag) : peers_(rank, size), abort_(abort_flag) {}

  Status run(const backend::DeviceOp& op, transport::Bootstrap* exchange, Deadline deadline) override {
    return peers_.run(op, exchange, deadline, abort_);
  }
  Status run_p2p(const backend::DeviceOp*, size_t, Deadline) override {
    return make_status(COLLX_ERR_UNSUPPORTED, "CUDA IPC runs collectives only, not point-to-point");
  }
  int device() const override { return -1; }  // each call's buffers decide

 private:
  Peers peers_;
  const std::atomic<bool>* abort_;
};

}  // namespace

Status create_backend(const backend::BackendSetup& setup, std::unique_ptr<backend::Backend>* out) {
  *out = std::make_unique<IpcBackend>(setup.rank, setup.size, setup.abort_flag);
  return Status::Ok();
}

}  // namespace cuda_ipc
}  // namespace collx
