// The emulated device's settings, device count, current device, UUIDs and pointer queries.
#include "lib/cuda/emu_config.h"

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>

#include "lib/common/log.h"
#include "lib/common/settings.h"
#include "lib/cuda/backends.h"
#include "lib/cuda/emu_memory.h"

namespace collx {
namespace cuda {
namespace emu {

namespace {

thread_local int current = 0;
std::atomic<uint64_t> probes{0};  // pointer_kind() calls

Config read_config() {
  Config c;
  const std::string mode = setting_raw(SettingId::TEST_DEVICE);
  if (mode.empty()) return c;
  if (mode != "emulated") {
    COLLX_WARN(INIT, "COLLX_TEST_DEVICE='%s' is not a known test device ('emulated'); the real CUDA layer is used",
               mode.c_str());
    return c;
  }
  c.active = true;
  int64_t v = 0;
  if (!setting_int(SettingId::TEST_DEVICE_COUNT, &v).ok() || v < 1 || v > 64) {
    COLLX_WARN(INIT, "COLLX_TEST_DEVICE_COUNT='%s' is not 1..64; emulating 1 device",
               setting_raw(SettingId::TEST_DEVICE_COUNT).c_str());
    v = 1;
  }
  c.devices = static_cast<int>(v);
  v = 0;
  if (!setting_int(SettingId::TEST_DEVICE_DELAY_US, &v).ok() || v < 0) {
    COLLX_WARN(INIT, "COLLX_TEST_DEVICE_DELAY_US='%s' is not a count of microseconds >= 0; no delay",
               setting_raw(SettingId::TEST_DEVICE_DELAY_US).c_str());
    v = 0;
  }
  c.delay_us = v;
  v = 1;
  if (!setting_int(SettingId::TEST_DEVICE_PEER_ACCESS, &v).ok() || v < 0 || v > 1) {
    COLLX_WARN(INIT, "COLLX_TEST_DEVICE_PEER_ACCESS='%s' is not 0 or 1; peer access is allowed",
               setting_raw(SettingId::TEST_DEVICE_PEER_ACCESS).c_str());
    v = 1;
  }
  c.peer_access = v == 1;
  COLLX_WARN(INIT, "COLLX_TEST_DEVICE=emulated: CUDA calls run on the emulated test device (%d device(s), delay up "
             "to %lld us per operation), not on a GPU; for tests only", c.devices, static_cast<long long>(c.delay_us));
  return c;
}

// FNV-1a, 64 bits.
uint64_t fnv(const std::string& text, uint64_t h) {
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

const Config& config() {
  static const Config c = read_config();
  return c;
}

int current_index() { return current; }

bool active() { return config().active; }

int device_count(std::string* why) {
  if (why) why->clear();
  return config().devices;
}

int pointer_kind(const void* ptr) {
  probes.fetch_add(1, std::memory_order_relaxed);
  return ptr && find_mapping(ptr) ? COLLX_MEM_CUDA : COLLX_MEM_HOST;
}

uint64_t pointer_kind_probes() { return probes.load(std::memory_order_relaxed); }

Status pointer_device(const void* ptr, int* device) {
  std::shared_ptr<Mapping> m = find_mapping(ptr);
  if (!m) return make_status(COLLX_ERR_INVALID_ARG, "pointer_device: %p is not emulated device memory", ptr);
  *device = m->device_index;
  return Status::Ok();
}

Status set_device(int device) {
  if (device < 0 || device >= config().devices) {
    return make_status(COLLX_ERR_INVALID_ARG, "set_device: device %d does not exist (%d emulated device(s), "
                       "COLLX_TEST_DEVICE_COUNT)", device, config().devices);
  }
  current = device;
  return Status::Ok();
}

Status current_device(int* device) {
  *device = current;
  return Status::Ok();
}

int multiprocessor_count() { return 4; }

// Stable per host and device index: the host's boot id and name hashed with the index.
Status device_uuid(int device, uint8_t out[16]) {
  if (device < 0 || device >= config().devices) {
    return make_status(COLLX_ERR_INVALID_ARG, "device_uuid: device %d does not exist (%d emulated device(s))", device,
                       config().devices);
  }
  std::string host;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::getline(boot, host);
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  host += name;
  const std::string key = host + "/emulated-device/" + std::to_string(device);
  const uint64_t a = fnv(key, 14695981039346656037ull), b = fnv(key, a ^ 0x9e3779b97f4a7c15ull);
  std::memcpy(out, &a, 8);
  std::memcpy(out + 8, &b, 8);
  return Status::Ok();
}

// --- Peer access: every pair of devices, or none (COLLX_TEST_DEVICE_PEER_ACCESS) ---
namespace {
Status check_device(const char* fn, int device) {
  if (device >= 0 && device < config().devices) return Status::Ok();
  return make_status(COLLX_ERR_INVALID_ARG, "%s: device %d does not exist (%d emulated device(s))", fn, device,
                     config().devices);
}
}  // namespace

Status device_can_access_peer(int device, int peer, bool* can) {
  *can = false;
  COLLX_RETURN_IF_ERROR(check_device("device_can_access_peer", device));
  COLLX_RETURN_IF_ERROR(check_device("device_can_access_peer", peer));
  *can = device == peer || config().peer_access;
  return Status::Ok();
}

Status device_enable_peer_access(int peer) {
  COLLX_RETURN_IF_ERROR(check_device("device_enable_peer_access", peer));
  if (peer == current || config().peer_access) return Status::Ok();
  return make_status(COLLX_ERR_CUDA, "device_enable_peer_access: device %d cannot access device %d "
                     "(emulated cudaErrorPeerAccessUnsupported, COLLX_TEST_DEVICE_PEER_ACCESS=0)", current, peer);
}

}  // namespace emu
}  // namespace cuda
}  // namespace collx
