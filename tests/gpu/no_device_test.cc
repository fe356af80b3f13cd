// Without a usable GPU (CPU-only CI): a device-buffer call fails cleanly with
// COLLX_ERR_UNSUPPORTED naming why, the communicator stays usable, host buffers detected as
// host take the host path, and the CUDA and NCCL layers report instead of crashing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collx/parallel.h"
#include "lib/cuda/device.h"
#include "parallel/parallel_test_util.h"
#include "tests/support/thread_ranks.h"
#include "backends/nccl/nccl_comm.h"

namespace collx {
namespace testing {
namespace {

TEST(NoDevice, ExplicitCudaBuffersAreRefusedAndTheCommunicatorStaysUsable) {
  ThreadRanks world(2, 30000, COLLX_TRANSPORT_TCP | COLLX_TRANSPORT_NCCL);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([](int rank, collx_comm_t comm) {
    std::vector<float> send(64, static_cast<float>(rank + 1)), recv(64, 0.0f);
    collx_opts_t opts;
    collx_opts_init(&opts, sizeof opts);
    opts.mem_kind = COLLX_MEM_CUDA;
    EXPECT_EQ(COLLX_ERR_UNSUPPORTED, collx_allreduce(send.data(), recv.data(), 64, COLLX_FLOAT32, COLLX_SUM, comm, &opts));
    const std::string message = collx_last_error(comm);
    EXPECT_NE(message.find("CUDA"), std::string::npos) << message;
    // Detected (AUTO): host memory, host path, over a mask that allows NCCL.
    opts.mem_kind = COLLX_MEM_AUTO;
    ASSERT_EQ(COLLX_OK, collx_allreduce(send.data(), recv.data(), 64, COLLX_FLOAT32, COLLX_SUM, comm, &opts))
        << collx_last_error(comm);
    EXPECT_EQ(recv[63], 3.0f);
  });
}

TEST(NoDevice, ExplicitCudaPointToPointIsRefusedBeforeAnythingMoves) {
  ThreadRanks world(2, 30000, COLLX_TRANSPORT_TCP);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([](int rank, collx_comm_t comm) {
    std::vector<float> buf(64, 1.0f);
    collx_opts_t opts;
    collx_opts_init(&opts, sizeof opts);
    opts.mem_kind = COLLX_MEM_CUDA;
    EXPECT_EQ(COLLX_ERR_UNSUPPORTED, rank == 0 ? collx_send(buf.data(), 64, COLLX_FLOAT32, 1, 0, comm, &opts)
                                               : collx_recv(buf.data(), 64, COLLX_FLOAT32, 0, 0, comm, &opts));
    const std::string message = collx_last_error(comm);
    EXPECT_NE(message.find("CUDA"), std::string::npos) << message;
  });
}

// The parallel layer's device variants (issue 14) refuse at create, naming why.
TEST(NoDevice, ParallelDeviceBuffersAreRefusedAtCreate) {
  ThreadRanks world(1, 30000, COLLX_TRANSPORT_TCP);
  ASSERT_TRUE(world.ok()) << world.error();
  collx_layout_t l = make_layout(1, {5, 7}, 8);
  collx_dp_config_t dc;
  collx_dp_config_init(&dc, sizeof dc);
  dc.mem_kind = COLLX_MEM_CUDA;
  collx_dp_t dp = nullptr;
  EXPECT_EQ(COLLX_ERR_UNSUPPORTED, collx_dp_create(world.comm(0), l, &dc, nullptr, &dp));
  EXPECT_NE(std::string(collx_dp_last_error(nullptr)).find("config->mem_kind is COLLX_MEM_CUDA but"),
            std::string::npos)
      << collx_dp_last_error(nullptr);
  collx_zero_config_t zc;
  collx_zero_config_init(&zc, sizeof zc);
  zc.stage = 1;
  zc.mem_kind = COLLX_MEM_CUDA;
  zc.offload = 1;
  collx_zero_t z = nullptr;
  EXPECT_EQ(COLLX_ERR_UNSUPPORTED, collx_zero_create(world.comm(0), l, &zc, &z));
  EXPECT_NE(std::string(collx_zero_last_error(nullptr)).find("config->mem_kind is COLLX_MEM_CUDA but"),
            std::string::npos)
      << collx_zero_last_error(nullptr);
  collx_layout_destroy(l);
}

TEST(NoDevice, LayersReportInsteadOfCrashing) {
  std::string why;
  EXPECT_EQ(0, cuda::device_count(&why));
  EXPECT_FALSE(why.empty());
  int x = 0;
  EXPECT_EQ(COLLX_MEM_HOST, cuda::pointer_kind(&x));
  EXPECT_EQ(COLLX_MEM_HOST, cuda::pointer_kind(nullptr));
  void* p = reinterpret_cast<void*>(&x);
  EXPECT_FALSE(cuda::device_alloc(16, &p).ok());
  EXPECT_EQ(p, nullptr);
  EXPECT_FALSE(nccl::available(&why));
  EXPECT_FALSE(why.empty());
  EXPECT_FALSE(cuda::cuda_reduce(&x, &x, &x, 1, COLLX_INT32, COLLX_SUM, nullptr).ok());
}

TEST(NoDevice, PublicDeviceUtilitiesSayWhy) {
  void* p = nullptr;
  EXPECT_EQ(collx_device_alloc(16, &p), COLLX_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(collx_last_error(nullptr)).find("no usable device"), std::string::npos);
  EXPECT_EQ(p, nullptr);
  int x = 0, y = 0;
  EXPECT_EQ(collx_device_memcpy(&x, &y, sizeof x, nullptr), COLLX_ERR_UNSUPPORTED);
  EXPECT_EQ(collx_device_stream_synchronize(nullptr), COLLX_ERR_UNSUPPORTED);
  EXPECT_EQ(collx_device_free(nullptr), COLLX_OK);
}

}  // namespace
}  // namespace testing
}  // namespace collx
