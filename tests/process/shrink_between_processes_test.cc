// collx_comm_shrink between real processes: survivors of a killed rank agree on a new
// communicator and reduce correctly on it; a healthy communicator shrinks to its own size; a
// rank that stays alive but does not call shrink is excluded at the deadline and told so; a
// dead store host makes shrink fail saying why; bad arguments are COLLX_ERR_INVALID_ARG.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/process_ranks.h"
#include "tests/support/transports_under_test.h"

namespace collx {
namespace testing {
namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Memory the children share with the test (and each other).
template <class T>
T* shared_block() {
  void* p = mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  std::memset(p, 0, sizeof(T));
  return static_cast<T*>(p);
}

// Waits (sleeping) until *flag reaches `value` or `seconds` pass.
bool wait_for(volatile int* flag, int value, int seconds) {
  const int64_t give_up = now_ms() + seconds * 1000;
  while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) < value) {
    if (now_ms() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// The sum over `ranks` of (rank + 1), all-reduced on `comm`, must equal `expected`.
int check_sum(collx_comm_t comm, double mine, double expected, const char* what) {
  std::vector<double> buf(1000, mine);
  collx_status_t rc = collx_allreduce(buf.data(), buf.data(), buf.size(), COLLX_FLOAT64, COLLX_SUM, comm, nullptr);
  COLLX_CHILD_CHECK(rc == COLLX_OK, "%s: allreduce: %s: %s", what, collx_status_name(rc), collx_last_error(comm));
  for (double v : buf) COLLX_CHILD_CHECK(v == expected, "%s: sum %g, expected %g", what, v, expected);
  return 0;
}

class Shrink : public ::testing::TestWithParam<TransportUnderTest> {};

TEST_P(Shrink, SurvivorsOfAKilledRankAgreeAndReduceOnTheShrunkCommunicator) {
  struct Shared {
    int code[4];
    int new_rank[4];
    int new_size[4];
    int64_t shrink_ms[4];
    char message[4][512];
    int done;
  };
  Shared* shared = shared_block<Shared>();
  ASSERT_NE(shared, nullptr);
  auto results = run_comm_processes(
      4, 90000,
      [shared](int rank, int, collx_comm_t comm) {
        std::vector<float> buf(64 << 10, 1.0f);
        collx_status_t rc = COLLX_OK;
        for (int iter = 0; iter < 1000 && rc == COLLX_OK; ++iter) {
          if (rank == 1 && iter == 3) raise(SIGKILL);  // old rank 1 dies: 0, 2, 3 become 0, 1, 2
          rc = collx_allreduce(buf.data(), buf.data(), buf.size(), COLLX_FLOAT32, COLLX_SUM, comm, nullptr);
        }
        shared->code[rank] = rc;
        snprintf(shared->message[rank], sizeof shared->message[rank], "%s", collx_last_error(comm));
        COLLX_CHILD_CHECK(rc != COLLX_OK, "never noticed the death");
        const int64_t start = now_ms();
        collx_comm_t shrunk = nullptr;
        rc = collx_comm_shrink(comm, 20000, &shrunk);
        shared->shrink_ms[rank] = now_ms() - start;
        COLLX_CHILD_CHECK(rc == COLLX_OK && shrunk, "shrink: %s: %s", collx_status_name(rc), collx_last_error(comm));
        int32_t new_rank = -1, new_size = -1;
        collx_comm_rank(shrunk, &new_rank);
        collx_comm_size(shrunk, &new_size);
        shared->new_rank[rank] = new_rank;
        shared->new_size[rank] = new_size;
        // Survivors' old ranks 0, 2, 3 contribute 1, 3, 4.
        int failed = check_sum(shrunk, rank + 1.0, 8.0, "shrunk");
        // Twice, so the second one runs on a communicator known to work.
        if (!failed) failed = check_sum(shrunk, rank + 1.0, 8.0, "shrunk, again");
        // The store host (rank 0) stays until everyone finished with the store.
        __atomic_add_fetch(&shared->done, 1, __ATOMIC_ACQ_REL);
        if (rank == 0) wait_for(&shared->done, 3, 30);
        collx_comm_destroy(shrunk);
        return failed;
      },
      /*comm_timeout_ms=*/30000, GetParam().mask);
  EXPECT_EQ(results[1].signal, SIGKILL) << describe(results);
  const int expected_rank[4] = {0, -1, 1, 2};
  for (int r : {0, 2, 3}) {
    SCOPED_TRACE("old rank " + std::to_string(r) + ": " + shared->message[r]);
    EXPECT_EQ(results[static_cast<size_t>(r)].exit_code, 0) << describe(results);
    EXPECT_EQ(shared->code[r], COLLX_ERR_REMOTE);
    EXPECT_EQ(shared->new_size[r], 3);
    EXPECT_EQ(shared->new_rank[r], expected_rank[r]);
    // The dead rank is excluded on proof of death, not by waiting for the 20 s deadline.
    EXPECT_LT(shared->shrink_ms[r], 10000);
  }
  munmap(shared, sizeof *shared);
}

TEST_P(Shrink, AHealthyCommunicatorShrinksToItsOwnSizeAndStaysUsable) {
  auto results = run_comm_processes(
      4, 60000,
      [](int rank, int size, collx_comm_t comm) {
        collx_comm_t shrunk = nullptr;
        collx_status_t rc = collx_comm_shrink(comm, -1, &shrunk);
        COLLX_CHILD_CHECK(rc == COLLX_OK && shrunk, "shrink: %s: %s", collx_status_name(rc), collx_last_error(comm));
        int32_t new_rank = -1, new_size = -1;
        collx_comm_rank(shrunk, &new_rank);
        collx_comm_size(shrunk, &new_size);
        COLLX_CHILD_CHECK(new_rank == rank && new_size == size, "rank %d of %d", new_rank, new_size);
        int failed = check_sum(shrunk, rank + 1.0, 10.0, "shrunk");
        if (!failed) failed = check_sum(comm, rank + 1.0, 10.0, "old communicator after shrink");
        // A second shrink of the same communicator is a new agreement.
        collx_comm_t again = nullptr;
        rc = collx_comm_shrink(comm, -1, &again);
        COLLX_CHILD_CHECK(rc == COLLX_OK && again, "second shrink: %s: %s", collx_status_name(rc), collx_last_error(comm));
        if (!failed) failed = check_sum(again, rank + 1.0, 10.0, "second shrunk");
        // Nobody leaves (rank 0 hosts the store) before everyone is done with it.
        if (!failed) {
          collx_status_t b = collx_barrier(comm, nullptr);
          COLLX_CHILD_CHECK(b == COLLX_OK, "barrier: %s", collx_last_error(comm));
        }
        collx_comm_destroy(again);
        collx_comm_destroy(shrunk);
        return failed;
      },
      /*comm_timeout_ms=*/30000, GetParam().mask);
  for (const RankResult& r : results) EXPECT_EQ(r.exit_code, 0) << describe(results);
}

INSTANTIATE_TEST_SUITE_P(EveryTransport, Shrink, ::testing::ValuesIn(transports_under_test()), TransportName());

TEST(ShrinkAgreement, ARankThatIsAliveButDoesNotCallIsExcludedAtTheDeadlineAndToldSo) {
  struct Shared {
    int shrunk;  // ranks 0 and 1 are done with the new communicator
    int late_done;
    int late_code;
    int64_t shrink_ms[2];
    char message[512];
  };
  Shared* shared = shared_block<Shared>();
  ASSERT_NE(shared, nullptr);
  auto results = run_comm_processes(
      3, 60000,
      [shared](int rank, int, collx_comm_t comm) {
        if (rank == 2) {
          // Alive, but calls shrink only after the others agreed without it.
          COLLX_CHILD_CHECK(wait_for(&shared->shrunk, 2, 30), "ranks 0 and 1 did not finish");
          collx_comm_t shrunk = nullptr;
          collx_status_t rc = collx_comm_shrink(comm, 1000, &shrunk);
          shared->late_code = rc;
          snprintf(shared->message, sizeof shared->message, "%s", collx_last_error(comm));
          __atomic_store_n(&shared->late_done, 1, __ATOMIC_RELEASE);
          COLLX_CHILD_CHECK(shrunk == nullptr, "got a communicator");
          return 0;
        }
        const int64_t start = now_ms();
        collx_comm_t shrunk = nullptr;
        collx_status_t rc = collx_comm_shrink(comm, 1500, &shrunk);
        shared->shrink_ms[rank] = now_ms() - start;
        COLLX_CHILD_CHECK(rc == COLLX_OK && shrunk, "shrink: %s: %s", collx_status_name(rc), collx_last_error(comm));
        int32_t new_rank = -1, new_size = -1;
        collx_comm_rank(shrunk, &new_rank);
        collx_comm_size(shrunk, &new_size);
        COLLX_CHILD_CHECK(new_rank == rank && new_size == 2, "rank %d of %d", new_rank, new_size);
        int failed = check_sum(shrunk, rank + 1.0, 3.0, "shrunk");
        collx_comm_destroy(shrunk);
        __atomic_add_fetch(&shared->shrunk, 1, __ATOMIC_ACQ_REL);
        // Rank 0 hosts the store: it stays until rank 2 learned its fate.
        if (rank == 0) wait_for(&shared->late_done, 1, 30);
        // Rank 2 still holds the old communicator: leave it in good order.
        return failed;
      },
      /*comm_timeout_ms=*/30000);
  for (const RankResult& r : results) EXPECT_EQ(r.exit_code, 0) << describe(results);
  EXPECT_EQ(shared->late_code, COLLX_ERR_REMOTE) << shared->message;
  EXPECT_NE(std::string(shared->message).find("excluded"), std::string::npos) << shared->message;
  EXPECT_NE(std::string(shared->message).find("old ranks 0,1"), std::string::npos) << shared->message;
  for (int r = 0; r < 2; ++r) {
    EXPECT_GE(shared->shrink_ms[r], 1400) << "excluded before the deadline";
    EXPECT_LT(shared->shrink_ms[r], 15000);
  }
  munmap(shared, sizeof *shared);
}

TEST(ShrinkAgreement, WhenTheStoreHostDiedShrinkFailsSayingSo) {
  struct Shared {
    int code[3];
    char message[3][1024];
  };
  Shared* shared = shared_block<Shared>();
  ASSERT_NE(shared, nullptr);
  auto results = run_comm_processes(
      3, 60000,
      [shared](int rank, int, collx_comm_t comm) {
        std::vector<float> buf(1000, 1.0f);
        collx_status_t rc = collx_allreduce(buf.data(), buf.data(), buf.size(), COLLX_FLOAT32, COLLX_SUM, comm, nullptr);
        COLLX_CHILD_CHECK(rc == COLLX_OK, "first allreduce: %s", collx_last_error(comm));
        if (rank == 0) raise(SIGKILL);  // takes the store it hosts with it
        rc = collx_allreduce(buf.data(), buf.data(), buf.size(), COLLX_FLOAT32, COLLX_SUM, comm, nullptr);
        COLLX_CHILD_CHECK(rc == COLLX_ERR_REMOTE, "second allreduce: %s", collx_status_name(rc));
        collx_comm_t shrunk = nullptr;
        rc = collx_comm_shrink(comm, 5000, &shrunk);
        shared->code[rank] = rc;
        snprintf(shared->message[rank], sizeof shared->message[rank], "%s", collx_last_error(comm));
        COLLX_CHILD_CHECK(shrunk == nullptr, "got a communicator");
        return 0;
      },
      /*comm_timeout_ms=*/30000);
  EXPECT_EQ(results[0].signal, SIGKILL) << describe(results);
  for (int r = 1; r < 3; ++r) {
    EXPECT_EQ(results[static_cast<size_t>(r)].exit_code, 0) << describe(results);
    EXPECT_NE(shared->code[r], COLLX_OK);
    EXPECT_NE(std::string(shared->message[r]).find("shrink cannot work"), std::string::npos) << shared->message[r];
  }
  munmap(shared, sizeof *shared);
}

TEST(ShrinkArguments, NullHandlesAreInvalidArgumentsAndAWorldOfOneShrinksToOne) {
  auto results = run_comm_processes(1, 30000, [](int, int, collx_comm_t comm) {
    collx_comm_t shrunk = reinterpret_cast<collx_comm_t>(0x1);
    collx_status_t rc = collx_comm_shrink(nullptr, -1, &shrunk);
    COLLX_CHILD_CHECK(rc == COLLX_ERR_INVALID_ARG, "NULL comm: %s", collx_status_name(rc));
    COLLX_CHILD_CHECK(std::string(collx_last_error(nullptr)).find("comm is NULL") != std::string::npos, "%s",
                      collx_last_error(nullptr));
    rc = collx_comm_shrink(comm, -1, nullptr);
    COLLX_CHILD_CHECK(rc == COLLX_ERR_INVALID_ARG, "NULL newcomm: %s", collx_status_name(rc));
    COLLX_CHILD_CHECK(std::string(collx_last_error(comm)).find("newcomm is NULL") != std::string::npos, "%s",
                      collx_last_error(comm));
    // The communicator is still usable after the invalid calls.
    rc = collx_comm_shrink(comm, -1, &shrunk);
    COLLX_CHILD_CHECK(rc == COLLX_OK && shrunk, "shrink: %s: %s", collx_status_name(rc), collx_last_error(comm));
    int32_t size = -1;
    collx_comm_size(shrunk, &size);
    COLLX_CHILD_CHECK(size == 1, "size %d", size);
    int failed = check_sum(shrunk, 5.0, 5.0, "world of one");
    collx_comm_destroy(shrunk);
    return failed;
  });
  for (const RankResult& r : results) EXPECT_EQ(r.exit_code, 0) << describe(results);
}

}  // namespace
}  // namespace testing
}  // namespace collx
