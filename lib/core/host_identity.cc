#include "lib/core/host_identity.h"

#include <unistd.h>

#include <cstring>
#include <fstream>

namespace collx {

uint64_t fnv1a64(const void* data, size_t size, uint64_t seed) {
  uint64_t hash = seed;
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= 1099511628211ull;
  }
  return hash;
}

static std::string read_first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

static std::string read_link(const char* path) {
  char buffer[256];
  ssize_t n = readlink(path, buffer, sizeof buffer - 1);
  return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : std::string();
}

HostIdentity this_host() {
  HostIdentity id;
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  id.hostname = name;
  std::string key = id.hostname + "|" + read_first_line("/proc/sys/kernel/random/boot_id") + "|" +
                    read_link("/proc/self/ns/ipc") + "|" + read_link("/proc/self/ns/net");
  id.host_hash = fnv1a64(key.data(), key.size());
  id.pid = static_cast<int32_t>(getpid());
  return id;
}

std::vector<uint8_t> encode_host_identity(const HostIdentity& id) {
  std::vector<uint8_t> out(12 + id.hostname.size());
  std::memcpy(out.data(), &id.host_hash, 8);
  std::memcpy(out.data() + 8, &id.pid, 4);
  std::memcpy(out.data() + 12, id.hostname.data(), id.hostname.size());
  return out;
}

Status decode_host_identity(const std::vector<uint8_t>& bytes, HostIdentity* out) {
  if (bytes.size() < 12 || bytes.size() > 12 + 255) {
    return make_status(COLLX_ERR_PROTOCOL, "host identity of %zu bytes is malformed", bytes.size());
  }
  std::memcpy(&out->host_hash, bytes.data(), 8);
  std::memcpy(&out->pid, bytes.data() + 8, 4);
  out->hostname.assign(reinterpret_cast<const char*>(bytes.data()) + 12, bytes.size() - 12);
  return Status::Ok();
}

}  // namespace collx
