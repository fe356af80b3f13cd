// A collective on a stream that is capturing a CUDA graph: the routes that wait on the host
// (staging, CUDA IPC) refuse with COLLX_ERR_INVALID_USAGE naming the capture, before anything
// moves; nothing is written to the buffers, and the communicator keeps working once the
// capture has ended. (NCCL's route can be captured; that needs a GPU per rank.)
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "lib/cuda/device.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/thread_ranks.h"

namespace collx {
namespace testing {
namespace {

struct Route {
  const char* name;
  uint32_t transports;
};

class GraphCapture : public ::testing::TestWithParam<Route> {};

TEST_P(GraphCapture, CollectiveOnACapturingStreamIsRefusedAndLeavesTheCommunicatorUsable) {
  const Route route = GetParam();
  constexpr int kRanks = 2;
  ThreadRanks world(kRanks, 30000, route.transports);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](int rank, collx_comm_t comm) {
    const size_t count = 4096;
    std::vector<float> mine(count, static_cast<float>(rank + 1));
    DeviceBuffer buf(count * sizeof(float), mine.data());
    ASSERT_TRUE(buf.ok());
    void* stream = nullptr;
    ASSERT_TRUE(cuda::stream_create(&stream).ok());
    collx_opts_t opts;
    collx_opts_init(&opts, sizeof opts);
    opts.stream = stream;

    ASSERT_TRUE(cuda::stream_begin_capture(stream).ok());
    bool capturing = false;
    ASSERT_TRUE(cuda::stream_capturing(stream, &capturing).ok());
    EXPECT_TRUE(capturing);
    EXPECT_EQ(COLLX_ERR_INVALID_USAGE,
              collx_allreduce(buf.get(), buf.get(), count, COLLX_FLOAT32, COLLX_SUM, comm, &opts));
    const std::string error = collx_last_error(comm);
    EXPECT_NE(error.find("capturing a CUDA graph"), std::string::npos) << error;
    EXPECT_EQ(COLLX_ERR_INVALID_USAGE,
              collx_broadcast(buf.get(), buf.get(), count, COLLX_FLOAT32, 0, comm, &opts));
    // Point-to-point is staged through host memory too: refused alike, nothing sent.
    EXPECT_EQ(COLLX_ERR_INVALID_USAGE,
              collx_send(buf.get(), count, COLLX_FLOAT32, (rank + 1) % kRanks, 0, comm, &opts));
    ASSERT_TRUE(cuda::stream_end_capture(stream).ok());
    ASSERT_TRUE(cuda::stream_capturing(stream, &capturing).ok());
    EXPECT_FALSE(capturing);

    // Nothing was written while refused.
    auto untouched = buf.read(0, count * sizeof(float));
    EXPECT_EQ(0, std::memcmp(untouched.data(), mine.data(), untouched.size()));

    // The same call after the capture runs normally.
    ASSERT_EQ(COLLX_OK, collx_allreduce(buf.get(), buf.get(), count, COLLX_FLOAT32, COLLX_SUM, comm, &opts))
        << collx_last_error(comm);
    ASSERT_TRUE(cuda::stream_wait(stream, Deadline::after_ms(30000), nullptr, "the test stream").ok());
    auto summed = buf.read(0, count * sizeof(float));
    float first = 0, last = 0;
    std::memcpy(&first, summed.data(), sizeof first);
    std::memcpy(&last, summed.data() + summed.size() - sizeof last, sizeof last);
    EXPECT_EQ(first, 3.0f);
    EXPECT_EQ(last, 3.0f);
    cuda::stream_destroy(stream);
  });
}

INSTANTIATE_TEST_SUITE_P(Routes, GraphCapture,
                         ::testing::Values(Route{"staged_tcp", COLLX_TRANSPORT_TCP},
                                           Route{"cuda_ipc_shm", COLLX_TRANSPORT_SHM | COLLX_TRANSPORT_TCP}),
                         [](const ::testing::TestParamInfo<Route>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace testing
}  // namespace collx
