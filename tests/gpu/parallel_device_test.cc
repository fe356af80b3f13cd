// The handle-less parallel ops (tp/sp ops, vocab-parallel cross-entropy, overflow flag and
// norm, pipeline exchange, context-parallel ring) on device buffers, checked bit for bit
// against the same call on host buffers through the same communicator, for float32,
// bfloat16 and float16 where the op takes a datatype, on 2 and 3 thread ranks over the staged and CUDA
// IPC routes. Each rank queues its work on its own created stream (collx_parallel_set_stream),
// which the emulated tier runs with random delays per operation.
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
#include "tests/support/thread_ranks.h"

namespace collx {
namespace testing {
namespace {

using Bytes = std::vector<uint8_t>;
using Op = std::function<collx_status_t(const std::vector<void*>& p)>;

const collx_datatype_t kTypes[] = {COLLX_FLOAT32, COLLX_BFLOAT16, COLLX_FLOAT16};
const DeviceRoute kRoutes[] = {kStagedRoute, kIpcRoute};

// A created stream set as the thread's parallel stream for the scope.
class RankStream {
 public:
  RankStream() {
    ok_ = cuda::stream_create(&s_).ok() && collx_parallel_set_stream(s_) == COLLX_OK;
  }
  ~RankStream() {
    collx_parallel_set_stream(nullptr);
    cuda::stream_destroy(s_);
  }
  bool ok() const { return ok_; }
  bool wait() const { return cuda::stream_wait(s_, Deadline::after_ms(60000), nullptr, "the rank's stream").ok(); }

