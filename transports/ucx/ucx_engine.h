// The UCX transport's engine. Internal to transports/ucx; compiled only with UCX.
//
// Threads: every public method is thread-safe; one mutex guards all state AND every call
// into UCX (the worker is created UCS_THREAD_MODE_SERIALIZED), so UCX completion callbacks
// always run with the mutex held and never take it. No progress thread: a thread in
// wait_all becomes the driver (ucp_worker_progress, then ucp_worker_arm + poll on the
// worker's event fd without the mutex); other waiters sleep on a condition variable.
// abort() takes the mutex only if it is free (try_lock).
//
// Files: ucx_engine.cc (public API, waiting), ucx_progress.cc (sending, callbacks,
// headers, matching, driver round), ucx_failure.cc (peers' failures, poison, abort,
// releasing buffers), ucx_transport.cc (setup), ucx_wireup.cc (connecting at creation).
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "lib/common/exception_status.h"
#include "transports/common/engine_overrides.h"
#include "transports/common/matcher.h"
#include "transports/common/wait_driver.h"
#include "transports/ucx/ucx_liveness.h"
#include "transports/ucx/ucx_transport.h"
#include "transports/ucx/ucx_wire.h"

namespace collx {
namespace ucx {

using transport::OpDesc;
using transport::Request;

class UcxEngine;

// A send in UCX's hands: its header message and (large messages) its data message. Owned by
// the engine until UCX released both, even when the user's request was failed earlier.
struct SendOp {
  UcxEngine* engine = nullptr;
  Request* req = nullptr;       // null for control messages, or once the request was failed
  int peer = 0;
  int pending = 0;              // UCX requests not yet completed
  void* data_req = nullptr;     // UCX request reading the user buffer (large messages)
  std::vector<uint8_t> header;  // header (+ inline payload) kept alive for UCX
  Status failure;               // first UCX error of its requests
};

// A message announced by a header, waiting for its receive (in the matcher: an inline
// payload is staged there) or being received (released by the matcher into receiving_;
// `recv` is null once cancelled / failed).
struct InMsg : transport::InMessage {
  UcxEngine* engine = nullptr;
  void* data_req = nullptr;      // UCX receive of the DATA message into recv->buffer
};

// A pre-posted receive for header messages from any peer.
struct HeaderSlot {
  UcxEngine* engine = nullptr;
  std::vector<uint8_t> buf;
  void* req = nullptr;
};

// A header that arrived (copied out of its slot), processed in msg_id order per peer.
struct Arrival {
  uint64_t ucx_tag = 0;
  std::vector<uint8_t> bytes;
};

struct Peer {
  UcxEngine* engine = nullptr;
  int rank = 0;
  ucp_ep_h ep = nullptr;
  bool ep_failed = false;   // UCX reported an error on it (or we force-closed it)
  bool departed = false;    // its GOODBYE was processed
  bool failure_reported = false;
  bool peer_errors = true;  // endpoint created with UCP_ERR_HANDLING_MODE_PEER (force close allowed)
  std::string failure;      // why its endpoint failed
  PeerProcess process;      // same-host peers: is the process alive
  int64_t pid = 0;
  uint64_t next_send_id = 1;
  uint64_t next_recv_id = 1;
  std::map<uint64_t, Arrival> early;  // headers that overtook an earlier one
};

// The note every rank sends every peer once at creation (ucx_wireup.cc).
struct WireupNote {
  uint32_t magic;
  int32_t rank;
  uint64_t comm_id;
};

// One UCX operation of that exchange, polled rather than called back.
struct WireupOp {
  enum Kind { kRecv, kSend, kFlush } kind;
  int peer;
  void* req;
};

class UcxEngine final : public transport::Transport, private transport::WaitHooks, private transport::MatchHooks {
 public:
  explicit UcxEngine(const UcxTransportParams& params);
  ~UcxEngine() override;

  // Setup (ucx_transport.cc).
  Status init_worker();
  Status local_address(std::vector<uint8_t>* blob);
  Status connect(const std::vector<std::vector<uint8_t>>& blobs);
  // Connects every endpoint now rather than at first use (ucx_wireup.cc), within `deadline`.
  Status wire_up(Deadline deadline);

