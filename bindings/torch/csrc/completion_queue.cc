#include "bindings/torch/csrc/completion_queue.h"

#include "bindings/torch/csrc/collx_error.h"
#include "bindings/torch/csrc/gil.h"

namespace collx_torch {

CompletionQueue::CompletionQueue(collx_comm_t comm) : comm_(comm), thread_([this] { run(); }) {}

CompletionQueue::~CompletionQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  ReleaseGilIfHeld unlocked;  // the operations being completed may need the GIL
  thread_.join();
}

void CompletionQueue::push(PendingOp op) {
  std::vector<PendingOp> release;  // destroyed here, on the posting thread, after the lock
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(op));
    release.swap(finished_);
  }
  cv_.notify_all();
}

void CompletionQueue::run() {
  for (;;) {
    PendingOp op;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to complete
      op = std::move(queue_.front());
      queue_.pop_front();
    }
    finish(op);
  }
}

void CompletionQueue::finish(PendingOp& op) {
  // -1: no extra limit; the operation's own deadline (the process group's timeout or the
  // call's) ends the wait.
  collx_status_t status = collx_wait(op.request, -1);
  std::exception_ptr error;
  if (status < 0) error = std::make_exception_ptr(error_from_status(status, comm_, op.what));
  collx_request_free(op.request);
  op.request = nullptr;
  if (!error && op.on_success) {
    try {
      op.on_success();
    } catch (...) {
      error = std::current_exception();
    }
  }
  op.work->complete(error);
  std::lock_guard<std::mutex> lock(mutex_);
  finished_.push_back(std::move(op));
}

}  // namespace collx_torch
