// Cross-memory attach: copy a peer's buffer straight into ours with process_vm_readv (one
// copy, no ring). Ranks that are threads of one process just memcpy.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace collx {
namespace shm {

enum class PullResult {
  kOk,
  kUnsupported,  // EPERM / ENOSYS / EACCES: ptrace restrictions or no CMA; use the ring instead
  kFailed,       // anything else (EFAULT, ESRCH, short read): errno in *error
};

// Copies `bytes` from `address` in process `pid` to `dst`.
PullResult pull_from_peer(pid_t pid, uint64_t address, void* dst, size_t bytes, int* error);

}  // namespace shm
}  // namespace collx
