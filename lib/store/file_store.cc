// The file store: one file per key in a directory every rank can see (a shared or network
// file system). Writers publish a value by renaming a finished temporary file over the key's
// file, so readers only ever see whole values; add() and compare_set() read-modify-write
// under an flock on a lock file in the directory, which serializes them across processes
// and hosts, within COLLX_TIMEOUT_MS. Readers poll with backoff because a file system offers
// no change notification that works across hosts. Each file carries its value's length and
// checksum (file_store_format.h) and is fsync'ed before it is published. The directory and
// files are private to their user (0700, 0600): a directory or file of another user, or a
// directory others may write to, is refused, since whoever can write there can forge keys.
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "lib/store/file_store_format.h"
#include "lib/store/store.h"
#include "lib/store/store_common.h"
#include "lib/store/store_timeout.h"
#include "lib/common/unique_fd.h"

namespace collx {
namespace {

// Keys up to this long are named by their hex encoding (readable when debugging); longer keys
// would exceed NAME_MAX (255) once hex-encoded and are named by a 128-bit hash instead.
constexpr size_t kMaxHexNamedKeyBytes = 100;

std::string hex_encode(const uint8_t* data, size_t size) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (size_t i = 0; i < size; ++i) {
    out += kDigits[data[i] >> 4];
    out += kDigits[data[i] & 15];
  }
  return out;
}

// FNV-1a with a 128-bit state: not cryptographic, but the key stored in the file catches the
// (astronomically unlikely) accidental collision.
std::string hash_hex(const std::string& key) {
  unsigned __int128 hash = (static_cast<unsigned __int128>(0x6c62272e07bb0142ull) << 64) | 0x62b821756295c58dull;
  const unsigned __int128 prime = (static_cast<unsigned __int128>(1) << 88) | 0x13b;
  for (unsigned char c : key) {
    hash ^= c;
    hash *= prime;
  }
  uint8_t bytes[16];
  for (int i = 0; i < 16; ++i) bytes[i] = static_cast<uint8_t>(hash >> (8 * (15 - i)));
  return hex_encode(bytes, sizeof bytes);
}

// Keys may hold '/', "..", NUL or any byte: only [0-9a-f_] ever reaches the file system.
std::string key_file_name(const std::string& key) {
  if (key.size() <= kMaxHexNamedKeyBytes)
    return "k_" + hex_encode(reinterpret_cast<const uint8_t*>(key.data()), key.size());
  return "h_" + hash_hex(key);
}

Status write_all(int fd, const uint8_t* data, size_t size, const std::string& path) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return system_error(("file store: writing " + path).c_str(), errno);
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

// A file or directory another user owns: whoever that is could forge or read keys.
Status check_owner(const struct stat& info, const std::string& path) {
  if (info.st_uid == ::geteuid()) return Status::Ok();
  return make_status(COLLX_ERR_INVALID_USAGE,
                     "file store: %s belongs to uid %u, not to this process's user (uid %u): another user could forge "
                     "or read its keys; use a directory of your own",
                     path.c_str(), static_cast<unsigned>(info.st_uid), static_cast<unsigned>(::geteuid()));
}

class FileStore : public Store {
 public:
  FileStore(std::string directory, int64_t lock_timeout_ms)
      : directory_(std::move(directory)), lock_timeout_ms_(lock_timeout_ms) {
    // Temporary names must differ between every writer of the directory: host and pid tell
    // processes apart (across hosts too, on a network file system), this tag the store
    // objects of one process.
    char host[64] = "host";
    ::gethostname(host, sizeof host - 1);
    host_ = host;
    temp_tag_ = static_cast<unsigned>(monotonic_us()) ^ static_cast<unsigned>(reinterpret_cast<uintptr_t>(this));
  }

  Status set(const std::string& key, const Bytes& value) override {
    COLLX_RETURN_IF_ERROR(validate_store_key(key));
    COLLX_RETURN_IF_ERROR(validate_store_value(value));
    return publish(key, value);
  }

  Status get(const std::string& key, Bytes* value, Deadline deadline) override {
    if (value == nullptr) return make_status(COLLX_ERR_INVALID_ARG, "store get: value is null");
    COLLX_RETURN_IF_ERROR(validate_store_key(key));
    const int64_t start_us = monotonic_us();
    StoreBackoff backoff;
    while (true) {
      bool found = false;
      COLLX_RETURN_IF_ERROR(read_value(key, value, &found));
      if (found) return Status::Ok();
      if (!backoff.sleep_until_next(deadline)) return store_timeout_status("get", store_elapsed_ms(start_us), key);
    }
  }

