// Completes the Work objects of one communicator's operations. collx runs a communicator's
// nonblocking operations in the order they were posted, so one thread waits for them in
// that order: it waits on each request (its collx deadline bounds the wait), copies results
// out of staging buffers, and completes the Work and its future.
//
// The thread never drops the last reference to a tensor: releasing a tensor that Python
// created takes the GIL, which a Python thread may hold while it waits for this one.
// Finished operations are handed back instead and released by the next push (the posting
// thread) or by the destructor after the join (which it waits for without the GIL).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>

#include "bindings/torch/csrc/work.h"
#include "collx/collx.h"

namespace collx_torch {

// One posted collx operation and what it needs until it ends.
struct PendingOp {
  collx_request_t request = nullptr;              // owned: freed once waited for
  c10::intrusive_ptr<CollxWork> work;
  std::string what;                               // names the operation in errors
  std::vector<at::Tensor> buffers;                // every tensor collx reads or writes
  std::function<void()> on_success;               // copies staged results out; may be empty
};

class CompletionQueue {
 public:
  // `comm` is borrowed (for error messages); it must outlive the queue.
  explicit CompletionQueue(collx_comm_t comm);
  // Waits for every queued operation (each ends by its deadline), then stops the thread.
  ~CompletionQueue();
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  // Takes ownership of op.request. Thread-safe.
  void push(PendingOp op);

 private:
  void run();
  void finish(PendingOp& op);

  collx_comm_t comm_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<PendingOp> queue_;
  std::vector<PendingOp> finished_;  // completed, holding their tensors until released
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace collx_torch
