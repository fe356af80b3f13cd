// The TCP engine's public face: posting, waiting (leader/follower), cancel, poison, abort
// and close.
#include "transports/tcp/tcp_engine.h"

#include <errno.h>
#include <linux/sockios.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstring>
#include <thread>

#include "lib/common/log.h"
#include "transports/transport_checks.h"

namespace collx {
namespace tcp {

CompletionNotifier::~CompletionNotifier() {
  if (engine_->completions_ == before_) return;
  engine_->cv_.notify_all();
  if (engine_->in_epoll_) engine_->wake_driver();
}

TcpEngine::TcpEngine(const TcpTransportParams& params, UniqueFd listener, SocketAddress listen_address,
                     const std::vector<SocketAddress>& peer_addresses, MeshSockets sockets)
    : rank_(params.rank),
      size_(params.size),
      comm_id_(params.comm_id),
      nsocks_(params.sockets_per_peer),
      stripe_min_bytes_(params.stripe_min_bytes),
      hello_timeout_ms_(params.hello_timeout_ms),
      unacked_timeout_ms_(params.liveness.unacked_timeout_ms),
      describe_fn_(params.describe),
      listen_address_(listen_address),
      matcher_(rank_, size_, params.unexpected_max_bytes, describe_fn_, *this),
      listener_(std::move(listener)) {
  mesh_params_.rank = rank_;
  mesh_params_.size = size_;
  mesh_params_.comm_id = comm_id_;
  mesh_params_.sockets_per_peer = nsocks_;
  mesh_params_.hello_timeout_ms = hello_timeout_ms_;
  const auto now = std::chrono::steady_clock::now();
  next_unacked_check_ = now;
  peers_.resize(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    Peer& p = peers_[r];
    p.rank = r;
    p.address = peer_addresses[r].to_string();
    if (r == rank_) continue;
    for (int i = 0; i < nsocks_; ++i) {
      auto s = std::make_unique<Socket>();
      s->peer = r;
      s->index = i;
      s->fd = std::move(sockets[r][i]);
      s->token = kTokenSocketBase + static_cast<uint64_t>(r) * static_cast<uint64_t>(nsocks_) + static_cast<uint64_t>(i);
      s->rbuf.reset(new uint8_t[kRxBufferBytes]);
      s->last_write_checked = now;
      abort_fds_.push_back(s->fd.get());
      p.sockets.push_back(std::move(s));
    }
  }
}

Status TcpEngine::init() {
  std::lock_guard<std::mutex> lock(mu_);
  epoll_fd_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_fd_.valid()) return system_error("epoll_create1", errno);
  wake_fd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_fd_.valid()) return system_error("eventfd", errno);
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = kTokenWake;
  if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, wake_fd_.get(), &event) != 0) return system_error("epoll_ctl", errno);
  event.data.u64 = kTokenListener;
  if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, listener_.get(), &event) != 0) return system_error("epoll_ctl", errno);
  for (Peer& p : peers_) {
    for (auto& s : p.sockets) update_epoll(*s);
  }
  return poison_;
}

TcpEngine::~TcpEngine() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!closed_) {
    // No GOODBYE: to the peers this looks like a crashed process, which it may well be
    // (destroyed on an error path without close()).
    fds_closed_.store(true);
    while (abort_in_progress_.load() > 0) std::this_thread::yield();
    closed_ = true;
    poison_locked(make_status(COLLX_ERR_ABORTED, "rank %d: TCP transport destroyed", rank_), false);
  }
  for (Peer& p : peers_) {
    for (auto& s : p.sockets) {
      for (OutFrame* f : s->sendq) {
        if (f->op == nullptr) delete f;  // failing the requests removed every DATA frame
      }
      s->sendq.clear();
    }
  }
}

Status TcpEngine::post_send(Request* req, int peer, uint64_t tag, const void* buf, size_t bytes, const OpDesc& desc) {
  COLLX_RETURN_IF_ERROR(check_args(req, peer, buf, bytes));
  std::lock_guard<std::mutex> lock(mu_);
  COLLX_RETURN_IF_ERROR(usable_locked());
  CompletionNotifier notifier(this);
  if (peer == rank_) return matcher_.send_to_self(req, rank_, tag, buf, bytes, desc);
  Peer& p = peers_[peer];
  if (p.departed) return make_status(COLLX_ERR_REMOTE, "rank %d left the communicator", peer);

  transport::fill_posted_request(req, true, peer, tag, buf, bytes, desc);
  const std::vector<Fragment> plan = plan_fragments(bytes, nsocks_, stripe_min_bytes_);
  auto* op = new SendOp;
  op->req = req;
  op->peer = peer;
  op->frames.resize(plan.size());
  op->frames_left = plan.size();
  const uint64_t msg_id = p.next_send_id++;
  for (size_t i = 0; i < plan.size(); ++i) {
    OutFrame& f = op->frames[i];
    FrameHeader h;
    h.type = FrameType::kData;
    h.src_rank = rank_;
    h.frag_bytes = plan[i].bytes;
    h.tag = tag;
    h.msg_id = msg_id;
    h.msg_bytes = bytes;
    h.frag_offset = plan[i].offset;
    h.desc = desc;
    encode_frame_header(h, f.header);
    f.data = static_cast<const uint8_t*>(buf) + plan[i].offset;
    f.data_bytes = plan[i].bytes;
    f.op = op;
    f.socket = plan[i].socket;
  }
  req->transport_private = op;
  // Queue every fragment before writing any, so the operation cannot complete (and be
  // freed) while some of its fragments are still unqueued.
  uint64_t idle_sockets = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    Socket& s = *p.sockets[plan[i].socket];
    if (s.sendq.empty()) idle_sockets |= 1ull << plan[i].socket;
    s.sendq.push_back(&op->frames[i]);
  }
  COLLX_TRACE(NET, "rank %d: send message %" PRIu64 " to rank %d, tag 0x%" PRIx64 ", %zu bytes in %zu fragments",
              rank_, msg_id, peer, tag, bytes, plan.size());
  for (int i = 0; i < nsocks_; ++i) {
    if (idle_sockets & (1ull << i)) write_socket(*p.sockets[i]);  // latency: write now, not in the driver
  }
  return Status::Ok();
}

