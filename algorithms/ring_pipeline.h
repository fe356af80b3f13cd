// The chunked, pipelined ring shared by allreduce_ring, reduce_scatter_ring and
// allgather_ring. Each runs a range of the global ring steps (see ring_pattern.h) over its
// own buffer layout; this file only describes where the data lives.
#pragma once

#include "algorithms/algorithm.h"
#include "algorithms/ring_pattern.h"

namespace collx {
namespace algo {

struct RingJob {
  RingJob(size_t count, int size) : blocks(count, size) {}

  BlockLayout blocks;  // the p blocks of the full vector, in elements
  int first_step = 0;  // 0 to start with the reduce-scatter half, p-1 for all-gather only
  int end_step = 0;    // one past the last ring step run
  // Reduce steps: this rank's contribution to block b starts at input + offset(b).
  const char* input = nullptr;
  // Data of the block sent at first_step (block r-first_step-1).
  const char* first_block = nullptr;
  // Full vector (offsets as `blocks`) receiving partial sums and gathered blocks; nullptr
  // when partial sums must go to scratch (reduce-scatter keeps only its own block).
  char* output = nullptr;
  // Where block `rank` lands once fully reduced (when the job has reduce steps).
  char* own_result = nullptr;
};

Status run_ring(const Context& ctx, const CollArgs& args, const RingJob& job);

}  // namespace algo
}  // namespace collx
