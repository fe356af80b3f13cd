// The TCP store server: one background thread serves every client with non-blocking sockets
// and epoll, so a slow, stalled or hostile client costs a buffer, never the thread. Requests
// of one connection are answered in order; a GET or WAIT whose keys are missing parks its
// connection (indexed by the key it waits for) until a write supplies the key or its timeout
// passes. A client that breaks the protocol is dropped with a warning naming it; everyone
// else keeps being served. With a job token, a connection must pass the handshake
// (store_handshake.h) before any other request is processed, within a deadline, and only a
// bounded number of connections may be handshaking at once. Memory running out while serving
// one connection (std::bad_alloc) drops that connection, not the process.
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <new>
#include <thread>
#include <unordered_map>

#include "lib/common/auth.h"
#include "lib/common/auth_policy.h"
#include "lib/common/log.h"
#include "lib/common/settings.h"
#include "lib/store/store.h"
#include "lib/store/store_common.h"
#include "lib/store/store_socket.h"
#include "lib/store/store_table.h"
#include "lib/store/store_wire.h"
#include "lib/store/tcp_store_connection.h"
#include "lib/store/unique_fd.h"

namespace collx {
namespace {

using namespace store_wire;
using Clock = ServerConnection::Clock;
using Connection = ServerConnection;
constexpr size_t kReadChunkBytes = ServerConnection::kReadChunkBytes;

// Reads per readiness event, so one fast sender cannot starve the others.
constexpr int kReadsPerEvent = 16;
// A waiting timeout beyond this (about 115 days) is treated as forever, which keeps the
// deadline arithmetic far from overflow.
constexpr int64_t kMaxTimeoutMs = 10'000'000'000;
// When accept() runs out of descriptors, stop accepting for a moment rather than spin.
constexpr int kAcceptPauseMs = 100;
constexpr uint64_t kWakeToken = 0;
constexpr uint64_t kListenToken = 1;

class TcpStoreServerImpl : public TcpStoreServer {
 public:
  TcpStoreServerImpl(std::string connect_host, int port, const TcpStoreServerOptions& options, UniqueFd listen_fd,
                     UniqueFd wake_fd, UniqueFd epoll_fd)
      : connect_host_(std::move(connect_host)),
        port_(port),
        options_(options),
        listen_fd_(std::move(listen_fd)),
        wake_fd_(std::move(wake_fd)),
        epoll_fd_(std::move(epoll_fd)),
        table_(StoreCapacity{options.max_keys, options.max_bytes}) {
    thread_ = std::thread([this] { serve(); });
  }

  ~TcpStoreServerImpl() override {
    stop_.store(true);
    uint64_t one = 1;
    ssize_t ignored = ::write(wake_fd_.get(), &one, sizeof one);
    (void)ignored;
    thread_.join();
  }

  int port() const override { return port_; }

  Status connect(Deadline deadline, std::shared_ptr<Store>* out) override {
    return connect_tcp_store(format_host_port(connect_host_, port_), options_.job_token, deadline, out);
  }

  TcpStoreServerCounters counters() const override {
    TcpStoreServerCounters out;
    out.handshaking_connections = handshaking_.load();
    out.refused_connections = refused_connections_.load();
    out.handshake_timeouts = handshake_timeouts_.load();
    out.refused_handshakes = refused_handshakes_.load();
    out.allocation_failures = allocation_failures_.load();
    out.max_unauthenticated_input_bytes = max_unauthenticated_input_.load();
    return out;
  }

 private:
  void serve();
  void accept_all();
  void admit(int fd, const sockaddr_storage& address, socklen_t length);
  template <typename Work>
  void guarded(uint64_t id, Work&& work);
  void expire_handshakes();
  void on_connection_event(uint64_t id, uint32_t events);
  bool read_input(Connection* c);
  void service(Connection* c);
  void process_requests(Connection* c);
  void handle(Connection* c, Request request);
  void park(Connection* c, Request request, size_t missing_index);
  void key_stored(const std::string& key);
  void finish_wait(Connection* c, const Status& status);
  void expire_timeouts();
  void drop_waiter(Connection* c);
  void send_reply(Connection* c, const Reply& reply);
  bool flush(Connection* c);
  void update_interest(Connection* c);
  void protocol_violation(Connection* c, const Status& status);
  void refuse(Connection* c, Reply reply, const Status& why);
  void close_after_error(Connection* c, Reply reply, const Status& why);
  void close_connection(Connection* c);
  Connection* find(uint64_t id) {
    auto it = connections_.find(id);
    return it == connections_.end() ? nullptr : it->second.get();
  }
  int epoll_timeout_ms() const;

