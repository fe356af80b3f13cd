#include "lib/common/periodic_thread.h"

#include <vector>

namespace collx {

PeriodicThread::PeriodicThread(std::chrono::microseconds period) : period_(period) {}

PeriodicThread::~PeriodicThread() {
  std::thread ending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.clear();
    ending = std::move(thread_);
  }
  wake_.notify_all();
  if (ending.joinable()) ending.join();
}

PeriodicThread::TaskId PeriodicThread::add(std::function<void()> task) {
  std::thread previous;  // a thread that saw no task and is ending: joined outside the lock
  TaskId id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_id_++;
    tasks_.emplace(id, std::move(task));
    if (!thread_running_) {
      previous = std::move(thread_);
      thread_running_ = true;
      ++threads_started_;
      thread_ = std::thread([this] { run(); });
    }
  }
  if (previous.joinable()) previous.join();
  return id;
}

void PeriodicThread::remove(TaskId id) {
  std::unique_lock<std::mutex> lock(mu_);
  tasks_.erase(id);
  finished_.wait(lock, [&] { return running_ != id; });
  if (tasks_.empty()) wake_.notify_all();  // let the thread end now rather than a period later
}

uint64_t PeriodicThread::threads_started() const {
  std::lock_guard<std::mutex> lock(mu_);
  return threads_started_;
}

size_t PeriodicThread::tasks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tasks_.size();
}

void PeriodicThread::run() {
  std::unique_lock<std::mutex> lock(mu_);
  auto next = std::chrono::steady_clock::now() + period_;
  while (!tasks_.empty()) {
    wake_.wait_until(lock, next, [&] { return tasks_.empty(); });
    if (tasks_.empty()) break;
    next = std::chrono::steady_clock::now() + period_;
    // Run each task registered now, by id: one removed meanwhile is skipped, one added runs
    // from the next round.
    std::vector<TaskId> ids;
    ids.reserve(tasks_.size());
    for (const auto& entry : tasks_) ids.push_back(entry.first);
    for (TaskId id : ids) {
      auto it = tasks_.find(id);
      if (it == tasks_.end()) continue;
      std::function<void()> task = it->second;  // a copy: remove() may erase the entry meanwhile
      running_ = id;
      lock.unlock();
      task();
      lock.lock();
      running_ = 0;
      finished_.notify_all();
    }
  }
  thread_running_ = false;  // the next add() starts (and first joins) a new thread
}

}  // namespace collx
