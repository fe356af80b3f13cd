// The TCP store server: one background thread serves every client with non-blocking sockets
// and epoll, so a slow, stalled or hostile client costs a buffer, never the thread. Requests
// of one connection are answered in order; a GET or WAIT whose keys are missing parks its
// connection (indexed by the key it waits for) until a write supplies the key or its timeout
// passes. A client that breaks the protocol is dropped with a warning naming it; everyone
// else keeps being served. With a job token, a connection must pass the AUTH exchange
// (store_auth.h) before any other request is processed.
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <thread>
#include <unordered_map>

#include "lib/common/log.h"
#include "lib/store/store.h"
#include "lib/store/store_auth.h"
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
  TcpStoreServerImpl(std::string connect_host, int port, std::string token, UniqueFd listen_fd, UniqueFd wake_fd,
                     UniqueFd epoll_fd)
      : connect_host_(std::move(connect_host)),
        port_(port),
        token_(std::move(token)),
        listen_fd_(std::move(listen_fd)),
        wake_fd_(std::move(wake_fd)),
        epoll_fd_(std::move(epoll_fd)) {
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
    return connect_tcp_store(format_host_port(connect_host_, port_), token_, deadline, out);
  }

 private:
  void serve();
  void accept_all();
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
  bool authenticate(Connection* c, const Request& request, Reply* reply);
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
  const std::string token_;  // the job token; empty = no authentication
  UniqueFd listen_fd_, wake_fd_, epoll_fd_;
  std::atomic<bool> stop_{false};
  std::thread thread_;

  // Everything below belongs to the serving thread.
  StoreTable table_;
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> connections_;
  uint64_t next_id_ = kListenToken + 1;
  std::unordered_map<std::string, std::vector<uint64_t>> waiters_;  // key -> connections parked on it
  std::multimap<Clock::time_point, uint64_t> timeouts_;            // parked connections' deadlines
  std::vector<uint64_t> ready_;  // connections to service again (a wait ended, output drained)
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
      if (events[i].data.u64 == kListenToken) accept_all();
      else on_connection_event(events[i].data.u64, events[i].events);
    }
    if (accept_paused_ && Clock::now() >= accept_resume_at_) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = kListenToken;
      ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, listen_fd_.get(), &ev);
      accept_paused_ = false;
    }
    expire_timeouts();
    while (!ready_.empty()) {
      std::vector<uint64_t> batch;
      batch.swap(ready_);
      for (uint64_t id : batch)
        if (Connection* c = find(id)) service(c);
    }
  }
  // Closing every connection tells every client the server is gone.
  connections_.clear();
}

int TcpStoreServerImpl::epoll_timeout_ms() const {
  Clock::time_point next = Clock::time_point::max();
  if (!timeouts_.empty()) next = timeouts_.begin()->first;
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
    auto c = std::make_unique<Connection>();
    c->id = next_id_++;
    c->fd.reset(fd);
    c->peer = format_sockaddr(reinterpret_cast<sockaddr*>(&address), length);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = c->id;
    if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      COLLX_WARN(STORE, "store server: cannot watch client %s: %s", c->peer.c_str(), std::strerror(errno));
      continue;
    }
    c->registered_events = ev.events;
    c->authenticated = token_.empty();
    COLLX_TRACE(STORE, "store server: client %s connected", c->peer.c_str());
    connections_.emplace(c->id, std::move(c));
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
    // Size the buffer for a large frame once rather than doubling up to it: every doubling
    // copies and faults in fresh pages.
    c->input.reserve(c->input_start + peek_frame_bytes(c->input.data() + c->input_start, c->unparsed(), false) +
                     kReadChunkBytes);
    c->input.resize(old_size + kReadChunkBytes);
    ssize_t n = recv_some(c->fd.get(), c->input.data() + old_size, kReadChunkBytes);
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
    if (static_cast<size_t>(n) < kReadChunkBytes) break;  // drained the socket
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
    Status status = decode_request(c->input.data() + c->input_start, c->unparsed(), &request, &frame_bytes);
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
  Reply reply;
  reply.opcode = request.opcode;
  reply.request_id = request.request_id;
  if (!authenticate(c, request, &reply)) return;
  switch (request.opcode) {
    case Opcode::kHello:
    case Opcode::kAuth: break;  // answered by authenticate()
    case Opcode::kPing: break;
    case Opcode::kSet:
      table_.set(request.key, std::move(request.value));
      key_stored(request.key);
      break;
    case Opcode::kGet:
      if (const Bytes* value = table_.find(request.key)) {
        reply.value = *value;
        break;
      }
      request.keys.assign(1, request.key);
      park(c, std::move(request), 0);
      return;
    case Opcode::kAdd: {
      Status status = table_.add(request.key, request.delta, &reply.new_value);
      reply.status = status.code();
      reply.message = status.message();
      if (status.ok()) key_stored(request.key);
      break;
    }
    case Opcode::kCompareSet:
      if (table_.compare_set(request.key, request.expected, request.value, &reply.value)) key_stored(request.key);
      break;
    case Opcode::kWait:
      if (const std::string* missing = table_.first_missing(request.keys)) {
        size_t index = static_cast<size_t>(missing - request.keys.data());
        park(c, std::move(request), index);
        return;
      }
      break;
    case Opcode::kDelete: table_.remove(request.key); break;
  }
  send_reply(c, reply);
}