  const std::string connect_host_;
  const int port_;
  const TcpStoreServerOptions options_;  // job_token empty = no authentication
  UniqueFd listen_fd_, wake_fd_, epoll_fd_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  // Published for counters(); written by the serving thread only.
  std::atomic<uint64_t> handshaking_{0}, refused_connections_{0}, handshake_timeouts_{0}, refused_handshakes_{0},
      allocation_failures_{0}, max_unauthenticated_input_{0};

  // Everything below belongs to the serving thread.
  StoreTable table_;
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> connections_;
  uint64_t next_id_ = kListenToken + 1;
  std::unordered_map<std::string, std::vector<uint64_t>> waiters_;  // key -> connections parked on it
  std::multimap<Clock::time_point, uint64_t> timeouts_;            // parked connections' deadlines
  std::vector<uint64_t> ready_;  // connections to service again (a wait ended, output drained)
  // Handshake deadlines of unauthenticated connections in accept order, hence in deadline
  // order (all get the same timeout); entries of connections gone or authenticated are skipped.
  std::deque<std::pair<Clock::time_point, uint64_t>> handshake_deadlines_;
  bool accept_paused_ = false;
  Clock::time_point accept_resume_at_;
};

void TcpStoreServerImpl::serve() {
  epoll_event events[128];
  while (!stop_.load()) {
    int n = ::epoll_wait(epoll_fd_.get(), events, 128, epoll_timeout_ms());
    if (n < 0 && errno != EINTR) {
      COLLX_WARN(STORE, "store server: epoll_wait failed: %s; stopping", std::strerror(errno));
      break;
    }
    for (int i = 0; i < n; ++i) {
      // The wake eventfd is never drained: it only ever signals stop_, checked by the loop.
      if (events[i].data.u64 == kWakeToken) continue;
      const uint64_t id = events[i].data.u64;
      const uint32_t what = events[i].events;
      if (id == kListenToken) accept_all();
      else guarded(id, [&] { on_connection_event(id, what); });
    }
    if (accept_paused_ && Clock::now() >= accept_resume_at_) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = kListenToken;
      ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, listen_fd_.get(), &ev);
      accept_paused_ = false;
    }
    expire_timeouts();
    expire_handshakes();
    while (!ready_.empty()) {
      std::vector<uint64_t> batch;
      batch.swap(ready_);
      for (uint64_t id : batch)
        guarded(id, [&] {
          if (Connection* c = find(id)) service(c);
        });
    }
  }
  // Closing every connection tells every client the server is gone.
  connections_.clear();
}

int TcpStoreServerImpl::epoll_timeout_ms() const {
  Clock::time_point next = Clock::time_point::max();
  if (!timeouts_.empty()) next = timeouts_.begin()->first;
  if (!handshake_deadlines_.empty()) next = std::min(next, handshake_deadlines_.front().first);
  if (accept_paused_) next = std::min(next, accept_resume_at_);
  if (next == Clock::time_point::max()) return -1;
  auto left = std::chrono::duration_cast<std::chrono::microseconds>(next - Clock::now()).count();
  if (left <= 0) return 0;
  return static_cast<int>(std::min<int64_t>((left + 999) / 1000, 1 << 30));
}

void TcpStoreServerImpl::accept_all() {
  while (true) {
    sockaddr_storage address;
    socklen_t length = sizeof address;
    int fd = ::accept4(listen_fd_.get(), reinterpret_cast<sockaddr*>(&address), &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      COLLX_WARN(STORE, "store server: accept failed: %s; pausing accepts for %d ms", std::strerror(errno),
                 kAcceptPauseMs);
      epoll_event ev{};
      ev.data.u64 = kListenToken;
      ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, listen_fd_.get(), &ev);
      accept_paused_ = true;
      accept_resume_at_ = Clock::now() + std::chrono::milliseconds(kAcceptPauseMs);
      return;
    }
    admit(fd, address, length);
  }
}

