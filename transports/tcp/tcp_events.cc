// Event handling of the TCP engine: one driver round (epoll_wait without the mutex, events
// with it), epoll registration, late connections to the listen port, and what happens when
// a peer leaves, dies or misbehaves (departure, poison).
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "lib/common/log.h"
#include "transports/tcp/tcp_engine.h"

namespace collx {
namespace tcp {

namespace {
// The driver re-checks deadlines, aborts and late connections at least this often.
constexpr int kMaxEpollWaitMs = 100;
// Before sleeping in epoll_wait, poll this long, yielding the CPU between polls. A sleeping
// waiter costs a wake-up (tens of microseconds on VMs) per message; with more ranks than
// cores the yield hands the core to the peer that is about to send. Never a bare spin.
constexpr auto kPollBeforeSleep = std::chrono::microseconds(50);
constexpr size_t kMaxStrays = 64;
}  // namespace

void TcpEngine::drive_once(std::unique_lock<std::mutex>& lock, Deadline deadline) {
  if (!ready_.empty()) {
    process_ready();
    if (driver_satisfied()) return;
  }
  int timeout = ready_.empty() ? deadline.remaining_ms(kMaxEpollWaitMs) : 0;
  in_epoll_ = true;
  lock.unlock();
  const int max_events = static_cast<int>(sizeof events_ / sizeof events_[0]);
  int n = ::epoll_wait(epoll_fd_.get(), events_, max_events, 0);
  if (n == 0 && timeout > 0) {
    const auto poll_until = std::chrono::steady_clock::now() + kPollBeforeSleep;
    do {
      sched_yield();
      n = ::epoll_wait(epoll_fd_.get(), events_, max_events, 0);
    } while (n == 0 && std::chrono::steady_clock::now() < poll_until);
    if (n == 0) n = ::epoll_wait(epoll_fd_.get(), events_, max_events, timeout);
  }
  int error = errno;
  lock.lock();
  in_epoll_ = false;
  if (aborted_.load(std::memory_order_acquire) || closed_) return;
  if (n < 0) {
    if (error != EINTR) poison_locked(system_error("epoll_wait", error), false);
    return;
  }
  // Events left unhandled once the driver's requests are done stay pending (level-triggered).
  uint64_t seen = completions_;
  for (int i = 0; i < n && poison_.ok(); ++i) {
    handle_event(events_[i].data.u64, events_[i].events);
    if (completions_ != seen) {
      seen = completions_;
      if (driver_satisfied()) break;
    }
  }
  if (poison_.ok() && !driver_satisfied()) process_ready();
  if (!strays_.empty()) expire_strays();
  if (unacked_timeout_ms_ > 0 && poison_.ok()) check_unacked_data();
}

bool TcpEngine::driver_satisfied() const {
  if (driver_reqs_ == nullptr) return false;
  for (size_t i = 0; i < driver_count_; ++i) {
    const Request* r = driver_reqs_[i];
    if (r != nullptr && !r->done()) return false;
  }
  return true;
}

void TcpEngine::handle_event(uint64_t token, uint32_t events) {
  if (token == kTokenWake) {
    uint64_t value;
    while (::read(wake_fd_.get(), &value, sizeof value) < 0 && errno == EINTR) {
    }
    wake_pending_ = false;
    return;
  }
  if (token == kTokenListener) {
    accept_strays();
    return;
  }
  if (token & kStrayTokenBit) {
    service_stray(token & ~kStrayTokenBit);
    return;
  }
  uint64_t index = token - kTokenSocketBase;
  int peer = static_cast<int>(index / static_cast<uint64_t>(nsocks_));
  if (peer < 0 || peer >= size_ || peers_[peer].sockets.empty()) return;
  Socket& s = *peers_[peer].sockets[index % static_cast<uint64_t>(nsocks_)];
  const bool reading = s.rx == RxState::kHeader || s.rx == RxState::kPayload;
  if (reading && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
    s.maybe_drained = false;
    read_socket(s);
  } else if (!reading && s.rx != RxState::kClosed && (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
    // A paused socket whose peer shut down or reset: everything it sent must be read (its
    // GOODBYE or the reason it failed are in there), budget or not.
    s.rdhup = true;
    if (events & (EPOLLHUP | EPOLLERR)) s.hup = true;
    Peer& p = peers_[peer];
    if (!p.closing) {
      p.closing = true;
      matcher_.resume_paused();
    }
    update_epoll(s);
  }
  if (!poison_.ok()) return;
  if ((events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) && !s.sendq.empty()) write_socket(s);
  if (s.rx == RxState::kClosed) update_epoll(s);
}

// Keeps the socket's epoll interest in step with its state. Level-triggered: a socket is
// only armed for input while its input is wanted, and leaves the set once it can only
// report a hang-up nobody will act on (else epoll_wait would return at once forever).
void TcpEngine::update_epoll(Socket& s) {
  if (!s.fd.valid() || closed_) return;
  const bool reading = s.rx == RxState::kHeader || s.rx == RxState::kPayload;
  uint32_t want = 0;
  if (reading) {
    want |= EPOLLIN | EPOLLRDHUP;
  } else if (s.rx != RxState::kClosed && !s.rdhup) {
    want |= EPOLLRDHUP;
  }
  if (!s.sendq.empty() && !s.send_broken && !s.mid_frame) want |= EPOLLOUT;
  const bool stay = want != 0 || (s.rx != RxState::kClosed && !s.hup);
  if (!stay) {
    if (s.registered) {
      ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, s.fd.get(), nullptr);
      s.registered = false;
      s.armed = 0;
    }
    return;
  }
  if (s.registered && s.armed == want) return;
  epoll_event event{};
  event.events = want;
  event.data.u64 = s.token;
  int rc = ::epoll_ctl(epoll_fd_.get(), s.registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, s.fd.get(), &event);
  if (rc != 0) {
    poison_locked(system_error("epoll_ctl", errno), false);
    return;
  }
  s.registered = true;
  s.armed = want;
}

// Input that epoll will not report (parsed headers of a resumed socket, bytes left in its
// buffer) is handled by the driver's next round.
void TcpEngine::schedule_read(Socket& s) {
  if (s.in_ready) return;
  s.in_ready = true;
  ready_.push_back(&s);
  if (in_epoll_) wake_driver();
}

void TcpEngine::process_ready() {
  std::vector<Socket*> batch;
  batch.swap(ready_);
  for (Socket* s : batch) s->in_ready = false;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!poison_.ok() || aborted_.load(std::memory_order_relaxed)) return;
    if (driver_satisfied()) {
      for (; i < batch.size(); ++i) schedule_read(*batch[i]);  // for the next round
      return;
    }
    if (batch[i]->rx != RxState::kClosed) read_socket(*batch[i]);
  }
}

