// ZeRO (parallel/zero*.cc) on device buffers, against the same run on host buffers through
// the same communicator: stages 0 and 1 with ZeRO-Offload (device parameters and gradient
// buffer, float32 master shard and AdamW / SGD state on the host). The device run reduces the
// same float32 values with the same products and sums and steps with the same host optimizer,
// so parameters and master shards must agree bit for bit. Gradients are written by work
// queued on the stream; on the emulated device every queued operation is delayed at random,
// so anything not ordered on the stream shows as a mismatch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "collx/collx.h"
#include "collx/parallel.h"
#include "lib/cuda/device.h"
#include "parallel/low_precision.h"
#include "parallel/parallel_test_util.h"
#include "parallel/zero_test_util.h"
#include "tests/gpu/device_case.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/thread_ranks.h"

namespace collx {
namespace testing {
namespace {

const std::vector<size_t> kSizes = {0, 1, 3, 5, 97, 300, 64};
constexpr size_t kBucket = 128;
constexpr int kSteps = 3;
constexpr int kMicro = 2;
constexpr int64_t kTimeoutMs = 60000;

// AdamW as the host ZeRO tests use it, or SGD with momentum.
collx_zero_config_t zero_config(int stage, int optimizer) {
  collx_zero_config_t c = zero_test_config(stage);
  if (stage == 3) c.prefetch_depth = 2;  // plan gathers in flight behind the fetches
  if (optimizer == COLLX_OPT_SGD) {
    c.optimizer = COLLX_OPT_SGD;
    c.lr = 0.05;
    c.momentum = 0.9;
  }
  c.timeout_ms = kTimeoutMs;
  return c;
}

float micro_grad(int rank, size_t t, size_t j, int step, int micro) {
  return 0.1f * grad_value(rank, t, j) + 0.01f * static_cast<float>(step) - 0.02f * static_cast<float>(micro);
}

// x rounded to dtype (nearest even) and widened back; float32: x.
float rounded_value(float x, int32_t dtype) {
  if (dtype == COLLX_BFLOAT16) return parallel::bf16_to_float(parallel::float_to_bf16(x));
  if (dtype == COLLX_FLOAT16) return parallel::fp16_to_float(parallel::float_to_fp16(x));
  return x;
}

struct Result {
  std::vector<float> params;  // the whole parameter view after the last publish
  std::vector<float> master;  // the master shard
  std::vector<double> norms;  // collx_zero_grad_norm_sq before each step
  std::vector<float> full;    // every tensor's consolidated master and first moment
};

// Elements of `dtype` (float32, bfloat16 or float16) as float32 (exact).
std::vector<float> widen(const std::vector<char>& bytes, int32_t dtype) {
  const size_t es = dtype == COLLX_FLOAT32 ? 4 : 2, n = bytes.size() / es;
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    uint16_t h = 0;
    if (es == 4) {
      std::memcpy(&out[i], bytes.data() + 4 * i, 4);
      continue;
    }
    std::memcpy(&h, bytes.data() + 2 * i, 2);
    out[i] = dtype == COLLX_BFLOAT16 ? parallel::bf16_to_float(h) : parallel::fp16_to_float(h);
  }
  return out;
}

// The whole parameter view (stages 0-2), widened to float32; device: the stream was waited.
std::vector<float> read_view(collx_zero_t z, collx_layout_t l, size_t total, bool device, int32_t param_dtype) {
  void* view = nullptr;
  int32_t dtype = -1;
  size_t offset = 0;
  EXPECT_EQ(collx_zero_param_view(z, 0, &view, &dtype), COLLX_OK) << collx_zero_last_error(z);
  EXPECT_EQ(dtype, device ? param_dtype : COLLX_FLOAT32);
  collx_layout_tensor(l, 0, &offset, nullptr);
  const size_t es = dtype == COLLX_FLOAT32 ? 4 : 2;
  // The start of the whole view (the layout puts tensors in reverse order).
  const char* params = static_cast<const char*>(view) - offset * es;
  std::vector<char> bytes(total * es);
  if (device) {
    EXPECT_TRUE(cuda::copy(bytes.data(), params, bytes.size(), cuda::CopyKind::kDeviceToHost).ok());
  } else {
    std::memcpy(bytes.data(), params, bytes.size());
  }
  return widen(bytes, dtype);
}

// Stage 3 has no full view: every tensor gathered, read and released (device: the gather is
// ordered on the stream, so the stream is waited before the blocking copy).
std::vector<float> read_gathered(collx_zero_t z, collx_layout_t l, size_t total, bool device, void* stream) {
  std::vector<float> out(total, 0.0f);
  for (size_t t = 0; t < kSizes.size(); ++t) {
    const uint64_t id = t;
    size_t off = 0, n = 0;
    collx_layout_tensor(l, t, &off, &n);
    void* p = nullptr;
    int32_t dtype = -1;
    EXPECT_EQ(collx_zero3_fetch(z, &id, 1), COLLX_OK) << collx_zero_last_error(z);
    EXPECT_EQ(collx_zero_param_view(z, t, &p, &dtype), COLLX_OK) << collx_zero_last_error(z);
    const size_t es = dtype == COLLX_FLOAT32 ? 4 : 2;
    std::vector<char> bytes(n * es);
    if (device && n) {
      EXPECT_TRUE(cuda::stream_wait(stream, Deadline::after_ms(kTimeoutMs), nullptr, "test").ok());
      EXPECT_TRUE(cuda::copy(bytes.data(), p, bytes.size(), cuda::CopyKind::kDeviceToHost).ok());
    } else if (n) {
      std::memcpy(bytes.data(), p, bytes.size());
    }
    const std::vector<float> values = widen(bytes, dtype);
    std::copy(values.begin(), values.end(), out.begin() + static_cast<long>(off));
    EXPECT_EQ(collx_zero3_release(z, &id, 1), COLLX_OK);
  }
  return out;
}

// kSteps steps of kMicro micro-steps; device: gradients copied to a device scratch and added
// into the views on the stream, parameters read back after synchronizing it.
// 16-bit parameters (param_dtype) are read back widened to float32 (exact).
Result run_zero(collx_comm_t comm, int rank, collx_zero_config_t cfg, bool device, void* stream,
                int32_t param_dtype = COLLX_FLOAT32, int32_t offload = 1, int32_t grad_dtype = COLLX_FLOAT32) {
  int32_t world = 0;
  collx_comm_size(comm, &world);
  const int stage = cfg.stage;
  collx_layout_t l = make_layout(world, kSizes, kBucket, stage == 3 ? COLLX_PART_PER_TENSOR : COLLX_PART_FLAT);
  size_t total = 0;
  collx_layout_total(l, &total);
  if (device) {
    cfg.mem_kind = COLLX_MEM_CUDA;
    cfg.offload = offload;
    cfg.stream = stream;
    cfg.param_dtype = param_dtype;
    cfg.grad_dtype = grad_dtype;
  }
  collx_zero_t z = nullptr;
  EXPECT_EQ(collx_zero_create(comm, l, &cfg, &z), COLLX_OK) << collx_zero_last_error(nullptr);
  if (!z) {
    collx_layout_destroy(l);
    return {};
  }
  zero_test_load(z, kSizes);
  EXPECT_EQ(collx_zero_publish(z), COLLX_OK) << collx_zero_last_error(z);
  // Every micro-step's host gradients stay alive until the end: the copies read them later.
  std::vector<std::vector<float>> host_grads;
  std::vector<std::vector<uint16_t>> host_half;  // 16-bit views' sources, alive until the end
  // Device memory of the device run only, released after its own stream drained (RankDeviceMem).
  RankDeviceMem scratch;
  if (device) {
    EXPECT_TRUE(scratch.allocate_zeroed(static_cast<size_t>(kSteps * kMicro) * total * sizeof(float), stream).ok());
  }
  Result r;
  for (int step = 0; step < kSteps; ++step) {
    for (int micro = 0; micro < kMicro; ++micro) {
      EXPECT_EQ(collx_zero_set_boundary(z, micro == kMicro - 1 ? 1 : 0), COLLX_OK);
      host_grads.emplace_back(total, 0.0f);
      std::vector<float>& g = host_grads.back();
      float* dev = device ? static_cast<float*>(scratch.get()) + (host_grads.size() - 1) * total : nullptr;
      for (size_t t = kSizes.size(); t-- > 0;) {  // backward order
        size_t off = 0, n = 0;
        collx_layout_tensor(l, t, &off, &n);
        // 16-bit views: both runs use the values rounded to grad_dtype (the device run writes
        // the 16-bit bits), so the float32 sums agree.
        for (size_t j = 0; j < n; ++j) g[off + j] = rounded_value(micro_grad(rank, t, j, step, micro), grad_dtype);
        if (stage == 3) {  // gather, use, release, then the full gradient (device memory on device)
          const uint64_t id = t;
          EXPECT_EQ(collx_zero3_fetch(z, &id, 1), COLLX_OK) << collx_zero_last_error(z);
          EXPECT_EQ(collx_zero3_release(z, &id, 1), COLLX_OK) << collx_zero_last_error(z);
          const void* full = g.data() + off;
          if (device && n && grad_dtype != COLLX_FLOAT32) {  // the 16-bit bits of the same values
            host_half.emplace_back(n);
            for (size_t j = 0; j < n; ++j)
              host_half.back()[j] = grad_dtype == COLLX_BFLOAT16 ? parallel::float_to_bf16(g[off + j])
                                                                 : parallel::float_to_fp16(g[off + j]);
            EXPECT_TRUE(cuda::copy_async(dev + off, host_half.back().data(), n * 2, cuda::CopyKind::kHostToDevice,
                                         stream).ok());
            full = dev + off;  // n 16-bit elements at the start of the tensor's scratch
          } else if (device && n) {
            EXPECT_TRUE(cuda::copy_async(dev + off, g.data() + off, n * sizeof(float), cuda::CopyKind::kHostToDevice,
                                         stream).ok());
            full = dev + off;
          }
          EXPECT_EQ(collx_zero3_reduce_grad_view(z, t, full), COLLX_OK) << collx_zero_last_error(z);
          continue;
        }
        void* view = nullptr;
        int32_t dtype = -1;
        EXPECT_EQ(collx_zero_grad_view(z, t, &view, &dtype), COLLX_OK) << collx_zero_last_error(z);
        if (device && n && dtype != COLLX_FLOAT32) {  // the 16-bit bits, into the zeroed view
          host_half.emplace_back(n);
          for (size_t j = 0; j < n; ++j)
            host_half.back()[j] = dtype == COLLX_BFLOAT16 ? parallel::float_to_bf16(g[off + j])
                                                          : parallel::float_to_fp16(g[off + j]);
          EXPECT_TRUE(cuda::copy_async(view, host_half.back().data(), n * 2, cuda::CopyKind::kHostToDevice, stream).ok());
        } else if (device && n) {
          EXPECT_TRUE(cuda::copy_async(dev + off, g.data() + off, n * sizeof(float), cuda::CopyKind::kHostToDevice,
                                       stream).ok());
          EXPECT_TRUE(cuda::cuda_reduce(view, view, dev + off, n, COLLX_FLOAT32, COLLX_SUM, stream).ok());
        } else {
          for (size_t j = 0; j < n; ++j) static_cast<float*>(view)[j] += g[off + j];
        }
        EXPECT_EQ(collx_zero_mark_ready(z, t), COLLX_OK) << collx_zero_last_error(z);
      }
      if (stage == 3) continue;
      EXPECT_EQ(collx_zero_finish_grads(z, -1), COLLX_OK) << collx_zero_last_error(z);
    }
    double norm = 0;
    EXPECT_EQ(collx_zero_grad_norm_sq(z, 0, 1, &norm), COLLX_OK) << collx_zero_last_error(z);
    r.norms.push_back(norm);
    EXPECT_EQ(collx_zero_step(z, 1.0), COLLX_OK) << collx_zero_last_error(z);
    EXPECT_EQ(collx_zero_publish(z), COLLX_OK) << collx_zero_last_error(z);
  }
  if (device) {
    EXPECT_TRUE(cuda::stream_wait(stream, Deadline::after_ms(kTimeoutMs), nullptr, "test").ok());
  }
  r.params = stage == 3 ? read_gathered(z, l, total, device, stream) : read_view(z, l, total, device, param_dtype);
  for (size_t t = 0; t < kSizes.size(); ++t) {  // checkpoint export (collective)
    for (int32_t kind : {COLLX_ZERO_MASTER, COLLX_ZERO_EXP_AVG}) {
      std::vector<float> v(kSizes[t]);
      EXPECT_EQ(collx_zero_full_state(z, kind, t, v.data()), COLLX_OK) << collx_zero_last_error(z);
      r.full.insert(r.full.end(), v.begin(), v.end());
    }
  }
  float* master = nullptr;
  size_t count = 0;
  EXPECT_EQ(collx_zero_shard(z, &master, nullptr, &count), COLLX_OK);
  r.master.resize(count);
  if (device && !offload) {  // the shard is device memory too
    EXPECT_TRUE(cuda::copy(r.master.data(), master, count * sizeof(float), cuda::CopyKind::kDeviceToHost).ok());
  } else {
    r.master.assign(master, master + count);
  }
  EXPECT_EQ(collx_zero_destroy(z), COLLX_OK);
  collx_layout_destroy(l);
  return r;
}

void expect_same_bits(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0) << what << " element " << i << ": host " << a[i]
                                                            << " device " << b[i];
}

// The host run's parameters rounded as publish rounds them for param_dtype.
std::vector<float> rounded(std::vector<float> v, int32_t param_dtype) {
  for (float& x : v) x = rounded_value(x, param_dtype);
  return v;
}

void run_case(int world_size, const DeviceRoute& route, int stage, int optimizer,
              int32_t param_dtype = COLLX_FLOAT32, int32_t comm_dtype = COLLX_FLOAT32, int32_t offload = 1,
              int32_t grad_dtype = COLLX_FLOAT32, int32_t deterministic = 0) {
  ThreadRanks world(world_size, kTimeoutMs, route.transports);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](int rank, collx_comm_t comm) {
    void* stream = nullptr;
    ASSERT_TRUE(cuda::stream_create(&stream).ok());
    collx_zero_config_t cfg = zero_config(stage, optimizer);
    cfg.comm_dtype = comm_dtype;
    cfg.deterministic = deterministic;
    const Result host = run_zero(comm, rank, cfg, false, nullptr, COLLX_FLOAT32, 1, grad_dtype);
    const Result dev = run_zero(comm, rank, cfg, true, stream, param_dtype, offload, grad_dtype);
    cuda::stream_destroy(stream);
    const std::string what = std::string(route.name) + " world " + std::to_string(world_size) + " stage " +
                             std::to_string(stage) + " param_dtype " + std::to_string(param_dtype) + " comm_dtype " +
                             std::to_string(comm_dtype) + " offload " + std::to_string(offload) + " rank " +
                             std::to_string(rank);
    // The master is float32 in both runs: the 16-bit view is the rounded master.
    expect_same_bits(rounded(host.params, param_dtype), dev.params, what + " params");
    expect_same_bits(host.master, dev.master, what + " master");
    expect_same_bits(host.full, dev.full, what + " consolidated state");
    // Summed in index order on the emulated device (as the host loop); a GPU's fixed-order
    // partial sums differ by less than this (lib/cuda/device.h, sum_squares).
    ASSERT_EQ(host.norms.size(), dev.norms.size());
    for (size_t i = 0; i < host.norms.size(); ++i)
      EXPECT_NEAR(host.norms[i], dev.norms[i], 1e-12 * host.norms[i]) << what << " norm of step " << i;
  });
}

