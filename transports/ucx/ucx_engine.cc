// The UCX engine's public face: posting, waiting (leader/follower; the driver sleeps on the
// worker's event fd), cancel, poison, abort and close.
#ifdef COLLX_HAVE_UCX
#include "transports/ucx/ucx_engine.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>

#include "lib/common/log.h"
#include "transports/transport_checks.h"

namespace collx {
namespace ucx {

namespace {
// A driver with nothing to do yields this long before it arms the worker and sleeps: a
// reply from a peer running right now costs no wake-up, an idle rank costs no CPU.
constexpr int64_t kSpinUs = 50;
// Longest sleep in poll(): bounds how late a dead same-host peer (which wakes nobody) is seen.
constexpr int kMaxSleepMs = 100;
}  // namespace

UcxEngine::UcxEngine(const UcxTransportParams& params)
    : rank_(params.rank), size_(params.size), comm_id_(params.comm_id), describe_fn_(params.describe) {
  for (int r = 0; r < size_; ++r) {
    auto p = std::make_unique<Peer>();
    p->engine = this;
    p->rank = r;
    peers_.push_back(std::move(p));
  }
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

void UcxEngine::wake() {
  cv_.notify_all();
  if (sleeping_ && wake_fd_ >= 0) {
    uint64_t one = 1;
    ssize_t n = ::write(wake_fd_, &one, sizeof one);
    (void)n;  // EAGAIN: already signalled
  }
}

Status UcxEngine::post_send(Request* req, int peer, uint64_t tag, const void* buf, size_t bytes,
                            const OpDesc& desc) {
  COLLX_RETURN_IF_ERROR(transport::check_post_args(req, peer, size_, buf, bytes));
  std::lock_guard<std::mutex> lock(mu_);
  COLLX_RETURN_IF_ERROR(usable_locked());
  Peer& p = *peers_[peer];
  if (p.departed) return make_status(COLLX_ERR_REMOTE, "rank %d left the communicator", peer);
  transport::fill_posted_request(req, true, peer, tag, buf, bytes, desc);
  Status status = send_message(p, MsgType::kData, req, tag, buf, bytes, desc);
  wake();  // a sleeping driver progresses it (UCX may need progress to push it out)
  return status;
}

Status UcxEngine::post_recv(Request* req, int peer, uint64_t tag, void* buf, size_t bytes, const OpDesc& desc) {
  COLLX_RETURN_IF_ERROR(transport::check_post_args(req, peer, size_, buf, bytes));
  std::lock_guard<std::mutex> lock(mu_);
  COLLX_RETURN_IF_ERROR(usable_locked());
  const uint64_t before = completions_;
  Status status = matcher_.post_recv(req, peer, tag, buf, bytes, desc, peers_[peer]->departed);
  if (completions_ != before) wake();
  return status;
}

std::string UcxEngine::wait_pending_detail(const Request& r) const {
  if (r.is_send) return transport::tag_text(r.tag);
  return string_printf("%s, %s", transport::tag_text(r.tag).c_str(),
                       r.transport_private ? "announced, data in flight" : "nothing announced yet");
}

// Nothing moved: arm the worker and sleep on its event fd (and our wake fd) without the
// mutex, at most kMaxSleepMs so dead same-host peers are still noticed.
void UcxEngine::idle_wait(std::unique_lock<std::mutex>& lock, Deadline deadline) {
  ucs_status_t armed = ucp_worker_arm(worker_);
  if (armed == UCS_ERR_BUSY) return;  // events pending: progress again
  if (armed != UCS_OK) {
    // Should not happen; fall back to a short sleep rather than a spin.
    lock.unlock();
    ::usleep(1000);
    lock.lock();
    return;
  }
  pollfd fds[2] = {{efd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  const int timeout = deadline.remaining_ms(kMaxSleepMs);
  sleeping_ = true;
  lock.unlock();
  if (!aborted_.load(std::memory_order_acquire)) ::poll(fds, 2, std::max(timeout, 1));
  lock.lock();
  sleeping_ = false;
  uint64_t drained;
  while (::read(wake_fd_, &drained, sizeof drained) > 0) {
  }
}

Status UcxEngine::wait_all(Request* const* reqs, size_t count, Deadline deadline) {
  return waiter_.wait_all(mu_, reqs, count, deadline);
}

Status UcxEngine::wait_on_aborted() {
  abort_locked();
  return aborted_status();
}

// Progress the worker; with nothing to do yield for kSpinUs, then arm it and sleep.
void UcxEngine::wait_drive(std::unique_lock<std::mutex>& lock, Request* const*, size_t, Deadline deadline,
                           transport::IdlePacer& pacer) {
  pacer.pace(progress(), kSpinUs, lock, [&] { idle_wait(lock, deadline); });
}

void UcxEngine::cancel(Request* const* reqs, size_t count) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t before = completions_;
  const Status cancelled = make_status(COLLX_ERR_ABORTED, "cancelled");
  bool broken = false;
  for (size_t i = 0; i < count; ++i) {
    Request* r = reqs[i];
    if (r == nullptr || r->done()) continue;
    if (r->is_send) {
      // Its header is on the wire: the peer will expect the message, so the stream to it is
      // broken. (Poisoning below also makes UCX let go of the buffer.)
      broken = true;
      auto* op = static_cast<SendOp*>(r->transport_private);
      if (op) op->req = nullptr;
    } else if (auto* m = static_cast<InMsg*>(r->transport_private)) {
      m->recv = nullptr;  // its data receive is cancelled in UCX below
      if (m->data_req) ucp_request_cancel(worker_, m->data_req);
    } else {
      matcher_.cancel_recv(r, cancelled);  // only posted
      continue;
    }
    r->transport_private = nullptr;
    complete_request(r, cancelled);
    if (r->is_send && poison_.ok()) {
      poison_locked(make_status(COLLX_ERR_ABORTED,
                                "rank %d: cancelled a send to rank %d (%zu bytes) that was already announced; the "
                                "stream to rank %d is broken",
                                rank_, r->peer, r->bytes, r->peer),
                    true);
    }
  }
  // The contract: no buffer of a cancelled request is touched once cancel returns.
  release_user_buffers(broken ? 1000 : 200);
  if (completions_ != before) wake();
}

void UcxEngine::set_active_op(const OpDesc* desc) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool was_healthy = poison_.ok();
  matcher_.set_active(desc, !closed_ && !aborted_.load(std::memory_order_acquire));
  if (was_healthy && !poison_.ok()) wake();
}

void UcxEngine::poison(const Status& status, bool notify_peers) {
  std::lock_guard<std::mutex> lock(mu_);
  poison_locked(status, notify_peers);
  wake();
}

Status UcxEngine::health() const { return waiter_.health(mu_); }

void UcxEngine::abort() {
  aborted_.store(true, std::memory_order_release);
  // Cut the connections now when nobody is inside the engine; else the thread inside does
  // it when it sees the flag (a sleeping driver is woken by the eventfd).
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (lock.owns_lock()) abort_locked();
  if (wake_fd_ >= 0) {
    uint64_t one = 1;
    ssize_t n = ::write(wake_fd_, &one, sizeof one);
    (void)n;
  }
  cv_.notify_all();
}

// Becomes the driver (waking the current one), so close() alone talks to UCX.
void UcxEngine::take_driver(std::unique_lock<std::mutex>& lock) {
  while (driving_) {
    wake();
    cv_.wait_for(lock, std::chrono::milliseconds(10));
  }
  driving_ = true;
}

void UcxEngine::close(Deadline deadline) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  if (closed_) return;
  take_driver(lock);
  if (aborted_.load()) abort_locked();
  // Sends already posted are delivered (large ones need the receiver to take them).
  auto user_sends_pending = [this] {
    for (SendOp* op : sends_) {
      if (op->req != nullptr) return true;
    }
    return false;
  };
  while (poison_.ok() && user_sends_pending() && !deadline.expired()) {
    if (!progress()) idle_wait(lock, deadline.min(Deadline::after_ms(10)));
  }
  bool orderly = poison_.ok() && !aborted_.load();
  if (orderly && user_sends_pending()) {
    poison_locked(make_status(COLLX_ERR_TIMEOUT, "rank %d closed with sends not delivered", rank_), true);
    orderly = false;
  }
  if (orderly) {
    for (auto& p : peers_) {
      if (p->rank != rank_ && !p->ep_failed && !p->departed) {
        send_message(*p, MsgType::kGoodbye, nullptr, 0, nullptr, 0, OpDesc{}).ignore();
      }
    }
    drain(std::max(deadline.remaining_ms(1000), 1), &UcxEngine::control_sends_done);
  }
  closed_ = true;
  poison_locked(make_status(COLLX_ERR_ABORTED, "rank %d: the ucx transport is closed", rank_), false);
  for (auto& p : peers_) force_close(*p);
  drain(200, &UcxEngine::no_ucx_requests);
  driving_ = false;
  cv_.notify_all();
  auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  COLLX_INFO(NET, "rank %d: ucx transport closed (%s) in %lld ms", rank_, orderly ? "orderly" : "after a failure",
             static_cast<long long>(elapsed.count()));
}

UcxEngine::~UcxEngine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (worker_ != nullptr) {
      if (!closed_) {
        // Not closed in order: abortive, like abort(). Peers see the endpoints go (a
        // failure that poisoned us was already sent to them when it was meant to be).
        closed_ = true;
        poison_locked(make_status(COLLX_ERR_ABORTED, "rank %d: ucx transport destroyed", rank_), false);
        for (auto& p : peers_) force_close(*p);
      }
      for (auto& slot : slots_) {
        if (slot->req) ucp_request_cancel(worker_, slot->req);
      }
      drain(1000, &UcxEngine::no_ucx_requests);
      if (!no_ucx_requests()) {
        // UCX asserts when a worker is destroyed under live requests (a flushing endpoint
        // to a dead peer): leak the worker and context rather than abort the process.
        COLLX_WARN(NET, "rank %d: UCX still holds requests at destruction; leaking its worker", rank_);
        // Leak what UCX may still call back into; its callbacks then only free the request.
        for (SendOp* op : sends_) op->engine = nullptr;
        for (InMsg* m : receiving_) m->engine = nullptr;
        for (auto& slot : slots_) {
          slot->engine = nullptr;
          (void)slot.release();
        }
        sends_.clear();
        receiving_.clear();
        slots_.clear();
        worker_ = nullptr;
        context_ = nullptr;
      } else {
        ucp_worker_destroy(worker_);
        worker_ = nullptr;
      }
    }
    if (context_ && worker_ == nullptr) ucp_cleanup(context_);
    context_ = nullptr;
  }
  for (SendOp* op : sends_) delete op;
  for (InMsg* m : receiving_) delete m;
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

}  // namespace ucx
}  // namespace collx
#endif  // COLLX_HAVE_UCX