// Takes a freshly accepted socket into the server: watched by epoll and, before it
// authenticates, counted against the handshake cap and given its handshake deadline.
void TcpStoreServerImpl::admit(int fd, const sockaddr_storage& address, socklen_t length) {
  UniqueFd owned(fd);
  const bool needs_handshake = !options_.job_token.empty();
  if (needs_handshake && handshaking_.load() >= options_.max_handshaking_connections) {
    // A flood of strangers must not flood the log: the first refusal says why, the rest count.
    if (refused_connections_.fetch_add(1) == 0)
      COLLX_WARN(STORE,
                 "store server: refusing a client: %llu connections are already handshaking (further refusals are "
                 "counted, not logged)",
                 static_cast<unsigned long long>(options_.max_handshaking_connections));
    return;
  }
  try {
    auto c = std::make_unique<Connection>();
    c->id = next_id_++;
    c->peer = format_sockaddr(reinterpret_cast<const sockaddr*>(&address), length);
    c->handshake = StoreHandshake(options_.job_token);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = c->id;
    if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      COLLX_WARN(STORE, "store server: cannot watch client %s: %s", c->peer.c_str(), std::strerror(errno));
      return;
    }
    c->fd = std::move(owned);
    c->registered_events = ev.events;
    if (needs_handshake)
      handshake_deadlines_.emplace_back(
          Clock::now() + std::chrono::milliseconds(std::min(options_.handshake_timeout_ms, kMaxTimeoutMs)), c->id);
    COLLX_TRACE(STORE, "store server: client %s connected", c->peer.c_str());
    const uint64_t id = c->id;
    connections_.emplace(id, std::move(c));
    if (needs_handshake) handshaking_.fetch_add(1);  // counted once it is in the table
  } catch (const std::bad_alloc&) {
    allocation_failures_.fetch_add(1);
    COLLX_WARN(STORE, "store server: out of memory accepting a client; closed its connection");
  }
}

// Runs one connection's work; memory running out in it (or any other exception, which would
// otherwise end the process) drops that connection alone, with a warning.
template <typename Work>
void TcpStoreServerImpl::guarded(uint64_t id, Work&& work) {
  try {
    work();
    return;
  } catch (const std::bad_alloc&) {
    allocation_failures_.fetch_add(1);
    COLLX_WARN(STORE, "store server: out of memory serving a client; dropping it");
  } catch (const std::exception& e) {
    COLLX_WARN(STORE, "store server: %s while serving a client; dropping it", e.what());
  }
  if (Connection* c = find(id)) {
    COLLX_WARN(STORE, "store server: dropped client %s", c->peer.c_str());
    close_connection(c);
  }
}

// Drops the connections that did not authenticate within the handshake timeout.
void TcpStoreServerImpl::expire_handshakes() {
  const Clock::time_point now = Clock::now();
  while (!handshake_deadlines_.empty() && handshake_deadlines_.front().first <= now) {
    const uint64_t id = handshake_deadlines_.front().second;
    handshake_deadlines_.pop_front();
    Connection* c = find(id);
    if (c == nullptr || c->handshake.authenticated()) continue;
    handshake_timeouts_.fetch_add(1);
    COLLX_WARN(STORE, "store server: dropping client %s: it did not authenticate within %lld ms", c->peer.c_str(),
               static_cast<long long>(options_.handshake_timeout_ms));
    close_connection(c);
  }
}

void TcpStoreServerImpl::on_connection_event(uint64_t id, uint32_t events) {
  Connection* c = find(id);
  if (c == nullptr) return;
  if (events & EPOLLERR) {
    COLLX_TRACE(STORE, "store server: client %s: socket error", c->peer.c_str());
    close_connection(c);
    return;
  }
  if ((events & EPOLLIN) && !read_input(c)) return;
  if ((events & (EPOLLHUP | EPOLLRDHUP)) && !(c->registered_events & EPOLLIN)) {
    // Hung up while we were not reading (parked or closing): nothing left to answer.
    COLLX_TRACE(STORE, "store server: client %s hung up", c->peer.c_str());
    close_connection(c);
    return;
  }
  if ((events & EPOLLOUT) && !flush(c)) return;
  service(c);
}

