// Executor: the communicator's progress thread for nonblocking collectives. Tasks run one at
// a time in submission order (collectives on a communicator are ordered). The thread starts
// on the first task, so communicators that never use nonblocking calls cost no thread, and it
// sleeps on a condition variable while there is nothing to do. A task that throws (an
// allocation failure, typically) does not end the process: its failure handler gets the
// exception as a status, and the thread goes on with the next task.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "lib/common/deadline.h"
#include "lib/common/status.h"

namespace collx {

class Executor {
 public:
  Executor() = default;
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Queue a task. When it throws, `on_exception` runs on the thread with the exception as a
  // status (COLLX_ERR_NO_MEMORY for std::bad_alloc) and must complete whatever waits for the
  // task; an exception from on_exception itself is logged and dropped. `log_rank` is the rank
  // printed by log lines of the thread. Throws (on the caller's thread) when the task cannot
  // be queued or the thread cannot be started.
  using FailureHandler = std::function<void(const Status&)>;
  void submit(std::function<void()> task, FailureHandler on_exception, int log_rank);
  // True when nothing is queued or running. Only meaningful to the thread that submits.
  bool idle() const;
  // Wait until idle or the deadline; false on timeout.
  bool drain(Deadline deadline);
  // Run the remaining tasks, then stop and join the thread.
  void stop();

 private:
  struct Task {
    std::function<void()> run;
    FailureHandler on_exception;
  };
  void loop(int log_rank);
  static void run_guarded(Task& task) noexcept;

  mutable std::mutex mutex_;
  std::condition_variable wake_;     // new task or stop
  std::condition_variable drained_;  // queue became empty and nothing runs
  std::deque<Task> tasks_;
  bool running_task_ = false;
  // Tasks queued or running, changed under mutex_: idle() reads it without the lock (every
  // blocking collective asks). The release decrement after a task ran and the acquire load
  // in idle() order the task's effects before what the caller does next.
  std::atomic<size_t> busy_{0};
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace collx
