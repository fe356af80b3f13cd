// The memory-kind rule is part of validate() (device_check, comm_device.cc): the same refusal
// for blocking, nonblocking, point-to-point and grouped calls, none of which spends a
// sequence number, and a call that differs from an accepted one only in its memory kind is
// checked again.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lib/cuda/device.h"
#include "tests/support/thread_ranks.h"

namespace collx {
namespace testing {
namespace {

collx_opts_t opts_with_mem_kind(int32_t mem_kind) {
  collx_opts_t opts;
  collx_opts_init(&opts, sizeof opts);
  opts.mem_kind = mem_kind;
  return opts;
}

TEST(MemoryKindRule, AnUnknownKindIsRefusedAlikeOnEveryPath) {
  ThreadRanks world(1);
  ASSERT_TRUE(world.ok()) << world.error();
  collx_comm_t comm = world.comm(0);
  std::vector<float> buf(8, 1.0f);
  const collx_opts_t bad = opts_with_mem_kind(7);
  auto expect_refused = [&](collx_status_t st, const char* what) {
    EXPECT_EQ(st, COLLX_ERR_INVALID_ARG) << what;
    EXPECT_NE(std::string(collx_last_error(comm)).find("unknown mem_kind 7 in opts"), std::string::npos)
        << what << ": " << collx_last_error(comm);
  };
  expect_refused(collx_allreduce(buf.data(), buf.data(), 4, COLLX_FLOAT32, COLLX_SUM, comm, &bad), "allreduce");
  collx_request_t request = nullptr;
  expect_refused(collx_iallgather(buf.data(), buf.data() + 4, 4, COLLX_FLOAT32, comm, &bad, &request), "iallgather");
  EXPECT_EQ(request, nullptr);
  expect_refused(collx_send(buf.data(), 4, COLLX_FLOAT32, 0, 0, comm, &bad), "send");
  ASSERT_EQ(collx_group_start(), COLLX_OK);
  expect_refused(collx_allreduce(buf.data(), buf.data(), 4, COLLX_FLOAT32, COLLX_SUM, comm, &bad), "grouped");
  EXPECT_EQ(collx_group_end(), COLLX_ERR_INVALID_ARG);  // a call refused while recorded: nothing runs
  // Accepted with a known kind, then the same call with the unknown one: checked again.
  const collx_opts_t host = opts_with_mem_kind(COLLX_MEM_HOST);
  EXPECT_EQ(collx_allreduce(buf.data(), buf.data(), 4, COLLX_FLOAT32, COLLX_SUM, comm, &host), COLLX_OK)
      << collx_last_error(comm);
  expect_refused(collx_allreduce(buf.data(), buf.data(), 4, COLLX_FLOAT32, COLLX_SUM, comm, &bad), "repeat");
  EXPECT_EQ(collx_allreduce(buf.data(), buf.data(), 4, COLLX_FLOAT32, COLLX_SUM, comm, &host), COLLX_OK)
      << collx_last_error(comm);
}

TEST(MemoryKindRule, DeviceBuffersWithoutAUsableDeviceAreUnsupportedAndTheCommunicatorStaysUsable) {
  ThreadRanks world(1);
  ASSERT_TRUE(world.ok()) << world.error();
  collx_comm_t comm = world.comm(0);
  if (cuda::device_count() > 0) GTEST_SKIP() << "a CUDA device is usable here";
  std::vector<float> buf(8, 1.0f);
  const collx_opts_t cuda = opts_with_mem_kind(COLLX_MEM_CUDA);
  EXPECT_EQ(collx_allreduce(buf.data(), buf.data(), 4, COLLX_FLOAT32, COLLX_SUM, comm, &cuda), COLLX_ERR_UNSUPPORTED);
  const std::string message = collx_last_error(comm);
  EXPECT_TRUE(message.find("not supported by this build") != std::string::npos ||
              message.find("no CUDA device is usable") != std::string::npos)
      << message;
  EXPECT_EQ(collx_allreduce(buf.data(), buf.data(), 4, COLLX_FLOAT32, COLLX_SUM, comm, nullptr), COLLX_OK)
      << collx_last_error(comm);
}

}  // namespace
}  // namespace testing
}  // namespace collx