// Reads what the socket holds, parsing as it goes. False when the connection was closed.
bool TcpStoreServerImpl::read_input(Connection* c) {
  for (int i = 0; i < kReadsPerEvent && c->wants_read(); ++i) {
    const size_t old_size = c->input.size();
    // Before authenticating, a connection gets no more room than the handshake needs (the
    // whole buffer counts, parsed bytes included, so its allocation stays that small).
    const size_t chunk = std::min(kReadChunkBytes, c->handshake.input_room(old_size));
    if (chunk == 0) break;  // a handshake that does not fit: its deadline drops it
    // Size the buffer for a large frame once rather than doubling up to it: every doubling
    // copies and faults in fresh pages.
    if (c->handshake.authenticated())
      c->input.reserve(c->input_start + peek_frame_bytes(c->input.data() + c->input_start, c->unparsed(), false) +
                       kReadChunkBytes);
    else
      c->input.reserve(StoreHandshake::kMaxInputBytes);
    c->input.resize(old_size + chunk);
    ssize_t n = recv_some(c->fd.get(), c->input.data() + old_size, chunk);
    if (!c->handshake.authenticated())
      max_unauthenticated_input_.store(std::max<uint64_t>(max_unauthenticated_input_.load(), c->input.capacity()));
    c->input.resize(old_size + (n > 0 ? static_cast<size_t>(n) : 0));
    if (n == 0) {
      // Complete requests still queued (behind a wait) are just abandoned; a partial frame
      // means the client broke off mid-message.
      const size_t frame = peek_frame_bytes(c->input.data() + c->input_start, c->unparsed(), false);
      if (c->unparsed() > 0 && (frame == 0 || frame > c->unparsed()))
        COLLX_WARN(STORE, "store server: client %s closed the connection inside a frame (%zu bytes of it received)",
                   c->peer.c_str(), c->unparsed());
      else
        COLLX_TRACE(STORE, "store server: client %s disconnected", c->peer.c_str());
      close_connection(c);
      return false;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      COLLX_TRACE(STORE, "store server: client %s: %s", c->peer.c_str(), std::strerror(errno));
      close_connection(c);
      return false;
    }
    const uint64_t id = c->id;
    process_requests(c);
    if (find(id) == nullptr) return false;
    if (static_cast<size_t>(n) < chunk) break;  // drained the socket
  }
  return true;
}

// Answers every complete request buffered, then sends and re-arms.
void TcpStoreServerImpl::service(Connection* c) {
  const uint64_t id = c->id;
  process_requests(c);
  if (find(id) == nullptr || !flush(c)) return;
  update_interest(c);
}

void TcpStoreServerImpl::process_requests(Connection* c) {
  const uint64_t id = c->id;
  while (!c->closing && !c->blocked()) {
    Request request;
    size_t frame_bytes = 0;
    // Before authenticating, the header alone decides: a frame other than the handshake is
    // refused before its body is read.
    Status status = c->handshake.screen(c->input.data() + c->input_start, c->unparsed());
    if (!status.ok()) {
      refused_handshakes_.fetch_add(1);
      protocol_violation(c, status);
      return;
    }
    status = decode_request(c->input.data() + c->input_start, c->unparsed(), &request, &frame_bytes);
    if (!status.ok()) {
      protocol_violation(c, status);
      return;
    }
    if (frame_bytes == 0) break;
    c->input_start += frame_bytes;
    handle(c, std::move(request));
    if (find(id) == nullptr) return;
  }
  // Keep the unparsed tail at the front so the buffer does not creep.
  if (c->input_start == c->input.size()) {
    c->input.clear();
    c->input_start = 0;
  } else if (c->input_start >= kReadChunkBytes) {
    c->input.erase(c->input.begin(), c->input.begin() + static_cast<std::ptrdiff_t>(c->input_start));
    c->input_start = 0;
  }
}

