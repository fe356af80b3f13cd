// Flight recorder and trace between real processes: a rank that skips a collective leaves
// its peers to time out; they dump their records on their own, and `collx-info hang` names
// the missing rank. COLLX_TRACE writes a Chrome-trace JSON per rank.
#include <gtest/gtest.h>

#include <cstring>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/collx_info_tool.h"
#include "tests/support/process_ranks.h"
#include "tests/support/scoped_env.h"
#include "tests/support/skipped_collective.h"
#include "tests/support/temp_dir.h"

namespace collx {
namespace testing {
namespace {

TEST(FlightRecorder, PeersOfARankThatSkipsACollectiveDumpOnTimeoutAndTheReportNamesIt) {
  const std::string dir = temp_dir();
  ASSERT_FALSE(dir.empty());
  SkippedCollective scenario;
  scenario.fr_dir = dir;
  scenario.comm_timeout_ms = 1500;
  // Rank 2 stays until both peers wrote their dumps; then dumps on demand.
  scenario.skipper_waits_for = {0, 1};
  scenario.skipper_gives_up_after_s = 30;
  scenario.skipper_dumps = true;
  scenario.check_waiting_rank = [](int, collx_status_t rc, collx_comm_t comm) {
    // Its own timeout, or the other waiting rank's, whichever comes first (both dump).
    COLLX_CHILD_CHECK(rc == COLLX_ERR_TIMEOUT ||
                          (rc == COLLX_ERR_REMOTE && std::strstr(collx_last_error(comm), "COLLX_ERR_TIMEOUT")),
                      "second allreduce: %s (%s)", collx_status_name(rc), collx_last_error(comm));
    return 0;
  };
  auto results = run_skipped_collective(scenario);
  for (const RankResult& r : results) ASSERT_EQ(r.exit_code, 0) << describe(results);
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(exists(dir + "/rank" + std::to_string(r) + ".json")) << r;

  int code = -1;
  const std::string report = run_and_read(collx_info_path() + " hang " + dir + " 2>&1", &code);
  EXPECT_EQ(code, 0) << report;
  EXPECT_NE(report.find("allreduce #2 (count 1000, float32"), std::string::npos) << report;
  EXPECT_NE(report.find("on 'world': in it: ranks 0,1"), std::string::npos) << report;
  EXPECT_NE(report.find("not in it: rank 2 (last completed allreduce #1, now idle)"), std::string::npos) << report;
  // Every dump is JSON.
  for (int r = 0; r < 3; ++r) {
    const std::string check = "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
                              "assert d[\"communicators\"][0][\"name\"]==\"world\"' " +
                              dir + "/rank" + std::to_string(r) + ".json 2>&1";
    EXPECT_EQ(run_and_read(check, &code), "");
    EXPECT_EQ(code, 0) << r;
  }
  if (!HasFailure()) remove_dir(dir);
}

TEST(FlightRecorder, TheDumpSignalWritesTheRecordFromTheDumperThread) {
  const std::string dir = temp_dir();
  ASSERT_FALSE(dir.empty());
  ScopedEnv fr_dir("COLLX_FR_DIR", dir);
  ScopedEnv fr_signal("COLLX_FR_SIGNAL", "SIGUSR1");
  auto results = run_comm_processes(2, 60000, [&dir](int rank, int, collx_comm_t comm) {
    collx_status_t rc = collx_barrier(comm, nullptr);
    COLLX_CHILD_CHECK(rc == COLLX_OK, "barrier: %s", collx_last_error(comm));
    raise(SIGUSR1);  // the handler only wakes the dumper thread
    const std::string mine = dir + "/rank" + std::to_string(rank) + ".json";
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!exists(mine) && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    COLLX_CHILD_CHECK(exists(mine), "no %s after SIGUSR1", mine.c_str());
    // Both ranks stay until both dumped: leaving early is not what this test is about.
    rc = collx_barrier(comm, nullptr);
    COLLX_CHILD_CHECK(rc == COLLX_OK, "barrier: %s", collx_last_error(comm));
    return 0;
  });
  for (const RankResult& r : results) ASSERT_EQ(r.exit_code, 0) << describe(results);
  int code = -1;
  const std::string report = run_and_read(collx_info_path() + " hang " + dir + " 2>&1", &code);
  EXPECT_EQ(code, 1) << report;  // nothing stuck
  EXPECT_NE(report.find("no stuck collective in 2 dump(s)"), std::string::npos) << report;
  if (!HasFailure()) remove_dir(dir);
}

TEST(FlightRecorder, ABadSizeFailsCreationAndSizeZeroTurnsItOff) {
  auto results = run_processes(1, 60000, [](int, int, const std::string&) {
    collx_config_t config;
    collx_config_init(&config, sizeof config);
    config.rank = 0;
    config.world_size = 1;
    collx_comm_t comm = nullptr;
    setenv("COLLX_FR_SIZE", "-5", 1);
    collx_status_t rc = collx_comm_create(&config, &comm);
    COLLX_CHILD_CHECK(rc == COLLX_ERR_INVALID_ARG, "COLLX_FR_SIZE=-5 gave %s", collx_status_name(rc));
    COLLX_CHILD_CHECK(std::string(collx_last_error(nullptr)).find("COLLX_FR_SIZE=-5") != std::string::npos,
                      "message: %s", collx_last_error(nullptr));
    setenv("COLLX_FR_SIZE", "0", 1);
    rc = collx_comm_create(&config, &comm);
    COLLX_CHILD_CHECK(rc == COLLX_OK, "COLLX_FR_SIZE=0: %s", collx_last_error(nullptr));
    rc = collx_comm_dump_flight_record(comm, "/tmp/collx-fr-test-never-written");
    COLLX_CHILD_CHECK(rc == COLLX_ERR_INVALID_USAGE, "dump with the recorder off gave %s", collx_status_name(rc));
    COLLX_CHILD_CHECK(!exists("/tmp/collx-fr-test-never-written"), "a dump was written");
    rc = collx_comm_dump_flight_record(nullptr, nullptr);
    COLLX_CHILD_CHECK(rc == COLLX_ERR_INVALID_ARG, "NULL comm gave %s", collx_status_name(rc));
    collx_comm_destroy(comm);
    return 0;
  });
  for (const RankResult& r : results) ASSERT_EQ(r.exit_code, 0) << describe(results);
}

TEST(Trace, TwoRanksWriteAChromeTraceWithEveryOperation) {
  const std::string dir = temp_dir();
  ASSERT_FALSE(dir.empty());
  ScopedEnv trace("COLLX_TRACE", dir + "/trace.%r.json");
  auto results = run_comm_processes(2, 60000, [](int rank, int, collx_comm_t comm) {
    std::vector<int32_t> buf(256, 1);
    for (int i = 0; i < 3; ++i) {
      collx_status_t rc = collx_allreduce(buf.data(), buf.data(), buf.size(), COLLX_INT32, COLLX_SUM, comm, nullptr);
      COLLX_CHILD_CHECK(rc == COLLX_OK, "allreduce: %s", collx_last_error(comm));
    }
    collx_status_t rc = rank == 0 ? collx_send(buf.data(), 16, COLLX_INT32, 1, 7, comm, nullptr)
                                  : collx_recv(buf.data(), 16, COLLX_INT32, 0, 7, comm, nullptr);
    COLLX_CHILD_CHECK(rc == COLLX_OK, "send/recv: %s", collx_last_error(comm));
    return 0;
  });
  for (const RankResult& r : results) ASSERT_EQ(r.exit_code, 0) << describe(results);
  for (int r = 0; r < 2; ++r) {
    const std::string check =
        "python3 -c 'import json,sys\n"
        "ev=json.load(open(sys.argv[1]))\n"
        "ar=[e for e in ev if e[\"name\"]==\"allreduce\"]\n"
        "assert len(ar)==3, ev\n"
        "assert all(e[\"ph\"]==\"X\" and e[\"pid\"]==int(sys.argv[2]) and e[\"dur\"]>=0 for e in ev), ev\n"
        "assert [e[\"args\"][\"seq\"] for e in ar]==[1,2,3], ar\n"
        "assert ar[0][\"args\"][\"bytes\"]==1024 and ar[0][\"args\"][\"datatype\"]==\"int32\", ar\n"
        "assert ar[0][\"tid\"]==\"world\" and ar[0][\"args\"][\"transport\"], ar\n"
        "assert len([e for e in ev if e[\"name\"] in (\"send\",\"recv\")])==1, ev' " +
        dir + "/trace." + std::to_string(r) + ".json " + std::to_string(r) + " 2>&1";
    int code = -1;
    EXPECT_EQ(run_and_read(check, &code), "") << r;
    EXPECT_EQ(code, 0) << r;
  }
  if (!HasFailure()) remove_dir(dir);
}

}  // namespace
}  // namespace testing
}  // namespace collx
