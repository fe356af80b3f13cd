// Memory of the emulated device: each allocation is a memory file mapped twice, a PROT_NONE
// mapping whose address is the "device pointer" (host code touching it gets SIGSEGV, as on a
// GPU) and a read-write alias only the emulator's workers use. A registry of address ranges
// answers pointer-kind questions and translates device addresses to aliases. IPC handles name
// the memory file (owner pid, descriptor, inode), so a peer process can map it too.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "lib/common/status.h"
#include "lib/cuda/device.h"

namespace collx {
namespace cuda {
namespace emu {

// One mapped memory file. Unmapped when the last reference goes: the registry holds one
// until free / ipc_close, and every queued operation holds one until it has run, so work
// queued before a free never touches unmapped memory.
struct Mapping {
  ~Mapping();
  char* device = nullptr;  // PROT_NONE: the address callers see
  char* alias = nullptr;   // read-write, same pages
  size_t bytes = 0;        // as allocated
  size_t mapped = 0;       // rounded up to pages
  int device_index = 0;
  int fd = -1;             // kept open by the owner (peers reopen it through /proc); -1 for imports
  bool imported = false;   // from ipc_open
  int opens = 0;           // ipc_open calls not yet closed (imports)
  uint64_t id = 0;         // unique per allocation of the owner process
  int64_t owner_pid = 0;
  uint64_t inode = 0, fs_dev = 0;
};

// A device range resolved to its alias, keeping the mapping alive.
struct Resolved {
  std::shared_ptr<Mapping> mapping;
  char* alias = nullptr;
};

// The live mapping containing `ptr`, or null.
std::shared_ptr<Mapping> find_mapping(const void* ptr);
// `bytes` at `ptr` inside one live emulated mapping; an error naming `what` otherwise.
Status resolve(const void* ptr, size_t bytes, const char* what, Resolved* out);
// An error naming `what` when `ptr` is emulated device memory (a host-side argument).
Status check_host(const void* ptr, const char* what);

Status allocate(size_t bytes, int device_index, void** out);
// Unregisters an allocation made by allocate(); false when `ptr` is not one.
bool release(void* ptr);

// Maps `fd` (a memory file of at least `bytes`) twice and fills m->device, alias, mapped.
Status map_file(int fd, size_t bytes, Mapping* m);
// Registry hooks of IPC (emu_ipc.cc), under the registry's lock.
void register_mapping(const std::shared_ptr<Mapping>& m);
// The import of (owner pid, allocation id) when open, else null.
std::shared_ptr<Mapping> find_import(int64_t pid, uint64_t id);
// Unregisters `m` (its pages stay mapped while queued work holds it).
void unregister_mapping(const Mapping* m);

}  // namespace emu
}  // namespace cuda
}  // namespace collx
