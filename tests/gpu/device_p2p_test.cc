// collx_send/recv/isend/irecv on CUDA device buffers (the staged route: pinned host staging,
// copies on the caller's stream). Every rank sends to the next in a ring and receives from
// the previous, blocking and nonblocking, over tcp and over shm, at 0, 1, odd and 4 MiB sizes.
// The send buffer is filled by a copy queued on the caller's stream just before the send, and
// the received data are read back by a copy queued just after the receive: with the
// emulator's random delays, a send that does not wait for the stream's earlier work, or a
// receive whose copy to the device is not ordered on the stream, fails the comparison.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lib/cuda/device.h"
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

INSTANTIATE_TEST_SUITE_P(WorldSizes, DeviceP2p, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "Ranks";
                         });

}  // namespace
}  // namespace testing
}  // namespace collx