 private:
  void* s_ = nullptr;
  bool ok_ = false;
};

template <typename T>
Bytes bytes_of(const std::vector<T>& v) {
  Bytes b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// count elements of dt that differ along the buffer and between ranks (a misplaced block
// shows), small integers whose sums over a few ranks are exact in every datatype used.
Bytes data(collx_datatype_t dt, size_t count, int rank, unsigned salt) {
  Bytes out(count * datatype_size(dt));
  for (size_t i = 0; i < count; ++i) {
    const float v = static_cast<float>(static_cast<int>((i * 5 + static_cast<size_t>(rank) * 11 + salt) % 31) - 15);
    if (dt == COLLX_FLOAT32) {
      std::memcpy(out.data() + i * 4, &v, 4);
    } else {
      const uint16_t h = dt == COLLX_BFLOAT16 ? float_to_bfloat16(v) : float_to_half(v);
      std::memcpy(out.data() + i * 2, &h, 2);
    }
  }
  return out;
}

// Whether a device result equals the host's: the same bytes, or, with gpu_rel_tol > 0 on a
// real GPU (whose expf/logf differ from the host's by a few ulp), float32 values within it.
::testing::AssertionResult same_result(const Bytes& got, const Bytes& want, float gpu_rel_tol) {
  if (got == want) return ::testing::AssertionSuccess();
  if (gpu_rel_tol <= 0 || cuda::emulated() || got.size() != want.size() || got.size() % 4)
    return ::testing::AssertionFailure() << "the bytes differ";
  for (size_t i = 0; i < got.size() / 4; ++i) {
    float g, w;
    std::memcpy(&g, got.data() + i * 4, 4);
    std::memcpy(&w, want.data() + i * 4, 4);
    if (!(std::fabs(g - w) <= gpu_rel_tol * std::fabs(w) + 1e-30f))
      return ::testing::AssertionFailure() << "float " << i << ": " << g << " vs " << w;
  }
  return ::testing::AssertionSuccess();
}

// Runs op on host copies of `buffers`, then on device copies, and expects every buffer to
// end with the same bytes (see same_result for gpu_rel_tol). Collective when op is: every
// rank calls it alike.
void expect_same_on_device(const std::string& what, const std::vector<Bytes>& buffers, const RankStream& stream,
                           const Op& op, float gpu_rel_tol = 0) {
  std::vector<Bytes> host = buffers;
  std::vector<void*> hp, dp;
  for (Bytes& b : host) hp.push_back(b.data());
  ASSERT_EQ(op(hp), COLLX_OK) << what << " (host): " << collx_parallel_last_error();
  std::vector<std::unique_ptr<DeviceBuffer>> dev;
  for (const Bytes& b : buffers) {
    dev.push_back(std::make_unique<DeviceBuffer>(b.size(), b.data()));
    ASSERT_TRUE(dev.back()->ok()) << what;
    dp.push_back(dev.back()->get());
  }
  ASSERT_EQ(op(dp), COLLX_OK) << what << " (device): " << collx_parallel_last_error();
  ASSERT_TRUE(stream.wait()) << what;
  for (size_t i = 0; i < buffers.size(); ++i)
    EXPECT_TRUE(same_result(dev[i]->read(0, buffers[i].size()), host[i], gpu_rel_tol)) << what << ": buffer " << i;
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

TEST(ParallelDevice, TensorAndSequenceOpsMatchHostBuffers) {
  on_worlds([](int rank, collx_comm_t comm, const RankStream& stream, const DeviceRoute& route, int t) {
    const size_t ts = static_cast<size_t>(t);
    for (collx_datatype_t dt : kTypes) {
      const size_t es = datatype_size(dt), rows = 3 * ts, cols = 2 * ts;
      const Bytes x = data(dt, rows * cols, rank, 1);
      expect_same_on_device(name("tp_allreduce", dt, route, t), {x}, stream, [&](const std::vector<void*>& p) {
        return collx_tp_allreduce(p[0], rows * cols, dt, comm);
      });
      expect_same_on_device(name("tp_allreduce_async", dt, route, t), {x}, stream, [&](const std::vector<void*>& p) {
        collx_request_t r = nullptr;
        collx_status_t st = collx_tp_allreduce_async(p[0], rows * cols, dt, comm, &r);
        if (st != COLLX_OK) return st;
        st = collx_wait(r, 60000);
        collx_request_free(r);
        return st;
      });
      // Out-of-place ops: (name, output elements, call).
      using Call = collx_status_t (*)(const void*, void*, size_t, size_t, collx_datatype_t, collx_comm_t);
      const struct {
        const char* name;
        size_t out_elems;
        Call call;
      } ops[] = {{"tp_split_last", rows * cols / ts, collx_tp_split_last},
                 {"tp_gather_last", rows * cols * ts, collx_tp_gather_last},
                 {"sp_split_first", rows / ts * cols, collx_sp_split_first},
                 {"sp_gather_first", rows * cols * ts, collx_sp_gather_first},
                 {"sp_reduce_scatter_first", rows / ts * cols, collx_sp_reduce_scatter_first}};
      for (const auto& op : ops) {
        expect_same_on_device(name(op.name, dt, route, t), {x, Bytes(op.out_elems * es)}, stream,
                              [&](const std::vector<void*>& p) { return op.call(p[0], p[1], rows, cols, dt, comm); });
      }
    }
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
      const Bytes x = data(COLLX_BFLOAT16, rows * 3, rank, static_cast<unsigned>(rows));
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
                          {data(COLLX_FLOAT32, total, rank, 3)}, stream, [&](const std::vector<void*>& p) {
                            return collx_tp_finalize_grads(l, static_cast<float*>(p[0]), comm);
                          });
    collx_layout_destroy(l);
  });
}

TEST(ParallelDevice, VocabCrossEntropyMatchesHostBuffers) {
  on_worlds([](int rank, collx_comm_t comm, const RankStream& stream, const DeviceRoute& route, int t) {
    const int64_t vocab = 5 * t + 1;  // the last rank's block is shorter
    int64_t start = 0, end = 0;
    ASSERT_EQ(collx_tp_vocab_range(vocab, t, rank, &start, &end), COLLX_OK);
    const size_t n = 7, v = static_cast<size_t>(end - start);
    std::vector<float> logits(n * v);
    for (size_t k = 0; k < logits.size(); ++k) logits[k] = static_cast<float>((k * 5 + rank * 3) % 11) * 0.25f - 1;
    std::vector<int64_t> targets(n);
    for (size_t i = 0; i < n; ++i) targets[i] = static_cast<int64_t>((i * 4 + 1) % static_cast<size_t>(vocab));
    std::vector<float> dloss(n);
    for (size_t i = 0; i < n; ++i) dloss[i] = 0.5f + static_cast<float>(i);
    const std::string what = name("tp_vocab_ce", COLLX_FLOAT32, route, t);
    // Forward (loss and softmax), then backward from that softmax.
    expect_same_on_device(what + " fwd", {bytes_of(logits), bytes_of(targets), Bytes(n * 4), Bytes(n * v * 4)},
                          stream, [&](const std::vector<void*>& p) {
                            return collx_tp_vocab_ce_fwd(static_cast<float*>(p[0]), static_cast<int64_t*>(p[1]), n,
                                                         v, start, vocab, static_cast<float*>(p[2]),
                                                         static_cast<float*>(p[3]), comm);
                          },
                          1e-5f);
    expect_same_on_device(what + " bwd", {bytes_of(logits), bytes_of(targets), bytes_of(dloss), Bytes(n * v * 4)},
                          stream, [&](const std::vector<void*>& p) {
                            return collx_tp_vocab_ce_bwd(static_cast<float*>(p[0]), static_cast<int64_t*>(p[1]),
                                                         static_cast<float*>(p[2]), n, v, start,
                                                         static_cast<float*>(p[3]));
                          });
    // A target outside the vocabulary: refused on every rank before any communication.
    targets[3] = vocab;
    DeviceBuffer dl(logits.size() * 4, logits.data()), dt(n * 8, targets.data()), dloss_out(n * 4);
    EXPECT_EQ(collx_tp_vocab_ce_fwd(reinterpret_cast<float*>(dl.get()), reinterpret_cast<int64_t*>(dt.get()), n, v,
                                    start, vocab, reinterpret_cast<float*>(dloss_out.get()), nullptr, comm),
              COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_parallel_last_error()).find("targets[3]"), std::string::npos)
        << collx_parallel_last_error();
  });
}

TEST(ParallelDevice, PipelineRingExchangeMatchesHostBuffers) {
  on_worlds([](int rank, collx_comm_t comm, const RankStream& stream, const DeviceRoute& route, int t) {
    for (collx_datatype_t dt : kTypes) {
      const size_t count = 1031, bytes = count * datatype_size(dt);
      expect_same_on_device(name("pp_exchange_ring", dt, route, t),
                            {data(dt, count, rank, 5), Bytes(bytes), data(dt, count, rank, 6), Bytes(bytes)},
                            stream, [&](const std::vector<void*>& p) {
                              return collx_pp_exchange_ring(comm, p[0], p[1], p[2], p[3], count, dt, 3, 60000);
                            });
    }
  });
}

TEST(ParallelDevice, ContextParallelRingHandsOutEveryRanksBlock) {
  on_worlds([](int rank, collx_comm_t comm, const RankStream& stream, const DeviceRoute& route, int t) {
    const size_t count = 257, bytes = count * 4;
    // p[0] the block, p[1] the work double buffer, p[2] every block in source order.
    expect_same_on_device(
        name("cp_ring", COLLX_FLOAT32, route, t),
        {data(COLLX_FLOAT32, count, rank, 7), Bytes(2 * bytes), Bytes(static_cast<size_t>(t) * bytes)}, stream,
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
          << collx_parallel_last_error();
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
          << collx_parallel_last_error();
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

TEST(ParallelDevice, MixedHostAndDeviceBuffersAreRefused) {
  ThreadRanks world(1, 60000);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([](int, collx_comm_t comm) {
    RankStream stream;
    std::vector<float> host(8);
    DeviceBuffer dev(8 * 4);
    EXPECT_EQ(collx_tp_split_last(dev.get(), host.data(), 2, 4, COLLX_FLOAT32, comm), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_parallel_last_error()).find("one kind"), std::string::npos)
        << collx_parallel_last_error();
    int32_t* dflag = reinterpret_cast<int32_t*>(dev.get());
    EXPECT_EQ(collx_found_nonfinite(host.data(), 8, 1.0f, dflag), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_parallel_last_error()).find("values"), std::string::npos)
        << collx_parallel_last_error();
    // No values: the device flag is cleared (queued on the stream).
    const int32_t one = 1;
    ASSERT_TRUE(cuda::copy(dflag, &one, 4, cuda::CopyKind::kHostToDevice).ok());
    EXPECT_EQ(collx_found_nonfinite(nullptr, 0, 1.0f, dflag), COLLX_OK) << collx_parallel_last_error();
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