  Status add(const std::string& key, int64_t delta, int64_t* new_value) override {
    COLLX_RETURN_IF_ERROR(validate_store_key(key));
    UniqueFd lock;
    COLLX_RETURN_IF_ERROR(lock_directory(&lock));
    Bytes existing;
    bool found = false;
    COLLX_RETURN_IF_ERROR(read_value(key, &existing, &found));
    int64_t counter = 0, result = 0;
    COLLX_RETURN_IF_ERROR(parse_store_counter(key, found ? &existing : nullptr, &counter));
    COLLX_RETURN_IF_ERROR(add_store_counter(key, counter, delta, &result));
    COLLX_RETURN_IF_ERROR(publish(key, format_store_counter(result)));
    if (new_value) *new_value = result;
    return Status::Ok();
  }

  Status compare_set(const std::string& key, const Bytes& expected, const Bytes& desired,
                     Bytes* current) override {
    COLLX_RETURN_IF_ERROR(validate_store_key(key));
    COLLX_RETURN_IF_ERROR(validate_store_value(expected, "expected value"));
    COLLX_RETURN_IF_ERROR(validate_store_value(desired, "desired value"));
    UniqueFd lock;
    COLLX_RETURN_IF_ERROR(lock_directory(&lock));
    Bytes existing;
    bool found = false;
    COLLX_RETURN_IF_ERROR(read_value(key, &existing, &found));
    if (store_compare_matches(found ? &existing : nullptr, expected)) {
      COLLX_RETURN_IF_ERROR(publish(key, desired));
      existing = desired;
    }
    if (current) *current = std::move(existing);  // empty when still missing
    return Status::Ok();
  }

  Status wait(const std::vector<std::string>& keys, Deadline deadline) override {
    COLLX_RETURN_IF_ERROR(validate_store_keys(keys));
    const int64_t start_us = monotonic_us();
    StoreBackoff backoff;
    size_t present = 0;  // keys never disappear for a waiter's purposes: check each once
    while (true) {
      while (present < keys.size()) {
        bool exists = false;
        COLLX_RETURN_IF_ERROR(key_exists(keys[present], &exists));
        if (!exists) break;
        ++present;
      }
      if (present == keys.size()) return Status::Ok();
      if (!backoff.sleep_until_next(deadline))
        return store_timeout_status("wait", store_elapsed_ms(start_us), keys[present]);
    }
  }

  Status remove(const std::string& key) override {
    COLLX_RETURN_IF_ERROR(validate_store_key(key));
    std::string path = key_path(key);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      return system_error(("file store: removing " + path).c_str(), errno);
    return Status::Ok();
  }

 private:
  std::string key_path(const std::string& key) const { return directory_ + "/" + key_file_name(key); }

  // Writes header + value to a fresh temporary file, then renames it over the key's file:
  // rename is atomic, so a concurrent reader sees the old value or the new one, whole.
  Status publish(const std::string& key, const Bytes& value) {
    // The pid is read here, not at construction, so a store object inherited across fork()
    // still names its temporary files apart from the parent's.
    std::string temp = string_printf("%s/.tmp.%s.%d.%08x.%llu", directory_.c_str(), host_.c_str(),
                                     static_cast<int>(::getpid()), temp_tag_,
                                     static_cast<unsigned long long>(temp_counter_.fetch_add(1)));
    UniqueFd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!fd.valid()) return system_error(("file store: creating " + temp).c_str(), errno);
    const Bytes contents = file_store_format::encode(key, value);
    Status status = write_all(fd.get(), contents.data(), contents.size(), temp);
    // The data reaches the disk before the name does: after a crash the key holds the old
    // value or the new one, not a file of zeros. close() reports what write-back found.
    if (status.ok() && ::fsync(fd.get()) != 0) status = system_error(("file store: fsync of " + temp).c_str(), errno);
    if (::close(fd.release()) != 0 && status.ok())
      status = system_error(("file store: closing " + temp).c_str(), errno);
    std::string path = key_path(key);
    if (status.ok() && ::rename(temp.c_str(), path.c_str()) != 0)
      status = system_error(("file store: renaming " + temp + " to " + path).c_str(), errno);
    if (!status.ok()) ::unlink(temp.c_str());
    return status;
  }

