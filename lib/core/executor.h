// Executor: the communicator's progress thread for nonblocking collectives. Tasks run one at
// a time in submission order (collectives on a communicator are ordered). The thread starts
// on the first task, so communicators that never use nonblocking calls cost no thread, and it
// sleeps on a condition variable while there is nothing to do.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "lib/common/deadline.h"

namespace collx {

class Executor {
 public:
  Executor() = default;
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Queue a task. `log_rank` is the rank printed by log lines of the thread.
  void submit(std::function<void()> task, int log_rank);
  // True when nothing is queued or running. Only meaningful to the thread that submits.
  bool idle() const;
  // Wait until idle or the deadline; false on timeout.
  bool drain(Deadline deadline);
  // Run the remaining tasks, then stop and join the thread.
  void stop();

 private:
  void loop(int log_rank);

  mutable std::mutex mutex_;
  std::condition_variable wake_;     // new task or stop
  std::condition_variable drained_;  // queue became empty and nothing runs
  std::deque<std::function<void()>> tasks_;
  bool running_task_ = false;
  // Tasks queued or running, changed under mutex_: idle() reads it without the lock (every
  // blocking collective asks). The release decrement after a task ran and the acquire load
  // in idle() order the task's effects before what the caller does next.
  std::atomic<size_t> busy_{0};
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace collx
