#include "bindings/torch/csrc/work.h"

#include "bindings/torch/csrc/collx_error.h"

namespace collx_torch {

CollxWork::CollxWork(int rank, c10d::OpType type, std::string what, std::vector<at::Tensor> results)
    : c10d::Work(rank, type),
      what_(std::move(what)),
      results_(std::move(results)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

bool CollxWork::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto done = [this] { return completed_; };
  if (timeout == kNoTimeout) {
    cv_.wait(lock, done);
  } else if (!cv_.wait_for(lock, timeout, done)) {
    throw CollxError(COLLX_ERR_TIMEOUT, "collx " + what_ + " failed: COLLX_ERR_TIMEOUT: not complete after " +
                                            std::to_string(timeout.count()) +
                                            " ms given to Work.wait (the operation goes on until "
                                            "its own deadline)");
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> CollxWork::getFuture() { return future_; }

std::vector<at::Tensor> CollxWork::result() { return results_; }

void CollxWork::complete(std::exception_ptr error) {
  finish(error);  // wakes wait() and sets isCompleted/isSuccess/exception
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(results_));
  }
}

}  // namespace collx_torch
