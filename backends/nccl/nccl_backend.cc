// The NCCL communicator as lib/core sees a backend (backends/backend.h): a thin adapter, so
// nccl_comm.cc stays about NCCL itself.
#include "backends/nccl/nccl_comm.h"

namespace collx {
namespace nccl {
namespace {

class NcclBackend final : public backend::Backend {
 public:
  explicit NcclBackend(std::unique_ptr<Comm> comm) : comm_(std::move(comm)) {}

  Status run(const backend::DeviceOp& op, transport::Bootstrap* /*exchange*/, Deadline deadline) override {
    return comm_->enqueue(op, deadline);
  }
  Status run_p2p(const backend::DeviceOp* ops, size_t n, Deadline deadline) override {
    return comm_->enqueue_p2p(ops, n, deadline);
  }
  int device() const override { return comm_->device(); }

 private:
  std::unique_ptr<Comm> comm_;
};

}  // namespace

bool supports(collx_coll_t coll, int /*size*/) {
  return coll == COLLX_COLL_ALLREDUCE || coll == COLLX_COLL_REDUCE_SCATTER || coll == COLLX_COLL_ALLGATHER ||
         coll == COLLX_COLL_BROADCAST || coll == COLLX_COLL_REDUCE || coll == COLLX_COLL_ALLTOALL;
}

Status create_backend(const backend::BackendSetup& setup, std::unique_ptr<backend::Backend>* out) {
  std::unique_ptr<Comm> comm;
  COLLX_RETURN_IF_ERROR(
      Comm::create(setup.bootstrap, setup.rank, setup.size, setup.device, setup.deadline, setup.abort_flag, &comm));
  *out = std::make_unique<NcclBackend>(std::move(comm));
  return Status::Ok();
}

}  // namespace nccl
}  // namespace collx
