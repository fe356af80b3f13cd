// The leader/follower wait_all shared by the tcp, shm and ucx engines. No engine has a
// progress thread: the first thread in wait_all becomes the driver and makes progress for
// everyone (each engine its own way, behind WaitHooks::drive); the other waiters sleep on the
// engine's condition variable and are woken when the driver completes requests or hands the
// role on. The engine's mutex is held throughout, except where drive() releases it to sleep.
#pragma once

#include <sched.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

#include "lib/common/deadline.h"
#include "transports/transport.h"

namespace collx {
namespace transport {

// Paces a driver whose progress pass found nothing: yield the CPU (never spin without
// yielding: 8 ranks may share 2 cores) during the first spin_us of idleness, then sleep.
// One per wait_all call, so every wait starts by spinning.
class IdlePacer {
 public:
  template <class Sleep>
  void pace(bool moved, int64_t spin_us, std::unique_lock<std::mutex>& lock, Sleep&& sleep) {
    if (moved) {
      idle_since_ = 0;
      return;
    }
    const int64_t now = monotonic_us();
    if (idle_since_ == 0) idle_since_ = now;
    if (now - idle_since_ < spin_us) {
      lock.unlock();
      ::sched_yield();
      lock.lock();
    } else {
      sleep();
    }
  }

 private:
  int64_t idle_since_ = 0;
};

// What the shared loop needs from an engine; every call is made with the engine's mutex held.
class WaitHooks {
 public:
  // Called once the abort flag is seen: poison the engine, return the status wait_all reports.
  virtual Status wait_on_aborted() = 0;
  // One driver pass for the waiter of `reqs`: make progress and, when nothing moved, wait for
  // something to happen without sleeping past the deadline (and not at all once it expired,
  // for engines waiting with ExpiredDeadline::kOnePass).
  virtual void wait_drive(std::unique_lock<std::mutex>& lock, Request* const* reqs, size_t count, Deadline deadline,
                          IdlePacer& pacer) = 0;
  // The engine's words on a pending request for the timeout message (see pending_list.h).
  virtual std::string wait_pending_detail(const Request& r) const = 0;

 protected:
  ~WaitHooks() = default;
};

// The WaitHooks overrides, declared once for every engine (in its private section).
#define COLLX_WAIT_HOOKS_OVERRIDES                                                                  \
  Status wait_on_aborted() override;                                                                \
  void wait_drive(std::unique_lock<std::mutex>& lock, ::collx::transport::Request* const* reqs, size_t count, \
                  Deadline deadline, ::collx::transport::IdlePacer& pacer) override;                \
  std::string wait_pending_detail(const ::collx::transport::Request& r) const override

// The engine's members the loop reads and writes, all guarded by the engine's mutex except
// `aborted` (set by abort() without it). close() and the posting paths use them too.
struct WaitState {
  std::condition_variable& cv;       // followers sleep here
  bool& driving;                     // a thread owns the driver role
  const uint64_t& completions;       // bumped per completed request: followers are notified
  const std::atomic<bool>& aborted;  // abort() ran
  const Status& poison;              // non-OK once poisoned
  const bool& closed;                // close() ran
};

class WaitDriver {
 public:
  enum class ExpiredDeadline {
    // A deadline already expired (collx_test) still gets one progress pass when no other
    // thread is driving: polling alone must be able to complete requests.
    kOnePass,
    // Report the timeout at once.
    kReportAtOnce,
  };

  // `name` goes in the "transport is closed" message ("shm", "TCP", ...).
  WaitDriver(WaitHooks& hooks, WaitState state, int rank, const char* name, ExpiredDeadline expired)
      : hooks_(hooks), state_(state), rank_(rank), name_(name), expired_(expired) {}

  // Transport::wait_all, with `lock` holding the engine's mutex.
  Status wait_all(std::unique_lock<std::mutex>& lock, Request* const* reqs, size_t count, Deadline deadline);
  // The same, taking `mu`, the engine's mutex.
  Status wait_all(std::mutex& mu, Request* const* reqs, size_t count, Deadline deadline) {
    std::unique_lock<std::mutex> lock(mu);
    return wait_all(lock, reqs, count, deadline);
  }

  // Whether a post may go ahead (under the engine's mutex): once aborted, what
  // WaitHooks::wait_on_aborted says; once closed, closed_status(); else the poison (OK).
  Status usable();
  // What every engine reports once aborted or closed: "rank R: the <name> transport was
  // aborted" (COLLX_ERR_ABORTED), "... is closed" (COLLX_ERR_INVALID_USAGE).
  Status aborted_status() const;
  Status closed_status() const;
  // Transport::health(): the abort, read without `mu` (abort() takes no lock, a thread may
  // be inside the engine), else the poison under `mu`, the engine's mutex.
  Status health(std::mutex& mu) const;

 private:
  // True when the wait is over: every request done (*result OK) or one failed (its status).
  static bool settled(Request* const* reqs, size_t count, Status* result);

  WaitHooks& hooks_;
  const WaitState state_;
  const int rank_;
  const char* const name_;
  const ExpiredDeadline expired_;
};

}  // namespace transport
}  // namespace collx
