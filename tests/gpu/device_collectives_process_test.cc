// Device-buffer collectives between ranks that are processes (forked), as in a real job: the
// staged route and CUDA IPC, where every peer buffer is opened from another process's IPC
// handle. Each rank checks its device result bit for bit against the same call on host
// buffers (run_device_case). The ranks use a stream of their own, the legacy default stream
// and the per-thread default stream in turn. The parent never touches the device (main probes
// in a child: CUDA does not survive fork), so this runs unchanged on a GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "lib/cuda/device.h"
#include "tests/gpu/device_case.h"
#include "tests/gpu/device_p2p_case.h"
#include "tests/gpu/parallel_device_case.h"
#include "tests/support/process_ranks.h"

namespace collx {
namespace testing {
namespace {

const DeviceRoute kRoutes[] = {kStagedRoute, kIpcRoute};

// The stream rank `rank` orders its calls on: its own, the legacy default (nullptr) or the
// per-thread default stream (cudaStreamPerThread's handle).
void* stream_for(int rank, void* own) {
  switch (rank % 3) {
    case 0: return own;
    case 1: return nullptr;
    default: return reinterpret_cast<void*>(uintptr_t{2});
  }
}

int run_rank(const DeviceRoute& route, int rank, int size, collx_comm_t comm) {
  void* own = nullptr;
  if (!cuda::stream_create(&own).ok()) {
    std::fprintf(stderr, "rank %d: stream_create failed\n", rank);
    return 1;
  }
  void* stream = stream_for(rank, own);
  const collx_coll_t colls[] = {COLLX_COLL_ALLREDUCE, COLLX_COLL_REDUCE_SCATTER, COLLX_COLL_ALLGATHER,
                                COLLX_COLL_BROADCAST, COLLX_COLL_REDUCE, COLLX_COLL_ALLTOALL};
  const collx_datatype_t types[] = {COLLX_FLOAT32, COLLX_BFLOAT16, COLLX_INT32};
  const collx_op_t ops[] = {COLLX_SUM, COLLX_AVG, COLLX_PREMUL_SUM, COLLX_MIN};
  unsigned variant = 0;
  int failures = 0;
  auto check = [&](const DeviceCase& c) {
    const std::string failure = run_device_case(c, route.name, rank, size, comm, stream);
    if (!failure.empty()) {
      std::fprintf(stderr, "%s\n", failure.c_str());
      ++failures;
    }
  };
  for (collx_coll_t coll : colls) {
    for (collx_datatype_t dt : types) {
      for (size_t o = 0; o < (reduces(coll) ? sizeof ops / sizeof ops[0] : 1); ++o) {
        ++variant;
        check(DeviceCase{coll, dt, ops[o], variant % 4 == 0 ? size_t{1} : size_t{1031}, variant % 2 == 1,
                         static_cast<int>(variant % static_cast<unsigned>(size)), variant % 3 == 0});
      }
    }
  }
  // Two staging chunks of 8 MiB; IPC slices of a buffer larger than a page.
  check(DeviceCase{COLLX_COLL_ALLREDUCE, COLLX_FLOAT32, COLLX_SUM, (size_t{2} << 20) + 3, false, 0, false});
  check(DeviceCase{COLLX_COLL_REDUCE_SCATTER, COLLX_BFLOAT16, COLLX_AVG, (size_t{1} << 18) + 1, true, 0, true});
  cuda::stream_destroy(own);
  return failures == 0 ? 0 : 1;
}

class DeviceCollectivesProcesses : public ::testing::TestWithParam<int> {};

TEST_P(DeviceCollectivesProcesses, MatchHostResultsOnStagedAndIpcRoutes) {
  const int size = GetParam();
  for (const DeviceRoute& route : kRoutes) {
    auto results = run_comm_processes(
        size, 120000, [&](int rank, int n, collx_comm_t comm) { return run_rank(route, rank, n, comm); }, 60000,
        route.transports);
    for (const RankResult& r : results) {
      ASSERT_EQ(r.exit_code, 0) << route.name << " np=" << size << ": " << describe(results);
    }
  }
}

// Point-to-point on device buffers between processes (the staged route over tcp and over shm),
// on the ranks' own streams, the legacy and the per-thread default streams in turn.
TEST(DeviceP2pProcesses, RingDeliversStreamOrderedDataOverTcpAndShm) {
  for (const DeviceRoute& route : kRoutes) {
    auto results = run_comm_processes(
        3, 120000,
        [&](int rank, int n, collx_comm_t comm) {
          void* own = nullptr;
          if (!cuda::stream_create(&own).ok()) return 1;
          const std::string failure = run_p2p_rings(rank, n, comm, stream_for(rank, own));
          if (!failure.empty()) std::fprintf(stderr, "%s: %s\n", route.name, failure.c_str());
          cuda::stream_destroy(own);
          return failure.empty() ? 0 : 1;
        },
        60000, route.transports);
    for (const RankResult& r : results) ASSERT_EQ(r.exit_code, 0) << route.name << ": " << describe(results);
  }
}

// collx_isend from a device buffer returns before its stream's earlier work ended, between
// processes too; the later host-buffer send to the same peer and tag arrives second.
TEST(DeviceP2pProcesses, IsendReturnsBeforeEarlierStreamWorkEndsAndKeepsMessageOrder) {
  for (const DeviceRoute& route : kRoutes) {
    auto results = run_comm_processes(
        3, 120000,
        [&](int rank, int n, collx_comm_t comm) {
          const std::string failure = run_p2p_isend_on_held_stream(rank, n, comm, 23);
          if (!failure.empty()) std::fprintf(stderr, "%s: %s\n", route.name, failure.c_str());
          return failure.empty() ? 0 : 1;
        },
        60000, route.transports);
    for (const RankResult& r : results) ASSERT_EQ(r.exit_code, 0) << route.name << ": " << describe(results);
  }
}

// The parallel layer's tp/sp ops, pipeline ring and vocab-parallel cross-entropy on device
// buffers between processes (peer buffers, the thread's device workspace included, opened
// from IPC handles on the IPC route), against the same calls on host buffers.
TEST(ParallelDeviceProcesses, TpSpPipelineAndCrossEntropyMatchHostBuffers) {
  for (const DeviceRoute& route : kRoutes) {
    auto results = run_comm_processes(
        3, 120000,
        [&](int rank, int n, collx_comm_t comm) {
          RankStream stream;
          if (!stream.ok()) return 1;
          const std::string failure = run_parallel_device_cases(rank, n, comm, route.name, stream);
          if (!failure.empty()) std::fprintf(stderr, "%s", failure.c_str());
          return failure.empty() ? 0 : 1;
        },
        60000, route.transports);
    for (const RankResult& r : results) ASSERT_EQ(r.exit_code, 0) << route.name << ": " << describe(results);
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, DeviceCollectivesProcesses, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int>& info) { return "np" + std::to_string(info.param); });

}  // namespace
}  // namespace testing
}  // namespace collx
