#include "lib/store/store_socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "lib/common/log.h"
#include "lib/common/socket_liveness.h"
#include "lib/store/store_common.h"

namespace collx {
namespace {

Status resolve(const HostPort& where, bool passive, addrinfo** result) {
  addrinfo hints;
  std::memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  std::string port = std::to_string(where.port);
  int rc = ::getaddrinfo(where.host.c_str(), port.c_str(), &hints, result);
  if (rc != 0) {
    const char* text = rc == EAI_SYSTEM ? std::strerror(errno) : ::gai_strerror(rc);
    return make_status(COLLX_ERR_SYSTEM, "resolving %s: %s", format_host_port(where.host, where.port).c_str(), text);
  }
  return Status::Ok();
}

struct AddrInfoList {
  addrinfo* head = nullptr;
  ~AddrInfoList() {
    if (head) ::freeaddrinfo(head);
  }
};

void set_nodelay(int fd) {
  int one = 1;
  // Store frames are small request/response exchanges: Nagle would add delays to each.
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Keepalive and user timeout (lib/common/socket_liveness.h), so a store connection whose
// peer went silent fails in seconds instead of at the deadline. Set on the server's listener
// (accepted connections inherit them) and on every client socket. Unlike transport sockets,
// store sockets keep TCP_USER_TIMEOUT (SocketLiveness::for_store says why it is safe here).
Status set_liveness_options(int fd, const SocketLiveness& liveness, const char* what) {
  Status applied = apply_socket_liveness(fd, liveness.for_store());
  return applied.ok() ? applied : applied.with_context(what);
}

// One non-blocking connect to one resolved address, waiting at most until the deadline.
// Returns 0 with *out connected, or the errno of the failure (ETIMEDOUT at the deadline).
int connect_once(const addrinfo* address, const Deadline& deadline, UniqueFd* out) {
  UniqueFd fd(::socket(address->ai_family, address->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, address->ai_protocol));
  if (!fd.valid()) return errno;
  if (::connect(fd.get(), address->ai_addr, address->ai_addrlen) != 0) {
    if (errno != EINPROGRESS && errno != EINTR) return errno;
    if (!poll_fd(fd.get(), POLLOUT, deadline).ok()) return ETIMEDOUT;
    int error = 0;
    socklen_t length = sizeof error;
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) return errno;
    if (error != 0) return error;
  }
  set_nodelay(fd.get());
  *out = std::move(fd);
  return 0;
}

}  // namespace

Status parse_store_address(const std::string& address, HostPort* out) {
  COLLX_RETURN_IF_ERROR(parse_host_port(address, "store address", out));
  if (out->host == "*") out->host = "0.0.0.0";
  return Status::Ok();
}

std::string format_sockaddr(const sockaddr* address, socklen_t length) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (address->sa_family == AF_INET && length >= sizeof(sockaddr_in)) {
    auto* v4 = reinterpret_cast<const sockaddr_in*>(address);
    ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
    return format_host_port(text, ntohs(v4->sin_port));
  }
  if (address->sa_family == AF_INET6 && length >= sizeof(sockaddr_in6)) {
    auto* v6 = reinterpret_cast<const sockaddr_in6*>(address);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
    return format_host_port(text, ntohs(v6->sin6_port));
  }
  return "?";
}

std::string peer_address(int fd) {
  sockaddr_storage storage;
  socklen_t length = sizeof storage;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&storage), &length) != 0) return "?";
  return format_sockaddr(reinterpret_cast<sockaddr*>(&storage), length);
}

