#include "bindings/torch/csrc/process_group.h"

#include "bindings/torch/csrc/collx_error.h"
#include "bindings/torch/csrc/type_map.h"

namespace collx_torch {

ProcessGroupCollx::ProcessGroupCollx(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                     std::chrono::milliseconds timeout)
    : c10d::ProcessGroup(rank, size),
      handles_(create_communicator(store, rank, size, timeout)),
      comm_(handles_.comm),
      completions_(std::make_unique<CompletionQueue>(comm_)) {
  init();
}

ProcessGroupCollx::~ProcessGroupCollx() {
  completions_.reset();  // waits for pending operations before the communicator goes
  collx_comm_destroy(comm_);
  collx_store_destroy(handles_.store);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::enqueue(c10d::OpType type, const std::string& what,
                                                          std::chrono::milliseconds timeout, const Post& post,
                                                          std::vector<at::Tensor> results,
                                                          std::vector<at::Tensor> buffers,
                                                          std::function<void()> on_success) {
  collx_opts_t opts;
  collx_opts_init(&opts, sizeof opts);
  if (timeout.count() > 0) opts.timeout_ms = timeout.count();  // else the group's timeout
  std::lock_guard<std::mutex> lock(post_mutex_);
  PendingOp op;
  check_status(post(&opts, &op.request), comm_, what);
  op.work = c10::make_intrusive<CollxWork>(getRank(), type, what, std::move(results));
  op.what = what;
  op.buffers = std::move(buffers);
  op.on_success = std::move(on_success);
  c10::intrusive_ptr<c10d::Work> work = op.work;
  completions_->push(std::move(op));
  return work;
}

void ProcessGroupCollx::check_rank(int64_t rank, const char* role, const std::string& what) const {
  if (rank < 0 || rank >= getSize()) {
    throw_invalid(what, std::string(role) + " rank " + std::to_string(rank) + " is outside [0, " +
                            std::to_string(getSize()) + ")");
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::broadcast(std::vector<at::Tensor>& tensors,
                                                            const c10d::BroadcastOptions& opts) {
  const std::string what = "broadcast";
  const at::Tensor& tensor = single(tensors, what);
  check_rank(opts.rootRank, "root", what);
  collx_datatype_t type = to_collx_datatype(tensor.scalar_type(), what);
  auto post = [&](const collx_opts_t* o, collx_request_t* request) {
    return collx_ibroadcast(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(), type,
                            static_cast<int32_t>(opts.rootRank), comm_, o, request);
  };
  return enqueue(c10d::OpType::BROADCAST, what, opts.timeout, post, tensors, tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::allreduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::AllreduceOptions& opts) {
  const std::string what = "all_reduce";
  const at::Tensor& tensor = single(tensors, what);
  collx_datatype_t type = to_collx_datatype(tensor.scalar_type(), what);
  CollxOp op = to_collx_op(opts.reduceOp, what);
  auto post = [&](const collx_opts_t* o, collx_request_t* request) {
    collx_opts_t with_scalar = *o;
    with_scalar.premul_scalar = op.premul_scalar;
    return collx_iallreduce(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(), type, op.op, comm_,
                            &with_scalar, request);
  };
  return enqueue(c10d::OpType::ALLREDUCE, what, opts.timeout, post, tensors, tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::reduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::ReduceOptions& opts) {
  const std::string what = "reduce";
  const at::Tensor& tensor = single(tensors, what);
  check_rank(opts.rootRank, "root", what);
  collx_datatype_t type = to_collx_datatype(tensor.scalar_type(), what);
  CollxOp op = to_collx_op(opts.reduceOp, what);
  auto post = [&](const collx_opts_t* o, collx_request_t* request) {
    collx_opts_t with_scalar = *o;
    with_scalar.premul_scalar = op.premul_scalar;
    return collx_ireduce(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(), type, op.op,
                         static_cast<int32_t>(opts.rootRank), comm_, &with_scalar, request);
  };
  return enqueue(c10d::OpType::REDUCE, what, opts.timeout, post, tensors, tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::barrier(const c10d::BarrierOptions& opts) {
  auto post = [&](const collx_opts_t* o, collx_request_t* request) { return collx_ibarrier(comm_, o, request); };
  return enqueue(c10d::OpType::BARRIER, "barrier", opts.timeout, post, {}, {});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  const std::string what = "send to rank " + std::to_string(dst_rank);
  const at::Tensor& tensor = single(tensors, what);
  check_rank(dst_rank, "destination", what);
  if (tag < 0) throw_invalid(what, "tag " + std::to_string(tag) + " is negative");
  collx_datatype_t type = to_collx_datatype(tensor.scalar_type(), what);
  auto post = [&](const collx_opts_t* o, collx_request_t* request) {
    return collx_isend(tensor.data_ptr(), tensor.numel(), type, dst_rank, tag, comm_, o, request);
  };
  return enqueue(c10d::OpType::SEND, what, c10d::kUnsetTimeout, post, tensors, tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  const std::string what = "recv from rank " + std::to_string(src_rank);
  const at::Tensor& tensor = single(tensors, what);
  check_rank(src_rank, "source", what);
  if (tag < 0) throw_invalid(what, "tag " + std::to_string(tag) + " is negative");
  collx_datatype_t type = to_collx_datatype(tensor.scalar_type(), what);
  auto post = [&](const collx_opts_t* o, collx_request_t* request) {
    return collx_irecv(tensor.data_ptr(), tensor.numel(), type, src_rank, tag, comm_, o, request);
  };
  return enqueue(c10d::OpType::RECV, what, c10d::kUnsetTimeout, post, tensors, tensors);
}

}  // namespace collx_torch