TEST(ZeroDevice, OffloadStage1MatchesHostBitForBit) {
  run_case(3, kStagedRoute, 1, COLLX_OPT_ADAMW);
  run_case(2, kIpcRoute, 1, COLLX_OPT_SGD);
}

TEST(ZeroDevice, OffloadStage0MatchesHostBitForBit) { run_case(2, kStagedRoute, 0, COLLX_OPT_ADAMW); }

// bfloat16 parameters (float32 master and gradients): the view is the host run's master
// rounded to nearest even, all-gathered in bfloat16.
TEST(ZeroDevice, OffloadBf16ParamsAreTheRoundedHostMaster) {
  run_case(3, kStagedRoute, 1, COLLX_OPT_ADAMW, COLLX_BFLOAT16);
  run_case(2, kStagedRoute, 2, COLLX_OPT_ADAMW, COLLX_BFLOAT16);
  run_case(2, kIpcRoute, 0, COLLX_OPT_SGD, COLLX_FLOAT16);
}

// A 16-bit gradient wire (stage 1 through the dp reducer, stage 2 through its slots): rounded
// and widened on the device exactly as the host path rounds.
TEST(ZeroDevice, OffloadBf16WireMatchesHostBitForBit) {
  run_case(3, kStagedRoute, 1, COLLX_OPT_ADAMW, COLLX_FLOAT32, COLLX_BFLOAT16);
  run_case(2, kIpcRoute, 2, COLLX_OPT_ADAMW, COLLX_BFLOAT16, COLLX_BFLOAT16);
  run_case(3, kStagedRoute, 2, COLLX_OPT_SGD, COLLX_FLOAT32, COLLX_FLOAT16);
}

