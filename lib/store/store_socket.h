// Socket plumbing of the TCP store: address parsing, listening, connecting with retries
// until a deadline, and EINTR/SIGPIPE-safe non-blocking I/O.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <string>

#include "lib/common/deadline.h"
#include "lib/common/host_port.h"
#include "lib/common/status.h"
#include "lib/common/unique_fd.h"

namespace collx {

// A store address: lib/common's parse_host_port ("host:port", "[v6addr]:port"), and "*:port"
// meaning all interfaces (host "0.0.0.0"). COLLX_ERR_INVALID_ARG naming the address otherwise.
Status parse_store_address(const std::string& address, HostPort* out);
// "ip:port" of a socket address; "?" when it is not IPv4/IPv6.
std::string format_sockaddr(const sockaddr* address, socklen_t length);
// The address of a connected socket's peer, for logs.
std::string peer_address(int fd);

// A non-blocking listening socket with SO_REUSEADDR and the keepalive and user timeout of
// COLLX_TCP_KEEPALIVE_* / COLLX_TCP_USER_TIMEOUT_MS, which accepted connections inherit. *bound_port is the port actually bound
// (the chosen one when port is 0). When the port is taken the status is COLLX_ERR_SYSTEM
// with EADDRINUSE's text and *address_in_use is true.
Status listen_tcp(const HostPort& where, UniqueFd* out, int* bound_port, bool* address_in_use);

// A connected non-blocking socket with TCP_NODELAY, keepalive and user timeout. While nothing accepts at the address
// (refused, unreachable, name not resolvable yet) it retries with backoff; at the deadline it
// answers COLLX_ERR_TIMEOUT naming the address and the last error. With `retry` false a
// failed attempt is final: COLLX_ERR_REMOTE naming the address and the error (used once the
// server is known to have been up, when a refusal means it is gone).
Status connect_tcp(const std::string& address, Deadline deadline, UniqueFd* out, bool retry = true);

// poll() for `events` on one descriptor until the deadline, retrying on EINTR. OK when ready
// (or the peer hung up: the next I/O call reports it), COLLX_ERR_TIMEOUT when the deadline
// passed first.
Status poll_fd(int fd, short events, const Deadline& deadline);

// send() with MSG_NOSIGNAL (a closed peer must not kill the process with SIGPIPE), retried
// on EINTR. Returns bytes sent, 0 when the socket would block, -1 with errno on error.
ssize_t send_some(int fd, const uint8_t* data, size_t size);
// recv() retried on EINTR. Returns bytes read, 0 at end of stream, -1 with errno (EAGAIN
// when nothing is buffered).
ssize_t recv_some(int fd, uint8_t* data, size_t size);

}  // namespace collx
