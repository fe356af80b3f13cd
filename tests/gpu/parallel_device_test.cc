// The handle-less parallel ops (tp/sp ops, vocab-parallel cross-entropy, overflow flag and
// norm, pipeline exchange, context-parallel ring) on device buffers, checked bit for bit
// against the same call on host buffers through the same communicator, for float32,
// bfloat16 and float16 where the op takes a datatype, on 2 and 3 thread ranks over the
// staged and CUDA IPC routes (the cases shared with the process-rank tier are in
// parallel_device_case.cc). Each rank queues its work on its own created stream
// (collx_parallel_set_stream), which the emulated tier runs with random delays per operation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "collx/collx.h"
#include "collx/parallel.h"
#include "lib/cuda/device.h"
#include "lib/dtype/datatype.h"
#include "parallel/parallel_test_util.h"
#include "tests/gpu/device_case.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/parallel_device_case.h"
#include "tests/support/thread_ranks.h"

namespace collx {
namespace testing {
namespace {

const DeviceRoute kRoutes[] = {kStagedRoute, kIpcRoute};

// gtest's form of same_on_device.
void expect_same_on_device(const std::string& what, const std::vector<Bytes>& buffers, const RankStream& stream,
                           const BufferOp& op) {
  EXPECT_EQ(same_on_device(what, buffers, stream, op), "");
}

std::string name(const char* op, collx_datatype_t dt, const DeviceRoute& route, int size) {
  return std::string(op) + " " + datatype_name(dt) + " " + route.name + " " + std::to_string(size) + " ranks";
}

// Runs fn(rank, comm, stream) on every rank of a world of each size and route.
void on_worlds(const std::function<void(int, collx_comm_t, const RankStream&, const DeviceRoute&, int)>& fn) {
  for (int size : {2, 3}) {
    for (const DeviceRoute& route : kRoutes) {
      ThreadRanks world(size, 60000, route.transports);
      ASSERT_TRUE(world.ok()) << world.error();
      world.run([&](int rank, collx_comm_t comm) {
        RankStream stream;
        ASSERT_TRUE(stream.ok());
        fn(rank, comm, stream, route, size);
      });
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(ParallelDevice, TpSpPipelineAndCrossEntropyMatchHostBuffers) {
  on_worlds([](int rank, collx_comm_t comm, const RankStream& stream, const DeviceRoute& route, int t) {
    const std::string label = std::string(route.name) + " " + std::to_string(t) + " ranks";
    EXPECT_EQ(run_parallel_device_cases(rank, t, comm, label, stream), "");
  });
}

// tp_gather_last reuses one device workspace per thread: it grows with the calls, and a
// call on another stream (the last one destroyed meanwhile) is ordered after the last use.
TEST(ParallelDevice, GatherLastWorkspaceFollowsSizesAndStreams) {
  ThreadRanks world(2, 60000, kStagedRoute.transports);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([](int rank, collx_comm_t comm) {
    for (size_t rows : {2, 9, 4, 33, 1}) {
      RankStream stream;  // a new stream each time
      ASSERT_TRUE(stream.ok());
      const Bytes x = parallel_data(COLLX_BFLOAT16, rows * 3, rank, static_cast<unsigned>(rows));
      expect_same_on_device("tp_gather_last rows " + std::to_string(rows), {x, Bytes(x.size() * 2)}, stream,
                            [&](const std::vector<void*>& p) {
                              return collx_tp_gather_last(p[0], p[1], rows, 3, COLLX_BFLOAT16, comm);
                            });
    }
  });
}

TEST(ParallelDevice, FinalizeGradsReducesOnlySpNormTensorsOnTheDevice) {
  on_worlds([](int rank, collx_comm_t comm, const RankStream& stream, const DeviceRoute& route, int t) {
    collx_layout_t l = make_layout(1, {10, 7, 5, 3}, 0, COLLX_PART_FLAT,
                                   {0u, COLLX_TENSOR_SP_NORM, 0u, COLLX_TENSOR_SP_NORM});
    size_t total = 0;
    ASSERT_EQ(collx_layout_total(l, &total), COLLX_OK);
    expect_same_on_device(name("tp_finalize_grads", COLLX_FLOAT32, route, t),
                          {parallel_data(COLLX_FLOAT32, total, rank, 3)}, stream, [&](const std::vector<void*>& p) {
                            return collx_tp_finalize_grads(l, static_cast<float*>(p[0]), comm);
                          });
    collx_layout_destroy(l);
  });
}

TEST(ParallelDevice, ContextParallelRingHandsOutEveryRanksBlock) {
  on_worlds([](int rank, collx_comm_t comm, const RankStream& stream, const DeviceRoute& route, int t) {
    const size_t count = 257, bytes = count * 4;
    // p[0] the block, p[1] the work double buffer, p[2] every block in source order.
    expect_same_on_device(
        name("cp_ring", COLLX_FLOAT32, route, t),
        {parallel_data(COLLX_FLOAT32, count, rank, 7), Bytes(2 * bytes), Bytes(static_cast<size_t>(t) * bytes)}, stream,
        [&](const std::vector<void*>& p) {
          const bool device = cuda::pointer_kind(p[0]) == COLLX_MEM_CUDA;
          collx_cp_ring_t ring = nullptr;
          collx_status_t st = collx_cp_ring_start(comm, p[0], p[1], count, COLLX_FLOAT32, 9, 60000, &ring);
          if (st != COLLX_OK) return st;
          const void* block = nullptr;
          int32_t source = 0;
          while ((st = collx_cp_ring_next(ring, &block, &source)) == COLLX_OK && block) {
            char* slot = static_cast<char*>(p[2]) + static_cast<size_t>(source) * bytes;
            if (!device) {
              std::memcpy(slot, block, bytes);
            } else {
              void* s = nullptr;
              collx_parallel_get_stream(&s);
              // The block is ready for work on the stream; the next receive into its half
              // is posted only after this copy is queued ahead of it.
              if (!cuda::copy_async(slot, block, bytes, cuda::CopyKind::kDeviceToDevice, s).ok())
                st = COLLX_ERR_SYSTEM;
            }
            if (st != COLLX_OK) break;
          }
          collx_status_t fin = collx_cp_ring_finish(ring);
          return st != COLLX_OK ? st : fin;
        });
  });
}

TEST(ParallelDevice, OverflowFlagAndNormOnDeviceBuffers) {
  ThreadRanks world(1, 60000);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([](int, collx_comm_t) {
    RankStream stream;
    ASSERT_TRUE(stream.ok());
    collx_layout_t l = make_layout(2, {10, 7, 5, 3});
    size_t total = 0;
    ASSERT_EQ(collx_layout_total(l, &total), COLLX_OK);
    std::vector<float> g(total);
    for (size_t i = 0; i < total; ++i) g[i] = static_cast<float>(static_cast<int>(i % 13) - 6) * 0.37f;
    for (int32_t owner : {-1, 0, 1}) {
      double host = -1, dev_host_out = -1;
      ASSERT_EQ(collx_norm_sq_local(l, g.data(), owner, 0, 1, &host), COLLX_OK);
      DeviceBuffer dg(total * 4, g.data()), dsum(8);
      // A host result: the call waits. A device result: queued only.
      ASSERT_EQ(collx_norm_sq_local(l, reinterpret_cast<float*>(dg.get()), owner, 0, 1, &dev_host_out), COLLX_OK)
          << collx_last_error(nullptr);
      ASSERT_EQ(collx_norm_sq_local(l, reinterpret_cast<float*>(dg.get()), owner, 0, 1,
                                    reinterpret_cast<double*>(dsum.get())), COLLX_OK);
      ASSERT_TRUE(stream.wait());
      double dev_dev_out = 0;
      std::memcpy(&dev_dev_out, dsum.read(0, 8).data(), 8);
      if (cuda::emulated()) {
        EXPECT_EQ(dev_host_out, host) << owner;  // index order, as the host loop
      }
      EXPECT_NEAR(dev_host_out, host, 1e-12 * host) << owner;
      EXPECT_EQ(dev_dev_out, dev_host_out) << owner;
    }
    for (float bad : {0.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
      std::vector<float> v = g;
      if (bad != 0.0f) v[total / 2] = bad;
      std::vector<float> hv = v;
      int32_t host_found = -1, dev_found = -1;
      ASSERT_EQ(collx_found_nonfinite(hv.data(), total, 0.5f, &host_found), COLLX_OK);
      DeviceBuffer dv(total * 4, v.data()), dv2(total * 4, v.data()), dflag(4);
      ASSERT_EQ(collx_found_nonfinite(reinterpret_cast<float*>(dv.get()), total, 0.5f, &dev_found), COLLX_OK)
          << collx_last_error(nullptr);
      EXPECT_EQ(dev_found, host_found);
      ASSERT_EQ(collx_found_nonfinite(reinterpret_cast<float*>(dv2.get()), total, 0.5f,
                                      reinterpret_cast<int32_t*>(dflag.get())), COLLX_OK);
      ASSERT_TRUE(stream.wait());
      int32_t flag = -1;
      std::memcpy(&flag, dflag.read(0, 4).data(), 4);
      EXPECT_EQ(flag, host_found);
      const auto got = dv.read(0, total * 4), got2 = dv2.read(0, total * 4);
      for (size_t i = 0; i < total; ++i) {
        float a, b;
        std::memcpy(&a, got.data() + i * 4, 4);
        std::memcpy(&b, got2.data() + i * 4, 4);
        if (std::isnan(hv[i])) {
          EXPECT_TRUE(std::isnan(a) && std::isnan(b)) << i;
        } else {
          EXPECT_EQ(a, hv[i]) << i;
          EXPECT_EQ(b, hv[i]) << i;
        }
      }
    }
    collx_layout_destroy(l);
  });
}

// The overflow check of a step on device gradients: found_nonfinite into a device flag on
// each rank, then flag_any over the group reads it back and writes the decision to it.
TEST(ParallelDevice, FlagAnyOnDeviceFlagsReachesEveryRank) {
  ThreadRanks world(3, 60000);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([](int rank, collx_comm_t comm) {
    RankStream stream;
    ASSERT_TRUE(stream.ok());
    for (int overflowing : {-1, 1}) {  // -1: no rank overflows
      std::vector<float> g(100, 1.5f);
      if (rank == overflowing) g[42] = std::numeric_limits<float>::infinity();
      DeviceBuffer dg(g.size() * 4, g.data()), dflag(4);
      auto* flag = reinterpret_cast<int32_t*>(dflag.get());
      ASSERT_EQ(collx_found_nonfinite(reinterpret_cast<float*>(dg.get()), g.size(), 1.0f, flag), COLLX_OK);
      ASSERT_EQ(collx_flag_any(flag, comm), COLLX_OK) << collx_last_error(nullptr);
      int32_t got = -1;
      std::memcpy(&got, dflag.read(0, 4).data(), 4);
      EXPECT_EQ(got, overflowing >= 0 ? 1 : 0) << "rank " << rank;
    }
  });
}

TEST(ParallelDevice, MixedHostAndDeviceBuffersAreRefused) {
  ThreadRanks world(1, 60000);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([](int, collx_comm_t comm) {
    RankStream stream;
    std::vector<float> host(8);
    DeviceBuffer dev(8 * 4);
    EXPECT_EQ(collx_tp_split_last(dev.get(), host.data(), 2, 4, COLLX_FLOAT32, comm), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_last_error(nullptr)).find("one kind"), std::string::npos)
        << collx_last_error(nullptr);
    int32_t* dflag = reinterpret_cast<int32_t*>(dev.get());
    EXPECT_EQ(collx_found_nonfinite(host.data(), 8, 1.0f, dflag), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_last_error(nullptr)).find("values"), std::string::npos)
        << collx_last_error(nullptr);
    // No values: the device flag is cleared (queued on the stream).
    const int32_t one = 1;
    ASSERT_TRUE(cuda::copy(dflag, &one, 4, cuda::CopyKind::kHostToDevice).ok());
    EXPECT_EQ(collx_found_nonfinite(nullptr, 0, 1.0f, dflag), COLLX_OK) << collx_last_error(nullptr);
    ASSERT_TRUE(stream.wait());
    EXPECT_EQ(dev.read(0, 4), Bytes(4, 0));
  });
}

TEST(ParallelDevice, CurrentStreamIsPerThread) {
  void* s = reinterpret_cast<void*>(0x1);
  ASSERT_EQ(collx_parallel_get_stream(&s), COLLX_OK);
  EXPECT_EQ(s, nullptr);  // the default
  void* mine = reinterpret_cast<void*>(0x2);  // cudaStreamPerThread's handle
  ASSERT_EQ(collx_parallel_set_stream(mine), COLLX_OK);
  run_threads(2, [](int) {
    void* other = reinterpret_cast<void*>(0x1);
    EXPECT_EQ(collx_parallel_get_stream(&other), COLLX_OK);
    EXPECT_EQ(other, nullptr);
  });
  ASSERT_EQ(collx_parallel_get_stream(&s), COLLX_OK);
  EXPECT_EQ(s, mine);
  EXPECT_EQ(collx_parallel_set_stream(nullptr), COLLX_OK);
  EXPECT_EQ(collx_parallel_get_stream(nullptr), COLLX_ERR_INVALID_ARG);
}

}  // namespace
}  // namespace testing
}  // namespace collx