// Master shard, gradients and moments on the device (offload = 0): lib/cuda's AdamW / SGD
// kernels compute the host step's expression, rounded alike, so the bits agree too.
TEST(ZeroDevice, DeviceOptimizerMatchesHostBitForBit) {
  run_case(2, kStagedRoute, 0, COLLX_OPT_ADAMW, COLLX_FLOAT32, COLLX_FLOAT32, 0);
  run_case(3, kStagedRoute, 1, COLLX_OPT_ADAMW, COLLX_BFLOAT16, COLLX_FLOAT32, 0);
  run_case(2, kIpcRoute, 1, COLLX_OPT_SGD, COLLX_FLOAT32, COLLX_BFLOAT16, 0);
  run_case(3, kStagedRoute, 2, COLLX_OPT_ADAMW, COLLX_BFLOAT16, COLLX_BFLOAT16, 0);
  run_case(2, kIpcRoute, 2, COLLX_OPT_SGD, COLLX_FLOAT32, COLLX_FLOAT32, 0);
}

// Stage 3: gathers into device tensors (strided unpack on the stream), the prefetch plan's
// gathers in flight behind fetches, device full gradients reduce-scattered into the shard.
TEST(ZeroDevice, Stage3MatchesHostBitForBit) {
  run_case(3, kStagedRoute, 3, COLLX_OPT_ADAMW, COLLX_FLOAT32, COLLX_FLOAT32, 1);
  run_case(2, kIpcRoute, 3, COLLX_OPT_SGD, COLLX_FLOAT32, COLLX_FLOAT32, 1);
  run_case(3, kStagedRoute, 3, COLLX_OPT_ADAMW, COLLX_FLOAT32, COLLX_FLOAT32, 0);
  run_case(2, kIpcRoute, 3, COLLX_OPT_SGD, COLLX_FLOAT32, COLLX_FLOAT32, 0);
  // bf16 parameters gathered in bf16, bf16 full gradients.
  run_case(3, kStagedRoute, 3, COLLX_OPT_ADAMW, COLLX_BFLOAT16, COLLX_FLOAT32, 0, COLLX_BFLOAT16);
  run_case(2, kIpcRoute, 3, COLLX_OPT_ADAMW, COLLX_BFLOAT16, COLLX_FLOAT32, 1, COLLX_BFLOAT16);
}