// The job token gate, run before any request is processed: answers HELLO (with a fresh
// challenge) and AUTH into *reply, and refuses, logs and drops a connection that sends
// anything else before authenticating or answers its challenge wrongly. False when the
// request must not be processed further (the connection is closing).
bool TcpStoreServerImpl::authenticate(Connection* c, const Request& request, Reply* reply) {
  if (request.opcode == Opcode::kHello) {
    reply->server_version = kProtocolVersion;
    if (token_.empty()) return true;
    auth::Nonce nonce;
    Status status = auth::make_nonce(&nonce);
    if (!status.ok()) {
      refuse(c, *reply, status);
      return false;
    }
    c->challenge.assign(nonce.begin(), nonce.end());
    reply->challenge = c->challenge;
    return true;
  }
  if (request.opcode == Opcode::kAuth) {
    Status status = store_auth_check_client(token_, c->challenge, request, &reply->mac);
    c->challenge.clear();  // one answer per challenge: no second guess
    if (!status.ok()) {
      refuse(c, *reply, status);
      return false;
    }
    c->authenticated = true;
    return true;
  }
  if (c->authenticated) return true;
  refuse(c, *reply,
         make_status(COLLX_ERR_PROTOCOL, "%s before authenticating: this store requires the job token (COLLX_JOB_TOKEN)",
                     opcode_name(request.opcode)));
  return false;
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
    const char* operation = c->parked.opcode == Opcode::kGet ? "get" : "wait";
    finish_wait(c, store_timeout_status(operation, c->parked.timeout_ms, c->parked.keys[c->missing_index]));
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
  // Closing the descriptor removes it from the epoll set.
  connections_.erase(c->id);
}

}  // namespace

Status start_tcp_store_server(const std::string& address, std::unique_ptr<TcpStoreServer>* out,
                              bool* address_in_use) {
  if (address_in_use) *address_in_use = false;
  std::string token;
  COLLX_RETURN_IF_ERROR(auth::job_token_from_settings(&token));
  return start_tcp_store_server(address, token, out, address_in_use);
}

Status start_tcp_store_server(const std::string& address, const std::string& job_token,
                              std::unique_ptr<TcpStoreServer>* out, bool* address_in_use) {
  if (address_in_use) *address_in_use = false;
  if (out == nullptr) return make_status(COLLX_ERR_INVALID_ARG, "start_tcp_store_server: out is null");
  COLLX_RETURN_IF_ERROR(auth::check_token_usable(job_token));
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
  // Clients of a server bound to every interface reach it through loopback.
  std::string connect_host = where.host;
  if (connect_host == "0.0.0.0") connect_host = "127.0.0.1";
  if (connect_host == "::") connect_host = "::1";
  COLLX_INFO(STORE, "store server listening on %s%s", format_host_port(where.host, port).c_str(),
             job_token.empty() ? "" : " (job token required)");
  *out = std::make_unique<TcpStoreServerImpl>(connect_host, port, job_token, std::move(listen_fd), std::move(wake_fd),
                                              std::move(epoll_fd));
  return Status::Ok();
}

}  // namespace collx
