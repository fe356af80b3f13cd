// Socket plumbing for the TCP transport: an owning fd, "ip:port" addresses, the choice of
// the local interface (COLLX_SOCKET_IFNAME syntax or the route to a host), listening and
// non-blocking connects. Nothing here knows about frames or ranks.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

#include "lib/common/status.h"
#include "lib/common/unique_fd.h"

namespace collx {
namespace tcp {

// An IPv4 or IPv6 socket address.
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&storage); }
  sockaddr* sa() { return reinterpret_cast<sockaddr*>(&storage); }
  int family() const { return storage.ss_family; }
  uint16_t port() const;
  void set_port(uint16_t port);
  bool is_loopback() const;
  std::string ip() const;         // "10.0.0.7" or "fe80::1"
  std::string to_string() const;  // "10.0.0.7:41234" or "[::1]:41234"
};

// Parses a numeric "ip:port" or "[ipv6]:port". No name resolution.
Status parse_address(const std::string& text, SocketAddress* out);
SocketAddress address_from_sockaddr(const sockaddr* sa, socklen_t length);

// COLLX_SOCKET_IFNAME: comma-separated interface name prefixes; a leading '^' makes the
// list an exclusion list, a leading '=' (after the optional '^') makes names exact.
struct InterfaceSpec {
  bool exclude = false;
  bool exact = false;
  std::vector<std::string> names;
};
InterfaceSpec parse_interface_spec(const std::string& text);
bool interface_matches(const InterfaceSpec& spec, const std::string& name);

struct LocalInterface {
  std::string name;
  SocketAddress address;  // port 0
  bool loopback = false;
};
// Interfaces that are up, with an IPv4 or (non link-local) IPv6 address, in system order.
Status list_interfaces(std::vector<LocalInterface>* out);

// The first interface the spec selects, IPv4 preferred. Loopback interfaces are skipped by
// exclusion specs unless nothing else is left.
Status choose_interface(const std::vector<LocalInterface>& interfaces, const std::string& spec,
                        LocalInterface* out);

// The local address to listen on (port 0): from `ifname` when set, else the address that
// routes to `route_to_host` ("host" or "host:port"), else 127.0.0.1. *why says how it was
// chosen, for the log.
Status choose_local_address(const std::string& ifname, const std::string& route_to_host,
                            SocketAddress* out, std::string* why);

// Non-blocking, close-on-exec listener bound to `address` (port 0 = ephemeral).
// socket_buffer_bytes > 0 sets SO_SNDBUF/SO_RCVBUF (inherited by accepted sockets) before
// the SYN, so the negotiated window scale allows them.
Status listen_on(const SocketAddress& address, int backlog, UniqueFd* out, SocketAddress* bound,
                 size_t socket_buffer_bytes = 0);

// Starts a non-blocking connect with TCP_NODELAY set. Returns 0 when connected at once,
// EINPROGRESS when pending (wait for writability, then read socket_error), else an errno.
int start_connect(const SocketAddress& address, UniqueFd* out, size_t socket_buffer_bytes = 0);
// The pending error of a socket (SO_ERROR), 0 when none.
int socket_error(int fd);

Status set_nodelay(int fd);
std::string errno_string(int error);

}  // namespace tcp
}  // namespace collx
