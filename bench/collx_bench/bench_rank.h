// One rank of collx-bench: joins the communicator, runs the sweep, and on rank 0 prints
// the table (and writes --json). Returns the rank's exit status (launcher.h kExit*).
#pragma once

#include "bench/collx_bench/args.h"
#include "collx/collx.h"

namespace collx_bench {

int run_rank(const Options& options, collx_algorithm_t algorithm);

}  // namespace collx_bench
