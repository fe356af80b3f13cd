// main() of the GPU tests: exits 77 (ctest's SKIP_RETURN_CODE) with the reason when the test
// cannot run here; no-device tests (COLLX_GPU_TEST_WITHOUT_DEVICE) skip where a GPU exists.
// COLLX_GPU_TEST_PROBE_IN_CHILD: the device is probed in a forked child, so the test process
// itself has not initialized CUDA when its tests fork ranks (CUDA does not survive a fork).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "lib/cuda/device.h"

namespace {

int probe_devices(std::string* why) {
#if COLLX_GPU_TEST_PROBE_IN_CHILD
  int fds[2];
  if (pipe(fds) != 0) return collx::cuda::device_count(why);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string reason;
    const int n = collx::cuda::device_count(&reason);
    const std::string msg = std::to_string(n) + " " + reason;
    (void)!write(fds[1], msg.data(), msg.size());
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[256];
  ssize_t got = 0;
  while ((got = read(fds[0], buf, sizeof buf)) > 0) msg.append(buf, static_cast<size_t>(got));
  close(fds[0]);
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  const size_t space = msg.find(' ');
  if (pid < 0 || space == std::string::npos) {
    *why = "probing the device in a child process failed";
    return 0;
  }
  *why = msg.substr(space + 1);
  return std::atoi(msg.substr(0, space).c_str());
#else
  return collx::cuda::device_count(why);
#endif
}

}  // namespace

int main(int argc, char** argv) {
  std::string why;
  const int devices = probe_devices(&why);
#if COLLX_GPU_TEST_WITHOUT_DEVICE
  if (devices > 0) {
    std::printf("SKIP: %d CUDA device(s) present; this test checks the behaviour without one\n", devices);
    return 77;
  }
#else
  if (devices == 0) {
    std::printf("SKIP: no usable CUDA device (%s); run bench/gpu/check.sh on a GPU machine, or set "
                "COLLX_TEST_DEVICE=emulated (the *_emulated tests)\n", why.c_str());
    return 77;
  }
#endif
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
