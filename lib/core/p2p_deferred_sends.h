// Sends posted to the transport later than they were called: a send on device buffers leaves
// from pinned staging that a copy queued on the caller's stream fills, and the host must not
// wait for that copy (docs/cuda.md, "What blocks the host"). The send is queued here instead,
// and a poster thread posts it once its condition holds (the copy's event is done).
//
// Order: receives match messages of one (peer, tag) in the order they were posted, so a
// later send to the same peer and tag (device or host buffer) must not overtake a deferred
// one: it is queued behind it and posted right after it. Sends to other peers or tags are not
// held (holding them could deadlock a program that is valid under stream ordering, as NCCL's).
//
// The poster never blocks on the network nor on the device: it polls each queue's first
// entry (the condition is a non-blocking query) and posts. An entry whose deadline passes or
// whose communicator is aborted is failed instead; whoever waits for it sees that status.
// Thread-safe. The thread starts with the first deferred send and is joined by stop().
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "lib/common/deadline.h"
#include "lib/common/status.h"

namespace collx {

class DeferredSends {
 public:
  // What the caller holds of one deferred send: whether (and how) it was posted.
  class Ticket {
   public:
    // Until posted or failed (true, *status = the post's outcome) or until `until` (false).
    bool wait(Deadline until, Status* status);
    // Never posts it after this returns true; false: it was already settled.
    bool cancel();
    bool settled();

   private:
    friend class DeferredSends;
    std::mutex mutex_;  // held by the poster while it checks and posts this entry
    std::condition_variable settled_cv_;
    bool settled_ = false;
    bool cancelled_ = false;
    Status status_;
  };
  // Non-blocking: *ready = whether the send may be posted now. A failure fails the send.
  using ReadyFn = std::function<Status(bool* ready)>;
  // Posts the send to the transport (non-blocking, as Transport::post_send).
  using PostFn = std::function<Status()>;

  DeferredSends() = default;
  ~DeferredSends();
  DeferredSends(const DeferredSends&) = delete;
  DeferredSends& operator=(const DeferredSends&) = delete;

  // True while a send to (peer, tag) waits here: a new send to them must be deferred too.
  bool holds(int peer, uint64_t tag);
  // Queues a send behind the earlier ones of (peer, tag). `ready` (nullptr: always ready) and
  // `post` run on the poster thread under the ticket's lock. Fails by `deadline` (COLLX_ERR_TIMEOUT
  // "<waits_for> did not end before the deadline", a static string) or `abort`. After stop()
  // the ticket is settled at once with stop's status. Throws std::bad_alloc /
  // std::system_error when it cannot queue or start the thread.
  std::shared_ptr<Ticket> defer(int peer, uint64_t tag, ReadyFn ready, PostFn post, Deadline deadline,
                                const std::atomic<bool>* abort, const char* waits_for);
  // Waits until every queued send was posted or failed, or until `deadline`; false then.
  bool drain(Deadline deadline);
  // Fails what is still queued with `why`, then joins the thread. Idempotent.
  void stop(const Status& why);

 private:
  struct Entry {
    int peer;
    uint64_t tag;
    ReadyFn ready;
    PostFn post;
    Deadline deadline;
    const std::atomic<bool>* abort;
    const char* waits_for;
    std::shared_ptr<Ticket> ticket;
  };
  static void settle(Ticket* ticket, Status status);
  // One pass over the queue: true when it posted or dropped anything.
  bool pass();
  void loop();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable drained_;  // entries_ became empty
  std::deque<Entry> entries_;  // in call order
  bool stopping_ = false;
  Status stopped_;  // what the sends still queued at stop() fail with
  std::thread thread_;
};

}  // namespace collx
