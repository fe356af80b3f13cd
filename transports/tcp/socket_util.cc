#include <cstdlib>
#include "transports/tcp/socket_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "lib/common/host_port.h"

namespace collx {
namespace tcp {

std::string errno_string(int error) {
  char buffer[128];
  return std::string(strerror_r(error, buffer, sizeof buffer));
}

// ---- addresses ------------------------------------------------------------------------------

uint16_t SocketAddress::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return 0;
}

void SocketAddress::set_port(uint16_t port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(port);
}

bool SocketAddress::is_loopback() const {
  if (family() == AF_INET) {
    uint32_t a = ntohl(reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr.s_addr);
    return (a >> 24) == 127;
  }
  if (family() == AF_INET6) {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&a)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&a)) return a.s6_addr[12] == 127;
  }
  return false;
}

std::string SocketAddress::ip() const {
  char text[INET6_ADDRSTRLEN] = "?";
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, text, sizeof text);
  } else if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, text, sizeof text);
  }
  return text;
}

std::string SocketAddress::to_string() const {
  if (family() == AF_INET6) return "[" + ip() + "]:" + std::to_string(port());
  return ip() + ":" + std::to_string(port());
}

SocketAddress address_from_sockaddr(const sockaddr* sa, socklen_t length) {
  SocketAddress out;
  length = std::min<socklen_t>(length, sizeof out.storage);
  std::memcpy(&out.storage, sa, length);
  out.length = length;
  return out;
}

Status parse_address(const std::string& text, SocketAddress* out) {
  HostPort parsed;
  COLLX_RETURN_IF_ERROR(parse_host_port(text, "address", &parsed));
  const std::string& host = parsed.host;
  const int port = parsed.port;

  SocketAddress address;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&address.storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&address.storage);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    address.length = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    address.length = sizeof(sockaddr_in6);
  } else {
    return make_status(COLLX_ERR_INVALID_ARG, "malformed IP address in '%s'", text.c_str());
  }
  address.set_port(static_cast<uint16_t>(port));
  *out = address;
  return Status::Ok();
}

// ---- interface choice -----------------------------------------------------------------------

InterfaceSpec parse_interface_spec(const std::string& text) {
  InterfaceSpec spec;
  size_t start = 0;
  if (start < text.size() && text[start] == '^') {
    spec.exclude = true;
    ++start;
  }
  if (start < text.size() && text[start] == '=') {
    spec.exact = true;
    ++start;
  }
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string name = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    // Trim spaces so "eth0, ib0" works.
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    if (!name.empty()) spec.names.push_back(name);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return spec;
}

bool interface_matches(const InterfaceSpec& spec, const std::string& name) {
  bool listed = false;
  for (const auto& wanted : spec.names) {
    if (spec.exact ? name == wanted : name.compare(0, wanted.size(), wanted) == 0) {
      listed = true;
      break;
    }
  }
  return spec.exclude ? !listed : listed;
}

Status list_interfaces(std::vector<LocalInterface>* out) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return system_error("getifaddrs", errno);
  out->clear();
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || !(it->ifa_flags & IFF_UP)) continue;
    int family = it->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    socklen_t length = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    if (family == AF_INET6) {
      // Link-local addresses need a scope id on every peer: not usable as a published address.
      const auto* v6 = reinterpret_cast<const sockaddr_in6*>(it->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&v6->sin6_addr)) continue;
    }
    LocalInterface entry;
    entry.name = it->ifa_name;
    entry.address = address_from_sockaddr(it->ifa_addr, length);
    entry.address.set_port(0);
    entry.loopback = (it->ifa_flags & IFF_LOOPBACK) != 0 || entry.address.is_loopback();
    out->push_back(entry);
  }
  freeifaddrs(list);
  return Status::Ok();
}

Status choose_interface(const std::vector<LocalInterface>& interfaces, const std::string& spec_text,
                        LocalInterface* out) {
  InterfaceSpec spec = parse_interface_spec(spec_text);
  const LocalInterface* best = nullptr;
  const LocalInterface* loopback_fallback = nullptr;
  for (const auto& candidate : interfaces) {
    if (!interface_matches(spec, candidate.name)) continue;
    // An exclusion list means "anything but these": prefer a real network over loopback.
    if (spec.exclude && candidate.loopback) {
      if (!loopback_fallback) loopback_fallback = &candidate;
      continue;
    }
    if (!best || (best->address.family() == AF_INET6 && candidate.address.family() == AF_INET)) {
      best = &candidate;
    }
  }
  if (!best) best = loopback_fallback;
  if (!best) {
    std::string available;
    for (const auto& candidate : interfaces) {
      if (!available.empty()) available += ", ";
      available += candidate.name + " (" + candidate.address.ip() + ")";
    }
    return make_status(COLLX_ERR_INVALID_ARG,
                       "COLLX_SOCKET_IFNAME='%s' selects no usable interface; available: %s",
                       spec_text.c_str(), available.empty() ? "none" : available.c_str());
  }
  *out = *best;
  return Status::Ok();
}

