// collx_send/recv/isend/irecv on CUDA device buffers (the staged route: pinned host staging,
// copies on the caller's stream). Every rank sends to the next in a ring and receives from
// the previous, blocking and nonblocking, over tcp and over shm, at 0, 1, odd and 4 MiB sizes.
// The send buffer is filled by a copy queued on the caller's stream just before the send, and
// the received data are read back by a copy queued just after the receive: with the
// emulator's random delays, a send that does not wait for the stream's earlier work, or a
// receive whose copy to the device is not ordered on the stream, fails the comparison.
// collx_isend does not wait on the host for the stream's earlier work (its copy to staging is
// queued, the send posted once it ended), keeps its place before later sends to the same peer
// and tag, and fails by its deadline when the stream never gets there.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "lib/cuda/device.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/device_case.h"
#include "tests/gpu/device_p2p_case.h"
#include "tests/support/thread_ranks.h"

namespace collx {
namespace testing {
namespace {

class DeviceP2p : public ::testing::TestWithParam<int> {};

TEST_P(DeviceP2p, RingDeliversStreamOrderedDataBlockingAndNonblocking) {
  const int size = GetParam();
  const DeviceRoute routes[] = {kStagedRoute, {"shm", COLLX_TRANSPORT_TCP | COLLX_TRANSPORT_SHM}};
  for (const DeviceRoute& route : routes) {
    ThreadRanks world(size, 60000, route.transports);
    ASSERT_TRUE(world.ok()) << route.name << ": " << world.error();
    std::vector<void*> streams(static_cast<size_t>(size), nullptr);  // rank 0: the legacy default stream
    for (int r = 1; r < size; ++r) ASSERT_TRUE(cuda::stream_create(&streams[static_cast<size_t>(r)]).ok());
    world.run([&](int rank, collx_comm_t comm) {
      const std::string failure = run_p2p_rings(rank, size, comm, streams[static_cast<size_t>(rank)]);
      if (!failure.empty()) ADD_FAILURE() << route.name << ": " << failure;
    });
    for (void* s : streams) cuda::stream_destroy(s);
  }
}

// The staged route, and the communicator whose collectives take CUDA IPC (point-to-point
// stays staged there).
TEST(DeviceP2pStreamOrdered, IsendReturnsBeforeEarlierStreamWorkEndsAndKeepsMessageOrder) {
  for (const DeviceRoute& route : {kStagedRoute, kIpcRoute}) {
    for (int size : {2, 3}) {
      ThreadRanks world(size, 60000, route.transports);
      ASSERT_TRUE(world.ok()) << route.name << ": " << world.error();
      world.run([&](int rank, collx_comm_t comm) {
        const std::string failure = run_p2p_isend_on_held_stream(rank, size, comm, 11);
        if (!failure.empty()) ADD_FAILURE() << route.name << ": " << failure;
      });
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(DeviceP2pStreamOrdered, SendWhoseStreamNeverGetsThereTimesOutNamingTheCopy) {
  ThreadRanks world(2, /*timeout_ms=*/300, kStagedRoute.transports);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](int rank, collx_comm_t comm) {
    const size_t count = 64;
    DeviceBuffer buf(count * sizeof(int32_t));
    void* stream = nullptr;
    std::atomic<bool> gate{false};
    ASSERT_TRUE(cuda::stream_create(&stream).ok());
    collx_opts_t opts;
    collx_opts_init(&opts, sizeof opts);
    opts.stream = stream;
    collx_request_t request = nullptr;
    collx_status_t rc;
    if (rank == 0) {
      ASSERT_TRUE(cuda::launch_host_func(stream, hold_until_open, &gate).ok());
      ASSERT_EQ(collx_isend(buf.get(), count, COLLX_INT32, 1, 3, comm, &opts, &request), COLLX_OK)
          << collx_last_error(comm);
    } else {
      ASSERT_EQ(collx_irecv(buf.get(), count, COLLX_INT32, 0, 3, comm, &opts, &request), COLLX_OK)
          << collx_last_error(comm);
    }
    rc = collx_wait(request, -1);
    const std::string why = collx_last_error(comm);
    collx_request_free(request);
    EXPECT_NE(rc, COLLX_OK) << "rank " << rank;
    if (rank == 0) {
      EXPECT_EQ(rc, COLLX_ERR_TIMEOUT) << why;
      EXPECT_NE(why.find("the copy of the send buffer to host staging"), std::string::npos) << why;
    }
    gate = true;
    EXPECT_TRUE(cuda::stream_wait(stream, Deadline::after_ms(60000), nullptr, "the test's stream").ok());
    cuda::stream_destroy(stream);
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, DeviceP2p, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "Ranks";
                         });

}  // namespace
}  // namespace testing
}  // namespace collx