void TcpStoreServerImpl::handle(Connection* c, Request request) {
  if (options_.before_request) options_.before_request();
  Reply reply;
  reply.opcode = request.opcode;
  reply.request_id = request.request_id;
  const bool was_authenticated = c->handshake.authenticated();
  bool answered = false;
  Status status = c->handshake.on_request(request, &reply, &answered);
  if (!status.ok()) {
    if (!was_authenticated) refused_handshakes_.fetch_add(1);
    refuse(c, reply, status);
    return;
  }
  if (!was_authenticated && c->handshake.authenticated()) handshaking_.fetch_sub(1);
  if (answered) {
    send_reply(c, reply);
    return;
  }
  switch (request.opcode) {
    case Opcode::kHello:
    case Opcode::kAuth: break;  // answered by the handshake
    case Opcode::kPing: break;
    case Opcode::kSet:
      status = table_.set(request.key, std::move(request.value));
      if (status.ok()) key_stored(request.key);
      break;
    case Opcode::kGet:
      if (const Bytes* value = table_.find(request.key)) {
        reply.value = *value;
        break;
      }
      request.keys.assign(1, request.key);
      park(c, std::move(request), 0);
      return;
    case Opcode::kAdd:
      status = table_.add(request.key, request.delta, &reply.new_value);
      if (status.ok()) key_stored(request.key);
      break;
    case Opcode::kCompareSet: {
      bool stored = false;
      status = table_.compare_set(request.key, request.expected, request.value, &reply.value, &stored);
      if (stored) key_stored(request.key);
      break;
    }
    case Opcode::kWait:
      if (const std::string* missing = table_.first_missing(request.keys)) {
        size_t index = static_cast<size_t>(missing - request.keys.data());
        park(c, std::move(request), index);
        return;
      }
      break;
    case Opcode::kDelete: table_.remove(request.key); break;
  }
  reply.status = status.code();
  reply.message = status.message();
  send_reply(c, reply);
}

void TcpStoreServerImpl::park(Connection* c, Request request, size_t missing_index) {
  const char* operation = request.opcode == Opcode::kGet ? "get" : "wait";
  if (request.timeout_ms == 0) {
    Reply reply;
    reply.opcode = request.opcode;
    reply.request_id = request.request_id;
    Status status = store_timeout_status(operation, 0, request.keys[missing_index]);
    reply.status = status.code();
    reply.message = status.message();
    send_reply(c, reply);
    return;
  }
  c->waiting = true;
  c->parked = std::move(request);
  c->missing_index = missing_index;
  waiters_[c->parked.keys[missing_index]].push_back(c->id);
  if (c->parked.timeout_ms > 0 && c->parked.timeout_ms <= kMaxTimeoutMs) {
    c->timeout_entry = timeouts_.emplace(Clock::now() + std::chrono::milliseconds(c->parked.timeout_ms), c->id);
    c->has_timeout = true;
  }
}

// A write stored `key`: every connection parked on it moves to its next missing key or, when
// none is left, gets its answer.
void TcpStoreServerImpl::key_stored(const std::string& key) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  std::vector<uint64_t> parked = std::move(it->second);
  waiters_.erase(it);
  for (uint64_t id : parked) {
    Connection* c = find(id);
    if (c == nullptr || !c->waiting) continue;
    const std::vector<std::string>& keys = c->parked.keys;
    size_t next = c->missing_index + 1;
    while (next < keys.size() && table_.find(keys[next]) != nullptr) ++next;
    if (next < keys.size()) {
      c->missing_index = next;
      waiters_[keys[next]].push_back(id);
    } else {
      finish_wait(c, Status::Ok());
    }
  }
}

void TcpStoreServerImpl::finish_wait(Connection* c, const Status& status) {
  drop_waiter(c);
  Reply reply;
  reply.opcode = c->parked.opcode;
  reply.request_id = c->parked.request_id;
  reply.status = status.code();
  reply.message = status.message();
  if (status.ok() && reply.opcode == Opcode::kGet) reply.value = *table_.find(c->parked.key);
  c->parked = Request();
  send_reply(c, reply);
  ready_.push_back(c->id);  // requests buffered behind the wait can proceed now
}

void TcpStoreServerImpl::expire_timeouts() {
  const Clock::time_point now = Clock::now();
  while (!timeouts_.empty() && timeouts_.begin()->first <= now) {
    Connection* c = find(timeouts_.begin()->second);
    if (c == nullptr) {  // cannot happen: closing a connection removes its entry
      timeouts_.erase(timeouts_.begin());
      continue;
    }
    // A failure here drops c, which takes its entry out of timeouts_: the loop moves on.
    guarded(c->id, [&] {
      const char* operation = c->parked.opcode == Opcode::kGet ? "get" : "wait";
      finish_wait(c, store_timeout_status(operation, c->parked.timeout_ms, c->parked.keys[c->missing_index]));
    });
  }
}

