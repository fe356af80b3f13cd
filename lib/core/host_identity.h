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
};

HostIdentity this_host();
std::vector<uint8_t> encode_host_identity(const HostIdentity& id);
Status decode_host_identity(const std::vector<uint8_t>& bytes, HostIdentity* out);

// 64-bit FNV-1a, for identities that must agree across ranks.
uint64_t fnv1a64(const void* data, size_t size, uint64_t seed = 1469598103934665603ull);

}  // namespace collx
