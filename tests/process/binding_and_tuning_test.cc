// COLLX_BIND pins each local rank to its own CPUs; collx_explain and COLLX_TUNE_FILE show
// and steer the tuner's choice; a broken tune file is refused at creation, naming it.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "tests/support/process_ranks.h"
#include "tests/support/scoped_env.h"

namespace collx {
namespace testing {
namespace {

std::string explain(collx_comm_t comm, collx_coll_t coll, size_t count) {
  size_t len = 0;
  if (collx_explain(comm, coll, count, COLLX_FLOAT32, nullptr, &len) != COLLX_ERR_INVALID_ARG || len < 2) return "";
  std::string text(len, '\0');
  if (collx_explain(comm, coll, count, COLLX_FLOAT32, &text[0], &len) != COLLX_OK) return "";
  text.resize(len - 1);
  return text;
}

TEST(Binding, CoreModeGivesEachLocalRankItsOwnCpu) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs 2 CPUs";
  ScopedEnv bind("COLLX_BIND", "core");
  auto* cpus = static_cast<int*>(mmap(nullptr, 2 * sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(cpus, MAP_FAILED);
  auto results = run_comm_processes(2, 60000, [cpus](int rank, int, collx_comm_t comm) {
    cpu_set_t set;
    CPU_ZERO(&set);
    COLLX_CHILD_CHECK(sched_getaffinity(0, sizeof set, &set) == 0, "sched_getaffinity");
    COLLX_CHILD_CHECK(CPU_COUNT(&set) >= 1, "no CPU left");
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) {
        cpus[rank] = c;
        break;
      }
    }
    // A core holds every hardware thread of it: fewer CPUs than the machine has.
    COLLX_CHILD_CHECK(CPU_COUNT(&set) < sysconf(_SC_NPROCESSORS_ONLN), "rank %d was not bound (%d CPUs)", rank,
                      CPU_COUNT(&set));
    return collx_barrier(comm, nullptr) == COLLX_OK ? 0 : 1;
  });
  for (const RankResult& r : results) EXPECT_EQ(r.exit_code, 0) << describe(results);
  EXPECT_NE(cpus[0], cpus[1]) << "both local ranks were bound to CPU " << cpus[0];
  munmap(cpus, 2 * sizeof(int));
}

TEST(Tuning, ExplainNamesTheTransportTheChoiceAndEveryCandidate) {
  auto results = run_comm_processes(4, 60000, [](int rank, int, collx_comm_t comm) {
    // Everyone waits for rank 0: it hosts the store the others may still be reading.
    if (rank != 0) return collx_barrier(comm, nullptr) == COLLX_OK ? 0 : 1;
    const std::string small = explain(comm, COLLX_COLL_ALLREDUCE, 2);
    const std::string large = explain(comm, COLLX_COLL_ALLREDUCE, 16u << 20);
    for (const char* word : {"over shm", "recursive_doubling", "ring", "rabenseifner", "shared_memory", "built-in defaults"}) {
      COLLX_CHILD_CHECK(large.find(word) != std::string::npos, "'%s' missing from:\n%s", word, large.c_str());
    }
    // On one host the shared-memory algorithms win: one meeting instead of log2 p messages
    // when small, board copies instead of messages when large.
    COLLX_CHILD_CHECK(small.find("chosen: shared_memory (cost model)") != std::string::npos, "%s", small.c_str());
    COLLX_CHILD_CHECK(large.find("chosen: shared_memory (cost model)") != std::string::npos, "%s", large.c_str());
    const char* transport = nullptr;
    COLLX_CHILD_CHECK(collx_comm_transport(comm, &transport) == COLLX_OK && std::string(transport) == "shm", "transport");
    char tiny[8];
    size_t len = sizeof tiny;
    COLLX_CHILD_CHECK(collx_explain(comm, COLLX_COLL_ALLREDUCE, 2, COLLX_FLOAT32, tiny, &len) == COLLX_ERR_INVALID_ARG &&
                          len > sizeof tiny,
                      "a short buffer must be refused with the size needed");
    return collx_barrier(comm, nullptr) == COLLX_OK ? 0 : 1;
  });
  for (const RankResult& r : results) EXPECT_EQ(r.exit_code, 0) << describe(results);
}

TEST(Tuning, TuneFileAndRulesSteerTheChoice) {
  const std::string path = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/collx-tune-" +
                           std::to_string(getpid()) + ".tune";
  {
    // Messages that cost a second each: recursive doubling (fewest messages) always wins.
    std::ofstream f(path);
    f << "# collx tune file 1\nshm 1000000 0.0001 0.0001\n";
  }
  ScopedEnv tune("COLLX_TUNE_FILE", path);
  ScopedEnv rules("COLLX_ALGO", "allreduce:0-1K:ring");
  auto results = run_comm_processes(4, 60000, [&path](int rank, int, collx_comm_t comm) {
    // Everyone waits for rank 0: it hosts the store the others may still be reading.
    if (rank != 0) return collx_barrier(comm, nullptr) == COLLX_OK ? 0 : 1;
    const std::string small = explain(comm, COLLX_COLL_ALLREDUCE, 2);
    const std::string large = explain(comm, COLLX_COLL_ALLREDUCE, 16u << 20);
    COLLX_CHILD_CHECK(small.find("chosen: ring (COLLX_ALGO rule 'allreduce:0-1K:ring')") != std::string::npos, "%s",
                      small.c_str());
    COLLX_CHILD_CHECK(large.find("chosen: recursive_doubling (cost model)") != std::string::npos, "%s", large.c_str());
    COLLX_CHILD_CHECK(large.find("from " + path) != std::string::npos, "%s", large.c_str());
    return collx_barrier(comm, nullptr) == COLLX_OK ? 0 : 1;
  });
  for (const RankResult& r : results) EXPECT_EQ(r.exit_code, 0) << describe(results);
  std::remove(path.c_str());
}

TEST(Tuning, ABrokenTuneFileIsRefusedAtCreationNamingIt) {
  ScopedEnv tune("COLLX_TUNE_FILE", "/nonexistent/collx.tune");
  collx_config_t config;
  collx_config_init(&config, sizeof config);
  config.rank = 0;
  config.world_size = 1;
  collx_comm_t comm = nullptr;
  EXPECT_EQ(collx_comm_create(&config, &comm), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(std::string(collx_last_error(nullptr)).find("/nonexistent/collx.tune"), std::string::npos)
      << collx_last_error(nullptr);
  collx_comm_destroy(comm);
}

}  // namespace
}  // namespace testing
}  // namespace collx
