// The size sweep, the per-size element counts and the bandwidth formulas of nccl-tests
// (reference/collectives.md section 5.2-5.3), kept free of library calls so they are
// unit-tested on their own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/collx_bench/names.h"

namespace collx_bench {

// The sizes -b/-e/-i/-f select: min, then min*factor (factor > 1) or min+step, while
// <= max. Empty with *error set when the sweep would not end (zero step, zero start
// with a factor) or min > max.
std::vector<uint64_t> size_sweep(uint64_t min_bytes, uint64_t max_bytes, uint64_t step_bytes,
                                 uint64_t step_factor, std::string* error);

// Element counts of one row, as nccl-tests' *GetCollByteCount.
struct RowCounts {
  size_t count = 0;       // the count argument of the call; the "count" column
  size_t send_count = 0;  // elements in the send buffer
  size_t recv_count = 0;  // elements in the receive buffer
  uint64_t bytes = 0;     // the "size" column: max(send, recv) bytes, the whole array
};

// For reducescatter, allgather, alltoall, gather and scatter the per-rank count is
// size/elt/nranks rounded down so that every rank's block is a multiple of 16 bytes; the
// others use size/elt.
// Allgatherv's uneven shards (collx-bench prints the pattern): rank r sends (1 + r % 3)
// units, count being the unit, so the largest shard is 3x the smallest from 3 ranks on.
RowCounts row_counts(BenchColl coll, uint64_t size_bytes, size_t elt_bytes, int nranks);
// Reducescatterv, gatherv and scatterv use the same shards (rank r's block is
// allgatherv_shard(count, r) elements, packed in rank order from shard_offset).
// Alltoallv: rank s sends rank d (1 + (s + d) % 3) units (alltoallv_block); the buffers are
// packed in rank order, and the size column is the largest rank's buffer.
size_t allgatherv_shard(size_t unit, int rank);
size_t allgatherv_units(int nranks);  // units of every shard together
size_t shard_offset(size_t unit, int rank);  // elements of the shards of ranks before `rank`
size_t alltoallv_block(size_t unit, int src, int dst);
size_t alltoallv_units(int nranks, int rank);  // units rank sends (= units it receives)
size_t alltoallv_max_units(int nranks);        // the largest of those
// Element offset of block `dst` in rank `src`'s send buffer (packed).
size_t alltoallv_send_offset(size_t unit, int src, int dst);

// busbw = algbw * factor: 2(n-1)/n for allreduce, (n-1)/n for reducescatter, allgather,
// alltoall, gather, scatter and every v-collective, 1 for broadcast, reduce and sendrecv.
double busbw_factor(BenchColl coll, int nranks);
// algbw in GB/s (1e9 B/s) for `bytes` moved in `time_us`; 0 when the time is not positive.
double algbw_gbs(uint64_t bytes, double time_us);

}  // namespace collx_bench
