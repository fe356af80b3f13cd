// collx-bench --explain and --tune: what the library's tuner decides, and measuring the
// constants it decides with. Both use only the public C API (collx_explain,
// collx_comm_transport, send/recv, allreduce).
#pragma once

#include "bench/collx_bench/args.h"
#include "collx/collx.h"

namespace collx_bench {

// Rank 0 prints collx_explain for every size of the sweep and every datatype; no traffic.
int explain_sweep(const Options& options, collx_comm_t comm, int rank, int nranks);

// Measures on this communicator's transport and writes (or updates) options.tune_path:
//   alpha: half the round trip of an 8-byte send/recv between ranks 0 and 1
//   beta:  the one-way time per byte of 16 MiB messages between ranks 0 and 1
//   gamma: this host's float32 a += b over 64 MiB arrays (also the memory-bandwidth bound
//          that issue figures are compared with), per byte of one array
// Every rank takes part (the others wait in a barrier); rank 0 writes the file.
int tune_transport(const Options& options, collx_comm_t comm, int rank, int nranks);

}  // namespace collx_bench
