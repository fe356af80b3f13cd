// Injected allocation failures between real processes. This test binary replaces the global
// operator new with one that, once armed, fails exactly one allocation: the Nth from then on
// (throwing std::bad_alloc, or returning null for the nothrow forms), either on any thread
// or only on threads other than the arming one (the communicator's progress thread). For
// every N up to the number of allocations the call makes, in turn: the failing rank's call
// returns COLLX_ERR_NO_MEMORY saying so (or succeeds, when the failed allocation had a
// fallback), its peer returns by its deadline naming the failing rank, and no process aborts.
#include <gtest/gtest.h>
#include <pthread.h>
#include <stdlib.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "tests/support/killed_rank.h"
#include "tests/support/process_ranks.h"
#include "tests/support/shared_outcomes.h"
#include "tests/support/transports_under_test.h"

namespace {

std::atomic<long> g_countdown{-1};  // allocations left before the failing one; < 0: disarmed
std::atomic<bool> g_other_threads_only{false};
pthread_t g_arming_thread;
std::atomic<long> g_failed{0};

bool inject_failure() {
  if (g_countdown.load(std::memory_order_relaxed) < 0) return false;
  if (g_other_threads_only.load(std::memory_order_relaxed) && pthread_equal(pthread_self(), g_arming_thread)) {
    return false;
  }
  if (g_countdown.fetch_sub(1, std::memory_order_relaxed) != 0) return false;
  g_failed.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void arm(long nth, bool other_threads_only) {
  g_arming_thread = pthread_self();
  g_other_threads_only.store(other_threads_only);
  g_failed.store(0);
  g_countdown.store(nth - 1);
}

void disarm() { g_countdown.store(-1); }

void* allocate(size_t bytes) { return malloc(bytes == 0 ? 1 : bytes); }

}  // namespace

// Not inlined into callers: GCC would then see free() of a pointer "from operator new" and
// warn (-Wmismatched-new-delete), not knowing both are these replacements.
#define COLLX_TEST_REPLACEMENT __attribute__((noinline))

COLLX_TEST_REPLACEMENT void* operator new(size_t bytes) {
  void* p = inject_failure() ? nullptr : allocate(bytes);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
COLLX_TEST_REPLACEMENT void* operator new[](size_t bytes) { return operator new(bytes); }
COLLX_TEST_REPLACEMENT void* operator new(size_t bytes, const std::nothrow_t&) noexcept {
  return inject_failure() ? nullptr : allocate(bytes);
}
COLLX_TEST_REPLACEMENT void* operator new[](size_t bytes, const std::nothrow_t&) noexcept {
  return inject_failure() ? nullptr : allocate(bytes);
}
COLLX_TEST_REPLACEMENT void operator delete(void* p) noexcept { free(p); }
COLLX_TEST_REPLACEMENT void operator delete[](void* p) noexcept { free(p); }
COLLX_TEST_REPLACEMENT void operator delete(void* p, size_t) noexcept { free(p); }
COLLX_TEST_REPLACEMENT void operator delete[](void* p, size_t) noexcept { free(p); }

namespace collx {
namespace testing {
namespace {

constexpr int64_t kCommTimeoutMs = 10000;
constexpr long kMaxInjections = 60;  // more allocations than this in one call: sample the rest
constexpr size_t kCount = 1 << 16;

struct Injection {
  long failed;  // allocations that failed (0: the call made fewer than N)
};

enum class Path { kBlocking, kProgressThread };

// Two ranks over `transports`: a warm-up all-reduce, then rank 1 arms the Nth allocation to fail and
// all-reduces again (blocking, or nonblocking so that execution is on the progress thread).
bool run_once(uint32_t transports, Path path, long nth, SharedOutcomes* outcomes, std::vector<RankResult>* results,
              long* failed) {
  auto* injected =
      static_cast<Injection*>(mmap(nullptr, sizeof(Injection), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (injected == MAP_FAILED) return false;
  injected->failed = 0;
  *results = run_comm_processes(
      2, 90000,
      [&](int rank, int, collx_comm_t comm) {
        std::vector<float> buf(kCount, 1.0f);
        collx_status_t rc = collx_allreduce(buf.data(), buf.data(), kCount, COLLX_FLOAT32, COLLX_SUM, comm, nullptr);
        COLLX_CHILD_CHECK(rc == COLLX_OK, "warm-up: %s", collx_last_error(comm));
        collx_request_t request = nullptr;
        if (path == Path::kProgressThread) {  // starts the progress thread before arming
          rc = collx_iallreduce(buf.data(), buf.data(), kCount, COLLX_FLOAT32, COLLX_SUM, comm, nullptr, &request);
          if (rc == COLLX_OK) rc = collx_wait(request, -1);
          collx_request_free(request);
          COLLX_CHILD_CHECK(rc == COLLX_OK, "warm-up: %s", collx_last_error(comm));
        }
        const int64_t start = now_us();
        if (rank == 1) arm(nth, path == Path::kProgressThread);
        if (path == Path::kBlocking) {
          rc = collx_allreduce(buf.data(), buf.data(), kCount, COLLX_FLOAT32, COLLX_SUM, comm, nullptr);
        } else {
          rc = collx_iallreduce(buf.data(), buf.data(), kCount, COLLX_FLOAT32, COLLX_SUM, comm, nullptr, &request);
          if (rc == COLLX_OK) {
            rc = collx_wait(request, -1);
            collx_request_free(request);
          }
        }
        disarm();
        if (rank == 1) injected->failed = g_failed.load();
        outcomes->record(rank, path == Path::kBlocking ? "allreduce" : "iallreduce", rc, collx_last_error(comm),
                         (now_us() - start) / 1e6);
        const float expected = path == Path::kBlocking ? 4.0f : 8.0f;
        COLLX_CHILD_CHECK(rc != COLLX_OK || buf[0] == expected, "sum %g, expected %g", buf[0], expected);
        return 0;
      },
      kCommTimeoutMs, transports);
  *failed = injected->failed;
  munmap(injected, sizeof(Injection));
  return true;
}

void sweep(uint32_t transports, Path path) {
  int failures_seen = 0;
  for (long nth = 1; nth <= kMaxInjections; nth += nth < 20 ? 1 : 5) {
    SCOPED_TRACE("allocation #" + std::to_string(nth) + " fails");
    SharedOutcomes outcomes(2);
    ASSERT_TRUE(outcomes.valid());
    std::vector<RankResult> results;
    long failed = 0;
    ASSERT_TRUE(run_once(transports, path, nth, &outcomes, &results, &failed));
    for (const RankResult& r : results) {
      ASSERT_EQ(r.signal, 0) << "a rank crashed\n" << describe(results) << outcomes.describe();
      ASSERT_EQ(r.exit_code, 0) << describe(results) << outcomes.describe();
    }
    std::printf("allocation #%ld %s:\n%s", nth, failed ? "failed" : "not reached", outcomes.describe().c_str());
    if (failed == 0) break;  // the call makes fewer allocations than nth: every one was tried
    ++failures_seen;
    const RankOutcome& failing = outcomes[1];
    if (failing.code != COLLX_OK) {
      EXPECT_EQ(failing.code, COLLX_ERR_NO_MEMORY) << outcomes.describe();
      // "out of memory (std::bad_alloc)", or what a nothrow allocation was for ("cannot
      // allocate 4 transport requests").
      EXPECT_TRUE(std::strstr(failing.message, "out of memory") || std::strstr(failing.message, "cannot allocate"))
          << outcomes.describe();
    }
    EXPECT_LT(outcomes[0].seconds, kCommTimeoutMs / 1000.0 + 10) << outcomes.describe();
    if (failing.code != COLLX_OK && outcomes[0].code != COLLX_OK) {
      // The failing rank fails its communicator, which tells the peer: no wait for the deadline.
      EXPECT_LT(outcomes[0].seconds, kCommTimeoutMs / 2000.0) << outcomes.describe();
      EXPECT_NE(std::strstr(outcomes[0].message, "rank 1"), nullptr) << "the peer's error must name the failing rank\n"
                                                                     << outcomes.describe();
    }
  }
  EXPECT_GT(failures_seen, 0) << "the injection never hit an allocation of the call";
}

class AllocationFailure : public ::testing::TestWithParam<TransportUnderTest> {};

TEST_P(AllocationFailure, EachAllocationOfABlockingAllReduceFailsCleanly) { sweep(GetParam().mask, Path::kBlocking); }

TEST_P(AllocationFailure, EachAllocationOnTheProgressThreadFailsTheRequestCleanly) {
  sweep(GetParam().mask, Path::kProgressThread);
}

INSTANTIATE_TEST_SUITE_P(EveryTransport, AllocationFailure, ::testing::ValuesIn(transports_under_test()),
                         TransportName());

}  // namespace
}  // namespace testing
}  // namespace collx
