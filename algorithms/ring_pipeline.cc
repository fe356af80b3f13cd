// Chunked, pipelined ring.
//
// Every block is cut into chunks (chunk_plan.h). A "unit" is one chunk of one ring step,
// numbered step-major: u = (step - first_step) * chunks + chunk, which is also its tag
// step. Units are processed in that order: wait for unit u's chunk from the left
// neighbour, reduce it with this rank's contribution (reduce steps) or find it already in
// place (all-gather steps), and at once forward it to the right neighbour as unit
// u + chunks (same chunk, next step). Meanwhile the receives of the next kRecvDepth units
// are already posted, so while one chunk is being reduced the following ones are on the
// wire. The first step's chunks come straight from the input and are sent kRecvDepth
// chunks ahead of the one being processed.
//
// Receives of reduce steps land in a ring of kRecvDepth scratch slots (a slot is free as
// soon as its chunk has been reduced); all-gather steps receive straight into the output.
// Sends use a ring of request slots, each with a scratch slot for partial sums when the
// output cannot hold them (reduce-scatter); a slot is reused only once its previous send
// completed. The send ring holds a whole step's worth of chunks plus the receive window, so
// even a transport whose sends complete only when matched (rendezvous) cannot deadlock: a
// reused slot's previous send is at least 2 * kRecvDepth units older than the unit being
// processed, and the neighbour has posted that receive long ago.
#include "algorithms/ring_pipeline.h"

#include <algorithm>

#include "algorithms/chunk_plan.h"
#include "algorithms/local_ops.h"
#include "algorithms/request_set.h"

namespace collx {
namespace algo {
namespace {

constexpr size_t kRecvDepth = 4;

class RingPipeline {
 public:
  RingPipeline(const Context& ctx, const CollArgs& args, const RingJob& job)
      : ctx_(ctx), args_(args), job_(job) {}

  Status run();

 private:
  // Elements of the chunk a unit moves, and where it sits in the full vector.
  struct Piece {
    size_t offset = 0;  // elements from the start of the full vector
    size_t elems = 0;
    size_t in_block = 0;  // elements from the start of its block
  };

  int step_of(size_t unit) const { return job_.first_step + static_cast<int>(unit / plan_.chunks); }
  size_t chunk_of(size_t unit) const { return unit % plan_.chunks; }
  bool is_reduce_step(int step) const { return step < ctx_.size - 1; }
  Piece piece(int block, size_t chunk) const;
  Piece recv_piece(size_t unit) const {
    return piece(ring_recv_block(ctx_.rank, ctx_.size, step_of(unit)), chunk_of(unit));
  }
  Piece send_piece(size_t unit) const {
    return piece(ring_send_block(ctx_.rank, ctx_.size, step_of(unit)), chunk_of(unit));
  }
  char* incoming_slot(size_t unit) const { return incoming_ + (unit % depth_) * stride_; }
  char* partial_slot(size_t slot) const { return partial_ + slot * stride_; }
  size_t send_request(size_t slot) const { return depth_ + slot; }

  Status allocate_scratch();
  Status post_recv(size_t unit);
  Status acquire_send_slot(size_t unit, size_t* slot);
  Status send_first_step_chunk(size_t chunk);
  Status process(size_t unit);

