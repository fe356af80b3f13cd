#include "lib/common/process_identity.h"

#include <sys/random.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <mutex>

namespace collx {

namespace {

void fill_nonce(uint8_t* out, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::getrandom(out + got, n - got, 0);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  if (got == n) return;
  // No entropy source (a seccomp profile refusing getrandom): the clock and the address of a
  // stack variable still differ between two processes that started apart.
  const uint64_t mix[2] = {static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()),
                           reinterpret_cast<uintptr_t>(&got) ^ static_cast<uint64_t>(::getpid())};
  std::memcpy(out, mix, n < sizeof mix ? n : sizeof mix);
}

}  // namespace

ProcessIdentity this_process() {
  static std::mutex mu;
  static ProcessIdentity cached;
  const int64_t pid = static_cast<int64_t>(::getpid());
  std::lock_guard<std::mutex> lock(mu);
  if (cached.pid != pid) {  // first call, or the first in a forked child
    cached.pid = pid;
    fill_nonce(cached.nonce, sizeof cached.nonce);
  }
  return cached;
}

bool same_process(const ProcessIdentity& a, const ProcessIdentity& b) {
  return a.pid == b.pid && std::memcmp(a.nonce, b.nonce, sizeof a.nonce) == 0;
}

}  // namespace collx
