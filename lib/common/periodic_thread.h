// One thread that calls every registered task at a fixed period: the watchdog shared by all
// NCCL communicators of a process (one thread per process instead of one per communicator, so
// a job with hundreds of communicators, dp x tp x pp groups and their splits, does not carry
// hundreds of threads waking every 2 ms).
//
// The thread exists only while a task is registered: it starts with the first add() and ends
// when the last task is removed. Tasks run one after another on that thread, so a slow task
// delays the others (an NCCL abort can take a while: acceptable for a watchdog whose job is
// to end hangs within seconds).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace collx {

class PeriodicThread {
 public:
  using TaskId = uint64_t;
  explicit PeriodicThread(std::chrono::microseconds period);
  // Requires every task removed (a task left behind would run against a destroyed owner).
  ~PeriodicThread();
  PeriodicThread(const PeriodicThread&) = delete;
  PeriodicThread& operator=(const PeriodicThread&) = delete;

  // Registers `task`, first run within one period. Thread-safe.
  TaskId add(std::function<void()> task);
  // Unregisters a task. When it returns the task is not running and never runs again, so its
  // owner may be destroyed. Thread-safe; must not be called from inside a task of this thread
  // (it would wait for itself).
  void remove(TaskId id);

  // How many threads this object has started so far (tests: one per busy spell, not per task).
  uint64_t threads_started() const;
  // Number of registered tasks.
  size_t tasks() const;

 private:
  void run();

  const std::chrono::microseconds period_;
  mutable std::mutex mu_;
  std::condition_variable wake_;     // period ticks, stop requests
  std::condition_variable finished_; // a task run ended (remove() waits for it)
  std::map<TaskId, std::function<void()>> tasks_;
  TaskId next_id_ = 1;
  TaskId running_ = 0;  // the task being run now, 0 for none
  std::thread thread_;
  bool thread_running_ = false;  // run() has not returned yet
  uint64_t threads_started_ = 0;
};

}  // namespace collx
