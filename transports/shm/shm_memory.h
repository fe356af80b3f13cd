// Host memory that ranks on the same host can map (collx_mem_alloc): each allocation is an
// anonymous memory file (memfd) mapped shared; this process keeps its descriptor open so a
// peer can open it through /proc/<pid>/fd/<fd> (the same permission as cross-memory attach)
// and map the very pages. Nothing has a name in /dev/shm, so a killed rank leaves nothing.
//
// Threads: every function is thread-safe (one process-wide registry under a mutex).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "lib/common/status.h"

namespace collx {
namespace shm {

// Where a piece of memory lies, for a peer that wants to map it. id == 0: not in shared
// memory (a peer reads it with cross-memory attach, or through the boards).
struct SharedRegion {
  uint64_t id = 0;     // the memory file's inode: unique among live allocations on the host
  uint64_t base = 0;   // the region's address in its owner's process
  uint64_t bytes = 0;  // its length (whole pages)
  int64_t fd = -1;     // the owner's descriptor of the memory file
};

// Page-aligned, zero-filled memory of at least `bytes` (> 0) bytes in its own memory file.
// Where memory files are unavailable it falls back to private pages (still usable, never
// mapped by peers): *shared says which.
Status allocate_shared_memory(size_t bytes, void** out, bool* shared);
// Frees what allocate_shared_memory returned; COLLX_ERR_INVALID_ARG for any other pointer
// (including one freed already). nullptr is a no-op.
Status free_shared_memory(void* p);
// The region holding [p, p + bytes) when all of it lies in one allocation; else id 0.
SharedRegion find_shared_region(const void* p, size_t bytes);

// A peer's region mapped read-only in this process. Unmaps on destruction.
class MappedRegion {
 public:
  MappedRegion() = default;
  ~MappedRegion();
  MappedRegion(MappedRegion&& other) noexcept;
  MappedRegion& operator=(MappedRegion&& other) noexcept;
  MappedRegion(const MappedRegion&) = delete;
  MappedRegion& operator=(const MappedRegion&) = delete;

  // Opens `pid`'s descriptor of `region`, checks it is that memory file (inode and size) and
  // maps it. False (with errno's value in *error) when the kernel refuses or the file is not
  // the one described.
  bool map(pid_t pid, const SharedRegion& region, int* error);
  bool mapped() const { return local_ != nullptr; }
  const SharedRegion& region() const { return region_; }
  // The local address of the peer's address `remote`, which must lie in the region.
  const uint8_t* at(uint64_t remote) const { return local_ + (remote - region_.base); }
  bool holds(uint64_t remote, size_t bytes) const {
    return remote >= region_.base && bytes <= region_.bytes && remote - region_.base <= region_.bytes - bytes;
  }

 private:
  void release();
  SharedRegion region_;
  uint8_t* local_ = nullptr;
};

}  // namespace shm
}  // namespace collx
