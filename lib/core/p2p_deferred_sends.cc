// See p2p_deferred_sends.h.
#include "lib/core/p2p_deferred_sends.h"

#include <chrono>
#include <utility>
#include <vector>

namespace collx {

bool DeferredSends::Ticket::wait(Deadline until, Status* status) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto is_settled = [this] { return settled_; };
  if (until.is_never()) {
    settled_cv_.wait(lock, is_settled);
  } else if (!settled_cv_.wait_until(lock, until.time_point(), is_settled)) {
    return false;
  }
  *status = status_;
  return true;
}

bool DeferredSends::Ticket::cancel() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (settled_) return false;
  cancelled_ = true;
  return true;
}

bool DeferredSends::Ticket::settled() {
  std::lock_guard<std::mutex> lock(mutex_);
  return settled_;
}

// The caller holds ticket->mutex_.
void DeferredSends::settle(Ticket* ticket, Status status) {
  ticket->status_ = std::move(status);
  ticket->settled_ = true;
  ticket->settled_cv_.notify_all();
}

DeferredSends::~DeferredSends() {
  stop(make_status(COLLX_ERR_INVALID_USAGE, "the communicator was destroyed before the send was posted"));
}

bool DeferredSends::holds(int peer, uint64_t tag) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Entry& e : entries_) {
    if (e.peer == peer && e.tag == tag) return true;
  }
  return false;
}

std::shared_ptr<DeferredSends::Ticket> DeferredSends::defer(int peer, uint64_t tag, ReadyFn ready, PostFn post,
                                                            Deadline deadline, const std::atomic<bool>* abort,
                                                            const char* waits_for) {
  auto ticket = std::make_shared<Ticket>();
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) {
    std::lock_guard<std::mutex> ticket_lock(ticket->mutex_);
    settle(ticket.get(), stopped_);
    return ticket;
  }
  entries_.push_back(Entry{peer, tag, std::move(ready), std::move(post), deadline, abort, waits_for, ticket});
  if (!thread_.joinable()) {
    try {
      thread_ = std::thread([this] { loop(); });
    } catch (...) {
      entries_.pop_back();
      throw;
    }
  }
  wake_.notify_one();
  return ticket;
}

bool DeferredSends::pass() {
  std::vector<Entry> finished;  // destroyed after the lock: their closures own requests
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::pair<int, uint64_t>> waiting;  // (peer, tag) whose first entry is not ready
    for (auto it = entries_.begin(); it != entries_.end();) {
      Entry& e = *it;
      bool behind = false;
      for (const auto& key : waiting) behind = behind || (key.first == e.peer && key.second == e.tag);
      bool done = false;
      if (!behind) {
        std::lock_guard<std::mutex> ticket_lock(e.ticket->mutex_);
        done = true;
        bool ready = true;
        Status st;
        if (e.ticket->cancelled_) {
          // The caller gave up on it (its own deadline, a group abandoned): nothing to post.
        } else if (e.abort && e.abort->load(std::memory_order_acquire)) {
          settle(e.ticket.get(), make_status(COLLX_ERR_ABORTED, "collx_comm_abort was called before the send was posted"));
        } else if (!(st = e.ready ? e.ready(&ready) : Status::Ok()).ok()) {
          settle(e.ticket.get(), st);
        } else if (ready) {
          settle(e.ticket.get(), e.post());
        } else if (e.deadline.expired()) {
          settle(e.ticket.get(), make_status(COLLX_ERR_TIMEOUT, "%s did not end before the deadline", e.waits_for));
        } else {
          done = false;
        }
      }
      if (done) {
        finished.push_back(std::move(e));
        it = entries_.erase(it);
      } else {
        if (!behind) waiting.emplace_back(e.peer, e.tag);
        ++it;
      }
    }
    if (entries_.empty()) drained_.notify_all();
  }
  return !finished.empty();
}

void DeferredSends::loop() {
  int idle_passes = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !entries_.empty(); });
      if (stopping_) return;
    }
    idle_passes = pass() ? 0 : idle_passes + 1;
    // Poll the devices' progress: fast at first (a copy usually ends soon), then gently.
    std::unique_lock<std::mutex> lock(mutex_);
    if (stopping_) return;
    if (!entries_.empty()) wake_.wait_for(lock, std::chrono::microseconds(idle_passes < 100 ? 10 : 200));
  }
}

bool DeferredSends::drain(Deadline deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto empty = [this] { return entries_.empty(); };
  if (deadline.is_never()) {
    drained_.wait(lock, empty);
    return true;
  }
  return drained_.wait_until(lock, deadline.time_point(), empty);
}

void DeferredSends::stop(const Status& why) {
  std::deque<Entry> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!stopping_) stopped_ = why;
    stopping_ = true;
    wake_.notify_all();
  }
  if (thread_.joinable()) {
    // The poster never drops the last reference to the communicator (its owner stops it
    // first), but a join from the thread itself must not happen whatever the caller did.
    if (thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();
    } else {
      thread_.join();
    }
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    left.swap(entries_);
  }
  for (Entry& e : left) {
    std::lock_guard<std::mutex> ticket_lock(e.ticket->mutex_);
    if (!e.ticket->settled_) settle(e.ticket.get(), stopped_);
  }
}

}  // namespace collx
