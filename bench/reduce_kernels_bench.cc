// Throughput of the host reduction kernels (dst = dst + src) against memcpy of the same
// buffers, so the numbers read as "how close to memory bandwidth". bytes_per_second counts
// the bytes the kernel touches: two reads and one write of the element buffer (memcpy: one
// read, one write, over a buffer of the same element-buffer size times 1.5 so both move the
// same number of bytes).
//
// Run: reduce_kernels_bench --benchmark_filter=64MiB  (or any size in the list below)
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "lib/dtype/datatype.h"
#include "lib/dtype/kernel_isa.h"

namespace collx {
namespace {

// Bytes in one element buffer (1M elements: 2 MiB for the 16-bit types, 4 MiB for 32-bit).
constexpr int64_t kSizes[] = {int64_t{256} << 10, int64_t{2} << 20, int64_t{4} << 20, int64_t{64} << 20};

// Values that stay finite and away from subnormals under repeated summing, so the timing
// is the steady state of normal numbers.
std::vector<unsigned char> filled_buffer(collx_datatype_t dt, size_t count) {
  const size_t size = datatype_size(dt);
  std::vector<unsigned char> bytes(count * size);
  for (size_t i = 0; i < count; ++i) {
    unsigned char* p = bytes.data() + i * size;
    const float value = 1.0f + static_cast<float>(i % 7) / 8.0f;
    switch (dt) {
      case COLLX_FLOAT16: { const uint16_t h = float_to_half(value); std::memcpy(p, &h, 2); break; }
      case COLLX_BFLOAT16: { const uint16_t b = float_to_bfloat16(value); std::memcpy(p, &b, 2); break; }
      case COLLX_FLOAT32: std::memcpy(p, &value, 4); break;
      default: { const int32_t v = static_cast<int32_t>(i % 7); std::memcpy(p, &v, 4); break; }
    }
  }
  return bytes;
}

void BM_ReduceSum(benchmark::State& state, collx_datatype_t dt, KernelIsa isa) {
  if (!kernel_isa_supported(isa)) {
    state.SkipWithError("kernel variant not supported on this CPU");
    return;
  }
  const size_t bytes = static_cast<size_t>(state.range(0));
  const size_t count = bytes / datatype_size(dt);
  std::vector<unsigned char> dst = filled_buffer(dt, count);
  const std::vector<unsigned char> src = filled_buffer(dt, count);
  const ReduceFn sum = reduce_fn_for(isa, dt, COLLX_SUM);
  // dst accumulates across iterations (resetting it would add copy traffic to the timing).
  // It stays finite and normal: once an increment of at most 1.875 rounds away, it stops
  // growing (float16 near 4096, bfloat16 near 256, float32 near 2^24).
  for (auto _ : state) {
    sum(dst.data(), src.data(), count);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(3 * bytes));
  state.counters["elements/s"] = benchmark::Counter(static_cast<double>(count) * state.iterations(),
                                                    benchmark::Counter::kIsRate);
}

void BM_Memcpy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0)) * 3 / 2;
  std::vector<unsigned char> dst(bytes, 1), src(bytes, 2);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(2 * bytes));
}

void register_sizes(benchmark::internal::Benchmark* b) {
  for (int64_t size : kSizes) b->Arg(size);
}

BENCHMARK(BM_Memcpy)->Apply(register_sizes);
// What reduce_fn picks on this machine, then the portable variant for comparison.
BENCHMARK_CAPTURE(BM_ReduceSum, float32, COLLX_FLOAT32, best_kernel_isa())->Apply(register_sizes);
BENCHMARK_CAPTURE(BM_ReduceSum, bfloat16, COLLX_BFLOAT16, best_kernel_isa())->Apply(register_sizes);
BENCHMARK_CAPTURE(BM_ReduceSum, float16, COLLX_FLOAT16, best_kernel_isa())->Apply(register_sizes);
BENCHMARK_CAPTURE(BM_ReduceSum, int32, COLLX_INT32, best_kernel_isa())->Apply(register_sizes);
BENCHMARK_CAPTURE(BM_ReduceSum, float32_portable, COLLX_FLOAT32, KernelIsa::kPortable)->Apply(register_sizes);
BENCHMARK_CAPTURE(BM_ReduceSum, bfloat16_portable, COLLX_BFLOAT16, KernelIsa::kPortable)->Apply(register_sizes);
BENCHMARK_CAPTURE(BM_ReduceSum, float16_portable, COLLX_FLOAT16, KernelIsa::kPortable)->Apply(register_sizes);

}  // namespace
}  // namespace collx

BENCHMARK_MAIN();