void TcpEngine::wake_driver() {
  if (wake_pending_) return;
  wake_pending_ = true;
  uint64_t one = 1;
  while (::write(wake_fd_.get(), &one, sizeof one) < 0 && errno == EINTR) {
  }
}

// ---- late connections -----------------------------------------------------------------------

void TcpEngine::accept_strays() {
  for (;;) {
    sockaddr_storage remote{};
    socklen_t length = sizeof remote;
    int fd = ::accept4(listener_.get(), reinterpret_cast<sockaddr*>(&remote), &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      // Out of fds or similar: level-triggered epoll would report the pending connection
      // forever, so stop watching the listener.
      COLLX_WARN(NET, "rank %d: accept on the listen port failed: %s; late connections are no longer accepted", rank_,
                 errno_string(errno).c_str());
      ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, listener_.get(), nullptr);
      return;
    }
    if (strays_.size() >= kMaxStrays) drop_stray(strays_.begin()->first, "too many unidentified connections");
    uint64_t id = next_stray_id_++;
    Stray& stray = strays_[id];
    stray.fd.reset(fd);
    stray.remote = address_from_sockaddr(reinterpret_cast<sockaddr*>(&remote), length).to_string();
    stray.accepted_at = std::chrono::steady_clock::now();
    epoll_event event{};
    event.events = EPOLLIN | EPOLLRDHUP;
    event.data.u64 = kStrayTokenBit | id;
    if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &event) != 0) {
      drop_stray(id, "epoll_ctl failed: " + errno_string(errno));
    }
  }
}

