// A call with COLLX_MEM_AUTO probes its buffers' memory kind once, when it is accepted
// (resolve_mem_kind in prepare() or check_recorded()): the graph-capture check, the
// stream-ordered route and the dispatch read the resolved kind. Without a CUDA driver each
// probe is a failed library search, so a second probe per call is a cost on every host call.
// The probes are counted by the emulated device (COLLX_TEST_DEVICE=emulated, set here before
// anything asks lib/cuda which backend to use), which also gives device buffers to probe.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "lib/cuda/device.h"
#include "lib/cuda/emu_config.h"
#include "tests/support/thread_ranks.h"

namespace collx {
namespace testing {
namespace {

class MemoryKindProbe : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { setenv("COLLX_TEST_DEVICE", "emulated", 1); }
  void SetUp() override {
    // The backend is decided once per process, at the first lib/cuda call: nothing before
    // this suite may have made one.
    ASSERT_TRUE(cuda::emulated()) << "the emulated device did not take over (lib/cuda was used before the test)";
  }
  // Probes made while `fn` ran.
  template <typename Fn>
  static uint64_t probes_during(Fn fn) {
    const uint64_t before = cuda::emu::pointer_kind_probes();
    fn();
    return cuda::emu::pointer_kind_probes() - before;
  }
};

TEST_F(MemoryKindProbe, BlockingNonblockingAndGroupedHostCallsProbeOnce) {
  ThreadRanks world(1);
  ASSERT_TRUE(world.ok()) << world.error();
  collx_comm_t comm = world.comm(0);
  std::vector<float> buf(16, 1.0f);
  for (int repeat = 0; repeat < 2; ++repeat) {  // the second one is a repeat prepare() recognizes
    const uint64_t blocking = probes_during([&] {
      ASSERT_EQ(collx_allreduce(buf.data(), buf.data(), 16, COLLX_FLOAT32, COLLX_SUM, comm, nullptr), COLLX_OK)
          << collx_last_error(comm);
    });
    EXPECT_EQ(blocking, 1u) << "blocking, repeat " << repeat;
    const uint64_t nonblocking = probes_during([&] {
      collx_request_t request = nullptr;
      ASSERT_EQ(collx_iallreduce(buf.data(), buf.data(), 16, COLLX_FLOAT32, COLLX_SUM, comm, nullptr, &request),
                COLLX_OK)
          << collx_last_error(comm);
      ASSERT_EQ(collx_wait(request, -1), COLLX_OK) << collx_last_error(comm);
      collx_request_free(request);
    });
    EXPECT_EQ(nonblocking, 1u) << "nonblocking, repeat " << repeat;
  }
  const uint64_t grouped = probes_during([&] {
    ASSERT_EQ(collx_group_start(), COLLX_OK);
    ASSERT_EQ(collx_allreduce(buf.data(), buf.data(), 8, COLLX_FLOAT32, COLLX_SUM, comm, nullptr), COLLX_OK);
    ASSERT_EQ(collx_allreduce(buf.data() + 8, buf.data() + 8, 8, COLLX_FLOAT32, COLLX_SUM, comm, nullptr), COLLX_OK);
    ASSERT_EQ(collx_group_end(), COLLX_OK) << collx_last_error(comm);
  });
  EXPECT_EQ(grouped, 2u) << "two grouped calls: one probe each, when recorded";
  EXPECT_EQ(buf[0], 1.0f);  // one rank: the sum is the input
}

// Point-to-point on the caller's stream: the capture check and the route read the kind
// resolved when the call is posted (one probe per call, not one per step).
TEST_F(MemoryKindProbe, SendAndRecvOnAStreamProbeOnceEach) {
  ThreadRanks world(2);
  ASSERT_TRUE(world.ok()) << world.error();
  void* stream = nullptr;
  ASSERT_TRUE(cuda::stream_create(&stream).ok());
  collx_opts_t opts;
  ASSERT_EQ(collx_opts_init(&opts, sizeof opts), COLLX_OK);
  opts.stream = stream;  // mem_kind stays COLLX_MEM_AUTO; the buffers are host memory
  std::vector<float> sent(8, 2.5f), received(8, 0.0f);
  const uint64_t probes = probes_during([&] {
    collx_request_t send = nullptr, recv = nullptr;
    ASSERT_EQ(collx_irecv(received.data(), received.size(), COLLX_FLOAT32, 0, 7, world.comm(1), &opts, &recv),
              COLLX_OK)
        << collx_last_error(world.comm(1));
    ASSERT_EQ(collx_isend(sent.data(), sent.size(), COLLX_FLOAT32, 1, 7, world.comm(0), &opts, &send), COLLX_OK)
        << collx_last_error(world.comm(0));
    ASSERT_EQ(collx_wait(send, 60000), COLLX_OK) << collx_last_error(world.comm(0));
    ASSERT_EQ(collx_wait(recv, 60000), COLLX_OK) << collx_last_error(world.comm(1));
    collx_request_free(send);
    collx_request_free(recv);
  });
  EXPECT_EQ(probes, 2u) << "one probe for the send, one for the receive";
  EXPECT_EQ(received, sent);
  cuda::stream_destroy(stream);
}

// Device buffers on the caller's stream: the capture check, the stream-ordered route (staged:
// tcp only; CUDA IPC gated: shm) and the executor's dispatch all read the resolved kind.
TEST_F(MemoryKindProbe, NonblockingDeviceCallsOnAStreamProbeOnce) {
  for (uint32_t transports : {COLLX_TRANSPORT_TCP, COLLX_TRANSPORT_SHM}) {
    SCOPED_TRACE(transports == COLLX_TRANSPORT_TCP ? "staged (tcp)" : "CUDA IPC (shm)");
    ThreadRanks world(1, 60000, transports);
    ASSERT_TRUE(world.ok()) << world.error();
    collx_comm_t comm = world.comm(0);
    const std::vector<int32_t> input = {3, 1, 4, 1, 5, 9, 2, 6};
    const size_t bytes = input.size() * sizeof(int32_t);
    void* send = nullptr;
    void* recv = nullptr;
    void* stream = nullptr;
    ASSERT_TRUE(cuda::device_alloc(bytes, &send).ok());
    ASSERT_TRUE(cuda::device_alloc(bytes, &recv).ok());
    ASSERT_TRUE(cuda::stream_create(&stream).ok());
    ASSERT_TRUE(cuda::copy(send, input.data(), bytes, cuda::CopyKind::kHostToDevice).ok());
    collx_opts_t opts;
    ASSERT_EQ(collx_opts_init(&opts, sizeof opts), COLLX_OK);
    opts.stream = stream;  // mem_kind stays COLLX_MEM_AUTO
    const uint64_t probes = probes_during([&] {
      collx_request_t request = nullptr;
      ASSERT_EQ(collx_iallreduce(send, recv, input.size(), COLLX_INT32, COLLX_SUM, comm, &opts, &request), COLLX_OK)
          << collx_last_error(comm);
      ASSERT_EQ(collx_wait(request, -1), COLLX_OK) << collx_last_error(comm);
      collx_request_free(request);
      ASSERT_TRUE(cuda::stream_wait(stream, Deadline::after_ms(60000), nullptr, "the test's stream").ok());
    });
    EXPECT_EQ(probes, 1u);
    std::vector<int32_t> output(input.size(), 0);
    ASSERT_TRUE(cuda::copy(output.data(), recv, bytes, cuda::CopyKind::kDeviceToHost).ok());
    EXPECT_EQ(output, input);
    cuda::stream_destroy(stream);
    cuda::device_free(send);
    cuda::device_free(recv);
  }
}

}  // namespace
}  // namespace testing
}  // namespace collx