// Forgets that `c` waits: its entry under the key it waits for and its timeout.
void TcpStoreServerImpl::drop_waiter(Connection* c) {
  if (!c->waiting) return;
  auto it = waiters_.find(c->parked.keys[c->missing_index]);
  if (it != waiters_.end()) {
    auto& ids = it->second;
    ids.erase(std::remove(ids.begin(), ids.end(), c->id), ids.end());
    if (ids.empty()) waiters_.erase(it);
  }
  if (c->has_timeout) timeouts_.erase(c->timeout_entry);
  c->has_timeout = false;
  c->waiting = false;
}

void TcpStoreServerImpl::send_reply(Connection* c, const Reply& reply) {
  encode_reply(reply, &c->output);
  // Sent by flush() from service(): several replies of one read go out in one send.
}

// Sends what the socket accepts. False when the connection was closed.
bool TcpStoreServerImpl::flush(Connection* c) {
  while (c->queued() > 0) {
    ssize_t n = send_some(c->fd.get(), c->output.data() + c->output_start, c->queued());
    if (n == 0) break;
    if (n < 0) {
      COLLX_TRACE(STORE, "store server: client %s: %s", c->peer.c_str(), std::strerror(errno));
      close_connection(c);
      return false;
    }
    c->output_start += static_cast<size_t>(n);
  }
  if (c->queued() == 0) {
    c->output.clear();
    c->output_start = 0;
    if (c->closing) {
      close_connection(c);
      return false;
    }
  }
  return true;
}

void TcpStoreServerImpl::update_interest(Connection* c) {
  uint32_t wanted = EPOLLRDHUP | (c->wants_read() ? EPOLLIN : 0u) | (c->queued() > 0 ? EPOLLOUT : 0u);
  if (wanted == c->registered_events) return;
  epoll_event ev{};
  ev.events = wanted;
  ev.data.u64 = c->id;
  if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, c->fd.get(), &ev) == 0) c->registered_events = wanted;
}

// Drops the connection. A peer that spoke our magic is a collx client of some kind (perhaps
// another version): it gets an error reply saying why before the close.
void TcpStoreServerImpl::protocol_violation(Connection* c, const Status& status) {
  COLLX_WARN(STORE, "store server: dropping client %s: %s", c->peer.c_str(), status.message().c_str());
  Header header;
  const uint8_t* frame = c->input.data() + c->input_start;
  decode_header(frame, c->unparsed(), false, &header).ignore();
  if (header.magic != kMagic) {
    close_connection(c);
    return;
  }
  Reply reply;
  const uint16_t base = static_cast<uint16_t>(header.opcode & ~kReplyFlag);
  reply.opcode = base >= 1 && base <= static_cast<uint16_t>(Opcode::kAuth) ? static_cast<Opcode>(base) : Opcode::kHello;
  reply.request_id = header.request_id;
  close_after_error(c, reply, status);
}

// Refuses a well-formed request (job token): the warning names the client and the reason,
// the client gets the reason as an error reply, then the connection closes. Nothing else it
// sent is processed.
void TcpStoreServerImpl::refuse(Connection* c, Reply reply, const Status& why) {
  COLLX_WARN(STORE, "store server: dropping client %s: %s", c->peer.c_str(), why.message().c_str());
  close_after_error(c, reply, why);
}

void TcpStoreServerImpl::close_after_error(Connection* c, Reply reply, const Status& why) {
  reply.status = why.ok() ? COLLX_ERR_PROTOCOL : why.code();
  reply.message = "store server dropped the connection: " + why.message();
  reply.challenge.clear();
  reply.mac.clear();
  send_reply(c, reply);
  c->closing = true;
  c->input.clear();
  c->input_start = 0;
  if (flush(c)) update_interest(c);
}

void TcpStoreServerImpl::close_connection(Connection* c) {
  drop_waiter(c);
  if (!c->handshake.authenticated()) handshaking_.fetch_sub(1);
  // Closing the descriptor removes it from the epoll set.
  connections_.erase(c->id);
}

}  // namespace

