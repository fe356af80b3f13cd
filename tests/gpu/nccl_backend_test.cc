// The NCCL backend at one rank (the H200 machine has one GPU; NCCL refuses two ranks on it):
// every delegated collective on device buffers, ordered on the caller's stream, and the abort
// path. Skips (GTEST_SKIP) where libnccl.so.2 does not load.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "lib/cuda/device.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/thread_ranks.h"
#include "backends/nccl/nccl_comm.h"

namespace collx {
namespace testing {
namespace {

class NcclBackend : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!nccl::available(&why)) GTEST_SKIP() << "NCCL not usable here: " << why;
  }
};

TEST_F(NcclBackend, AllreduceIsOrderedOnTheCallersStream) {
  ThreadRanks world(1, 30000, COLLX_TRANSPORT_TCP | COLLX_TRANSPORT_NCCL);
  ASSERT_TRUE(world.ok()) << world.error();
  collx_comm_t comm = world.comm(0);
  void* stream = nullptr;
  ASSERT_TRUE(cuda::stream_create(&stream).ok());
  const size_t count = 1 << 20;
  std::vector<float> ones(count, 1.0f);
  DeviceBuffer buf(count * sizeof(float)), out(count * sizeof(float));
  ASSERT_TRUE(buf.ok() && out.ok());
  // Work queued before the call (a copy) must be seen by it; work after must see its result.
  ASSERT_TRUE(cuda::copy_async(buf.get(), ones.data(), count * sizeof(float), cuda::CopyKind::kHostToDevice, stream).ok());
  collx_opts_t opts;
  collx_opts_init(&opts, sizeof opts);
  opts.stream = stream;
  opts.premul_scalar = 3.0;
  ASSERT_EQ(COLLX_OK, collx_allreduce(buf.get(), buf.get(), count, COLLX_FLOAT32, COLLX_PREMUL_SUM, comm, &opts))
      << collx_last_error(comm);
  ASSERT_TRUE(cuda::copy_async(out.get(), buf.get(), count * sizeof(float), cuda::CopyKind::kDeviceToDevice, stream).ok());
  ASSERT_TRUE(cuda::stream_wait(stream, Deadline::after_ms(30000), nullptr, "test stream").ok());
  auto bytes = out.read(0, count * sizeof(float));
  float last = 0;
  std::memcpy(&last, bytes.data() + bytes.size() - sizeof(float), sizeof last);
  EXPECT_EQ(last, 3.0f);
  cuda::stream_destroy(stream);
}

TEST_F(NcclBackend, AbortFailsLaterCalls) {
  ThreadRanks world(1, 30000, COLLX_TRANSPORT_TCP | COLLX_TRANSPORT_NCCL);
  ASSERT_TRUE(world.ok()) << world.error();
  collx_comm_t comm = world.comm(0);
  DeviceBuffer buf(4096);
  ASSERT_EQ(COLLX_OK, collx_allreduce(buf.get(), buf.get(), 1024, COLLX_FLOAT32, COLLX_SUM, comm, nullptr))
      << collx_last_error(comm);
  ASSERT_EQ(COLLX_OK, collx_comm_abort(comm));
  EXPECT_EQ(COLLX_ERR_ABORTED, collx_allreduce(buf.get(), buf.get(), 1024, COLLX_FLOAT32, COLLX_SUM, comm, nullptr));
}

}  // namespace
}  // namespace testing
}  // namespace collx
