// What the kernel says about the liveness options of a process's TCP sockets, so tests can
// check that every connection collx opened carries keepalive and the expected user timeout.
#pragma once

#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <sys/socket.h>

#include <string>
#include <vector>

namespace collx {
namespace testing {

struct ObservedLiveness {
  int keepalive = -1;  // SO_KEEPALIVE
  int idle_s = -1;     // TCP_KEEPIDLE
  int interval_s = -1; // TCP_KEEPINTVL
  int count = -1;      // TCP_KEEPCNT
  int user_timeout_ms = -1;

  std::string text() const {
    return "keepalive " + std::to_string(keepalive) + ", idle " + std::to_string(idle_s) + " s, interval " +
           std::to_string(interval_s) + " s, count " + std::to_string(count) + ", user timeout " +
           std::to_string(user_timeout_ms) + " ms";
  }
};

inline ObservedLiveness observe_liveness(int fd) {
  ObservedLiveness out;
  socklen_t length = sizeof(int);
  getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &out.keepalive, &length);
  length = sizeof(int);
  getsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &out.idle_s, &length);
  length = sizeof(int);
  getsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &out.interval_s, &length);
  length = sizeof(int);
  getsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &out.count, &length);
  length = sizeof(int);
  getsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &out.user_timeout_ms, &length);
  return out;
}

// The descriptors of this process that are connected TCP sockets (a peer address to show).
inline std::vector<int> connected_tcp_sockets() {
  std::vector<int> fds;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return fds;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const int fd = atoi(entry->d_name);
    int type = 0;
    socklen_t length = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) != 0 || type != SOCK_STREAM) continue;
    sockaddr_storage peer{};
    socklen_t peer_length = sizeof peer;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0) continue;
    if (peer.ss_family != AF_INET && peer.ss_family != AF_INET6) continue;
    fds.push_back(fd);
  }
  closedir(dir);
  return fds;
}

// Checks every connected TCP socket of this process that is not in `before` against the
// expected options. Returns the mismatches as text ("" when all match); *checked counts the
// sockets looked at.
inline std::string liveness_mismatches(const std::vector<int>& before, const ObservedLiveness& want, int* checked) {
  std::string mismatches;
  *checked = 0;
  for (int fd : connected_tcp_sockets()) {
    bool old = false;
    for (int b : before) old = old || b == fd;
    if (old) continue;
    ++*checked;
    const ObservedLiveness seen = observe_liveness(fd);
    if (seen.keepalive != want.keepalive || seen.idle_s != want.idle_s || seen.interval_s != want.interval_s ||
        seen.count != want.count || seen.user_timeout_ms != want.user_timeout_ms) {
      mismatches += "fd " + std::to_string(fd) + ": " + seen.text() + "\n";
    }
  }
  return mismatches;
}

}  // namespace testing
}  // namespace collx