  // *found = false (and OK) when the key has no file yet.
  Status read_value(const std::string& key, Bytes* value, bool* found) {
    *found = false;
    std::string path = key_path(key);
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd.valid()) {
      if (errno == ENOENT) return Status::Ok();
      return system_error(("file store: opening " + path).c_str(), errno);
    }
    struct stat info;
    if (::fstat(fd.get(), &info) != 0) return system_error(("file store: stat of " + path).c_str(), errno);
    COLLX_RETURN_IF_ERROR(check_owner(info, path));
    const size_t size = static_cast<size_t>(info.st_size);
    if (size > file_store_format::kHeaderBytes + key.size() + kStoreMaxValueBytes)
      return make_status(COLLX_ERR_INTERNAL, "file store: %s has %zu bytes, more than a value of key %s can have",
                         path.c_str(), size, quote_store_key(key).c_str());
    Bytes contents(size);
    size_t done = 0;
    while (done < size) {
      ssize_t n = ::read(fd.get(), contents.data() + done, size - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return system_error(("file store: reading " + path).c_str(), errno);
      if (n == 0) break;
      done += static_cast<size_t>(n);
    }
    contents.resize(done);
    COLLX_RETURN_IF_ERROR(file_store_format::decode(path, key, contents, value));
    *found = true;
    return Status::Ok();
  }

  Status key_exists(const std::string& key, bool* exists) {
    std::string path = key_path(key);
    struct stat info;
    if (::stat(path.c_str(), &info) == 0) {
      *exists = true;
      return Status::Ok();
    }
    if (errno != ENOENT) return system_error(("file store: stat of " + path).c_str(), errno);
    *exists = false;
    return Status::Ok();
  }

  // An flock on a file opened for this call alone: separate open files conflict with each
  // other even inside one process, so threads and processes serialize alike. Closing the
  // descriptor (when *lock goes out of scope) releases the lock. A holder that does not let go
  // (hung, or stopped) makes this COLLX_ERR_TIMEOUT after COLLX_TIMEOUT_MS instead of a hang.
  Status lock_directory(UniqueFd* lock) {
    std::string path = directory_ + "/.lock";
    lock->reset(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!lock->valid()) return system_error(("file store: opening " + path).c_str(), errno);
    const Deadline deadline = Deadline::after_ms(lock_timeout_ms_);
    StoreBackoff backoff;
    while (::flock(lock->get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno == EINTR) continue;
      if (errno != EWOULDBLOCK) return system_error(("file store: locking " + path).c_str(), errno);
      if (!backoff.sleep_until_next(deadline))
        return make_status(COLLX_ERR_TIMEOUT,
                           "file store: %s stayed locked by another process for %lld ms (COLLX_TIMEOUT_MS); the "
                           "process holding it may be hung",
                           path.c_str(), static_cast<long long>(lock_timeout_ms_));
    }
    return Status::Ok();
  }

  std::string directory_;
  const int64_t lock_timeout_ms_;
  std::string host_;
  unsigned temp_tag_ = 0;
  std::atomic<uint64_t> temp_counter_{0};
};

// mkdir -p: ranks race to create the directory, so EEXIST is success.
Status make_directories(const std::string& directory) {
  for (size_t slash = 1; slash <= directory.size(); ++slash) {
    if (slash != directory.size() && directory[slash] != '/') continue;
    std::string prefix = directory.substr(0, slash);
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST)
      return system_error(("file store: creating directory " + prefix).c_str(), errno);
  }
  return Status::Ok();
}

}  // namespace

Status make_file_store(const std::string& directory, std::shared_ptr<Store>* out) {
  if (out == nullptr) return make_status(COLLX_ERR_INVALID_ARG, "make_file_store: out is null");
  if (directory.empty()) return make_status(COLLX_ERR_INVALID_ARG, "make_file_store: empty directory");
  COLLX_RETURN_IF_ERROR(make_directories(directory));
  if (::access(directory.c_str(), R_OK | W_OK | X_OK) != 0)
    return system_error(("file store: directory " + directory + " is not usable").c_str(), errno);
  struct stat info;
  if (::stat(directory.c_str(), &info) != 0)
    return system_error(("file store: stat of directory " + directory).c_str(), errno);
  COLLX_RETURN_IF_ERROR(check_owner(info, directory));
  if (info.st_mode & (S_IWGRP | S_IWOTH))
    return make_status(COLLX_ERR_INVALID_USAGE,
                       "file store: directory %s is writable by other users (mode %03o): they could forge keys; "
                       "chmod 700 it or use a private directory",
                       directory.c_str(), static_cast<unsigned>(info.st_mode & 0777));
  *out = std::make_shared<FileStore>(directory, store_operation_timeout_ms());
  return Status::Ok();
}

}  // namespace collx
