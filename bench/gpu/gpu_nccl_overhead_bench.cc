// Host time to enqueue one small all-reduce at one rank: raw NCCL against collx over NCCL
// (same library, same stream, same 1 KiB buffer). Batches of 200 calls (below the launch
// queue depth, so the GPU never throttles the loop), synchronized between batches; prints
// medians per call: "nccl_raw_us X", "collx_nccl_us Y", "collx_overhead_us Y-X".
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include "collx/collx.h"
#include "lib/cuda/device.h"
#include "backends/nccl/nccl_comm.h"

namespace {

double per_call_us(const std::function<bool()>& call, cudaStream_t stream) {
  const int batch = 200, batches = 30;
  std::vector<double> samples;
  for (int b = 0; b < batches + 3; ++b) {
    cudaStreamSynchronize(stream);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < batch; ++i) {
      if (!call()) return -1;
    }
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (b >= 3) samples.push_back(us / batch);
  }
  cudaStreamSynchronize(stream);
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

}  // namespace

int main() {
  std::string why;
  if (collx::cuda::device_count(&why) == 0 || !collx::nccl::available(&why)) {
    std::printf("SKIP: %s\n", why.c_str());
    return 77;
  }
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  float* buf = nullptr;
  cudaMalloc(&buf, 1024);
  ncclComm_t raw;
  ncclUniqueId id;
  ncclGetUniqueId(&id);
  if (ncclCommInitRank(&raw, 1, id, 0) != ncclSuccess) {
    std::fprintf(stderr, "ncclCommInitRank failed\n");
    return 1;
  }
  const double raw_us = per_call_us(
      [&] { return ncclAllReduce(buf, buf, 256, ncclFloat32, ncclSum, raw, stream) == ncclSuccess; }, stream);

  collx_store_t store = nullptr;
  collx_store_create_memory(&store);
  collx_config_t config;
  collx_config_init(&config, sizeof config);
  config.rank = 0;
  config.world_size = 1;
  config.store = store;
  config.transports = COLLX_TRANSPORT_TCP | COLLX_TRANSPORT_NCCL;
  collx_comm_t comm = nullptr;
  if (collx_comm_create(&config, &comm) != COLLX_OK) {
    std::fprintf(stderr, "collx_comm_create: %s\n", collx_last_error(nullptr));
    return 1;
  }
  collx_opts_t opts;
  collx_opts_init(&opts, sizeof opts);
  opts.stream = stream;
  opts.mem_kind = COLLX_MEM_CUDA;
  auto collx_call = [&] { return collx_allreduce(buf, buf, 256, COLLX_FLOAT32, COLLX_SUM, comm, &opts) == COLLX_OK; };
  if (!collx_call()) {
    std::fprintf(stderr, "collx_allreduce: %s\n", collx_last_error(comm));
    return 1;
  }
  const double collx_us = per_call_us(collx_call, stream);
  opts.mem_kind = COLLX_MEM_AUTO;
  const double auto_us = per_call_us(collx_call, stream);
  std::printf("nccl_raw_us %.3f\ncollx_nccl_us %.3f\ncollx_overhead_us %.3f\ncollx_auto_detect_us %.3f\n", raw_us,
              collx_us, collx_us - raw_us, auto_us - raw_us);
  collx_comm_destroy(comm);
  collx_store_destroy(store);
  ncclCommDestroy(raw);
  cudaFree(buf);
  return 0;
}