Status TcpEngine::post_recv(Request* req, int peer, uint64_t tag, void* buf, size_t bytes, const OpDesc& desc) {
  COLLX_RETURN_IF_ERROR(check_args(req, peer, buf, bytes));
  std::lock_guard<std::mutex> lock(mu_);
  COLLX_RETURN_IF_ERROR(usable_locked());
  CompletionNotifier notifier(this);
  return matcher_.post_recv(req, peer, tag, buf, bytes, desc, peers_[peer].departed);
}

std::string TcpEngine::wait_pending_detail(const Request& r) const {
  if (r.is_send) {
    auto* op = static_cast<const SendOp*>(r.transport_private);
    return string_printf("%" PRIu64 " sent", op ? op->payload_sent : 0);
  }
  auto* m = static_cast<const transport::InMessage*>(r.transport_private);
  return string_printf("%" PRIu64 " received", m ? m->received : 0);
}

Status TcpEngine::wait_all(Request* const* reqs, size_t count, Deadline deadline) {
  return waiter_.wait_all(mu_, reqs, count, deadline);
}

Status TcpEngine::wait_on_aborted() {
  poison_locked(aborted_status(), false);
  return aborted_status();
}

// drive_once paces itself (a short poll before the epoll sleep); it stops reading once the
// driver's own requests are done (driver_reqs_).
void TcpEngine::wait_drive(std::unique_lock<std::mutex>& lock, Request* const* reqs, size_t count, Deadline deadline,
                           transport::IdlePacer&) {
  driver_reqs_ = reqs;
  driver_count_ = count;
  drive_once(lock, deadline);
  driver_reqs_ = nullptr;
  driver_count_ = 0;
}

void TcpEngine::cancel(Request* const* reqs, size_t count) {
  std::lock_guard<std::mutex> lock(mu_);
  CompletionNotifier notifier(this);
  const Status cancelled = make_status(COLLX_ERR_ABORTED, "cancelled");
  for (size_t i = 0; i < count; ++i) {
    Request* r = reqs[i];
    if (r == nullptr || r->done()) continue;
    Peer& p = peers_[r->peer];
    if (r->is_send) {
      auto* op = static_cast<SendOp*>(r->transport_private);
      if (op == nullptr) continue;
      if (op->started()) {
        // Its bytes are partly on the wire: the stream cannot be resumed.
        poison_locked(make_status(COLLX_ERR_ABORTED,
                                  "rank %d: cancelled a send to rank %d that was partly written (%" PRIu64
                                  " of %zu bytes); the stream to rank %d is broken",
                                  rank_, r->peer, op->payload_sent, r->bytes, r->peer),
                      true);
        continue;
      }
      for (OutFrame& f : op->frames) {
        auto& queue = p.sockets[f.socket]->sendq;
        queue.erase(std::remove(queue.begin(), queue.end(), &f), queue.end());
      }
      for (auto& s : p.sockets) update_epoll(*s);
      delete op;
      matcher_.complete(r, cancelled);
    } else {
      // Partly received: the rest of its payload is read and dropped, keeping the stream in step.
      matcher_.cancel_recv(r, cancelled);
    }
  }
}

void TcpEngine::set_active_op(const OpDesc* desc) {
  std::lock_guard<std::mutex> lock(mu_);
  CompletionNotifier notifier(this);
  matcher_.set_active(desc, !closed_ && !aborted_.load(std::memory_order_acquire));
}

void TcpEngine::poison(const Status& status, bool notify_peers) {
  std::lock_guard<std::mutex> lock(mu_);
  CompletionNotifier notifier(this);
  poison_locked(status, notify_peers);
}

Status TcpEngine::health() const { return waiter_.health(mu_); }

