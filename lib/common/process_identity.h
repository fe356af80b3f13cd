// Which process this is, in a form that tells processes apart where a pid cannot: two
// containers (pid namespaces) on one host can each run a pid 7, and a forked child must not
// pass for its parent. Used where ranks decide they share an address space (CUDA IPC passes
// raw pointers between ranks of one process instead of IPC handles).
#pragma once

#include <cstdint>

namespace collx {

struct ProcessIdentity {
  int64_t pid = 0;         // getpid() when the identity was made
  uint8_t nonce[16] = {};  // random, made once per process (again after a fork)
};

// This process's identity. Thread-safe; cheap after the first call in a process.
ProcessIdentity this_process();

// True only for two identities of one process: equal pids alone are not enough.
bool same_process(const ProcessIdentity& a, const ProcessIdentity& b);

}  // namespace collx