  const char* name() const override { return "ucx"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  COLLX_TRANSPORT_ENGINE_OVERRIDES;

  // ---- UCX callbacks (mutex held: only called from inside our own UCX calls).
  void on_send_done(SendOp* op, void* request, ucs_status_t status);
  void on_header(HeaderSlot* slot, void* request, ucs_status_t status, const ucp_tag_recv_info_t* info);
  void on_data(InMsg* m, void* request, ucs_status_t status, const ucp_tag_recv_info_t* info);
  void on_ep_error(Peer* p, ucs_status_t status);
  // Runs a callback's body. An exception (an allocation failure) must not unwind through
  // UCX's C frames, which would leave the worker mid-progress (UCX then aborts the process):
  // it stops here and fails the engine once the progress call has returned.
  template <typename Body>
  void run_callback(Body&& body) noexcept {
    try {
      body();
    } catch (...) {
      defer_poison(current_exception_status("ucx transport: a completion callback"), true);
    }
  }

 private:
  // ---- ucx_engine.cc
  Status usable_locked() { return waiter_.usable(); }  // under mu_
  Status aborted_status() const { return waiter_.aborted_status(); }
  COLLX_WAIT_HOOKS_OVERRIDES;  // for waiter_
  // transport::MatchHooks, for matcher_ (ucx_progress.cc). No budget: UCX buffers unexpected
  // data itself, so nothing pauses.
  void matcher_poison(const Status& status, bool notify_peers) override;
  void matcher_resume(int) override {}
  void matcher_took_unexpected(transport::InMessage* m) override;
  void idle_wait(std::unique_lock<std::mutex>& lock, Deadline deadline);
  void wake();
  void take_driver(std::unique_lock<std::mutex>& lock);

  // ---- ucx_wireup.cc
  Status await_wireup(std::unique_lock<std::mutex>& lock, std::vector<WireupOp>& ops, Deadline deadline);

  // ---- ucx_progress.cc and ucx_failure.cc
  bool progress();  // one driver round; true if anything moved
  bool process_arrivals();
  void repost_header_slots();
  void handle_header(Peer& p, Arrival& a);
  void handle_data_header(Peer& p, const WireHeader& h, const uint8_t* payload);
  void start_data(Peer& p, InMsg* m);
  Status send_message(Peer& p, MsgType type, Request* req, uint64_t tag, const void* buf, size_t bytes,
                      const OpDesc& desc, collx_status_t code = COLLX_OK);
  void complete_request(Request* r, Status status);
  void check_peers(bool force);
  void peer_departed(Peer& p);
  void fail_peer_requests(Peer& p, const Status& status);
  void poison_locked(const Status& status, bool notify_peers, bool release = true);
  void defer_poison(Status status, bool notify_peers);  // from callbacks: applied after progress
  void release_user_buffers(int64_t budget_ms);
  void cancel_data_receives(bool detached_only);
  void finish_send(SendOp* op);
  Status post_header_slot(HeaderSlot* slot);
  void take_header(HeaderSlot* slot, const ucp_tag_recv_info_t& info);
  void finish_data(InMsg* m, ucs_status_t status, size_t length);
  void force_close(Peer& p);
  void abort_locked();
  void drain(int64_t budget_ms, bool (UcxEngine::*done)());
  bool no_user_buffers_in_ucx();
  bool no_ucx_requests();
  bool control_sends_done();

  const int rank_;
  const int size_;
  const uint64_t comm_id_;
  const transport::DescribeFn describe_fn_;

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int efd_ = -1;     // the worker's event fd
  int wake_fd_ = -1; // eventfd: abort, posts and completions by other threads wake the driver

  std::atomic<bool> aborted_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool driving_ = false;
  bool sleeping_ = false;  // the driver is in poll()
  bool abort_done_ = false;
  // Posted and unexpected messages, active op, poison, completions.
  transport::Matcher matcher_{rank_, size_, SIZE_MAX, describe_fn_, *this};
  const Status& poison_ = matcher_.poison();
  const uint64_t& completions_ = matcher_.completions();
  bool closed_ = false;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::vector<std::unique_ptr<HeaderSlot>> slots_;
  std::deque<Arrival> arrivals_;
  std::unordered_set<SendOp*> sends_;   // owned
  std::unordered_set<InMsg*> receiving_;  // owned: data receives in UCX's hands
  std::vector<void*> closing_;            // endpoint close requests
  InMsg* posting_ = nullptr;              // its data receive is being posted (see start_data)
  int64_t last_liveness_us_ = 0;
  WireupNote wireup_out_{};              // kept for UCX while a wire-up send may be queued
  std::vector<WireupNote> wireup_in_;    // per peer; kept for the worker's life
  Status deferred_poison_;
  bool deferred_notify_ = false;
  // Unlike tcp and shm, an expired deadline is reported at once (no extra progress pass).
  transport::WaitDriver waiter_{*this, {cv_, driving_, completions_, aborted_, poison_, closed_}, rank_, "ucx",
                                transport::WaitDriver::ExpiredDeadline::kReportAtOnce};  // last: refers to the above
};

// Marks a UCX request pointer field while the posting call runs: a callback that fires
// inside the call clears it, so the returned (already released) pointer is not stored.
inline void* const kPosting = reinterpret_cast<void*>(uintptr_t{1});

}  // namespace ucx
}  // namespace collx
