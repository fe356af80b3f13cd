// A rank killed in the middle of a run of all-reduces, and what its survivors must see: the
// failure scenario the process tier runs per transport and per algorithm.
#pragma once

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "collx/collx.h"
#include "tests/support/process_ranks.h"

namespace collx {
namespace testing {

inline int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Names in /dev/shm that end in "-<pid>" (collx names its segments /collx-<comm>-<rank>-<pid>).
inline std::string shm_objects_of(pid_t pid) {
  std::string found;
  const std::string suffix = "-" + std::to_string(pid);
  if (DIR* dir = opendir("/dev/shm")) {
    while (dirent* e = readdir(dir)) {
      std::string name = e->d_name;
      if (name.rfind("collx-", 0) == 0 && name.size() > suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        found += name + " ";
      }
    }
    closedir(dir);
  }
  return found;
}

// Rank 3 of 4 dies (SIGKILL) at the start of its fourth all-reduce of 16 MiB, `algorithm`
// over the transports of `mask`: every survivor must fail with COLLX_ERR_REMOTE naming rank 3
// within 2 s, and /dev/shm must hold nothing of any rank afterwards. With zero_copy the
// buffers come from collx_mem_alloc (peers have them mapped when the rank dies).
inline void expect_survivors_see_killed_rank(uint32_t mask, collx_algorithm_t algorithm, bool zero_copy = false) {
  // Shared with the children: when rank 3 died, and what each survivor saw.
  struct Shared {
    int64_t killed_at_us;
    pid_t pids[4];
    int64_t failed_at_us[4];
    int code[4];
    char message[4][1024];
  };
  auto* shared = static_cast<Shared*>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(shared, MAP_FAILED);
  std::memset(shared, 0, sizeof *shared);
  auto results = run_comm_processes(
      4, 60000,
      [shared, algorithm, zero_copy](int rank, int, collx_comm_t comm) {
        shared->pids[rank] = getpid();
        constexpr size_t kCount = 4 << 20;  // 16 MiB: the kill lands mid-transfer
        std::vector<float> heap(zero_copy ? 0 : kCount, 1.0f);
        float* data = heap.data();
        if (zero_copy) {
          void* p = nullptr;
          if (collx_mem_alloc(kCount * sizeof(float), &p) != COLLX_OK) return 2;
          data = static_cast<float*>(p);
          for (size_t i = 0; i < kCount; ++i) data[i] = 1.0f;
        }
        collx_opts_t opts;
        collx_opts_init(&opts, sizeof opts);
        opts.algorithm = algorithm;
        for (int iter = 0; iter < 1000; ++iter) {
          if (rank == 3 && iter == 3) {
            shared->killed_at_us = now_us();
            raise(SIGKILL);
          }
          collx_status_t rc = collx_allreduce(data, data, kCount, COLLX_FLOAT32, COLLX_SUM, comm, &opts);
          if (rc != COLLX_OK) {
            shared->failed_at_us[rank] = now_us();
            shared->code[rank] = rc;
            snprintf(shared->message[rank], sizeof shared->message[rank], "%s", collx_last_error(comm));
            return 0;
          }
        }
        return 1;  // never noticed
      },
      /*comm_timeout_ms=*/60000, mask);
  EXPECT_EQ(results[3].signal, SIGKILL) << describe(results);
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE("survivor rank " + std::to_string(r) + ": " + shared->message[r]);
    EXPECT_EQ(results[static_cast<size_t>(r)].exit_code, 0) << describe(results);
    EXPECT_EQ(shared->code[r], COLLX_ERR_REMOTE);
    const double seconds = (shared->failed_at_us[r] - shared->killed_at_us) / 1e6;
    EXPECT_LT(seconds, 2.0) << "the failure was seen after " << seconds << " s";
    EXPECT_NE(std::string(shared->message[r]).find("rank 3"), std::string::npos) << "the error must name the rank that died";
  }
  // Nothing of the job is left in /dev/shm, not even the killed rank's segment.
  for (pid_t pid : shared->pids) {
    EXPECT_EQ(shm_objects_of(pid), "") << "left in /dev/shm by pid " << pid;
  }
  munmap(shared, sizeof *shared);
}

}  // namespace testing
}  // namespace collx
