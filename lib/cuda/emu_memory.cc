// Emulated device memory (see emu_memory.h).
#include "lib/cuda/emu_memory.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

namespace collx {
namespace cuda {
namespace emu {

namespace {

struct Registry {
  std::mutex mu;
  std::map<uintptr_t, std::shared_ptr<Mapping>> by_base;  // device address -> mapping
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: workers may run during exit
  return *r;
}

std::atomic<uint64_t> next_id{1};

}  // namespace

Mapping::~Mapping() {
  if (device) munmap(device, mapped);
  if (alias) munmap(alias, mapped);
  if (fd >= 0) close(fd);
}

Status map_file(int fd, size_t bytes, Mapping* m) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  m->mapped = (bytes + page - 1) / page * page;
  void* dev = mmap(nullptr, m->mapped, PROT_NONE, MAP_SHARED, fd, 0);
  if (dev == MAP_FAILED) return make_status(COLLX_ERR_NO_MEMORY, "emulated device: mmap of %zu bytes failed: %s",
                                            m->mapped, std::strerror(errno));
  m->device = static_cast<char*>(dev);
  void* alias = mmap(nullptr, m->mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (alias == MAP_FAILED) return make_status(COLLX_ERR_NO_MEMORY, "emulated device: mmap of %zu bytes failed: %s",
                                              m->mapped, std::strerror(errno));
  m->alias = static_cast<char*>(alias);
  return Status::Ok();
}

void register_mapping(const std::shared_ptr<Mapping>& m) {
  std::lock_guard<std::mutex> lock(registry().mu);
  registry().by_base[reinterpret_cast<uintptr_t>(m->device)] = m;
}

void unregister_mapping(const Mapping* m) {
  std::lock_guard<std::mutex> lock(registry().mu);
  auto it = registry().by_base.find(reinterpret_cast<uintptr_t>(m->device));
  if (it != registry().by_base.end() && it->second.get() == m) registry().by_base.erase(it);
}

std::shared_ptr<Mapping> find_import(int64_t pid, uint64_t id) {
  std::lock_guard<std::mutex> lock(registry().mu);
  for (const auto& entry : registry().by_base) {
    const Mapping& m = *entry.second;
    if (m.imported && m.owner_pid == pid && m.id == id) return entry.second;
  }
  return nullptr;
}

std::shared_ptr<Mapping> find_mapping(const void* ptr) {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(registry().mu);
  auto it = registry().by_base.upper_bound(p);
  if (it == registry().by_base.begin()) return nullptr;
  --it;
  if (p - it->first >= it->second->mapped) return nullptr;
  return it->second;
}

Status resolve(const void* ptr, size_t bytes, const char* what, Resolved* out) {
  std::shared_ptr<Mapping> m = find_mapping(ptr);
  if (!m) {
    return make_status(COLLX_ERR_INVALID_ARG, "%s: %p is not emulated device memory (host memory, or freed)", what,
                       ptr);
  }
  const size_t offset = static_cast<size_t>(static_cast<const char*>(ptr) - m->device);
  if (bytes > m->bytes || offset > m->bytes - bytes) {
    return make_status(COLLX_ERR_INVALID_ARG,
                       "%s: %zu bytes at offset %zu overrun the emulated device allocation of %zu bytes", what, bytes,
                       offset, m->bytes);
  }
  out->alias = m->alias + offset;
  out->mapping = std::move(m);
  return Status::Ok();
}

Status check_host(const void* ptr, const char* what) {
  if (!find_mapping(ptr)) return Status::Ok();
  return make_status(COLLX_ERR_INVALID_ARG, "%s: %p is emulated device memory where host memory is expected", what,
                     ptr);
}

Status allocate(size_t bytes, int device_index, void** out) {
  *out = nullptr;
  if (bytes == 0) return Status::Ok();
  auto m = std::make_shared<Mapping>();
  m->id = next_id.fetch_add(1);
  m->owner_pid = static_cast<int64_t>(getpid());
  m->device_index = device_index;
  m->bytes = bytes;
  const std::string name = "collx-emulated-device-" + std::to_string(m->id);
  m->fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (m->fd < 0) {
    return make_status(COLLX_ERR_SYSTEM, "emulated device: memfd_create failed: %s", std::strerror(errno));
  }
  struct stat st;
  if (ftruncate(m->fd, static_cast<off_t>(bytes)) != 0 || fstat(m->fd, &st) != 0) {
    return make_status(COLLX_ERR_NO_MEMORY, "emulated device: sizing a %zu-byte memory file failed: %s", bytes,
                       std::strerror(errno));
  }
  m->inode = static_cast<uint64_t>(st.st_ino);
  m->fs_dev = static_cast<uint64_t>(st.st_dev);
  COLLX_RETURN_IF_ERROR(map_file(m->fd, bytes, m.get()));
  register_mapping(m);
  *out = m->device;
  return Status::Ok();
}

bool release(void* ptr) {
  std::shared_ptr<Mapping> m = find_mapping(ptr);
  if (!m || m->imported || m->device != ptr) return false;
  unregister_mapping(m.get());
  return true;
}

}  // namespace emu
}  // namespace cuda
}  // namespace collx