static SocketAddress loopback_v4() {
  SocketAddress address;
  parse_address("127.0.0.1:0", &address).ignore();
  return address;
}

Status choose_local_address(const std::string& ifname, const std::string& route_to_host,
                            SocketAddress* out, std::string* why) {
  if (!ifname.empty()) {
    std::vector<LocalInterface> interfaces;
    COLLX_RETURN_IF_ERROR(list_interfaces(&interfaces));
    LocalInterface chosen;
    COLLX_RETURN_IF_ERROR(choose_interface(interfaces, ifname, &chosen));
    *out = chosen.address;
    *why = "interface " + chosen.name + " (COLLX_SOCKET_IFNAME=" + ifname + ")";
    return Status::Ok();
  }
  std::string host = host_of(route_to_host);
  if (host.empty()) {
    *out = loopback_v4();
    *why = "loopback (no interface or route host given)";
    return Status::Ok();
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* resolved = nullptr;
  int rc = getaddrinfo(host.c_str(), "9", &hints, &resolved);
  if (rc != 0) {
    return make_status(COLLX_ERR_SYSTEM, "cannot resolve '%s' to find the local network interface: %s; set COLLX_SOCKET_IFNAME",
                       host.c_str(), gai_strerror(rc));
  }
  SocketAddress target = address_from_sockaddr(resolved->ai_addr, resolved->ai_addrlen);
  freeaddrinfo(resolved);
  if (target.is_loopback()) {
    *out = loopback_v4();
    *why = "loopback (" + host + " is this host)";
    return Status::Ok();
  }
  // Connecting a UDP socket sends nothing; it only asks the kernel which local address the
  // route to the target uses.
  UniqueFd probe(::socket(target.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!probe.valid()) return system_error("socket (route probe)", errno);
  if (::connect(probe.get(), target.sa(), target.length) != 0) {
    int error = errno;
    return make_status(COLLX_ERR_SYSTEM, "no route from this host to %s (%s): %s; set COLLX_SOCKET_IFNAME",
                       host.c_str(), target.ip().c_str(), errno_string(error).c_str());
  }
  SocketAddress local;
  local.length = sizeof local.storage;
  if (::getsockname(probe.get(), local.sa(), &local.length) != 0) return system_error("getsockname (route probe)", errno);
  local.set_port(0);
  *out = local;
  *why = "the address that routes to " + host;
  return Status::Ok();
}

// ---- listen / connect -----------------------------------------------------------------------

// Large socket buffers let a whole pipeline chunk (COLLX_CHUNK_SIZE, 512 KiB) sit in the
// kernel, so a send completes without waiting for the receiver to wake up and drain it; on
// machines where a wake-up costs tens of microseconds that waiting dominated transfers.
// Set before connect/listen so the window scale negotiated at SYN allows it.
static void set_buffer_sizes(int fd, size_t requested) {
  if (requested == 0) return;
  int bytes = static_cast<int>(requested);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

Status set_nodelay(int fd) {
  int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) return system_error("setsockopt(TCP_NODELAY)", errno);
  return Status::Ok();
}

Status listen_on(const SocketAddress& address, int backlog, UniqueFd* out, SocketAddress* bound,
                 size_t socket_buffer_bytes) {
  UniqueFd fd(::socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return system_error("socket", errno);
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  set_buffer_sizes(fd.get(), socket_buffer_bytes);
  if (::bind(fd.get(), address.sa(), address.length) != 0) {
    int error = errno;
    return make_status(COLLX_ERR_SYSTEM, "cannot bind a listening socket to %s: %s", address.to_string().c_str(),
                       errno_string(error).c_str());
  }
  if (::listen(fd.get(), backlog) != 0) return system_error("listen", errno);
  SocketAddress local;
  local.length = sizeof local.storage;
  if (::getsockname(fd.get(), local.sa(), &local.length) != 0) return system_error("getsockname", errno);
  *bound = local;
  *out = std::move(fd);
  return Status::Ok();
}

int start_connect(const SocketAddress& address, UniqueFd* out, size_t socket_buffer_bytes) {
  UniqueFd fd(::socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return errno;
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  set_buffer_sizes(fd.get(), socket_buffer_bytes);
  int rc;
  do {
    rc = ::connect(fd.get(), address.sa(), address.length);
  } while (rc != 0 && errno == EINTR);
  int result = rc == 0 ? 0 : errno;
  if (result == EALREADY) result = EINPROGRESS;  // a connect retried after EINTR is still pending
  if (result == 0 || result == EINPROGRESS) *out = std::move(fd);
  return result;
}

int socket_error(int fd) {
  int error = 0;
  socklen_t length = sizeof error;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) return errno;
  return error;
}

}  // namespace tcp
}  // namespace collx
