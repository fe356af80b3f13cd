// ProcessGroupCollx: the c10d process group behind backend "collx". Every operation checks
// its tensors, posts one nonblocking collx call on the group's communicator and returns a
// CollxWork that the CompletionQueue completes. Errors found before posting (bad tensors,
// unsupported dtypes or ops, a communicator already failed) raise at once; errors of the
// operation itself (mismatch, dead peer, deadline) surface from wait() and the future.
// Thread safety: operations may be posted from several threads (they are serialised; every
// rank must still post the same operations in the same order); Work objects may be waited on
// from any thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "bindings/torch/csrc/bootstrap.h"
#include "bindings/torch/csrc/completion_queue.h"
#include "bindings/torch/csrc/type_map.h"
#include "collx/collx.h"

namespace collx_torch {

class ProcessGroupCollx : public c10d::ProcessGroup {
 public:
  // Bootstraps the communicator through `store` (bootstrap.h); `timeout` is the deadline of
  // every collx call of the group unless an operation's options give another.
  ProcessGroupCollx(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                    std::chrono::milliseconds timeout);
  // Completes pending operations (each ends by its deadline), then destroys the communicator.
  ~ProcessGroupCollx() override = default;

  const std::string getBackendName() const override { return "collx"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;

  // process_group_gather.cc: the gathering and scattering collectives.
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;

 private:
  // Posts one collx call: `post` gets the per-call options (the call's timeout, and the
  // scalar of a PREMUL_SUM `op`) and the request to fill, and returns collx's status.
  // `results` are what the Work's future yields, `buffers` every tensor the call touches
  // (kept alive until it ends), `on_success` the copies out of staging buffers run once it
  // succeeded.
  using Post = std::function<collx_status_t(const collx_opts_t*, collx_request_t*)>;
  struct Call {
    c10d::OpType type;
    std::string what;
    std::chrono::milliseconds timeout = c10d::kUnsetTimeout;
    CollxOp op;
  };
  c10::intrusive_ptr<c10d::Work> enqueue(const Call& call, const Post& post, std::vector<at::Tensor> results,
                                         std::vector<at::Tensor> buffers, std::function<void()> on_success = {});
  // send (type SEND) and recv (RECV).
  c10::intrusive_ptr<c10d::Work> point_to_point(c10d::OpType type, std::vector<at::Tensor>& tensors, int peer,
                                                int tag);
  // COLLX_ERR_INVALID_ARG naming `role` ("root", "destination", "source") unless
  // 0 <= rank < size.
  void check_rank(int64_t rank, const char* role, const std::string& what) const;

  // collx takes one posting thread at a time per communicator, and the completion queue
  // must see operations in posting order: posts from several threads are serialised here.
  std::mutex post_mutex_;
  const std::unique_ptr<GroupHandles> handles_;
  const collx_comm_t comm_;  // handles_->comm()
  // Declared last: destroyed first, completing pending operations while the communicator lives.
  std::unique_ptr<CompletionQueue> completions_;
};

}  // namespace collx_torch
