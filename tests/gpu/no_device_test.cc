// Without a usable GPU (CPU-only CI): a device-buffer call fails cleanly with
// COLLX_ERR_UNSUPPORTED naming why, the communicator stays usable, host buffers detected as
// host take the host path, and the CUDA and NCCL layers report instead of crashing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lib/cuda/device.h"
#include "tests/support/thread_ranks.h"
#include "transports/nccl/nccl_comm.h"

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

}  // namespace
}  // namespace testing
}  // namespace collx
