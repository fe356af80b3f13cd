// Is a peer process on this host still alive? UCX notices a dead peer on connection-based
// transports, but its shared-memory transports only through keepalive (seconds to tens of
// seconds), so same-host peers are also watched by pid: a pidfd where the kernel has them
// (readable once the process exited, zombie or not), else /proc/<pid>/stat.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace collx {
namespace ucx {

// "<boot id>/<pid namespace>": equal for two processes iff their pids mean the same thing.
std::string pid_space_id();

class PeerProcess {
 public:
  PeerProcess() = default;
  PeerProcess(const PeerProcess&) = delete;
  PeerProcess& operator=(const PeerProcess&) = delete;
  ~PeerProcess();
  void watch(pid_t pid);
  bool watching() const { return pid_ > 0; }
  // False once the watched process exited (true when not watching).
  bool alive() const;

 private:
  pid_t pid_ = 0;
  int pidfd_ = -1;
};

}  // namespace ucx
}  // namespace collx
