// Throughput of the block quantization kernels through the public calls (collx_quant_pack
// and collx_quant_unpack, float32, int8 and int4, block 256) against memcpy of the same
// float32 buffer, so the numbers read as "how many memcpy's worth of time one quantize or
// dequantize pass costs". bytes_per_second counts the float32 bytes of the input (pack)
// or output (unpack). On a loaded machine compare the CPU column, not the wall time.
//
// Run: quant_kernels_bench --benchmark_filter=bytes:262144
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "collx/collx.h"
#include "collx/parallel.h"

namespace {

constexpr int64_t kSizes[] = {int64_t{256} << 10, int64_t{4} << 20, int64_t{64} << 20};  // float32 bytes

std::vector<float> data(size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * (1.0f + static_cast<float>(i % 97));
  return x;
}

collx_quant_config_t config(int bits) {
  collx_quant_config_t c;
  collx_quant_config_init(&c, sizeof c);
  c.bits = bits;
  return c;
}

void BM_Memcpy(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0)) / 4;
  std::vector<float> x = data(n), y(n);
  for (auto _ : state) {
    std::memcpy(y.data(), x.data(), n * 4);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

// The buffers of one pack/unpack case: float32 input, its message, an output buffer.
struct QuantCase {
  explicit QuantCase(const benchmark::State& state)
      : n(static_cast<size_t>(state.range(0)) / 4), c(config(static_cast<int>(state.range(1)))), x(data(n)), y(n) {
    size_t bytes = 0;
    collx_quant_packed_bytes(n, &c, &bytes);
    packed.resize(bytes);
    collx_quant_pack(x.data(), n, COLLX_FLOAT32, &c, packed.data());
  }
  size_t n;
  collx_quant_config_t c;
  std::vector<float> x, y;
  std::vector<unsigned char> packed;
};

// unpack = 0: collx_quant_pack of the float32 buffer; 1: collx_quant_unpack of its message.
void BM_Quant(benchmark::State& state) {
  QuantCase k(state);
  const bool unpack = state.range(2) != 0;
  for (auto _ : state) {
    const collx_status_t st = unpack ? collx_quant_unpack(k.packed.data(), k.n, COLLX_FLOAT32, &k.c, k.y.data())
                                     : collx_quant_pack(k.x.data(), k.n, COLLX_FLOAT32, &k.c, k.packed.data());
    if (st != COLLX_OK) state.SkipWithError(collx_last_error(nullptr));
    benchmark::DoNotOptimize(k.packed.data());
    benchmark::DoNotOptimize(k.y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void sizes(benchmark::internal::Benchmark* b) {
  for (int64_t s : kSizes) b->Arg(s);
}
void cases(benchmark::internal::Benchmark* b) {
  b->ArgNames({"bytes", "bits", "unpack"});
  for (int64_t unpack : {0, 1})
    for (int64_t s : kSizes)
      for (int64_t bits : {8, 4}) b->Args({s, bits, unpack});
}

BENCHMARK(BM_Memcpy)->Apply(sizes);
BENCHMARK(BM_Quant)->Apply(cases);

}  // namespace

BENCHMARK_MAIN();
