#include "bindings/torch/csrc/process_group.h"

#include "bindings/torch/csrc/collx_error.h"

namespace collx_torch {

ProcessGroupCollx::ProcessGroupCollx(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                     std::chrono::milliseconds timeout)
    : c10d::ProcessGroup(rank, size),
      handles_(create_communicator(store, rank, size, timeout)),
      comm_(handles_->comm()),
      completions_(std::make_unique<CompletionQueue>(comm_)) {
  init();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::enqueue(const Call& call, const Post& post,
                                                          std::vector<at::Tensor> results,
                                                          std::vector<at::Tensor> buffers,
                                                          std::function<void()> on_success) {
  collx_opts_t opts;
  collx_opts_init(&opts, sizeof opts);
  if (call.timeout.count() > 0) opts.timeout_ms = call.timeout.count();  // else the group's timeout
  opts.premul_scalar = call.op.premul_scalar;
  std::lock_guard<std::mutex> lock(post_mutex_);
  PendingOp op;
  check_status(post(&opts, &op.request), comm_, call.what);
  op.work = c10::make_intrusive<CollxWork>(getRank(), call.type, call.what, std::move(results));
  op.what = call.what;
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
  const Call call{c10d::OpType::BROADCAST, "broadcast", opts.timeout, {}};
  const at::Tensor& tensor = single(tensors, call.what);
  check_rank(opts.rootRank, "root", call.what);
  collx_datatype_t type = to_collx_datatype(tensor.scalar_type(), call.what);
  auto post = [&](const collx_opts_t* o, collx_request_t* request) {
    return collx_ibroadcast(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(), type,
                            static_cast<int32_t>(opts.rootRank), comm_, o, request);
  };
  return enqueue(call, post, tensors, tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::allreduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::AllreduceOptions& opts) {
  const std::string what = "all_reduce";
  const Call call{c10d::OpType::ALLREDUCE, what, opts.timeout, to_collx_op(opts.reduceOp, what)};
  const at::Tensor& tensor = single(tensors, what);
  collx_datatype_t type = to_collx_datatype(tensor.scalar_type(), what);
  auto post = [&](const collx_opts_t* o, collx_request_t* request) {
    return collx_iallreduce(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(), type, call.op.op, comm_, o,
                            request);
  };
  return enqueue(call, post, tensors, tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::reduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::ReduceOptions& opts) {
  const std::string what = "reduce";
  const Call call{c10d::OpType::REDUCE, what, opts.timeout, to_collx_op(opts.reduceOp, what)};
  const at::Tensor& tensor = single(tensors, what);
  check_rank(opts.rootRank, "root", what);
  collx_datatype_t type = to_collx_datatype(tensor.scalar_type(), what);
  auto post = [&](const collx_opts_t* o, collx_request_t* request) {
    return collx_ireduce(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(), type, call.op.op,
                         static_cast<int32_t>(opts.rootRank), comm_, o, request);
  };
  return enqueue(call, post, tensors, tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::barrier(const c10d::BarrierOptions& opts) {
  auto post = [&](const collx_opts_t* o, collx_request_t* request) { return collx_ibarrier(comm_, o, request); };
  return enqueue({c10d::OpType::BARRIER, "barrier", opts.timeout, {}}, post, {}, {});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  return point_to_point(c10d::OpType::SEND, tensors, dst_rank, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  return point_to_point(c10d::OpType::RECV, tensors, src_rank, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::point_to_point(c10d::OpType type, std::vector<at::Tensor>& tensors,
                                                                 int peer, int tag) {
  const bool sending = type == c10d::OpType::SEND;
  const Call call{type, (sending ? "send to rank " : "recv from rank ") + std::to_string(peer), c10d::kUnsetTimeout,
                  {}};
  const at::Tensor& tensor = single(tensors, call.what);
  check_rank(peer, sending ? "destination" : "source", call.what);
  if (tag < 0) throw_invalid(call.what, "tag " + std::to_string(tag) + " is negative");
  collx_datatype_t datatype = to_collx_datatype(tensor.scalar_type(), call.what);
  auto post = [&](const collx_opts_t* o, collx_request_t* request) {
    return sending ? collx_isend(tensor.data_ptr(), tensor.numel(), datatype, peer, tag, comm_, o, request)
                   : collx_irecv(tensor.data_ptr(), tensor.numel(), datatype, peer, tag, comm_, o, request);
  };
  return enqueue(call, post, tensors, tensors);
}

}  // namespace collx_torch