void TcpEngine::abort() {
  aborted_.store(true);
  // No lock: abort must not wait for a thread that is inside the engine. The fds stay open
  // (closing them here could race with their use); shutdown wakes everything blocked on
  // them and shows the peers a dead connection.
  abort_in_progress_.fetch_add(1);
  if (!fds_closed_.load()) {
    for (int fd : abort_fds_) ::shutdown(fd, SHUT_RDWR);
  }
  abort_in_progress_.fetch_sub(1);
  uint64_t one = 1;
  while (::write(wake_fd_.get(), &one, sizeof one) < 0 && errno == EINTR) {
  }
  cv_.notify_all();
}

void TcpEngine::close(Deadline deadline) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  if (closed_) return;
  closed_ = true;  // from now on posts fail and waiters leave
  CompletionNotifier notifier(this);
  // Take the driver role: nobody else may touch the sockets while they are flushed.
  while (driving_) {
    wake_driver();
    cv_.wait_for(lock, std::chrono::milliseconds(10));
  }
  driving_ = true;
  const bool orderly = poison_.ok() && !aborted_.load();
  if (orderly) {
    for (Peer& p : peers_) {
      if (p.departed) continue;
      for (auto& s : p.sockets) {
        if (s->send_broken) continue;
        queue_control_frame(*s, FrameType::kGoodbye, 0, "");
        write_socket(*s);
      }
    }
    flush_for_close(lock, deadline);
  }
  poison_locked(make_status(COLLX_ERR_ABORTED, "rank %d: the TCP transport is closed", rank_), false);
  close_sockets(lock, orderly, deadline);
  driving_ = false;
  cv_.notify_all();
  auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  COLLX_INFO(NET, "rank %d: TCP transport closed (%s) in %lld ms", rank_, orderly ? "orderly" : "after a failure",
             static_cast<long long>(elapsed.count()));
}

// Writes what is queued (pending sends, then GOODBYE) until written or the deadline.
void TcpEngine::flush_for_close(std::unique_lock<std::mutex>& lock, Deadline deadline) {
  std::vector<pollfd> fds;
  std::vector<Socket*> sockets;
  for (;;) {
    fds.clear();
    sockets.clear();
    for (Peer& p : peers_) {
      for (auto& s : p.sockets) {
        if (s->sendq.empty() || s->send_broken || s->mid_frame || !s->fd.valid()) continue;
        fds.push_back(pollfd{s->fd.get(), POLLOUT, 0});
        sockets.push_back(s.get());
      }
    }
    if (fds.empty() || deadline.expired() || aborted_.load()) return;
    lock.unlock();
    int n = ::poll(fds.data(), fds.size(), deadline.remaining_ms(100));
    int error = errno;
    lock.lock();
    if (n < 0 && error != EINTR) return;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents) write_socket(*sockets[i]);
    }
  }
}

void TcpEngine::close_sockets(std::unique_lock<std::mutex>& lock, bool orderly, Deadline deadline) {
  fds_closed_.store(true);
  while (abort_in_progress_.load() > 0) std::this_thread::yield();
  if (orderly) {
    for (Peer& p : peers_) {
      for (auto& s : p.sockets) ::shutdown(s->fd.get(), SHUT_WR);
    }
    // Closing a socket that holds unread input resets the connection, and a reset throws
    // away whatever the peer's kernel has not acknowledged yet (our GOODBYE). So wait (a
    // little) until everything is acknowledged, then drain what nobody will read. Briefly:
    // a peer that is itself closing other communicators may not acknowledge in time, and
    // ranks closing many communicators in different orders would otherwise wait on each
    // other in turn (8 ranks x 9 grid communicators took 40 s with a 1 s cap). The cost of
    // giving up is only a peer reporting "died" instead of "left" if it still needed us.
    Deadline drain = deadline.min(Deadline::after_ms(50));
    int sleep_us = 100;
    for (;;) {
      bool unacknowledged = false;
      for (Peer& p : peers_) {
        for (auto& s : p.sockets) {
          int queued = 0;
          if (!s->send_broken && ::ioctl(s->fd.get(), SIOCOUTQ, &queued) == 0 && queued > 0) unacknowledged = true;
        }
      }
      if (!unacknowledged || drain.expired()) break;
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
      lock.lock();
      sleep_us = std::min(sleep_us * 2, 20000);
    }
  }
  // Also after a failure: unread input at close() makes the kernel send a reset, and a reset
  // can destroy the POISON frame this rank just sent, so a peer would blame this rank for a
  // failure it only passed on. Drain what is there now.
  uint8_t sink[4096];
  for (Peer& p : peers_) {
    for (auto& s : p.sockets) {
      for (int i = 0; i < 256 && ::recv(s->fd.get(), sink, sizeof sink, MSG_DONTWAIT) > 0; ++i) {
      }
    }
  }
  for (Peer& p : peers_) {
    for (auto& s : p.sockets) {
      s->fd.reset();
      s->registered = false;
    }
  }
  strays_.clear();
  listener_.reset();
}

}  // namespace tcp
}  // namespace collx
