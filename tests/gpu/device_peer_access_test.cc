// Two devices of one host. CUDA IPC between ranks whose buffers are on different GPUs: peer
// access is checked and enabled, and where it is not possible every rank falls back to
// staging for the call, with the reason logged. Ranks are threads, rank r on device r % 2.
// The emulated tier runs this twice, with COLLX_TEST_DEVICE_PEER_ACCESS=1 (IPC, nothing
// logged) and =0 (staged, the reason at INFO); results must match the host's either way.
// Point-to-point on a communicator bound to device 0 (config->device) refuses a buffer on
// device 1, naming both.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "lib/common/log.h"
#include "lib/cuda/device.h"
#include "tests/gpu/device_case.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/thread_ranks.h"

namespace collx {
namespace testing {
namespace {

// Logs INFO lines of the COLL subsystem to a file while alive; text() reads them.
class CollLogFile {
 public:
  CollLogFile() : path_("/tmp/collx-peer-access-" + std::to_string(getpid()) + ".log") {
    std::remove(path_.c_str());
    setenv("COLLX_DEBUG", "INFO", 1);
    setenv("COLLX_DEBUG_SUBSYS", "COLL", 1);
    setenv("COLLX_DEBUG_FILE", path_.c_str(), 1);
    log_reload_settings();
  }
  ~CollLogFile() {
    unsetenv("COLLX_DEBUG");
    unsetenv("COLLX_DEBUG_SUBSYS");
    unsetenv("COLLX_DEBUG_FILE");
    log_reload_settings();
    std::remove(path_.c_str());
  }
  std::string text() const {
    std::ifstream in(path_);
    std::stringstream all;
    all << in.rdbuf();
    return all.str();
  }

 private:
  std::string path_;
};

TEST(DevicePeerAccess, IpcAcrossDevicesUsesPeerAccessOrStagesWithTheReasonLogged) {
  if (cuda::device_count() < 2) GTEST_SKIP() << "needs two CUDA devices (COLLX_TEST_DEVICE_COUNT=2 when emulated)";
  const char* setting = std::getenv("COLLX_TEST_DEVICE_PEER_ACCESS");
  const bool refused = cuda::emulated() && setting && std::string(setting) == "0";
  bool can = false;
  ASSERT_TRUE(cuda::device_can_access_peer(0, 1, &can).ok());
  if (cuda::emulated()) {
    EXPECT_EQ(can, !refused);
  }
  CollLogFile log;
  for (int size : {2, 4}) {
    ThreadRanks world(size, 60000, kIpcRoute.transports);
    ASSERT_TRUE(world.ok()) << world.error();
    unsigned variant = 0;
    for (collx_coll_t coll : {COLLX_COLL_ALLREDUCE, COLLX_COLL_ALLGATHER, COLLX_COLL_REDUCE_SCATTER}) {
      for (bool in_place : {false, true}) {
        ++variant;
        const DeviceCase c{coll, COLLX_INT32, COLLX_SUM, variant % 2 ? size_t{1031} : size_t{7}, in_place, 0, false};
        world.run([&](int rank, collx_comm_t comm) {
          if (!cuda::set_device(rank % 2).ok()) {
            ADD_FAILURE() << "set_device(" << rank % 2 << ") failed";
            return;
          }
          void* stream = nullptr;
          if (!cuda::stream_create(&stream).ok()) {
            ADD_FAILURE() << "stream_create failed";
            return;
          }
          const std::string failure = run_device_case(c, "ipc", rank, size, comm, stream);
          cuda::stream_destroy(stream);
          if (!failure.empty()) ADD_FAILURE() << failure;
        });
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
  const std::string text = log.text();
  if (!cuda::emulated()) return;  // a GPU machine answers for itself
  const bool logged = text.find("CUDA IPC needs peer access between the ranks' GPUs") != std::string::npos;
  EXPECT_EQ(logged, refused) << text;
  if (refused) {
    EXPECT_NE(text.find("cudaDeviceCanAccessPeer says no"), std::string::npos) << text;
  }
}

TEST(DeviceBinding, PointToPointBufferOnAnotherDeviceIsRefusedAndTheBoundOneWorks) {
  if (cuda::device_count() < 2) GTEST_SKIP() << "needs two CUDA devices (COLLX_TEST_DEVICE_COUNT=2 when emulated)";
  collx_store_t store = nullptr;
  ASSERT_EQ(collx_store_create_memory(&store), COLLX_OK);
  std::vector<collx_comm_t> comms(2, nullptr);
  run_threads(2, [&](int rank) {
    collx_config_t config;
    collx_config_init(&config, sizeof config);
    config.rank = rank;
    config.world_size = 2;
    config.store = store;
    config.timeout_ms = 60000;
    // nccl allowed: a bound communicator sets NCCL up at creation (refused without NCCL,
    // where point-to-point stays staged).
    config.transports = COLLX_TRANSPORT_TCP | COLLX_TRANSPORT_NCCL;
    config.device = 0;
    if (collx_comm_create(&config, &comms[static_cast<size_t>(rank)]) != COLLX_OK) {
      ADD_FAILURE() << "rank " << rank << ": " << collx_last_error(nullptr);
    }
  });
  if (!::testing::Test::HasFailure()) {
    const std::vector<uint8_t> data = {1, 2, 3, 4, 5, 6, 7, 8};
    run_threads(2, [&](int rank) {
      collx_comm_t comm = comms[static_cast<size_t>(rank)];
      if (rank == 0) {
        ASSERT_TRUE(cuda::set_device(1).ok());
        DeviceBuffer other(data.size(), data.data());
        ASSERT_TRUE(cuda::set_device(0).ok());
        EXPECT_EQ(collx_send(other.get(), data.size(), COLLX_UINT8, 1, 0, comm, nullptr), COLLX_ERR_INVALID_ARG);
        const std::string why = collx_last_error(comm);
        EXPECT_NE(why.find("CUDA device 1"), std::string::npos) << why;
        EXPECT_NE(why.find("bound to device 0"), std::string::npos) << why;
        DeviceBuffer mine(data.size(), data.data());
        EXPECT_EQ(collx_send(mine.get(), data.size(), COLLX_UINT8, 1, 0, comm, nullptr), COLLX_OK)
            << collx_last_error(comm);
      } else {
        DeviceBuffer got(data.size());
        EXPECT_EQ(collx_recv(got.get(), data.size(), COLLX_UINT8, 0, 0, comm, nullptr), COLLX_OK)
            << collx_last_error(comm);
        ASSERT_TRUE(cuda::device_synchronize().ok());
        EXPECT_EQ(got.read(0, data.size()), data);
      }
    });
  }
  run_threads(2, [&](int rank) { collx_comm_destroy(comms[static_cast<size_t>(rank)]); });
  collx_store_destroy(store);
}

}  // namespace
}  // namespace testing
}  // namespace collx
