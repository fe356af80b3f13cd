// Is a peer process still alive? With no sockets there is no EOF to tell us, so the waiter
// asks the kernel every ~100 ms: a pidfd (Linux >= 5.3) becomes readable when the process
// exits (zombies included); without pidfd_open, kill(pid, 0) plus /proc/<pid>/stat's state
// (a killed child stays a zombie until its parent reaps it).
#pragma once

#include <sys/types.h>

namespace collx {
namespace shm {

class PeerProcess {
 public:
  PeerProcess() = default;
  ~PeerProcess();
  PeerProcess(const PeerProcess&) = delete;
  PeerProcess& operator=(const PeerProcess&) = delete;

  // Starts watching `pid` (opens the pidfd when available).
  void watch(pid_t pid);
  // False once the process has exited.
  bool alive() const;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = 0;
  int pidfd_ = -1;
};

}  // namespace shm
}  // namespace collx