// Reads a late connection's HELLO. The mesh is complete, so whatever it says, the
// connection is dropped; the warning says why.
void TcpEngine::service_stray(uint64_t id) {
  auto it = strays_.find(id);
  if (it == strays_.end()) return;
  Stray& stray = it->second;
  while (stray.got < kHelloBytes) {
    ssize_t n = ::recv(stray.fd.get(), stray.hello + stray.got, kHelloBytes - stray.got, 0);
    if (n > 0) {
      stray.got += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    drop_stray(id, string_printf("closed before a complete HELLO (%zu of %zu bytes)", stray.got, kHelloBytes));
    return;
  }
  Hello hello;
  std::string why;
  if (decode_hello(stray.hello, &hello, &why)) {
    bool fatal = false;
    why = hello_rejection(hello, mesh_params_, [](int, int) { return true; }, &fatal);
  }
  drop_stray(id, why);
}

void TcpEngine::drop_stray(uint64_t id, const std::string& reason) {
  auto it = strays_.find(id);
  if (it == strays_.end()) return;
  COLLX_WARN(NET, "rank %d: dropped connection from %s on the listen port: %s", rank_, it->second.remote.c_str(),
             reason.c_str());
  ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, it->second.fd.get(), nullptr);
  strays_.erase(it);
}

void TcpEngine::expire_strays() {
  auto now = std::chrono::steady_clock::now();
  std::vector<uint64_t> expired;
  for (auto& [id, stray] : strays_) {
    if (now - stray.accepted_at > std::chrono::milliseconds(hello_timeout_ms_)) expired.push_back(id);
  }
  for (uint64_t id : expired) drop_stray(id, string_printf("no HELLO within %d ms", hello_timeout_ms_));
}

// ---- failures -------------------------------------------------------------------------------

