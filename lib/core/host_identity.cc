#include "lib/core/host_identity.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include <cstring>

#include "lib/common/settings.h"
#include "lib/common/strings.h"

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

// The kernel's boot id ("" on a system without one, the same for every rank there). A read
// that fails for lack of descriptors or memory is an error: an empty id on some ranks only
// would make ranks of this host look like ranks of another one.
static Status read_boot_id(std::string* out) {
  const char* path = "/proc/sys/kernel/random/boot_id";
  out->clear();
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == EMFILE || errno == ENFILE || errno == ENOMEM) {
      return make_status(COLLX_ERR_SYSTEM, "cannot read %s (it tells which ranks share this host): %s", path,
                         std::strerror(errno));
    }
    return Status::Ok();
  }
  char buffer[64];
  const ssize_t n = ::read(fd, buffer, sizeof buffer);
  ::close(fd);
  if (n > 0) out->assign(buffer, static_cast<size_t>(n));
  const size_t newline = out->find('\n');
  if (newline != std::string::npos) out->resize(newline);
  return Status::Ok();
}

static std::string read_link(const char* path) {
  char buffer[256];
  ssize_t n = readlink(path, buffer, sizeof buffer - 1);
  return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : std::string();
}

// "pid:[4026531836]" -> 4026531836.
static uint64_t pid_namespace() {
  const std::string link = read_link("/proc/self/ns/pid");
  const size_t open = link.find('[');
  if (open == std::string::npos) return 0;
  return std::strtoull(link.c_str() + open + 1, nullptr, 10);
}

// COLLX_TEST_HOST_ID (tests only): "a,a,b,b" gives world rank r the r-th label, a value
// without commas labels every rank; ranks past the end of the list get no label.
static std::string test_host_label(int world_rank) {
  const std::string spec = setting_raw(SettingId::TEST_HOST_ID);
  if (spec.empty()) return std::string();
  if (spec.find(',') == std::string::npos) return spec;
  const std::vector<std::string> labels = split_trimmed(spec, ',');
  if (world_rank < 0 || static_cast<size_t>(world_rank) >= labels.size()) return std::string();
  return labels[static_cast<size_t>(world_rank)];
}

Status this_host(int world_rank, HostIdentity* out) {
  HostIdentity id;
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  id.hostname = name;
  std::string boot_id;
  COLLX_RETURN_IF_ERROR(read_boot_id(&boot_id));
  std::string key = id.hostname + "|" + boot_id + "|" + read_link("/proc/self/ns/ipc") + "|" +
                    read_link("/proc/self/ns/net");
  const std::string label = test_host_label(world_rank);
  if (!label.empty()) key += "|test-host:" + label;
  id.host_hash = fnv1a64(key.data(), key.size());
  id.pid = static_cast<int32_t>(getpid());
  id.pid_ns = pid_namespace();
  *out = std::move(id);
  return Status::Ok();
}

bool known_dead(const HostIdentity& me, const HostIdentity& peer) {
  if (peer.pid <= 0 || peer.pid_ns == 0) return false;
  if (peer.host_hash != me.host_hash || peer.pid_ns != me.pid_ns) return false;
  return ::kill(peer.pid, 0) != 0 && errno == ESRCH;
}

std::vector<uint8_t> encode_host_identity(const HostIdentity& id) {
  // host_hash (8) | pid (4) | pid_ns (8) | hostname
  std::vector<uint8_t> out(20 + id.hostname.size());
  std::memcpy(out.data(), &id.host_hash, 8);
  std::memcpy(out.data() + 8, &id.pid, 4);
  std::memcpy(out.data() + 12, &id.pid_ns, 8);
  std::memcpy(out.data() + 20, id.hostname.data(), id.hostname.size());
  return out;
}

Status decode_host_identity(const std::vector<uint8_t>& bytes, HostIdentity* out) {
  if (bytes.size() < 20 || bytes.size() > 20 + 255) {
    return make_status(COLLX_ERR_PROTOCOL, "host identity of %zu bytes is malformed", bytes.size());
  }
  std::memcpy(&out->host_hash, bytes.data(), 8);
  std::memcpy(&out->pid, bytes.data() + 8, 4);
  std::memcpy(&out->pid_ns, bytes.data() + 12, 8);
  out->hostname.assign(reinterpret_cast<const char*>(bytes.data()) + 20, bytes.size() - 20);
  return Status::Ok();
}

}  // namespace collx