Status tcp_store_server_options_from_settings(TcpStoreServerOptions* out) {
  TcpStoreServerOptions options;
  COLLX_RETURN_IF_ERROR(auth::job_token_from_settings(&options.job_token));
  int64_t max_keys = static_cast<int64_t>(options.max_keys);
  COLLX_RETURN_IF_ERROR(setting_int(SettingId::STORE_MAX_KEYS, &max_keys));
  if (max_keys < 1)
    return make_status(COLLX_ERR_INVALID_ARG, "COLLX_STORE_MAX_KEYS=%lld: the store must hold at least one key",
                       static_cast<long long>(max_keys));
  options.max_keys = static_cast<uint64_t>(max_keys);
  COLLX_RETURN_IF_ERROR(setting_size(SettingId::STORE_MAX_BYTES, &options.max_bytes));
  *out = std::move(options);
  return Status::Ok();
}

Status start_tcp_store_server(const std::string& address, std::unique_ptr<TcpStoreServer>* out,
                              bool* address_in_use) {
  if (address_in_use) *address_in_use = false;
  TcpStoreServerOptions options;
  COLLX_RETURN_IF_ERROR(tcp_store_server_options_from_settings(&options));
  return start_tcp_store_server(address, options, out, address_in_use);
}

Status start_tcp_store_server(const std::string& address, const std::string& job_token,
                              std::unique_ptr<TcpStoreServer>* out, bool* address_in_use) {
  if (address_in_use) *address_in_use = false;
  TcpStoreServerOptions options;
  COLLX_RETURN_IF_ERROR(tcp_store_server_options_from_settings(&options));
  options.job_token = job_token;
  return start_tcp_store_server(address, options, out, address_in_use);
}

Status start_tcp_store_server(const std::string& address, const TcpStoreServerOptions& options,
                              std::unique_ptr<TcpStoreServer>* out, bool* address_in_use) {
  if (address_in_use) *address_in_use = false;
  if (out == nullptr) return make_status(COLLX_ERR_INVALID_ARG, "start_tcp_store_server: out is null");
  if (options.handshake_timeout_ms <= 0 || options.max_handshaking_connections == 0)
    return make_status(COLLX_ERR_INVALID_ARG,
                       "start_tcp_store_server: handshake_timeout_ms (%lld) and max_handshaking_connections (%llu) "
                       "must be positive",
                       static_cast<long long>(options.handshake_timeout_ms),
                       static_cast<unsigned long long>(options.max_handshaking_connections));
  COLLX_RETURN_IF_ERROR(auth::check_token_usable(options.job_token));
  COLLX_RETURN_IF_ERROR(auth::check_token_required(options.job_token, "TCP store server at " + address));
  HostPort where;
  COLLX_RETURN_IF_ERROR(parse_host_port(address, &where));
  UniqueFd listen_fd;
  int port = 0;
  COLLX_RETURN_IF_ERROR(listen_tcp(where, &listen_fd, &port, address_in_use));
  UniqueFd wake_fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_fd.valid()) return system_error("store server: eventfd", errno);
  UniqueFd epoll_fd(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_fd.valid()) return system_error("store server: epoll_create1", errno);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeToken;
  if (::epoll_ctl(epoll_fd.get(), EPOLL_CTL_ADD, wake_fd.get(), &ev) != 0)
    return system_error("store server: epoll_ctl", errno);
  ev.data.u64 = kListenToken;
  if (::epoll_ctl(epoll_fd.get(), EPOLL_CTL_ADD, listen_fd.get(), &ev) != 0)
    return system_error("store server: epoll_ctl", errno);
  sockaddr_storage bound{};
  socklen_t bound_length = sizeof bound;
  if (::getsockname(listen_fd.get(), reinterpret_cast<sockaddr*>(&bound), &bound_length) == 0)
    auth::warn_if_exposed(reinterpret_cast<const sockaddr*>(&bound), format_host_port(where.host, port),
                          options.job_token, "the TCP store server");
  // Clients of a server bound to every interface reach it through loopback.
  std::string connect_host = where.host;
  if (connect_host == "0.0.0.0") connect_host = "127.0.0.1";
  if (connect_host == "::") connect_host = "::1";
  COLLX_INFO(STORE, "store server listening on %s%s", format_host_port(where.host, port).c_str(),
             options.job_token.empty() ? "" : " (job token required)");
  *out = std::make_unique<TcpStoreServerImpl>(connect_host, port, options, std::move(listen_fd), std::move(wake_fd),
                                              std::move(epoll_fd));
  return Status::Ok();
}

}  // namespace collx