// Other peers whose connections have ended too, as " (also lost: rank 3, rank 5)". When a rank
// dies, the survivors that notice first fail and leave, and a slower survivor may see one of
// them leave before it reads the dead rank's end of stream; naming every connection already
// gone keeps the rank that really died in the report.
std::string TcpEngine::other_lost_peers(int reported) const {
  std::string lost;
  for (const Peer& p : peers_) {
    if (p.rank == reported || p.rank == rank_ || p.departed) continue;
    for (const auto& s : p.sockets) {
      if (!s->fd.valid()) continue;
      pollfd fd{s->fd.get(), POLLRDHUP, 0};
      if (::poll(&fd, 1, 0) == 1 && (fd.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
        lost += (lost.empty() ? " (also lost: rank " : ", rank ") + std::to_string(p.rank);
        break;
      }
    }
  }
  return lost.empty() ? lost : lost + ")";
}

// How the kernel fails an established connection when keepalive or the user timeout gives up
// on a silent peer: ETIMEDOUT, or the last ICMP or routing error it saw meanwhile (a host or
// network unreachable), which it keeps as the socket's "soft" error until then.
static bool silent_peer_error(int error) {
  return error == ETIMEDOUT || error == EHOSTUNREACH || error == ENETUNREACH || error == EHOSTDOWN ||
         error == ENETDOWN;
}

// The read side of `s` ended (error 0: end of stream). After GOODBYE that is orderly;
// otherwise the peer died or aborted.
void TcpEngine::on_stream_end(Socket& s, int error) {
  Peer& p = peers_[s.peer];
  if (aborted_.load(std::memory_order_relaxed)) {  // our own abort shut the socket down
    s.rx = RxState::kClosed;
    poison_locked(aborted_status(), false);
    return;
  }
  const bool mid_frame = s.rx == RxState::kPayload || s.rlen > s.rpos;
  if (error == 0 && silent_peer_error(s.send_errno)) error = s.send_errno;  // it went silent while we sent
  s.rx = RxState::kClosed;
  if (s.goodbye_received && !mid_frame) {
    update_epoll(s);
    return;
  }
  // A failing peer sends POISON on one socket and shuts all of them: read its other
  // sockets first so the report carries its own reason when it sent one.
  for (auto& other : p.sockets) {
    if (other.get() != &s && (other->rx == RxState::kHeader || other->rx == RxState::kPayload)) {
      other->maybe_drained = false;
      read_socket(*other);
      if (!poison_.ok()) return;
    }
  }
  std::string reason = error != 0 ? errno_string(error)
                                  : (mid_frame ? "connection closed in the middle of a frame" : "connection closed");
  if (silent_peer_error(error)) {
    poison_locked(unreachable_status(p, reason), false);
    return;
  }
  poison_locked(make_status(COLLX_ERR_REMOTE, "lost connection to rank %d (%s): %s; rank %d died or aborted%s", p.rank,
                            p.address.c_str(), reason.c_str(), p.rank, other_lost_peers(p.rank).c_str()),
                false);
}

// Keepalive, the user timeout or the unacknowledged-data check gave up: the peer's host
// stopped answering (network partition, host down), not a process that exited.
Status TcpEngine::unreachable_status(const Peer& p, const std::string& reason) const {
  return make_status(COLLX_ERR_REMOTE,
                     "lost connection to rank %d (%s): %s; rank %d is unreachable: its host stopped acknowledging "
                     "TCP (COLLX_TCP_KEEPALIVE_*, COLLX_TCP_UNACKED_TIMEOUT_MS, COLLX_TCP_USER_TIMEOUT_MS)%s",
                     p.rank, p.address.c_str(), reason.c_str(), p.rank, other_lost_peers(p.rank).c_str());
}

// A write failed: the peer closed or reset the connection. Whether it left (GOODBYE) or
// died is decided by reading what it sent, so make sure that gets read.
void TcpEngine::on_send_error(Socket& s, int error) {
  s.send_broken = true;
  s.send_errno = error;
  Peer& p = peers_[s.peer];
  COLLX_TRACE(NET, "rank %d: write to rank %d (socket %d) failed: %s", rank_, p.rank, s.index,
              errno_string(error).c_str());
  if (!p.closing) {
    p.closing = true;
    matcher_.resume_paused();
  }
  if (s.rx == RxState::kHeader || s.rx == RxState::kPayload) schedule_read(s);
  update_epoll(s);
}

void TcpEngine::peer_departed(Peer& p) {
  p.departed = true;
  COLLX_INFO(NET, "rank %d: rank %d left the communicator", rank_, p.rank);
  std::vector<SendOp*> ops;
  fail_peer_requests(p, make_status(COLLX_ERR_REMOTE, "rank %d left the communicator", p.rank), &ops);
  for (SendOp* op : ops) delete op;
  for (auto& s : p.sockets) update_epoll(*s);
}

void TcpEngine::protocol_error(Socket& s, const std::string& why) {
  const Peer& p = peers_[s.peer];
  poison_locked(make_status(COLLX_ERR_PROTOCOL, "rank %d: protocol violation by rank %d (%s, socket %d): %s", rank_,
                            p.rank, p.address.c_str(), s.index, why.c_str()),
                true);
}

// Fails every pending request involving `p` with `status`. Send operations are collected
// in *ops (to delete once no queue holds their frames); control frames are deleted.
// Receives are the matcher's (fail_peer), which forgets the messages still arriving: a socket
// inside one's payload lets go of it (reading stops anyway: the transport is poisoned, or the
// peer left after its last frame; were more read, it would be dropped).
void TcpEngine::fail_peer_requests(Peer& p, const Status& status, std::vector<SendOp*>* ops) {
  for (auto& s : p.sockets) s->msg = nullptr;  // only unfinished messages are a socket's
  matcher_.fail_peer(p.rank, status);
  for (auto& s : p.sockets) {
    if (!s->sendq.empty()) {
      OutFrame* head = s->sendq.front();
      if (head->sent > 0 && head->sent < head->total()) s->mid_frame = true;
    }
    for (OutFrame* f : s->sendq) {
      if (f->op == nullptr) {
        delete f;
      } else if (!f->op->failing) {
        f->op->failing = true;
        ops->push_back(f->op);
      }
    }
    s->sendq.clear();
  }
  for (SendOp* op : *ops) {
    if (op->req != nullptr && op->peer == p.rank) {
      Request* req = op->req;
      op->req = nullptr;
      matcher_.complete(req, status);
    }
  }
}

void TcpEngine::poison_locked(const Status& status, bool notify_peers) {
  if (!matcher_.begin_poison(status)) {
    // Already failed (e.g. a peer died) and now the caller asks to tell the others: pass on
    // the first reason, so a survivor that sees this rank leave learns the root cause
    // ("rank 1 failed: lost connection to rank 3") instead of blaming this rank.
    if (notify_peers && !peers_notified_ && !aborted_.load(std::memory_order_relaxed) && !closed_) {
      send_poison_frames(poison_);
    }
    return;
  }
  if (!closed_) {
    COLLX_INFO(NET, "rank %d: TCP transport failed: %s: %s", rank_, status_name(poison_.code()),
               poison_.message().c_str());
  }
  std::vector<SendOp*> ops;
  for (Peer& p : peers_) fail_peer_requests(p, poison_, &ops);
  for (SendOp* op : ops) delete op;
  if (notify_peers && !aborted_.load(std::memory_order_relaxed) && !closed_) send_poison_frames(poison_);
  if (in_epoll_) wake_driver();
  cv_.notify_all();
}

}  // namespace tcp
}  // namespace collx
