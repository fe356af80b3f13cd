// All-reduce of device buffers between ranks that are forked processes on this host, sharing
// the GPU(s): gpu_allreduce_bench NP MIB ROUTE [ITERS]. ROUTE: ipc (tcp+shm allowed, the CUDA
// IPC route), staged (tcp only: pinned-host staging over loopback TCP) or nccl. Rank 0 prints
// one line: "allreduce np=2 route=ipc MiB=256 us=... algbw_GBps=... busbw_GBps=...".
// The parent never touches CUDA (a forked child could not use it otherwise).
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "collx/collx.h"
#include "lib/cuda/device.h"

using namespace collx;

namespace {

int run_rank(int rank, int np, size_t bytes, uint32_t transports, const char* route, int iters, const char* addr) {
  std::string why;
  if (cuda::device_count(&why) == 0) {
    if (rank == 0) std::printf("SKIP: no CUDA device (%s)\n", why.c_str());
    return 77;
  }
  collx_config_t config;
  collx_config_init(&config, sizeof config);
  config.rank = rank;
  config.world_size = np;
  config.store_addr = addr;
  config.transports = transports;
  config.timeout_ms = 120000;
  collx_comm_t comm = nullptr;
  if (collx_comm_create(&config, &comm) != COLLX_OK) {
    std::fprintf(stderr, "rank %d: collx_comm_create: %s\n", rank, collx_last_error(nullptr));
    return 1;
  }
  void* buf = nullptr;
  void* stream = nullptr;
  if (!cuda::device_alloc(bytes, &buf).ok() || !cuda::stream_create(&stream).ok()) {
    std::fprintf(stderr, "rank %d: cannot allocate %zu bytes on the device\n", rank, bytes);
    return 1;
  }
  cuda::memset_async(buf, 0, bytes, stream).ignore();
  collx_opts_t opts;
  collx_opts_init(&opts, sizeof opts);
  opts.stream = stream;
  opts.mem_kind = COLLX_MEM_CUDA;
  const size_t count = bytes / sizeof(float);
  auto one = [&]() { return collx_allreduce(buf, buf, count, COLLX_FLOAT32, COLLX_SUM, comm, &opts); };
  for (int i = 0; i < 3; ++i) {
    if (one() != COLLX_OK) {
      std::fprintf(stderr, "rank %d: allreduce: %s\n", rank, collx_last_error(comm));
      return 1;
    }
  }
  cuda::stream_wait(stream, Deadline::after_ms(120000), nullptr, "warm-up").ignore();
  collx_barrier(comm, nullptr);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    if (one() != COLLX_OK) {
      std::fprintf(stderr, "rank %d: allreduce: %s\n", rank, collx_last_error(comm));
      return 1;
    }
  }
  cuda::stream_wait(stream, Deadline::after_ms(120000), nullptr, "timed runs").ignore();
  collx_barrier(comm, nullptr);
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
  if (rank == 0) {
    const double algbw = bytes / (us * 1e-6) / 1e9;
    std::printf("allreduce np=%d route=%s MiB=%zu us=%.1f algbw_GBps=%.1f busbw_GBps=%.1f\n", np, route, bytes >> 20, us,
                algbw, algbw * 2.0 * (np - 1) / np);
  }
  cuda::device_free(buf);
  cuda::stream_destroy(stream);
  collx_comm_destroy(comm);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s NP MIB ipc|staged|nccl [ITERS]\n", argv[0]);
    return 2;
  }
  const int np = std::atoi(argv[1]);
  const size_t bytes = static_cast<size_t>(std::atol(argv[2])) << 20;
  const std::string route = argv[3];
  const int iters = argc > 4 ? std::atoi(argv[4]) : 10;
  uint32_t transports = COLLX_TRANSPORT_TCP;
  if (route == "ipc") transports |= COLLX_TRANSPORT_SHM;
  else if (route == "nccl") transports |= COLLX_TRANSPORT_NCCL;
  else if (route != "staged") {
    std::fprintf(stderr, "unknown route '%s'\n", route.c_str());
    return 2;
  }
  std::fflush(nullptr);  // nothing buffered may be flushed twice by the children
  char addr[64];
  std::snprintf(addr, sizeof addr, "127.0.0.1:%d", 20000 + static_cast<int>(getpid() % 20000));
  std::vector<pid_t> children;
  for (int r = 0; r < np; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      const int rc = run_rank(r, np, bytes, transports, route.c_str(), iters, addr);
      std::fflush(nullptr);  // _exit does not flush stdio
      _exit(rc);
    }
    children.push_back(pid);
  }
  int worst = 0;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    if (rc != 0 && (worst == 0 || worst == 77)) worst = rc;
  }
  return worst;
}
