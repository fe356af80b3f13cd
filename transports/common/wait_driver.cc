// The leader/follower wait loop (see wait_driver.h).
#include "transports/common/wait_driver.h"

#include <algorithm>
#include <chrono>

#include "transports/common/pending_list.h"

namespace collx {
namespace transport {

namespace {
// Longest follower sleep: a follower re-checks its requests and the deadline at least this
// often even if nobody notifies it.
constexpr auto kFollowerNap = std::chrono::milliseconds(100);
}  // namespace

bool WaitDriver::settled(Request* const* reqs, size_t count, Status* result) {
  bool all_done = true;
  for (size_t i = 0; i < count; ++i) {
    const Request* r = reqs[i];
    if (r == nullptr) continue;
    if (!r->done()) {
      all_done = false;
    } else if (r->failed()) {
      *result = r->status();
      return true;
    }
  }
  if (all_done) *result = Status::Ok();
  return all_done;
}

Status WaitDriver::wait_all(std::unique_lock<std::mutex>& lock, Request* const* reqs, size_t count,
                            Deadline deadline) {
  const auto start = std::chrono::steady_clock::now();
  bool driver = false;
  // Whoever drives hands the role on when leaving (any return), so another waiter takes over.
  struct DriverRelease {
    WaitDriver* self;
    bool* driver;
    ~DriverRelease() {
      if (!*driver) return;
      self->state_.driving = false;
      self->state_.cv.notify_all();
    }
  } release{this, &driver};
  IdlePacer pacer;
  bool polled = false;
  for (;;) {
    if (state_.aborted.load(std::memory_order_acquire)) return hooks_.wait_on_aborted();
    Status result;
    if (settled(reqs, count, &result)) return result;
    if (!state_.poison.ok()) return state_.poison;
    if (state_.closed) return closed_status();
    const bool pass_owed = expired_ == ExpiredDeadline::kOnePass && !polled && !(state_.driving && !driver);
    if (deadline.expired() && !pass_owed) {
      auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
      return pending_timeout_status(rank_, waited.count(), reqs, count,
                                    [this](const Request& r) { return hooks_.wait_pending_detail(r); });
    }
    if (driver || !state_.driving) {
      state_.driving = driver = true;
      const uint64_t before = state_.completions;
      hooks_.wait_drive(lock, reqs, count, deadline, pacer);
      polled = true;
      if (state_.completions != before) state_.cv.notify_all();  // followers' requests may be among them
    } else {
      state_.cv.wait_until(lock, std::min(deadline.time_point(), std::chrono::steady_clock::now() + kFollowerNap));
    }
  }
}

Status WaitDriver::usable() {
  if (state_.aborted.load(std::memory_order_acquire)) return hooks_.wait_on_aborted();
  if (state_.closed) return closed_status();
  return state_.poison;
}

Status WaitDriver::aborted_status() const {
  return make_status(COLLX_ERR_ABORTED, "rank %d: the %s transport was aborted", rank_, name_);
}

Status WaitDriver::closed_status() const {
  return make_status(COLLX_ERR_INVALID_USAGE, "rank %d: the %s transport is closed", rank_, name_);
}

Status WaitDriver::health(std::mutex& mu) const {
  if (state_.aborted.load(std::memory_order_acquire)) return aborted_status();
  std::lock_guard<std::mutex> lock(mu);
  return state_.poison;
}

}  // namespace transport
}  // namespace collx
