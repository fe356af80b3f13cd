// Device bandwidth figures of one GPU, in one run: device-to-device copy, the collx
// reduction kernels (fp32 a += b, bf16 c = a + b) and pinned host<->device copies.
// Prints "name  GB/s" lines (bytes read + written per second, medians of --iters runs).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "lib/cuda/device.h"

using namespace collx;

namespace {

double median_gbps(double bytes, int iters, const std::function<Status()>& op) {
  void *start = nullptr, *end = nullptr;
  if (!cuda::event_create_timed(&start).ok() || !cuda::event_create_timed(&end).ok()) return 0;
  std::vector<double> rates;
  for (int i = 0; i < iters + 2; ++i) {
    cuda::event_record(start, nullptr).ignore();
    Status st = op();
    cuda::event_record(end, nullptr).ignore();
    if (!st.ok() || !cuda::device_synchronize().ok()) {
      std::fprintf(stderr, "failed: %s\n", st.message().c_str());
      return 0;
    }
    float ms = 0;
    cuda::event_elapsed_ms(start, end, &ms).ignore();
    if (i >= 2) rates.push_back(bytes / (ms * 1e-3) / 1e9);  // two warm-up runs
  }
  cuda::event_destroy(start);
  cuda::event_destroy(end);
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = argc > 1 ? static_cast<size_t>(std::atol(argv[1])) : 1024;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 20;
  std::string why;
  if (cuda::device_count(&why) == 0) {
    std::printf("SKIP: no CUDA device (%s)\n", why.c_str());
    return 77;
  }
  const size_t bytes = mib << 20;
  void *a = nullptr, *b = nullptr, *c = nullptr, *host = nullptr;
  if (!cuda::device_alloc(bytes, &a).ok() || !cuda::device_alloc(bytes, &b).ok() ||
      !cuda::device_alloc(bytes, &c).ok() || !cuda::host_alloc_pinned(256u << 20, &host).ok()) {
    std::fprintf(stderr, "cannot allocate 3 x %zu MiB on the device\n", mib);
    return 1;
  }
  cuda::memset_async(a, 0, bytes, nullptr).ignore();
  cuda::memset_async(b, 0, bytes, nullptr).ignore();
  const double copy = median_gbps(2.0 * bytes, iters, [&] {
    return cuda::copy_async(c, a, bytes, cuda::CopyKind::kDeviceToDevice, nullptr);
  });
  const double fp32 = median_gbps(3.0 * bytes, iters, [&] {
    return cuda::cuda_reduce(a, a, b, bytes / 4, COLLX_FLOAT32, COLLX_SUM, nullptr);
  });
  const double bf16 = median_gbps(3.0 * bytes, iters, [&] {
    return cuda::cuda_reduce(c, a, b, bytes / 2, COLLX_BFLOAT16, COLLX_SUM, nullptr);
  });
  const void* ins[4] = {a, b, c, a};
  const double fold4 = median_gbps(5.0 * (bytes / 4), iters, [&] {
    // 4 inputs of a quarter each, one output: what CUDA IPC's all-reduce runs per rank.
    void* outs[1] = {b};
    return cuda::cuda_reduce_n(outs, 1, ins, 4, bytes / 16, COLLX_FLOAT32, COLLX_SUM, 1.0, 4, nullptr);
  });
  const size_t pinned = 256u << 20;
  const double h2d = median_gbps(pinned, iters, [&] {
    return cuda::copy_async(a, host, pinned, cuda::CopyKind::kHostToDevice, nullptr);
  });
  const double d2h = median_gbps(pinned, iters, [&] {
    return cuda::copy_async(host, a, pinned, cuda::CopyKind::kDeviceToHost, nullptr);
  });
  std::printf("d2d_copy_GBps %.1f\n", copy);
  std::printf("reduce_fp32_GBps %.1f\n", fp32);
  std::printf("reduce_bf16_GBps %.1f\n", bf16);
  std::printf("reduce_n4_fp32_GBps %.1f\n", fold4);
  std::printf("pinned_h2d_GBps %.1f\n", h2d);
  std::printf("pinned_d2h_GBps %.1f\n", d2h);
  cuda::device_free(a);
  cuda::device_free(b);
  cuda::device_free(c);
  cuda::host_free_pinned(host);
  return 0;
}
