// The cause code of a peer's failure travels with its notice (TCP POISON frame, shm segment
// reason, UCX POISON message) and decides the flight recorder's dump: a peer's timeout makes
// a rank that was still within its own deadline dump its record; a peer's other failure (a
// mismatch) makes nobody dump.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/process_ranks.h"
#include "tests/support/scoped_env.h"
#include "tests/support/skipped_collective.h"
#include "tests/support/temp_dir.h"
#include "tests/support/transports_under_test.h"

namespace collx {
namespace testing {
namespace {

std::string files_in(const std::string& dir) {
  std::string found;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') found += std::string(e->d_name) + " ";
    }
    closedir(d);
  }
  return found;
}

class RemoteCause : public ::testing::TestWithParam<TransportUnderTest> {};

TEST_P(RemoteCause, APeersTimeoutMakesARankWithinItsDeadlineDump) {
  const std::string dir = temp_dir();
  ASSERT_FALSE(dir.empty());
  SkippedCollective scenario;
  scenario.fr_dir = dir;
  scenario.comm_timeout_ms = 30000;
  scenario.transports = GetParam().mask;
  scenario.rank0_timeout_ms = 500;  // times out first; rank 1 has 30 s
  // Rank 2 stays until rank 1 dumped, or long enough for the check below to fail.
  scenario.skipper_waits_for = {1};
  scenario.skipper_gives_up_after_s = 20;
  scenario.check_waiting_rank = [&dir](int rank, collx_status_t rc, collx_comm_t comm) {
    if (rank == 0) {
      COLLX_CHILD_CHECK(rc == COLLX_ERR_TIMEOUT, "rank 0: %s (%s)", collx_status_name(rc), collx_last_error(comm));
    } else {
      COLLX_CHILD_CHECK(rc == COLLX_ERR_REMOTE, "rank 1: %s (%s)", collx_status_name(rc), collx_last_error(comm));
      // The dump is written by the failing call itself, before it returns.
      COLLX_CHILD_CHECK(exists(dir + "/rank1.json"), "rank 1 did not dump after rank 0's timeout: %s",
                        collx_last_error(comm));
    }
    return 0;
  };
  auto results = run_skipped_collective(scenario);
  for (const RankResult& r : results) ASSERT_EQ(r.exit_code, 0) << describe(results);
  EXPECT_TRUE(exists(dir + "/rank0.json"));
  EXPECT_TRUE(exists(dir + "/rank1.json"));
  if (!HasFailure()) remove_dir(dir);
}

TEST_P(RemoteCause, APeersMismatchMakesNobodyDump) {
  const std::string dir = temp_dir();
  ASSERT_FALSE(dir.empty());
  ScopedEnv fr_dir("COLLX_FR_DIR", dir);
  auto results = run_comm_processes(
      3, 60000,
      [](int rank, int, collx_comm_t comm) {
        // Rank 0 sends float32, rank 1 expects int32: rank 1 fails with a mismatch and tells
        // the others, who are waiting in a barrier (rank 2) or behind the send (rank 0).
        std::vector<float> f(100, 1.0f);
        std::vector<int32_t> i(100, 0);
        collx_status_t rc = COLLX_OK;
        if (rank == 0) rc = collx_send(f.data(), f.size(), COLLX_FLOAT32, 1, 7, comm, nullptr);
        if (rank == 1) rc = collx_recv(i.data(), i.size(), COLLX_INT32, 0, 7, comm, nullptr);
        if (rank == 1) {
          COLLX_CHILD_CHECK(rc == COLLX_ERR_MISMATCH, "rank 1: %s (%s)", collx_status_name(rc), collx_last_error(comm));
          // Stay until the others had time to hear of it (leaving is a different failure).
          std::this_thread::sleep_for(std::chrono::milliseconds(1500));
          return 0;
        }
        if (rc == COLLX_OK) rc = collx_barrier(comm, nullptr);
        COLLX_CHILD_CHECK(rc == COLLX_ERR_REMOTE, "rank %d: %s (%s)", rank, collx_status_name(rc), collx_last_error(comm));
        COLLX_CHILD_CHECK(std::strstr(collx_last_error(comm), "COLLX_ERR_MISMATCH") != nullptr, "rank %d: %s", rank,
                          collx_last_error(comm));
        return 0;
      },
      /*comm_timeout_ms=*/30000, GetParam().mask);
  for (const RankResult& r : results) ASSERT_EQ(r.exit_code, 0) << describe(results);
  EXPECT_EQ(files_in(dir), "") << "a remote mismatch must not dump the flight record";
  if (!HasFailure()) remove_dir(dir);
}

INSTANTIATE_TEST_SUITE_P(EveryTransport, RemoteCause, ::testing::ValuesIn(transports_under_test()), TransportName());

}  // namespace
}  // namespace testing
}  // namespace collx
