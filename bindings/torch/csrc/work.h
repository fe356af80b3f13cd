// The torch Work object of one collx operation. The CompletionQueue thread completes it once
// the collx request ends; wait(), isCompleted() and the future then report the outcome (the
// result tensors, or the CollxError carrying collx's message). Thread-safe like c10d::Work.
#pragma once

#include <chrono>
#include <exception>
#include <string>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace collx_torch {

class CollxWork : public c10d::Work {
 public:
  // `what` names the operation in errors; `results` are the tensors the future yields (DDP
  // reads its bucket back from it).
  CollxWork(int rank, c10d::OpType type, std::string what, std::vector<at::Tensor> results);

  // Blocks until completion: the operation's collx deadline bounds the wait. A positive
  // `timeout` shorter than that raises COLLX_ERR_TIMEOUT naming the operation instead (the
  // operation itself goes on until its deadline).
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  std::vector<at::Tensor> result() override;

  // Called exactly once by the completion thread; `error` is null on success.
  void complete(std::exception_ptr error);

 private:
  const std::string what_;
  const std::vector<at::Tensor> results_;
  const c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace collx_torch
