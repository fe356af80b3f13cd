// Peer process liveness by pidfd or /proc (see ucx_liveness.h).
#include "transports/ucx/ucx_liveness.h"

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>

namespace collx {
namespace ucx {

std::string pid_space_id() {
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  struct stat st {};
  unsigned long long ns = ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<unsigned long long>(st.st_ino) : 0;
  return boot + "/" + std::to_string(ns);
}

PeerProcess::~PeerProcess() {
  if (pidfd_ >= 0) ::close(pidfd_);
}

void PeerProcess::watch(pid_t pid) {
  pid_ = pid;
#ifdef SYS_pidfd_open
  pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#endif
}

bool PeerProcess::alive() const {
  if (pid_ <= 0) return true;
  if (pidfd_ >= 0) {
    pollfd pfd{pidfd_, POLLIN, 0};
    return ::poll(&pfd, 1, 0) == 0;
  }
  if (::kill(pid_, 0) != 0 && errno == ESRCH) return false;
  // A zombie (exited, not yet reaped) still answers kill(0).
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid_));
  std::ifstream stat(path);
  std::string pid_field, comm, state;
  if (!(stat >> pid_field)) return false;
  std::string rest((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  size_t close_paren = rest.rfind(')');
  if (close_paren == std::string::npos || close_paren + 2 >= rest.size()) return true;
  return rest[close_paren + 2] != 'Z';
}

}  // namespace ucx
}  // namespace collx