  const Context& ctx_;
  const CollArgs& args_;
  const RingJob& job_;
  Reducer reducer_;
  size_t elem_size_ = 0;
  ChunkPlan plan_;
  size_t units_ = 0;
  size_t depth_ = 0;       // receive window
  size_t send_slots_ = 0;  // send ring
  size_t stride_ = 0;      // bytes per scratch slot
  char* incoming_ = nullptr;
  char* partial_ = nullptr;
  RequestSet* requests_ = nullptr;
};

RingPipeline::Piece RingPipeline::piece(int block, size_t chunk) const {
  Piece p;
  p.in_block = plan_.begin(chunk);
  p.elems = plan_.length(job_.blocks.length(block), chunk);
  p.offset = job_.blocks.offset(block) + p.in_block;
  return p;
}

Status RingPipeline::allocate_scratch() {
  const bool reduces = is_reduce_step(job_.first_step);
  if (reduces) COLLX_RETURN_IF_ERROR(get_scratch(ctx_, kScratchIncoming, depth_ * stride_, &incoming_));
  if (reduces && !job_.output) {
    COLLX_RETURN_IF_ERROR(get_scratch(ctx_, kScratchPartial, send_slots_ * stride_, &partial_));
  }
  return Status::Ok();
}

Status RingPipeline::post_recv(size_t unit) {
  const Piece in = recv_piece(unit);
  if (in.elems == 0) return Status::Ok();  // the left neighbour sends nothing either
  char* dst = is_reduce_step(step_of(unit)) ? incoming_slot(unit) : job_.output + in.offset * elem_size_;
  return requests_->post_recv(unit % depth_, ring_left(ctx_.rank, ctx_.size), unit, dst,
                              in.elems * elem_size_);
}

Status RingPipeline::acquire_send_slot(size_t unit, size_t* slot) {
  *slot = unit % send_slots_;
  return requests_->wait(send_request(*slot));
}

Status RingPipeline::send_first_step_chunk(size_t chunk) {
  const Piece out = send_piece(chunk);
  if (out.elems == 0) return Status::Ok();
  size_t slot;
  COLLX_RETURN_IF_ERROR(acquire_send_slot(chunk, &slot));
  return requests_->post_send(send_request(slot), ring_right(ctx_.rank, ctx_.size), chunk,
                              job_.first_block + out.in_block * elem_size_, out.elems * elem_size_);
}

Status RingPipeline::process(size_t unit) {
  const Piece in = recv_piece(unit);
  if (in.elems == 0) return Status::Ok();
  COLLX_RETURN_IF_ERROR(requests_->wait(unit % depth_));

  const int step = step_of(unit);
  const bool forward = step + 1 < job_.end_step;
  const size_t next_unit = unit + plan_.chunks;
  size_t slot = 0;
  if (forward) COLLX_RETURN_IF_ERROR(acquire_send_slot(next_unit, &slot));

  const char* result;
  if (is_reduce_step(step)) {
    char* dst;
    if (step == ctx_.size - 2) {
      dst = job_.own_result + in.in_block * elem_size_;  // block `rank`, now fully reduced
    } else if (job_.output) {
      dst = job_.output + in.offset * elem_size_;
    } else {
      dst = partial_slot(slot);
    }
    reducer_.combine(dst, job_.input + in.offset * elem_size_, incoming_slot(unit), in.elems);
    result = dst;
  } else {
    result = job_.output + in.offset * elem_size_;  // received in place
  }
  if (!forward) return Status::Ok();
  return requests_->post_send(send_request(slot), ring_right(ctx_.rank, ctx_.size), next_unit,
                              result, in.elems * elem_size_);
}

Status RingPipeline::run() {
  const int steps = job_.end_step - job_.first_step;
  if (steps <= 0) return Status::Ok();
  COLLX_RETURN_IF_ERROR(get_elem_size(args_, &elem_size_));
  if (is_reduce_step(job_.first_step)) COLLX_RETURN_IF_ERROR(get_reducer(args_, &reducer_));
  COLLX_RETURN_IF_ERROR(plan_chunks(job_.blocks.max_length(), elem_size_, ctx_.chunk_bytes,
                                    static_cast<uint64_t>(steps), &plan_));
  if (plan_.chunks == 0) return Status::Ok();  // count 0

  units_ = static_cast<size_t>(steps) * plan_.chunks;
  depth_ = std::min(kRecvDepth, units_);
  send_slots_ = std::min(units_, plan_.chunks + 2 * depth_ + 1);
  stride_ = slot_stride(plan_.chunk_elems, elem_size_);
  COLLX_RETURN_IF_ERROR(allocate_scratch());

  RequestSet requests(ctx_, args_, depth_ + send_slots_);
  COLLX_RETURN_IF_ERROR(requests.init_status());
  requests_ = &requests;

  for (size_t u = 0; u < depth_; ++u) COLLX_RETURN_IF_ERROR(post_recv(u));
  for (size_t c = 0; c < std::min(depth_, plan_.chunks); ++c) COLLX_RETURN_IF_ERROR(send_first_step_chunk(c));

  for (size_t u = 0; u < units_; ++u) {
    if (u < plan_.chunks && u + depth_ < plan_.chunks) COLLX_RETURN_IF_ERROR(send_first_step_chunk(u + depth_));
    COLLX_RETURN_IF_ERROR(process(u));
    if (u + depth_ < units_) COLLX_RETURN_IF_ERROR(post_recv(u + depth_));
  }
  return requests.wait_all();
}

}  // namespace

Status run_ring(const Context& ctx, const CollArgs& args, const RingJob& job) {
  RingPipeline pipeline(ctx, args, job);
  return pipeline.run();
}

}  // namespace algo
}  // namespace collx
