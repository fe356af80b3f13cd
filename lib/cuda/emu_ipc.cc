// IPC handles of the emulated device. A handle names the owner's memory file: its pid and
// descriptor (reopened through /proc/<pid>/fd, as a pidfd_getfd would) and its inode, which
// tells a reused descriptor from the file. Lifetime rules of cudaIpcOpenMemHandle / Close:
// - opening in the exporting process is an error (CUDA: cudaErrorDeviceUninitialized /
//   invalid context);
// - opening a handle already open in this process returns the same address and counts the
//   opens; each ipc_close drops one, the last unmaps;
// - the exporter's free does not take pages away from a process that has them mapped (the
//   mapping holds the memory file), but a handle opened after that free fails: the
//   descriptor is closed (or reused by another file).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>

#include "lib/cuda/backends.h"
#include "lib/cuda/emu_memory.h"

namespace collx {
namespace cuda {
namespace emu {

namespace {

constexpr char kMagic[8] = {'c', 'o', 'l', 'l', 'x', 'e', 'm', 'u'};

struct HandleBody {
  char magic[8];
  int64_t pid;
  uint64_t id;
  uint64_t inode;
  uint64_t fs_dev;
  uint64_t bytes;
  int32_t fd;
  int32_t device_index;
};
static_assert(sizeof(HandleBody) <= kIpcHandleBytes, "emulated IPC handle fits CUDA's 64 bytes");

std::mutex& open_mutex() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}

}  // namespace

Status ipc_get_handle(const void* ptr, IpcHandle* handle, uintptr_t* base, size_t* offset) {
  std::shared_ptr<Mapping> m = find_mapping(ptr);
  if (!m) return make_status(COLLX_ERR_INVALID_ARG, "%p is not in an emulated device allocation (IPC needs one)", ptr);
  if (m->imported) {
    return make_status(COLLX_ERR_INVALID_ARG, "%p is in memory opened from another process's IPC handle; only the "
                       "owner can export it", ptr);
  }
  HandleBody body;
  std::memset(&body, 0, sizeof body);
  std::memcpy(body.magic, kMagic, sizeof kMagic);
  body.pid = m->owner_pid;
  body.id = m->id;
  body.inode = m->inode;
  body.fs_dev = m->fs_dev;
  body.bytes = m->bytes;
  body.fd = m->fd;
  body.device_index = m->device_index;
  std::memset(handle->bytes, 0, kIpcHandleBytes);
  std::memcpy(handle->bytes, &body, sizeof body);
  *base = reinterpret_cast<uintptr_t>(m->device);
  *offset = static_cast<size_t>(static_cast<const char*>(ptr) - m->device);
  return Status::Ok();
}

Status ipc_open(const IpcHandle& handle, void** base) {
  *base = nullptr;
  HandleBody body;
  std::memcpy(&body, handle.bytes, sizeof body);
  if (std::memcmp(body.magic, kMagic, sizeof kMagic) != 0) {
    return make_status(COLLX_ERR_INVALID_ARG, "not an IPC handle of the emulated device");
  }
  if (body.pid == static_cast<int64_t>(getpid())) {
    return make_status(COLLX_ERR_INVALID_ARG, "opening an IPC handle in the process that exported it (CUDA refuses "
                       "this too; use the pointer itself)");
  }
  std::lock_guard<std::mutex> lock(open_mutex());
  if (std::shared_ptr<Mapping> m = find_import(body.pid, body.id)) {
    ++m->opens;
    *base = m->device;
    return Status::Ok();
  }
  const std::string path = "/proc/" + std::to_string(body.pid) + "/fd/" + std::to_string(body.fd);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    return make_status(COLLX_ERR_INVALID_ARG, "IPC handle of process %lld: its allocation is gone (%s: %s)",
                       static_cast<long long>(body.pid), path.c_str(), std::strerror(errno));
  }
  auto m = std::make_shared<Mapping>();
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_ino) != body.inode ||
      static_cast<uint64_t>(st.st_dev) != body.fs_dev) {
    close(fd);
    return make_status(COLLX_ERR_INVALID_ARG, "IPC handle of process %lld: its allocation was freed (the descriptor "
                       "now names another file)", static_cast<long long>(body.pid));
  }
  m->imported = true;
  m->opens = 1;
  m->owner_pid = body.pid;
  m->id = body.id;
  m->bytes = body.bytes;
  m->device_index = body.device_index;
  Status st_map = map_file(fd, m->bytes, m.get());
  close(fd);  // the mappings keep the file
  COLLX_RETURN_IF_ERROR(st_map);
  register_mapping(m);
  *base = m->device;
  return Status::Ok();
}

Status ipc_close(void* base) {
  std::lock_guard<std::mutex> lock(open_mutex());
  std::shared_ptr<Mapping> m = find_mapping(base);
  if (!m || !m->imported || m->device != base) {
    return make_status(COLLX_ERR_INVALID_ARG, "ipc_close: %p is not an address returned by ipc_open", base);
  }
  if (--m->opens == 0) unregister_mapping(m.get());
  return Status::Ok();
}

}  // namespace emu
}  // namespace cuda
}  // namespace collx
