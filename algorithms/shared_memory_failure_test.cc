// A shared-memory collective whose meeting fails leaves no wait listed in the shm engine.
// Meeting::wait_for_all waits for its peers in batches of 64 requests; when a batch times out
// the requests (which die with the Meeting) must be cancelled, or a later poison of the
// transport completes them through freed memory (AddressSanitizer reports it). Ranks are
// threads of this process over real shm transports; only rank 0 calls the collective, so the
// first batch of 64 peers is certain to time out.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "algorithms/algorithm.h"
#include "transports/shm/shm_test_util.h"

namespace collx {
namespace algo {
namespace {

// More peers than one batch of waits (64), so the timeout strikes inside a batch.
constexpr int kRanks = 66;
constexpr int64_t kCallTimeoutMs = 300;

using Entry = Status (*)(const Context&, const CollArgs&);

struct SharedMemoryEntry {
  const char* name;
  Entry fn;
  collx_coll_t kind;
};

// Rank 0 alone runs `entry`; every peer stays away until rank 0 is done.
void run_alone_on_rank_zero(const SharedMemoryEntry& entry) {
  std::mutex mu;
  std::condition_variable cv;
  bool rank_zero_done = false;
  transport_test::run_thread_job(
      kRanks,
      [](int rank, int n, uint64_t comm, transport::Bootstrap* boot, transport_test::TransportPtr* out) {
        return create_shm_transport(shm_test::make_params(rank, n, comm, boot), out);
      },
      [&](int rank, transport::Transport* t) {
        if (rank != 0) {
          std::unique_lock<std::mutex> lock(mu);
          EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return rank_zero_done; }))
              << "rank 0 never finished";
          return;
        }
        const size_t count = 64;  // past the inline payload: the boards and their meeting
        std::vector<float> send(count * kRanks, 1.0f), recv(count * kRanks, 0.0f);
        ScratchPool scratch;
        Context ctx;
        ctx.transport = t;
        ctx.rank = rank;
        ctx.size = kRanks;
        ctx.scratch = &scratch;
        CollArgs args;
        args.sendbuf = send.data();
        args.recvbuf = recv.data();
        args.count = count;
        args.desc.kind = static_cast<uint8_t>(entry.kind);
        args.desc.count = count;
        args.desc.seq = 1;
        args.deadline = Deadline::after_ms(kCallTimeoutMs);
        const Status status = entry.fn(ctx, args);
        EXPECT_EQ(status.code(), COLLX_ERR_TIMEOUT) << entry.name << ": " << status.message();
        // What the core does with a failed collective: it fails the communicator. Every
        // request still listed in the engine is completed now; none may be gone.
        t->poison(status.ok() ? make_status(COLLX_ERR_INTERNAL, "expected a timeout") : status, false);
        EXPECT_FALSE(t->health().ok());
        std::lock_guard<std::mutex> lock(mu);
        rank_zero_done = true;
        cv.notify_all();
      });
}

class SharedMemoryMeetingFailure : public ::testing::TestWithParam<SharedMemoryEntry> {};

TEST_P(SharedMemoryMeetingFailure, TimeoutInsideABatchOfWaitsLeavesNoneListed) { run_alone_on_rank_zero(GetParam()); }

INSTANTIATE_TEST_SUITE_P(
    Entries, SharedMemoryMeetingFailure,
    ::testing::Values(SharedMemoryEntry{"allreduce", allreduce_shared_memory, COLLX_COLL_ALLREDUCE},
                      SharedMemoryEntry{"reduce_scatter", reduce_scatter_shared_memory, COLLX_COLL_REDUCE_SCATTER},
                      SharedMemoryEntry{"allgather", allgather_shared_memory, COLLX_COLL_ALLGATHER}),
    [](const ::testing::TestParamInfo<SharedMemoryEntry>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace algo
}  // namespace collx
