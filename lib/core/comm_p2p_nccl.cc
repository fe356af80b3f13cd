// Point-to-point on device buffers over NCCL (docs/cuda.md, "Point-to-point on device
// buffers"): used by a communicator bound to a device (config->device) whose NCCL set-up at
// creation succeeded (Communicator::setup_bound_device_route), so both sides of a message
// always agree on the route. ncclSend/ncclRecv are enqueued on the call's stream and the call
// completes once they are (NCCL's semantics); a collx group's calls form one NCCL group.
#include "lib/core/comm.h"
#include "lib/core/comm_device.h"

namespace collx {

Status Communicator::post_p2p_nccl(const CollCall& call) {
  const backend::DeviceOp op = device_op(call);
  {
    std::lock_guard<std::mutex> lock(nccl_batch_mu_);
    if (nccl_batch_open_ && nccl_batch_owner_ == std::this_thread::get_id()) {
      nccl_batch_.push_back(op);
      return Status::Ok();
    }
  }
  DeviceScope scope;
  COLLX_RETURN_IF_ERROR(scope.enter(nccl_p2p_->device()));
  return nccl_p2p_->run_p2p(&op, 1, deadline_for(call.timeout_ms));
}

void Communicator::begin_nccl_p2p_batch() {
  if (!nccl_p2p_) return;
  std::lock_guard<std::mutex> lock(nccl_batch_mu_);
  nccl_batch_open_ = true;
  nccl_batch_owner_ = std::this_thread::get_id();
  nccl_batch_.clear();
}

Status Communicator::end_nccl_p2p_batch(Deadline deadline, bool enqueue) {
  if (!nccl_p2p_) return Status::Ok();
  std::vector<backend::DeviceOp> ops;
  {
    std::lock_guard<std::mutex> lock(nccl_batch_mu_);
    if (!nccl_batch_open_ || nccl_batch_owner_ != std::this_thread::get_id()) return Status::Ok();
    nccl_batch_open_ = false;
    ops.swap(nccl_batch_);
  }
  if (ops.empty() || !enqueue) return Status::Ok();
  DeviceScope scope;
  COLLX_RETURN_IF_ERROR(scope.enter(nccl_p2p_->device()));
  return nccl_p2p_->run_p2p(ops.data(), ops.size(), deadline);
}

}  // namespace collx