// bf16 / fp16 gradient views (a bf16 model's backward): widened into float32 when the bucket
// is launched, so the run equals a float32 host run fed the same rounded values.
TEST(ZeroDevice, Bf16GradientViewsAccumulateInFloat32) {
  run_case(3, kStagedRoute, 1, COLLX_OPT_ADAMW, COLLX_BFLOAT16, COLLX_FLOAT32, 0, COLLX_BFLOAT16);
  run_case(2, kIpcRoute, 2, COLLX_OPT_ADAMW, COLLX_BFLOAT16, COLLX_BFLOAT16, 0, COLLX_BFLOAT16);
  run_case(3, kStagedRoute, 2, COLLX_OPT_SGD, COLLX_FLOAT32, COLLX_FLOAT32, 1, COLLX_FLOAT16);
  run_case(2, kStagedRoute, 0, COLLX_OPT_ADAMW, COLLX_FLOAT32, COLLX_FLOAT32, 1, COLLX_BFLOAT16);
}

// Stage 2's deterministic reduction (all-to-all, pairwise tree, then 1/W) on the device.
TEST(ZeroDevice, DeterministicStage2MatchesHostBitForBit) {
  run_case(3, kStagedRoute, 2, COLLX_OPT_ADAMW, COLLX_FLOAT32, COLLX_FLOAT32, 0, COLLX_FLOAT32, 1);
  run_case(2, kIpcRoute, 2, COLLX_OPT_SGD, COLLX_BFLOAT16, COLLX_FLOAT32, 1, COLLX_BFLOAT16, 1);
}