Status listen_tcp(const HostPort& where, UniqueFd* out, int* bound_port, bool* address_in_use) {
  if (address_in_use) *address_in_use = false;
  const std::string name = format_host_port(where.host, where.port);
  AddrInfoList list;
  COLLX_RETURN_IF_ERROR(resolve(where, true, &list.head));
  Status last = make_status(COLLX_ERR_SYSTEM, "store server: no usable address for %s", name.c_str());
  for (const addrinfo* a = list.head; a != nullptr; a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd.valid()) {
      last = system_error(("store server: socket for " + name).c_str(), errno);
      continue;
    }
    int one = 1;
    // Lets a restarted server bind while connections of the previous one sit in TIME_WAIT.
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    SocketLiveness liveness;
    COLLX_RETURN_IF_ERROR(socket_liveness_from_settings(&liveness));
    COLLX_RETURN_IF_ERROR(set_liveness_options(fd.get(), liveness, "store server: "));
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
      int error = errno;
      // Both mean "another process may be serving this address": taken here, or an address
      // of another host (a launcher hosting the store elsewhere). The caller then connects.
      if ((error == EADDRINUSE || error == EADDRNOTAVAIL) && address_in_use) *address_in_use = true;
      last = system_error(("store server: binding " + name).c_str(), error);
      if (error == EADDRINUSE) return last;
      continue;
    }
    if (::listen(fd.get(), SOMAXCONN) != 0) {
      int error = errno;
      if (error == EADDRINUSE && address_in_use) *address_in_use = true;
      last = system_error(("store server: listening on " + name).c_str(), error);
      if (error == EADDRINUSE) return last;
      continue;
    }
    sockaddr_storage bound;
    socklen_t length = sizeof bound;
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &length) != 0)
      return system_error("store server: getsockname", errno);
    *bound_port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                              : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    *out = std::move(fd);
    return Status::Ok();
  }
  return last;
}

Status connect_tcp(const std::string& address, Deadline deadline, UniqueFd* out, bool retry) {
  HostPort where;
  COLLX_RETURN_IF_ERROR(parse_store_address(address, &where));
  SocketLiveness liveness;
  COLLX_RETURN_IF_ERROR(socket_liveness_from_settings(&liveness));
  const int64_t start_us = monotonic_us();
  std::string last_error = "no attempt finished";
  // Ranks usually start before the server listens: retry quickly at first, then back off so
  // thousands of ranks do not hammer it.
  StoreBackoff backoff(10, 500);
  while (true) {
    AddrInfoList list;
    Status resolved = resolve(where, false, &list.head);
    if (!resolved.ok()) {
      last_error = resolved.message();
    } else {
      for (const addrinfo* a = list.head; a != nullptr; a = a->ai_next) {
        int error = connect_once(a, deadline, out);
        if (error == 0) return set_liveness_options(out->get(), liveness, "store client: ");
        last_error = format_sockaddr(a->ai_addr, a->ai_addrlen) + ": " + std::strerror(error);
      }
    }
    if (!retry)
      return make_status(COLLX_ERR_REMOTE, "connecting to the store at %s failed: %s", address.c_str(),
                         last_error.c_str());
    COLLX_TRACE(STORE, "store client: connecting to %s failed (%s); retrying", address.c_str(), last_error.c_str());
    if (!backoff.sleep_until_next(deadline)) break;
  }
  return make_status(COLLX_ERR_TIMEOUT, "connecting to the store at %s timed out after %lld ms; last error: %s",
                     address.c_str(), static_cast<long long>(store_elapsed_ms(start_us)), last_error.c_str());
}

Status poll_fd(int fd, short events, const Deadline& deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, deadline.remaining_ms());
    if (rc > 0) return Status::Ok();
    if (rc == 0) {
      if (deadline.expired()) return make_status(COLLX_ERR_TIMEOUT, "deadline passed");
      continue;  // poll's millisecond rounding woke us a little early
    }
    if (errno != EINTR) return system_error("poll", errno);
  }
}

ssize_t send_some(int fd, const uint8_t* data, size_t size) {
  while (true) {
    ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -1;
  }
}

ssize_t recv_some(int fd, uint8_t* data, size_t size) {
  while (true) {
    ssize_t n = ::recv(fd, data, size, 0);
    if (n >= 0 || errno != EINTR) return n;
  }
}

}  // namespace collx
