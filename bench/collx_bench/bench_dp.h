// collx-bench dp and zero: strategy benchmarks over the public parallel API. A simulated
// backward pass writes gradients tensor by tensor over time (sleeping stands for device
// compute, leaving the CPU to the communicator as a GPU would); the table compares the
// overlapped step with compute alone and communication alone.
#pragma once

#include <cstddef>
#include <string>

#include "collx/collx.h"
#include "collx/parallel.h"

namespace collx_bench {

struct StrategyArgs {
  int np = 4;                // local ranks started without a launcher
  size_t elems = 1u << 22;   // model size in float32 elements
  int tensors = 16;          // equal tensors
  int buckets = 8;           // buckets the layout cuts the model into
  int iters = 5;             // timed steps (after one warm-up)
  double compute_ratio = 1;  // simulated backward time / measured communication time
  int32_t comm_dtype = COLLX_FLOAT32;
};

// Parses the flags after "dp" or "zero": --np N, --elems N, --tensors N, --buckets N,
// --iters N, --compute-ratio X, --comm fp32|bf16. False with *error on a bad flag.
bool parse_strategy_args(int argc, char** argv, StrategyArgs* args, std::string* error);

// Under a launcher: creates the communicator from the environment and runs body on it.
// Without one: starts args.np local ranks of this command. Returns an exit status.
int run_strategy(int argc, char** argv, const StrategyArgs& args,
                 int (*body)(const StrategyArgs&, collx_comm_t world));

// The benchmark model's layout (ids 0..tensors-1, float32) for dp ranks.
collx_layout_t strategy_layout(const StrategyArgs& args, int32_t dp, int32_t partition);

// Milliseconds on a monotonic clock.
double now_ms();

// The slowest rank's value (max over the communicator).
double slowest(double v, collx_comm_t comm);

int bench_dp_main(int argc, char** argv);

}  // namespace collx_bench