TEST(ZeroDevice, OffloadStage2MatchesHostBitForBit) {
  run_case(3, kStagedRoute, 2, COLLX_OPT_ADAMW);
  run_case(2, kIpcRoute, 2, COLLX_OPT_SGD);
}

// Device-resident optimizer state: the checkpoint calls read and write it through a host copy
// (collx_zero_state_shard gives the device shard itself).
TEST(ZeroDevice, CheckpointCallsWorkOnDeviceState) {
  ThreadRanks world(1, kTimeoutMs, kStagedRoute.transports);
  ASSERT_TRUE(world.ok()) << world.error();
  collx_layout_t l = make_layout(1, kSizes, kBucket);
  collx_zero_config_t cfg = zero_config(1, COLLX_OPT_ADAMW);
  cfg.mem_kind = COLLX_MEM_CUDA;
  collx_zero_t z = nullptr;
  ASSERT_EQ(collx_zero_create(world.comm(0), l, &cfg, &z), COLLX_OK) << collx_zero_last_error(nullptr);
  zero_test_load(z, kSizes);
  std::vector<float> in(kSizes[4]), out(kSizes[4]);
  for (size_t j = 0; j < in.size(); ++j) in[j] = 0.25f * static_cast<float>(j);
  ASSERT_EQ(collx_zero_load_state(z, COLLX_ZERO_EXP_AVG_SQ, 4, 0, in.size(), in.data()), COLLX_OK)
      << collx_zero_last_error(z);
  ASSERT_EQ(collx_zero_full_state(z, COLLX_ZERO_EXP_AVG_SQ, 4, out.data()), COLLX_OK) << collx_zero_last_error(z);
  EXPECT_EQ(in, out);
  ASSERT_EQ(collx_zero_full_tensor(z, 4, out.data()), COLLX_OK) << collx_zero_last_error(z);
  for (size_t j = 0; j < out.size(); ++j) EXPECT_EQ(out[j], zero_test_init(4, j)) << j;
  float* shard = nullptr;
  size_t count = 0;
  ASSERT_EQ(collx_zero_state_shard(z, COLLX_ZERO_EXP_AVG_SQ, &shard, &count), COLLX_OK);
  std::vector<float> whole(count);
  ASSERT_TRUE(cuda::copy(whole.data(), shard, count * sizeof(float), cuda::CopyKind::kDeviceToHost).ok());
  size_t offset = 0;
  collx_layout_tensor(l, 4, &offset, nullptr);  // W = 1: the shard is the buffer
  EXPECT_EQ(std::vector<float>(whole.begin() + static_cast<long>(offset),
                               whole.begin() + static_cast<long>(offset + in.size())),
            in);
  EXPECT_EQ(collx_zero_destroy(z), COLLX_OK);
  collx_layout_destroy(l);
}

