// ChunkPlan: how a block of elements is cut into pipeline chunks, and how the chunk size is
// chosen so that every (phase, step, chunk) of a collective gets its own tag step.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "lib/common/status.h"

namespace collx {
namespace algo {

// Upper bound on chunks per block. Pipelines keep about one request per chunk of a step in
// flight (see ring_pipeline.cc), so this bounds their memory when chunk_bytes is tiny.
constexpr size_t kMaxChunksPerBlock = size_t{1} << 16;

struct ChunkPlan {
  size_t chunk_elems = 1;  // elements per chunk (the last chunk of a block may be shorter)
  size_t chunks = 0;       // chunks of the longest block; shorter blocks have empty tails

  size_t begin(size_t chunk) const { return chunk * chunk_elems; }
  // Elements of chunk `chunk` in a block of `block_elems` elements (0 past its end).
  size_t length(size_t block_elems, size_t chunk) const {
    size_t start = begin(chunk);
    return start >= block_elems ? 0 : std::min(chunk_elems, block_elems - start);
  }
};

// Cuts blocks of at most `max_block_elems` elements of `elem_size` bytes into chunks of at
// most `chunk_bytes` (at least one element). `steps_per_chunk` is how many distinct tag steps
// each chunk index needs (e.g. 2(p-1) for a ring all-reduce); the chunk is grown until
// steps_per_chunk * chunks fits transport::kCollMaxSteps and chunks <= kMaxChunksPerBlock.
// COLLX_ERR_INTERNAL when even one chunk per block would not fit.
Status plan_chunks(size_t max_block_elems, size_t elem_size, size_t chunk_bytes,
                   uint64_t steps_per_chunk, ChunkPlan* plan);

}  // namespace algo
}  // namespace collx
