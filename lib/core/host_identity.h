// Which ranks share a host. Two ranks share a host when they share the kernel instance and
// the IPC and network namespaces (so shared memory and loopback reach each other): that
// makes containers and network-namespace "hosts" count as separate hosts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/common/status.h"

namespace collx {

struct HostIdentity {
  std::string hostname;
  uint64_t host_hash = 0;  // hostname + boot id + ipc and net namespace inodes
  int32_t pid = 0;
  // Inode of the process's pid namespace (/proc/self/ns/pid; 0 when unreadable). A peer's
  // pid means the same process here only when host_hash and pid_ns both match
  // (communicator shrink checks whether a silent peer's process still exists).
  uint64_t pid_ns = 0;
};

// Whether the process of `peer` is known to have exited: it shares the host and pid
// namespace of `me` (this process's identity as published) and kill(pid, 0) says ESRCH.
// False when unknown (another host, another namespace, or it exists).
bool known_dead(const HostIdentity& me, const HostIdentity& peer);

// This process's identity. `world_rank` picks its label in COLLX_TEST_HOST_ID (tests only:
// fake hosts on one machine, salted into host_hash; see lib/common/settings.h).
// COLLX_ERR_SYSTEM naming the cause when the boot id cannot be read for lack of descriptors
// or memory (a guessed identity would split one host's ranks into several hosts).
Status this_host(int world_rank, HostIdentity* out);
std::vector<uint8_t> encode_host_identity(const HostIdentity& id);
Status decode_host_identity(const std::vector<uint8_t>& bytes, HostIdentity* out);

// 64-bit FNV-1a, for identities that must agree across ranks.
uint64_t fnv1a64(const void* data, size_t size, uint64_t seed = 1469598103934665603ull);

}  // namespace collx
