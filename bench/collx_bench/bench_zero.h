// collx-bench zero: per-rank memory and step time of ZeRO stages 1, 2 and 3 (see bench_dp.h).
#pragma once

namespace collx_bench {

int bench_zero_main(int argc, char** argv);

}  // namespace collx_bench
