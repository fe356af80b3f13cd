#include "transports/shm/shm_memory.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "lib/common/log.h"

namespace collx {
namespace shm {

namespace {

struct Allocation {
  size_t bytes = 0;  // mapped length (whole pages)
  int fd = -1;       // -1: private pages (no memory file)
  uint64_t id = 0;
};

// Allocations of this process by base address.
struct Registry {
  std::mutex mu;
  std::map<uintptr_t, Allocation> by_base;
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: frees may run during exit
  return *r;
}

size_t page_bytes() {
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

int open_memory_file() {
#ifdef MFD_CLOEXEC
  return ::memfd_create("collx-mem", MFD_CLOEXEC);
#else
  errno = ENOSYS;
  return -1;
#endif
}

}  // namespace

Status allocate_shared_memory(size_t bytes, void** out, bool* shared) {
  if (out == nullptr) return make_status(COLLX_ERR_INVALID_ARG, "collx_mem_alloc: ptr is NULL");
  *out = nullptr;
  if (bytes == 0) return make_status(COLLX_ERR_INVALID_ARG, "collx_mem_alloc: bytes is 0");
  const size_t page = page_bytes();
  if (bytes > SIZE_MAX - page) return make_status(COLLX_ERR_INVALID_ARG, "collx_mem_alloc: %zu bytes is too many", bytes);
  const size_t length = (bytes + page - 1) / page * page;
  Allocation a;
  a.bytes = length;
  void* p = MAP_FAILED;
  int fd = open_memory_file();
  if (fd >= 0) {
    struct stat st;
    if (::ftruncate(fd, static_cast<off_t>(length)) == 0 && ::fstat(fd, &st) == 0) {
      p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      a.fd = fd;
      a.id = static_cast<uint64_t>(st.st_ino);
    }
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      if (err == ENOMEM || err == ENOSPC || err == EFBIG) {
        return make_status(COLLX_ERR_NO_MEMORY, "collx_mem_alloc: %zu bytes of shared memory: %s", bytes,
                           std::strerror(err));
      }
      a.fd = -1;
      a.id = 0;
    }
  }
  if (p == MAP_FAILED) {
    // No memory files here (old kernel, seccomp): private pages still make a valid buffer.
    static std::once_flag warned;
    std::call_once(warned, [] {
      COLLX_WARN(kInit, "collx_mem_alloc: memory files unavailable (%s); buffers are private, peers copy from them",
                 std::strerror(errno));
    });
    p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      return make_status(COLLX_ERR_NO_MEMORY, "collx_mem_alloc: %zu bytes: %s", bytes, std::strerror(errno));
    }
  }
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    r.by_base[reinterpret_cast<uintptr_t>(p)] = a;
  }
  *out = p;
  if (shared) *shared = a.fd >= 0;
  return Status::Ok();
}

Status free_shared_memory(void* p) {
  if (p == nullptr) return Status::Ok();
  Allocation a;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.by_base.find(reinterpret_cast<uintptr_t>(p));
    if (it == r.by_base.end()) {
      return make_status(COLLX_ERR_INVALID_ARG,
                         "collx_mem_free: %p is not memory from collx_mem_alloc (or was freed already)", p);
    }
    a = it->second;
    r.by_base.erase(it);
  }
  ::munmap(p, a.bytes);
  if (a.fd >= 0) ::close(a.fd);
  return Status::Ok();
}

SharedRegion find_shared_region(const void* p, size_t bytes) {
  SharedRegion region;
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.by_base.empty()) return region;
  auto it = r.by_base.upper_bound(address);
  if (it == r.by_base.begin()) return region;
  --it;
  const Allocation& a = it->second;
  const uintptr_t offset = address - it->first;
  if (a.fd < 0 || offset > a.bytes || bytes > a.bytes - offset) return region;
  region.id = a.id;
  region.base = it->first;
  region.bytes = a.bytes;
  region.fd = a.fd;
  return region;
}

MappedRegion::~MappedRegion() { release(); }

MappedRegion::MappedRegion(MappedRegion&& other) noexcept : region_(other.region_), local_(other.local_) {
  other.local_ = nullptr;
}

MappedRegion& MappedRegion::operator=(MappedRegion&& other) noexcept {
  if (this != &other) {
    release();
    region_ = other.region_;
    local_ = other.local_;
    other.local_ = nullptr;
  }
  return *this;
}

void MappedRegion::release() {
  if (local_ != nullptr) ::munmap(local_, region_.bytes);
  local_ = nullptr;
}

bool MappedRegion::map(pid_t pid, const SharedRegion& region, int* error) {
  release();
  *error = 0;
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(region.fd);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = errno;
    return false;
  }
  // The descriptor number may have been reused by the time we opened it: only the very
  // memory file described (its inode, at least its length) is mapped.
  struct stat st;
  bool same = ::fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_ino) == region.id &&
              static_cast<uint64_t>(st.st_size) >= region.bytes;
  void* p = MAP_FAILED;
  if (same) {
    p = ::mmap(nullptr, region.bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) *error = errno;
  } else {
    *error = ESTALE;
  }
  ::close(fd);
  if (p == MAP_FAILED) return false;
  region_ = region;
  local_ = static_cast<uint8_t*>(p);
  return true;
}

}  // namespace shm
}  // namespace collx
