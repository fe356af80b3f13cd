// The TCP store server: one background thread serves every client with non-blocking sockets
// and epoll, so a slow, stalled or hostile client costs a buffer, never the thread. Requests
// of one connection are answered in order; a GET or WAIT whose keys are missing parks its
// connection (indexed by the key it waits for) until a write supplies the key or its timeout
// passes. A client that breaks the protocol is dropped with a warning naming it; everyone
// else keeps being served. With a job token, a connection must pass the handshake
// (store_handshake.h) before any other request is processed, within a deadline, and only a
// bounded number of connections may be handshaking at once. Memory running out while serving
// one connection (std::bad_alloc) drops that connection, not the process.
// This file: the serving loop, accepting, handshake deadlines and reading; the class is in
// tcp_store_server_impl.h, requests and waits in tcp_store_server_requests.cc, output and
// closing in tcp_store_server_replies.cc.
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
#include "lib/common/unique_fd.h"
#include "lib/store/tcp_store_server_impl.h"

namespace collx {
namespace tcp_store_server {

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
}  // namespace tcp_store_server

using namespace tcp_store_server;

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
  COLLX_RETURN_IF_ERROR(parse_store_address(address, &where));
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
