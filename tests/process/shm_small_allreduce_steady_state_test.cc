// The small-message call path in the steady state (docs/tuning.md, "Small-message latency"):
// once a communicator has run an 8-byte all-reduce over shm, repeating it allocates nothing,
// on any thread of either rank, whether a peer is already there (the spin) or late (the
// transport's wait). This test binary replaces the global operator new with one that counts
// while armed; each rank arms it around a run of identical calls after a warm-up run.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <new>

#include "tests/support/process_ranks.h"

namespace {

std::atomic<bool> g_counting{false};
std::atomic<long> g_allocations{0};

void* counted(size_t bytes) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
  return malloc(bytes == 0 ? 1 : bytes);
}

}  // namespace

// Not inlined into callers: GCC would then pair free() with "operator new" and warn.
#define COLLX_COUNTING_NEW __attribute__((noinline))

COLLX_COUNTING_NEW void* operator new(size_t bytes) {
  if (void* p = counted(bytes)) return p;
  throw std::bad_alloc();
}
COLLX_COUNTING_NEW void* operator new[](size_t bytes) { return operator new(bytes); }
COLLX_COUNTING_NEW void* operator new(size_t bytes, const std::nothrow_t&) noexcept { return counted(bytes); }
COLLX_COUNTING_NEW void* operator new[](size_t bytes, const std::nothrow_t&) noexcept { return counted(bytes); }
COLLX_COUNTING_NEW void operator delete(void* p) noexcept { free(p); }
// The array and sized forms release the same way.
COLLX_COUNTING_NEW void operator delete[](void* p) noexcept { operator delete(p); }
COLLX_COUNTING_NEW void operator delete(void* p, size_t) noexcept { operator delete(p); }
COLLX_COUNTING_NEW void operator delete[](void* p, size_t) noexcept { operator delete(p); }

namespace collx {
namespace testing {
namespace {

constexpr int kCalls = 300;   // warm-up calls, then as many counted ones
constexpr int kLateAt = 7;    // call % kCalls at which rank 0 is late (rank 1 waits), and
constexpr int kLateAt1 = 13;  // at which rank 1 is late: both ranks take the waiting path
constexpr useconds_t kLateUs = 3000;
constexpr size_t kCount = 2;  // 8 bytes of fp32

// Runs 2 * kCalls 8-byte all-reduces (in place or not), counting allocations during the
// second half; the child fails when any allocation happened or a sum is wrong.
void expect_no_allocations(bool in_place) {
  std::vector<RankResult> results = run_comm_processes(
      2, 60000,
      [&](int rank, int size, collx_comm_t comm) {
        float send[kCount], recv[kCount];
        float* out = in_place ? send : recv;
        // One more call after the counted ones: a peer that has left the communicator (a
        // one-time status naming it) is seen only then.
        for (int call = 0; call <= 2 * kCalls; ++call) {
          for (size_t i = 0; i < kCount; ++i) send[i] = static_cast<float>(rank + call + i);
          g_counting.store(call >= kCalls && call < 2 * kCalls);
          if (call % kCalls == (rank == 0 ? kLateAt : kLateAt1)) usleep(kLateUs);  // the peer waits for us
          const collx_status_t rc = collx_allreduce(send, out, kCount, COLLX_FLOAT32, COLLX_SUM, comm, nullptr);
          COLLX_CHILD_CHECK(rc == COLLX_OK, "call %d: %s", call, collx_last_error(comm));
          for (size_t i = 0; i < kCount; ++i) {
            const float expected = static_cast<float>(size * (size - 1) / 2 + size * (call + static_cast<int>(i)));
            COLLX_CHILD_CHECK(out[i] == expected, "call %d element %zu: %g, expected %g", call, i, out[i], expected);
          }
        }
        g_counting.store(false);
        const long allocations = g_allocations.load();
        COLLX_CHILD_CHECK(allocations == 0, "rank %d: %ld allocations in %d steady-state calls", rank, allocations,
                          kCalls);
        return 0;
      },
      30000, COLLX_TRANSPORT_SHM);
  for (const RankResult& r : results) {
    EXPECT_EQ(r.signal, 0) << describe(results);
    EXPECT_EQ(r.exit_code, 0) << describe(results);
  }
}

TEST(ShmSmallAllreduceSteadyState, RepeatedOutOfPlaceCallsAllocateNothing) { expect_no_allocations(false); }

TEST(ShmSmallAllreduceSteadyState, RepeatedInPlaceCallsAllocateNothing) { expect_no_allocations(true); }

}  // namespace
}  // namespace testing
}  // namespace collx
