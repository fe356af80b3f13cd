// Ring collectives: all-reduce (reduce-scatter half then all-gather half), reduce-scatter
// and all-gather. Each only lays out its buffers for the shared pipeline (ring_pipeline.cc).
#include "algorithms/algorithm.h"
#include "algorithms/local_ops.h"
#include "algorithms/ring_pipeline.h"

namespace collx {
namespace algo {

Status allreduce_ring(const Context& ctx, const CollArgs& args) {
  if (args.count == 0) return Status::Ok();
  size_t elem_size;
  COLLX_RETURN_IF_ERROR(get_elem_size(args, &elem_size));
  const char* sendbuf = static_cast<const char*>(args.sendbuf);
  char* recvbuf = static_cast<char*>(args.recvbuf);
  if (ctx.size == 1) {
    copy_if_distinct(recvbuf, sendbuf, args.count * elem_size);
    return Status::Ok();
  }
  // Out of place, the reduce steps read sendbuf and write recvbuf directly (reduce3), so
  // sendbuf is never copied as a whole: every block of recvbuf is written exactly once by
  // the reduce-scatter half or received by the all-gather half.
  RingJob job(args.count, ctx.size);
  job.first_step = 0;
  job.end_step = 2 * ctx.size - 2;
  job.input = sendbuf;
  job.first_block = sendbuf + job.blocks.offset(ring_send_block(ctx.rank, ctx.size, 0)) * elem_size;
  job.output = recvbuf;
  job.own_result = recvbuf + job.blocks.offset(ctx.rank) * elem_size;
  return run_ring(ctx, args, job);
}

Status reduce_scatter_ring(const Context& ctx, const CollArgs& args) {
  if (args.count == 0) return Status::Ok();
  size_t elem_size;
  COLLX_RETURN_IF_ERROR(get_elem_size(args, &elem_size));
  const char* sendbuf = static_cast<const char*>(args.sendbuf);
  char* recvbuf = static_cast<char*>(args.recvbuf);
  if (ctx.size == 1) {
    copy_if_distinct(recvbuf, sendbuf, args.count * elem_size);
    return Status::Ok();
  }
  // recvbuf holds only this rank's block, so partial sums of the other blocks travel
  // through scratch (output == nullptr); the last reduce step writes recvbuf. In place,
  // recvbuf is sendbuf's block `rank`, which is read for the last time by that same step.
  RingJob job(args.count * static_cast<size_t>(ctx.size), ctx.size);
  job.first_step = 0;
  job.end_step = ctx.size - 1;
  job.input = sendbuf;
  job.first_block = sendbuf + job.blocks.offset(ring_send_block(ctx.rank, ctx.size, 0)) * elem_size;
  job.output = nullptr;
  job.own_result = recvbuf;
  return run_ring(ctx, args, job);
}

Status allgather_ring(const Context& ctx, const CollArgs& args) {
  if (args.count == 0) return Status::Ok();
  size_t elem_size;
  COLLX_RETURN_IF_ERROR(get_elem_size(args, &elem_size));
  const size_t block_bytes = args.count * elem_size;
  const char* sendbuf = static_cast<const char*>(args.sendbuf);
  char* recvbuf = static_cast<char*>(args.recvbuf);
  copy_if_distinct(recvbuf + static_cast<size_t>(ctx.rank) * block_bytes, sendbuf, block_bytes);
  if (ctx.size == 1) return Status::Ok();
  // Only the all-gather half of the ring: its first step sends block `rank`, straight from
  // sendbuf, and every received block lands in place and is forwarded from there.
  RingJob job(args.count * static_cast<size_t>(ctx.size), ctx.size);
  job.first_step = ctx.size - 1;
  job.end_step = 2 * ctx.size - 2;
  job.first_block = sendbuf;
  job.output = recvbuf;
  return run_ring(ctx, args, job);
}

}  // namespace algo
}  // namespace collx
