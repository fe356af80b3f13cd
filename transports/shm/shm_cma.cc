#include "transports/shm/shm_cma.h"

#include <errno.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstring>

namespace collx {
namespace shm {

PullResult pull_from_peer(pid_t pid, uint64_t address, void* dst, size_t bytes, int* error) {
  *error = 0;
  if (bytes == 0) return PullResult::kOk;
  // Same process (ranks as threads) also goes through the kernel: as fast as memcpy for
  // large copies, and a buffer freed behind our back (a misused cancel) gives EFAULT
  // instead of a crash. Plain memcpy only where the syscall itself is unavailable.
  const bool self = pid == ::getpid();
  size_t done = 0;
  while (done < bytes) {
    // The kernel caps one call (MAX_RW_COUNT); loop on partial reads.
    iovec local{static_cast<uint8_t*>(dst) + done, bytes - done};
    iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(address + done)), bytes - done};
    ssize_t n = ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      *error = errno;
      if (self && (errno == ENOSYS || errno == EPERM)) {
        std::memcpy(static_cast<uint8_t*>(dst) + done,
                    reinterpret_cast<const void*>(static_cast<uintptr_t>(address + done)), bytes - done);
        return PullResult::kOk;
      }
      if (errno == EPERM || errno == ENOSYS || errno == EACCES) return PullResult::kUnsupported;
      return PullResult::kFailed;
    }
    if (n == 0) {
      *error = EFAULT;
      return PullResult::kFailed;
    }
    done += static_cast<size_t>(n);
  }
  return PullResult::kOk;
}

}  // namespace shm
}  // namespace collx
