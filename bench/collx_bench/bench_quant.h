// collx-bench quant: the quantized all-gather and reduce-scatter (collx/parallel_quant.h)
// against the plain float32 and bfloat16 collectives in the same run: bytes each rank
// sends, time, bandwidth and error, per size (docs/parallel-quant.md).
#pragma once

namespace collx_bench {

int bench_quant_main(int argc, char** argv);

}  // namespace collx_bench
