#include "transports/shm/shm_liveness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace collx {
namespace shm {

PeerProcess::~PeerProcess() {
  if (pidfd_ >= 0) ::close(pidfd_);
}

void PeerProcess::watch(pid_t pid) {
  pid_ = pid;
#ifdef SYS_pidfd_open
  // Fails with ENOSYS on kernels before 5.3 (and in some seccomp sandboxes): fall back.
  long fd = ::syscall(SYS_pidfd_open, pid, 0);
  if (fd >= 0) {
    pidfd_ = static_cast<int>(fd);
    ::fcntl(pidfd_, F_SETFD, FD_CLOEXEC);
  }
#endif
}

bool PeerProcess::alive() const {
  if (pidfd_ >= 0) {
    pollfd p{pidfd_, POLLIN, 0};
    int n = ::poll(&p, 1, 0);
    return !(n > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)));
  }
  if (::kill(pid_, 0) != 0 && errno == ESRCH) return false;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid_));
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno != ENOENT;
  char buf[512];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return true;
  buf[n] = '\0';
  // "pid (comm) S ...": comm may contain spaces and parentheses, so find the last ')'.
  const char* close_paren = std::strrchr(buf, ')');
  if (close_paren == nullptr || close_paren[1] == '\0' || close_paren[2] == '\0') return true;
  char state = close_paren[2];
  return state != 'Z' && state != 'X';
}

}  // namespace shm
}  // namespace collx