// Configurations that are wrong, or not supported on device buffers yet, fail at create with
// a message naming the field.
TEST(ZeroDevice, BadConfigsNameTheField) {
  ThreadRanks world(1, kTimeoutMs, kStagedRoute.transports);
  ASSERT_TRUE(world.ok()) << world.error();
  struct Bad {
    int stage, mem_kind, offload, param_dtype, comm_dtype;
    collx_status_t want;
    const char* names;
  } bad[] = {
      {1, 7, 0, COLLX_FLOAT32, COLLX_FLOAT32, COLLX_ERR_INVALID_ARG, "config->mem_kind"},
      {1, COLLX_MEM_HOST, 1, COLLX_FLOAT32, COLLX_FLOAT32, COLLX_ERR_INVALID_ARG, "config->offload"},
      {1, COLLX_MEM_CUDA, 2, COLLX_FLOAT32, COLLX_FLOAT32, COLLX_ERR_INVALID_ARG, "config->offload"},
      {1, COLLX_MEM_CUDA, 1, COLLX_INT8, COLLX_FLOAT32, COLLX_ERR_INVALID_ARG, "config->param_dtype"},
      {1, COLLX_MEM_HOST, 0, COLLX_BFLOAT16, COLLX_FLOAT32, COLLX_ERR_UNSUPPORTED, "config->param_dtype"},
      {2, COLLX_MEM_CUDA, 1, COLLX_FLOAT32, COLLX_INT8, COLLX_ERR_INVALID_ARG, "config->comm_dtype"},
  };
  collx_layout_t l = make_layout(1, kSizes, kBucket);
  for (const Bad& b : bad) {
    collx_zero_config_t cfg = zero_config(b.stage, COLLX_OPT_ADAMW);
    cfg.mem_kind = b.mem_kind;
    cfg.offload = b.offload;
    cfg.param_dtype = b.param_dtype;
    cfg.comm_dtype = b.comm_dtype;
    collx_zero_t z = nullptr;
    EXPECT_EQ(collx_zero_create(world.comm(0), l, &cfg, &z), b.want) << b.names;
    EXPECT_EQ(z, nullptr);
    EXPECT_NE(std::string(collx_zero_last_error(nullptr)).find(b.names), std::string::npos)
        << collx_zero_last_error(nullptr);
  }
  collx_layout_destroy(l);
}

}  // namespace
}  // namespace testing
}  // namespace collx
