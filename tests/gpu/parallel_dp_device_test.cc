// The data-parallel reducer (parallel/dp*.cc) on device gradient buffers, checked bit for bit
// against the same run on host buffers through the same communicator: the device path queues
// the pre-scale, the bucket collectives and the post-scale on the caller's stream, the host
// path computes the same float32 products and sums on the CPU, so every bit must agree.
// Gradients are written and accumulated by work queued on the stream (as an engine's backward
// kernels would), marked in a different order on every rank, over two micro-steps (no_sync,
// then sync). On the emulated device every queued operation is delayed at random, so a scale
// or collective not ordered on the stream reads stale data and the comparison fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "collx/collx.h"
#include "collx/parallel.h"
#include "lib/cuda/device.h"
#include "parallel/device_mem.h"
#include "parallel/low_precision.h"
#include "parallel/parallel_test_util.h"
#include "tests/gpu/device_case.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/thread_ranks.h"

namespace collx {
namespace testing {
namespace {

// Sizes covering 0, 1, odd sizes and a tensor larger than a bucket.
const std::vector<size_t> kSizes = {0, 1, 3, 5, 97, 300, 64};
constexpr size_t kBucket = 128;
constexpr int64_t kTimeoutMs = 60000;

collx_dp_config_t dp_config(int32_t mode, double predivide) {
  collx_dp_config_t c;
  EXPECT_EQ(collx_dp_config_init(&c, sizeof c), COLLX_OK);
  c.mode = mode;
  c.predivide = predivide;
  c.timeout_ms = kTimeoutMs;
  return c;
}

// The micro-step's gradient of tensor t on this rank, whole layout (host copy).
std::vector<float> step_grads(collx_layout_t l, size_t total, int rank, int micro) {
  std::vector<float> g(total, 0.0f);
  for (size_t t = 0; t < kSizes.size(); ++t) {
    size_t off = 0, n = 0;
    collx_layout_tensor(l, t, &off, &n);
    for (size_t j = 0; j < n; ++j) g[off + j] = grad_value(rank, t, j) + static_cast<float>(micro);
  }
  return g;
}

// Two micro-steps (no_sync, then sync) on one reducer; host or device buffers. Device: each
// gradient is copied to a device scratch on the stream and added into its view by a kernel on
// the stream, then marked (the host never waits in between). Returns the whole buffer.
std::vector<float> run_reducer(collx_comm_t comm, int rank, collx_dp_config_t cfg, bool device, void* stream,
                               bool borrowed) {
  int32_t world = 0;
  collx_comm_size(comm, &world);
  collx_layout_t l = make_layout(world, kSizes, kBucket);
  size_t total = 0;
  collx_layout_total(l, &total);
  std::vector<std::vector<float>> host_grads = {step_grads(l, total, rank, 0), step_grads(l, total, rank, 1)};
  // 16-bit views: the same (exactly representable) values, rounded to grad_dtype.
  const bool half = cfg.grad_dtype != COLLX_FLOAT32;
  const size_t es = half ? 2 : 4;
  std::vector<std::vector<uint16_t>> host_half(2, std::vector<uint16_t>(total));
  for (size_t m = 0; m < 2 && half; ++m)
    for (size_t i = 0; i < total; ++i)
      host_half[m][i] = cfg.grad_dtype == COLLX_BFLOAT16 ? parallel::float_to_bf16(host_grads[m][i])
                                                          : parallel::float_to_fp16(host_grads[m][i]);
  // Device memory of the device run only, released after its own stream drained: see
  // RankDeviceMem (a plain free would wait for the other ranks' streams).
  RankDeviceMem scratch, borrowed_buf;
  if (device) {
    cfg.mem_kind = COLLX_MEM_CUDA;
    cfg.stream = stream;
    EXPECT_TRUE(scratch.allocate_zeroed(2 * total * es, stream).ok());
    EXPECT_TRUE(borrowed_buf.allocate_zeroed(total * sizeof(float), stream).ok());
  }
  std::vector<float> host_borrowed(total, 0.0f);
  void* buffer = borrowed ? (device ? borrowed_buf.get() : static_cast<void*>(host_borrowed.data())) : nullptr;
  collx_dp_t dp = nullptr;
  EXPECT_EQ(collx_dp_create(comm, l, &cfg, buffer, &dp), COLLX_OK) << collx_dp_last_error(nullptr);
  if (!dp) {
    collx_layout_destroy(l);
    return {};
  }
  EXPECT_EQ(collx_dp_zero(dp), COLLX_OK) << collx_dp_last_error(dp);
  std::vector<size_t> order(kSizes.size());
  std::iota(order.begin(), order.end(), 0);
  for (int micro = 0; micro < 2; ++micro) {
    EXPECT_EQ(collx_dp_set_sync(dp, micro == 1 ? 1 : 0), COLLX_OK);
    std::shuffle(order.begin(), order.end(), std::mt19937(77 + static_cast<unsigned>(rank * 2 + micro)));
    const std::vector<float>& g = host_grads[static_cast<size_t>(micro)];
    const char* src = half ? reinterpret_cast<const char*>(host_half[static_cast<size_t>(micro)].data())
                           : reinterpret_cast<const char*>(g.data());
    char* dev_scratch = static_cast<char*>(scratch.get()) + static_cast<size_t>(micro) * total * es;
    for (size_t t : order) {
      size_t off = 0, n = 0;
      collx_layout_tensor(l, t, &off, &n);
      void* view = nullptr;
      int32_t dtype = -1;
      EXPECT_EQ(collx_dp_grad_view(dp, t, &view, &dtype), COLLX_OK) << collx_dp_last_error(dp);
      EXPECT_EQ(dtype, device ? cfg.grad_dtype : COLLX_FLOAT32);
      if (device && n) {
        EXPECT_TRUE(cuda::copy_async(dev_scratch + off * es, src + off * es, n * es, cuda::CopyKind::kHostToDevice,
                                     stream).ok());
        EXPECT_TRUE(cuda::cuda_reduce(view, view, dev_scratch + off * es, n, static_cast<collx_datatype_t>(dtype),
                                      COLLX_SUM, stream).ok());
      } else {
        for (size_t j = 0; j < n; ++j) static_cast<float*>(view)[j] += g[off + j];
      }
      EXPECT_EQ(collx_dp_mark_ready(dp, t), COLLX_OK) << collx_dp_last_error(dp);
    }
    EXPECT_EQ(collx_dp_finish(dp, -1), COLLX_OK) << collx_dp_last_error(dp);
  }
  float* buf = nullptr;
  size_t count = 0;
  collx_dp_buffer(dp, &buf, &count);
  EXPECT_EQ(count, total);
  EXPECT_TRUE(!borrowed || buf == buffer);
  std::vector<float> out(total);
  if (device) {
    // finish only queued the post-scale: the stream says when the result is there.
    EXPECT_TRUE(cuda::stream_wait(stream, Deadline::after_ms(kTimeoutMs), nullptr, "test").ok());
    if (total) {
      EXPECT_TRUE(cuda::copy(out.data(), buf, total * sizeof(float), cuda::CopyKind::kDeviceToHost).ok());
    }
  } else {
    std::copy(buf, buf + total, out.begin());
  }
  EXPECT_EQ(collx_dp_destroy(dp), COLLX_OK);
  collx_layout_destroy(l);
  return out;
}

// The elements whose value the mode defines: everything (all-reduce) or this rank's owner
// ranges (reduce-scatter: the rest holds unreduced data).
std::vector<char> defined(int32_t mode, int world, int rank) {
  collx_layout_t l = make_layout(world, kSizes, kBucket);
  size_t total = 0, nb = 0;
  collx_layout_total(l, &total);
  collx_layout_num_buckets(l, &nb);
  std::vector<char> mask(total, mode == COLLX_DP_ALLREDUCE ? 1 : 0);
  for (size_t b = 0; mode == COLLX_DP_REDUCE_SCATTER && b < nb; ++b) {
    size_t start = 0, count = 0;
    collx_layout_owned(l, b, rank, &start, &count);
    std::fill(mask.begin() + static_cast<long>(start), mask.begin() + static_cast<long>(start + count), 1);
  }
  collx_layout_destroy(l);
  return mask;
}

struct Case {
  int world;
  DeviceRoute route;
  int32_t mode;
  double predivide;
  bool borrowed;
  int32_t comm_dtype = COLLX_FLOAT32;
  int32_t grad_dtype = COLLX_FLOAT32;  // of the device run (the host run writes float32)
};

void run_case(const Case& c) {
  ThreadRanks world(c.world, kTimeoutMs, c.route.transports);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](int rank, collx_comm_t comm) {
    void* stream = nullptr;
    ASSERT_TRUE(cuda::stream_create(&stream).ok());
    collx_dp_config_t cfg = dp_config(c.mode, c.predivide);
    cfg.comm_dtype = c.comm_dtype;
    const std::vector<float> host = run_reducer(comm, rank, cfg, false, nullptr, c.borrowed);
    cfg.grad_dtype = c.grad_dtype;
    const std::vector<float> dev = run_reducer(comm, rank, cfg, true, stream, c.borrowed);
    cuda::stream_destroy(stream);
    ASSERT_EQ(host.size(), dev.size());
    const std::vector<char> mask = defined(c.mode, c.world, rank);
    for (size_t i = 0; i < host.size(); ++i) {
      if (!mask[i]) continue;
      uint32_t a = 0, b = 0;
      std::memcpy(&a, &host[i], 4);
      std::memcpy(&b, &dev[i], 4);
      ASSERT_EQ(a, b) << c.route.name << " world " << c.world << " mode " << c.mode << " predivide " << c.predivide
                      << " comm_dtype " << c.comm_dtype
                      << " rank " << rank << " element " << i << ": host " << host[i] << " device " << dev[i];
    }
  });
}

TEST(DpDevice, AllreduceMatchesHostBitForBit) {
  for (double predivide : {0.0, 1.0}) run_case({3, kStagedRoute, COLLX_DP_ALLREDUCE, predivide, false});
  run_case({2, kIpcRoute, COLLX_DP_ALLREDUCE, 0.0, true});
}

TEST(DpDevice, ReduceScatterMatchesHostBitForBitInOwnedRanges) {
  run_case({3, kStagedRoute, COLLX_DP_REDUCE_SCATTER, 0.0, true});
  run_case({2, kIpcRoute, COLLX_DP_REDUCE_SCATTER, 1.0, false});  // all after: post-scale 1/2
}

// A 16-bit wire: rounded and widened by kernels on the stream, as the host helper thread
// rounds (round to nearest even of the pre-scaled float32), so the bits agree too.
TEST(DpDevice, Bf16AndFp16WireMatchHostBitForBit) {
  run_case({3, kStagedRoute, COLLX_DP_ALLREDUCE, 1.0, false, COLLX_BFLOAT16});
  run_case({2, kIpcRoute, COLLX_DP_REDUCE_SCATTER, 1.0, true, COLLX_BFLOAT16});
  run_case({2, kStagedRoute, COLLX_DP_ALLREDUCE, 0.0, false, COLLX_FLOAT16});
}

// 16-bit gradient views: the engine writes bf16 / fp16 gradients (exact values here), each
// bucket is added into the float32 buffer when launched (or at the no_sync finish), so the
// float32 result equals the float32 host run's.
TEST(DpDevice, Bf16GradientViewsAccumulateInFloat32) {
  run_case({3, kStagedRoute, COLLX_DP_ALLREDUCE, 0.0, false, COLLX_FLOAT32, COLLX_BFLOAT16});
  run_case({2, kIpcRoute, COLLX_DP_REDUCE_SCATTER, 1.0, true, COLLX_BFLOAT16, COLLX_BFLOAT16});
  run_case({2, kStagedRoute, COLLX_DP_ALLREDUCE, 1.0, false, COLLX_FLOAT32, COLLX_FLOAT16});
}

// Issue 14: rank 1 releases device memory while rank 0's stream already waits, stream-ordered,
// for an all-reduce rank 1 has not issued yet (the reducer's buckets in flight while a peer is
// still between runs). The release waits for rank 1's own stream only; one that waited for the
// whole device (device_free, as cudaFree) would wait for rank 0's stream, hence for rank 1
// itself, and both calls would fail at the deadline.
TEST(DpDevice, ReleasingDeviceMemoryDoesNotWaitForAnotherRanksPendingCollective) {
  ThreadRanks world(2, /*timeout_ms=*/10000, kStagedRoute.transports);
  ASSERT_TRUE(world.ok()) << world.error();
  std::atomic<bool> queued{false};
  world.run([&](int rank, collx_comm_t comm) {
    void* stream = nullptr;
    ASSERT_TRUE(cuda::stream_create(&stream).ok());
    {
      const size_t count = 64;
      RankDeviceMem grads;
      ASSERT_TRUE(grads.allocate_zeroed(count * sizeof(float), stream).ok());
      if (rank == 1) {
        while (!queued.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        RankDeviceMem scratch;  // released at once, with rank 0's call pending on its stream
        EXPECT_TRUE(scratch.allocate_zeroed(4096, stream).ok());
      }
      collx_opts_t opts = parallel::device_opts(stream);
      collx_request_t request = nullptr;
      const collx_status_t rc =
          collx_iallreduce(grads.get(), grads.get(), count, COLLX_FLOAT32, COLLX_SUM, comm, &opts, &request);
      if (rank == 0) queued = true;  // even on failure: rank 1 must not wait forever
      ASSERT_EQ(rc, COLLX_OK) << collx_last_error(comm);
      EXPECT_EQ(collx_wait(request, -1), COLLX_OK) << "rank " << rank << ": " << collx_last_error(comm);
      collx_request_free(request);
    }  // grads released after the stream drained
    cuda::stream_destroy(stream);
  });
}

// Bad or unsupported device configurations fail at create, naming the field.
TEST(DpDevice, BadConfigsNameTheField) {
  ThreadRanks world(1, kTimeoutMs, kStagedRoute.transports);
  ASSERT_TRUE(world.ok()) << world.error();
  collx_comm_t comm = world.comm(0);
  collx_layout_t l = make_layout(1, kSizes, kBucket);
  size_t total = 0;
  collx_layout_total(l, &total);
  DeviceBuffer dev(total * sizeof(float));
  ASSERT_TRUE(dev.ok());
  std::vector<float> host(total);
  struct Bad {
    int32_t mem_kind, comm_dtype, grad_dtype;
    void* buffer;
    collx_status_t want;
    const char* names;
  } bad[] = {
      {7, COLLX_FLOAT32, COLLX_FLOAT32, nullptr, COLLX_ERR_INVALID_ARG, "config->mem_kind"},
      {COLLX_MEM_CUDA, COLLX_INT8, COLLX_FLOAT32, nullptr, COLLX_ERR_INVALID_ARG, "config->comm_dtype"},
      {COLLX_MEM_HOST, COLLX_FLOAT32, COLLX_BFLOAT16, nullptr, COLLX_ERR_UNSUPPORTED, "config->grad_dtype"},
      {COLLX_MEM_HOST, COLLX_FLOAT32, COLLX_INT32, nullptr, COLLX_ERR_INVALID_ARG, "config->grad_dtype"},
      {COLLX_MEM_CUDA, COLLX_FLOAT32, COLLX_FLOAT32, host.data(), COLLX_ERR_INVALID_ARG, "grad_buffer is host"},
      {COLLX_MEM_HOST, COLLX_FLOAT32, COLLX_FLOAT32, dev.get(), COLLX_ERR_INVALID_ARG, "grad_buffer is device"},
  };
  for (const Bad& b : bad) {
    collx_dp_config_t cfg = dp_config(COLLX_DP_ALLREDUCE, 0.0);
    cfg.mem_kind = b.mem_kind;
    cfg.comm_dtype = b.comm_dtype;
    cfg.grad_dtype = b.grad_dtype;
    collx_dp_t dp = nullptr;
    EXPECT_EQ(collx_dp_create(comm, l, &cfg, b.buffer, &dp), b.want) << b.names;
    EXPECT_EQ(dp, nullptr);
    EXPECT_NE(std::string(collx_dp_last_error(nullptr)).find(b.names), std::string::npos)
        << collx_dp_last_error(nullptr);
  }
  // COLLX_MEM_AUTO takes the borrowed buffer's kind; a caller compiled before the device
  // fields (a shorter struct) gets host buffers.
  collx_dp_config_t cfg = dp_config(COLLX_DP_ALLREDUCE, 0.0);
  cfg.mem_kind = COLLX_MEM_AUTO;
  collx_dp_t dp = nullptr;
  ASSERT_EQ(collx_dp_create(comm, l, &cfg, dev.get(), &dp), COLLX_OK) << collx_dp_last_error(nullptr);
  EXPECT_EQ(collx_dp_zero(dp), COLLX_OK);  // on the device: a host fill would crash here
  EXPECT_EQ(collx_dp_destroy(dp), COLLX_OK);
  cfg = dp_config(COLLX_DP_ALLREDUCE, 0.0);
  cfg.size = offsetof(collx_dp_config_t, mem_kind);
  cfg.mem_kind = COLLX_MEM_CUDA;  // beyond the caller's size: ignored
  ASSERT_EQ(collx_dp_create(comm, l, &cfg, host.data(), &dp), COLLX_OK) << collx_dp_last_error(nullptr);
  EXPECT_EQ(collx_dp_zero(dp), COLLX_OK);
  EXPECT_EQ(collx_dp_destroy(dp), COLLX_OK);
  collx_layout_destroy(l);
}

}  // namespace
}  // namespace testing
}  // namespace collx
