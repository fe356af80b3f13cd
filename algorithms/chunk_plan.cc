#include "algorithms/chunk_plan.h"

#include "transports/transport.h"

namespace collx {
namespace algo {

static size_t ceil_div(size_t a, size_t b) { return a / b + (a % b != 0); }

Status plan_chunks(size_t max_block_elems, size_t elem_size, size_t chunk_bytes,
                   uint64_t steps_per_chunk, ChunkPlan* plan) {
  *plan = ChunkPlan();
  if (max_block_elems == 0) return Status::Ok();
  if (elem_size == 0) return make_status(COLLX_ERR_INTERNAL, "chunk plan: element size 0");
  if (steps_per_chunk == 0) steps_per_chunk = 1;
  if (steps_per_chunk > transport::kCollMaxSteps) {
    return make_status(COLLX_ERR_INTERNAL,
                       "collective needs %llu steps per chunk, more than the tag space holds",
                       static_cast<unsigned long long>(steps_per_chunk));
  }
  const size_t max_chunks =
      std::min<uint64_t>(kMaxChunksPerBlock, transport::kCollMaxSteps / steps_per_chunk);

  size_t chunk_elems = std::max<size_t>(1, chunk_bytes / elem_size);
  chunk_elems = std::min(chunk_elems, max_block_elems);
  // Too many chunks would run out of tag steps: grow the chunk instead.
  if (ceil_div(max_block_elems, chunk_elems) > max_chunks) {
    chunk_elems = ceil_div(max_block_elems, max_chunks);
  }
  plan->chunk_elems = chunk_elems;
  plan->chunks = ceil_div(max_block_elems, chunk_elems);
  return Status::Ok();
}

}  // namespace algo
}  // namespace collx
