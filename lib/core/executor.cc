#include "lib/core/executor.h"

#include "lib/common/exception_status.h"
#include "lib/common/log.h"

namespace collx {

Executor::~Executor() { stop(); }

void Executor::submit(std::function<void()> task, FailureHandler on_exception, int log_rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!thread_.joinable()) thread_ = std::thread([this, log_rank] { loop(log_rank); });
  tasks_.push_back(Task{std::move(task), std::move(on_exception)});  // after the thread: nothing to undo if it throws
  busy_.fetch_add(1, std::memory_order_relaxed);
  wake_.notify_one();
}

void Executor::run_guarded(Task& task) noexcept {
  try {
    task.run();
    return;
  } catch (...) {
    const Status failure = current_exception_status("nonblocking operation on the progress thread");
    try {
      if (task.on_exception) task.on_exception(failure);
    } catch (...) {
      COLLX_WARN(COLL, "the failure handler of a nonblocking operation threw too; its request may never complete");
    }
  }
}

bool Executor::idle() const { return busy_.load(std::memory_order_acquire) == 0; }

bool Executor::drain(Deadline deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto is_idle = [this] { return tasks_.empty() && !running_task_; };
  if (deadline.is_never()) {
    drained_.wait(lock, is_idle);
    return true;
  }
  return drained_.wait_until(lock, deadline.time_point(), is_idle);
}

void Executor::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    wake_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void Executor::loop(int log_rank) {
  LogRankScope rank_scope(log_rank);
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
    if (tasks_.empty()) break;  // stopping and nothing left
    Task task = std::move(tasks_.front());
    tasks_.pop_front();
    running_task_ = true;
    lock.unlock();
    run_guarded(task);
    lock.lock();
    running_task_ = false;
    busy_.fetch_sub(1, std::memory_order_release);
    if (tasks_.empty()) drained_.notify_all();
  }
  drained_.notify_all();
}

}  // namespace collx
