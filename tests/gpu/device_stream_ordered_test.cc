// Nonblocking collectives on device buffers over the staged and CUDA IPC routes are ordered on
// the caller's stream without the host waiting for it (lib/core/comm_device_async.cc): the call returns
// while the stream's earlier work has not ended (seen by an event recorded before the call
// that is not done yet, not by time), work queued after it on the stream sees the result, and
// a rank whose stream never reaches the call gets a timeout, its peers an error, and every
// stream still drains. The earlier work is a test-only host function that holds its stream
// until the test opens a gate (collx's own host functions never block).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "lib/cuda/device.h"
#include "tests/gpu/device_case.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/thread_ranks.h"

namespace collx {
namespace testing {
namespace {

void hold_until_open(void* gate) {
  while (!static_cast<std::atomic<bool>*>(gate)->load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
}

std::vector<int32_t> rank_data(int rank, size_t count) {
  std::vector<int32_t> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = rank + 1 + static_cast<int32_t>(i % 7);
  return v;
}

// collx_iallreduce (int32 sum) of send into recv, ordered on `stream`.
collx_status_t iallreduce_on(void* stream, const DeviceBuffer& send, const DeviceBuffer& recv, size_t count,
                             collx_comm_t comm, collx_request_t* request) {
  collx_opts_t opts;
  collx_opts_init(&opts, sizeof opts);
  opts.stream = stream;
  return collx_iallreduce(send.get(), recv.get(), count, COLLX_INT32, COLLX_SUM, comm, &opts, request);
}

// A stream held by hold_until_open until `gate` opens (at the latest when destroyed).
struct HeldCall {
  void* stream = nullptr;
  void* before = nullptr;  // recorded between the held work and the call
  std::atomic<bool> gate{false};
  ~HeldCall() {
    gate = true;
    if (stream) cuda::stream_wait(stream, Deadline::after_ms(60000), nullptr, "the test's stream").ignore();
    if (before) cuda::event_destroy(before);
    if (stream) cuda::stream_destroy(stream);
  }
};

TEST(StreamOrderedNonblocking, ReturnsBeforeEarlierStreamWorkEndsAndLaterWorkSeesTheResult) {
  // Staged: copies queued on the stream; CUDA IPC: the route runs on collx's side stream.
  for (const DeviceRoute& route : {kStagedRoute, kIpcRoute})
  for (int size : {2, 3}) {
    ThreadRanks world(size, 60000, route.transports);
    ASSERT_TRUE(world.ok()) << world.error();
    const size_t count = 1031;
    world.run([&](int rank, collx_comm_t comm) {
      const std::vector<int32_t> input = rank_data(rank, count);
      const size_t bytes = count * sizeof(int32_t);
      DeviceBuffer send(bytes, input.data()), recv(bytes), later(bytes);
      HeldCall held;
      ASSERT_TRUE(cuda::stream_create(&held.stream).ok());
      ASSERT_TRUE(cuda::event_create(&held.before).ok());
      ASSERT_TRUE(cuda::launch_host_func(held.stream, hold_until_open, &held.gate).ok());
      ASSERT_TRUE(cuda::event_record(held.before, held.stream).ok());
      collx_request_t request = nullptr;
      ASSERT_EQ(iallreduce_on(held.stream, send, recv, count, comm, &request), COLLX_OK) << collx_last_error(comm);
      bool done = true;
      ASSERT_TRUE(cuda::event_done(held.before, &done).ok());
      EXPECT_FALSE(done) << "the call returned only after the stream's earlier work ended";
      ASSERT_TRUE(cuda::copy_async(later.get(), recv.get(), bytes, cuda::CopyKind::kDeviceToDevice, held.stream).ok());
      held.gate = true;
      EXPECT_EQ(collx_wait(request, -1), COLLX_OK) << collx_last_error(comm);
      collx_request_free(request);
      ASSERT_TRUE(cuda::stream_wait(held.stream, Deadline::after_ms(60000), nullptr, "the test's stream").ok());
      std::vector<int32_t> want(count);
      for (int r = 0; r < size; ++r) {
        const std::vector<int32_t> theirs = rank_data(r, count);
        for (size_t i = 0; i < count; ++i) want[i] += theirs[i];
      }
      const auto got = later.read(0, bytes);
      ASSERT_EQ(got.size(), bytes);
      EXPECT_EQ(std::memcmp(got.data(), want.data(), bytes), 0) << route.name << ", rank " << rank << ", size " << size;
    });
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(StreamOrderedNonblocking, StreamThatNeverReachesTheCallTimesOutAndEveryStreamDrains) {
  ThreadRanks world(2, /*timeout_ms=*/300, kStagedRoute.transports);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](int rank, collx_comm_t comm) {
    const size_t count = 64, bytes = count * sizeof(int32_t);
    const std::vector<int32_t> input = rank_data(rank, count);
    DeviceBuffer send(bytes, input.data()), recv(bytes);
    HeldCall held;
    ASSERT_TRUE(cuda::stream_create(&held.stream).ok());
    if (rank == 0) {
      ASSERT_TRUE(cuda::launch_host_func(held.stream, hold_until_open, &held.gate).ok());
    }
    collx_request_t request = nullptr;
    ASSERT_EQ(iallreduce_on(held.stream, send, recv, count, comm, &request), COLLX_OK) << collx_last_error(comm);
    const collx_status_t rc = collx_wait(request, -1);
    const std::string why = collx_last_error(comm);
    collx_request_free(request);
    EXPECT_NE(rc, COLLX_OK) << "rank " << rank;
    if (rank == 0) {
      EXPECT_EQ(rc, COLLX_ERR_TIMEOUT) << why;
      EXPECT_NE(why.find("did not reach the collective"), std::string::npos) << why;
    }
    held.gate = true;
    // The stream-side wait was released with the failure: the stream drains.
    EXPECT_TRUE(cuda::stream_wait(held.stream, Deadline::after_ms(60000), nullptr, "the test's stream").ok());
  });
}

}  // namespace
}  // namespace testing
}  // namespace collx
