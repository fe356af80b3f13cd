// The ranks of one attempt on this node: started as children in their own process groups
// (so a signal reaches every process a rank spawned), killed with the agent (PDEATHSIG),
// their stdout and stderr read through pipes and written out line by line as "[rank] line".
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "lib/common/status.h"

namespace collx_run {

struct RankSpec {
  int rank = 0;
  std::vector<std::pair<std::string, std::string>> env;  // set on top of the agent's own
};

// A rank's end: exit code, or 128 + signal like a shell.
int exit_status_of(int wait_status);

class RankGroup {
 public:
  ~RankGroup();

  collx::Status start(const std::vector<std::string>& program, const std::vector<RankSpec>& ranks);

  // Waits up to `timeout_ms` for output (copied out as whole prefixed lines) or for `wake_fd`
  // to become readable; never spins.
  void pump_output(int wake_fd, int timeout_ms);
  // Reaps ranks that ended; returns (rank, exit status) of each.
  std::vector<std::pair<int, int>> reap();

  void signal_all(int signo);
  bool all_exited() const;
  // Writes out any unterminated last lines (after every rank has exited).
  void flush_output();

 private:
  struct Stream {
    int fd = -1;
    int rank = 0;
    int out_fd = 1;  // where its lines go: 1 or 2
    std::string pending;
  };
  struct Child {
    pid_t pid = -1;
    int rank = 0;
    bool exited = false;
  };
  void emit_lines(Stream* s, bool flush_partial);

  std::vector<Child> children_;
  std::vector<Stream> streams_;
};

}  // namespace collx_run
