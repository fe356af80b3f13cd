// A rank stopped by SIGSTOP mid-job is alive to the kernel (its sockets still acknowledge,
// its pid exists), so only the deadline can report it: its peers must fail by their (short)
// deadline with errors naming it, their flight records must name it, and when it is then
// continued (SIGCONT) or killed (SIGKILL) nothing may hang.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/collx_info_tool.h"
#include "tests/support/killed_rank.h"
#include "tests/support/process_ranks.h"
#include "tests/support/scoped_env.h"
#include "tests/support/temp_dir.h"
#include "tests/support/transports_under_test.h"

namespace collx {
namespace testing {
namespace {

constexpr int64_t kRank0TimeoutMs = 1500;  // times out first and tells rank 1
constexpr int64_t kCommTimeoutMs = 20000;  // rank 1 and the stopped rank

// What the ranks share with each other and the test (an anonymous shared mapping).
struct Shared {
  pid_t stopped_pid;
  int reported[2];         // ranks 0 and 1 returned from the barrier
  int code[3];
  double seconds[3];       // how long the barrier took
  char message[3][1024];
  char hang_report[2048];  // `collx-info hang` over the records, while rank 2 is still stopped
};

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The "failure" of the one communicator in a flight record dump ("" when none).
std::string recorded_failure(const std::string& dump) {
  const std::string key = "\"failure\": \"";
  const size_t at = dump.find(key);
  if (at == std::string::npos) return "";
  const size_t end = dump.find("\", \"records\"", at);
  return dump.substr(at + key.size(), end == std::string::npos ? std::string::npos : end - at - key.size());
}

// The collective the stopped rank misses: a barrier, in which every rank waits for a message
// of every other one (directly, in some round), so each peer's timeout names the stopped rank
// itself. (In a ring or tree the others may wait for a rank that waits for it: their errors
// then name that rank, and `collx-info hang` over the flight records finds the stopped one.)
int second_collective(Shared* shared, int rank, collx_comm_t comm, int64_t timeout_ms) {
  collx_opts_t opts;
  collx_opts_init(&opts, sizeof opts);
  opts.timeout_ms = timeout_ms;
  const int64_t start = now_us();
  const collx_status_t rc = collx_barrier(comm, &opts);
  shared->seconds[rank] = (now_us() - start) / 1e6;
  shared->code[rank] = rc;
  snprintf(shared->message[rank], sizeof shared->message[rank], "%s", collx_last_error(comm));
  return rc;
}

// Rank 2 stops itself after the first all-reduce; ranks 0 and 1 enter the barrier. Once
// both returned, rank 0 sends `resume_with` (SIGCONT or SIGKILL) to rank 2.
std::vector<RankResult> run_with_stopped_rank(Shared* shared, const std::string& fr_dir, uint32_t transports,
                                              int resume_with) {
  ScopedEnv fr_dir_setting("COLLX_FR_DIR", fr_dir);
  return run_comm_processes(
      3, 90000,
      [shared, &fr_dir, resume_with](int rank, int, collx_comm_t comm) {
        std::vector<float> buf(1000, 1.0f);
        collx_status_t rc = collx_allreduce(buf.data(), buf.data(), buf.size(), COLLX_FLOAT32, COLLX_SUM, comm, nullptr);
        COLLX_CHILD_CHECK(rc == COLLX_OK, "first allreduce: %s", collx_last_error(comm));
        if (rank == 2) {
          shared->stopped_pid = getpid();
          raise(SIGSTOP);
          // Continued: the peers gave up on this rank meanwhile; its barrier must fail, not hang.
          rc = static_cast<collx_status_t>(second_collective(shared, rank, comm, kCommTimeoutMs));
          COLLX_CHILD_CHECK(rc != COLLX_OK, "the continued rank's barrier succeeded without its peers");
          return 0;
        }
        second_collective(shared, rank, comm, rank == 0 ? kRank0TimeoutMs : kCommTimeoutMs);
        __atomic_store_n(&shared->reported[rank], 1, __ATOMIC_RELEASE);
        if (rank == 0) {
          const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(40);
          while (!__atomic_load_n(&shared->reported[1], __ATOMIC_ACQUIRE) && std::chrono::steady_clock::now() < give_up) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          }
          COLLX_CHILD_CHECK(shared->stopped_pid > 0, "the stopped rank's pid is unknown");
          int code = -1;
          const std::string report = run_and_read(collx_info_path() + " hang " + fr_dir + " 2>&1", &code);
          snprintf(shared->hang_report, sizeof shared->hang_report, "exit %d: %s", code, report.c_str());
          kill(shared->stopped_pid, resume_with);
        }
        return 0;
      },
      kCommTimeoutMs, transports);
}

class StoppedRank : public ::testing::TestWithParam<TransportUnderTest> {
 protected:
  void SetUp() override {
    dir_ = temp_dir();
    ASSERT_FALSE(dir_.empty());
    shared_ = static_cast<Shared*>(mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(shared_, MAP_FAILED);
    std::memset(shared_, 0, sizeof *shared_);
  }
  void TearDown() override {
    if (shared_ != MAP_FAILED && shared_ != nullptr) munmap(shared_, sizeof *shared_);
    if (!HasFailure()) remove_dir(dir_);
  }

  // Ranks 0 and 1 failed by their deadlines with errors naming rank 2, and each left a
  // flight record whose failure names it; `collx-info hang` over the records, run while
  // rank 2 was stopped, lists rank 2 outside the call.
  void expect_peers_named_the_stopped_rank() {
    EXPECT_EQ(shared_->code[0], COLLX_ERR_TIMEOUT) << shared_->message[0];
    EXPECT_GE(shared_->seconds[0], kRank0TimeoutMs / 1000.0 - 0.05) << shared_->message[0];
    EXPECT_LT(shared_->seconds[0], kRank0TimeoutMs / 1000.0 + 10) << shared_->message[0];
    // Rank 1 hears of rank 0's timeout long before its own deadline.
    EXPECT_EQ(shared_->code[1], COLLX_ERR_REMOTE) << shared_->message[1];
    EXPECT_LT(shared_->seconds[1], kCommTimeoutMs / 1000.0) << shared_->message[1];
    for (int r = 0; r < 2; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      EXPECT_NE(std::string(shared_->message[r]).find("rank 2"), std::string::npos) << shared_->message[r];
      const std::string failure = recorded_failure(read_file(dir_ + "/rank" + std::to_string(r) + ".json"));
      EXPECT_NE(failure.find("rank 2"), std::string::npos) << "flight record failure: '" << failure << "'";
      std::printf("rank %d after %.2f s: %s\n  flight record failure: %s\n", r, shared_->seconds[r],
                  shared_->message[r], failure.c_str());
    }
    const std::string report = shared_->hang_report;
    EXPECT_EQ(report.rfind("exit 0: ", 0), 0u) << report;
    EXPECT_NE(report.find("not in it: rank 2"), std::string::npos) << report;
    std::printf("collx-info hang while rank 2 was stopped: %s", report.c_str());
  }

  std::string dir_;
  Shared* shared_ = nullptr;
};

TEST_P(StoppedRank, PeersReportItByTheDeadlineAndItFailsCleanlyWhenContinued) {
  auto results = run_with_stopped_rank(shared_, dir_, GetParam().mask, SIGCONT);
  for (const RankResult& r : results) EXPECT_EQ(r.exit_code, 0) << describe(results);
  expect_peers_named_the_stopped_rank();
  EXPECT_NE(shared_->code[2], COLLX_OK) << shared_->message[2];
  EXPECT_LT(shared_->seconds[2], kCommTimeoutMs / 1000.0 + 10) << shared_->message[2];
  std::printf("continued rank 2 after %.2f s: %s\n", shared_->seconds[2], shared_->message[2]);
}

TEST_P(StoppedRank, PeersReportItByTheDeadlineAndNothingHangsWhenItIsKilled) {
  auto results = run_with_stopped_rank(shared_, dir_, GetParam().mask, SIGKILL);
  EXPECT_EQ(results[0].exit_code, 0) << describe(results);
  EXPECT_EQ(results[1].exit_code, 0) << describe(results);
  EXPECT_EQ(results[2].signal, SIGKILL) << describe(results);
  expect_peers_named_the_stopped_rank();
}

INSTANTIATE_TEST_SUITE_P(EveryTransport, StoppedRank, ::testing::ValuesIn(transports_under_test()), TransportName());

}  // namespace
}  // namespace testing
}  // namespace collx
