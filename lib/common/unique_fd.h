// UniqueFd: owns one file descriptor and closes it exactly once, so early returns on error
// paths cannot leak sockets, files or lock descriptors (closing a lock fd releases its flock).
#pragma once

#include <unistd.h>

#include <utility>

namespace collx {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }

  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

  // Gives up ownership without closing.
  int release() { return std::exchange(fd_, -1); }

  // Closes the current descriptor (if any) and owns `fd` instead. close() is not retried on
  // EINTR: on Linux the descriptor is released even then, and a retry could close a reused one.
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace collx
