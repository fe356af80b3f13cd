// Pairwise exchange: at step s (1..p-1) rank r sends a block to rank r+s and receives one
// from rank r-s, so every step is a permutation and no rank is flooded. A few steps are
// kept in flight at once so consecutive exchanges overlap. All-to-all(v) sends each peer its
// own block; all-gatherv sends every peer this rank's block; reduce-scatterv sends each peer
// this rank's contribution to the peer's block and reduces what arrives into its own.
// Every pair exchanges exactly one message, whatever its size: empty blocks only carry the
// call's OpDesc, and the receiver's size check catches counts that disagree.
#include <algorithm>
#include <functional>

#include "algorithms/algorithm.h"
#include "algorithms/local_ops.h"
#include "algorithms/request_set.h"
#include "algorithms/ring_pattern.h"

namespace collx {
namespace algo {
namespace {
constexpr int kStepsInFlight = 4;

struct Block {
  char* data;
  size_t bytes;
};

// Where the blocks of one pairwise collective are. recv_block gets the receive slot
// (0..in_flight-1) so that receives into scratch can use one slot each; `received`, when set,
// runs on the calling thread once the receive from `from` (in that slot) completed, in step
// order, while later steps are on the wire.
struct Exchange {
  std::function<Block(int to)> send_block;
  std::function<Block(int from, size_t slot)> recv_block;
  std::function<void(int from, size_t slot)> received;
};

int steps_in_flight(const Context& ctx) { return std::min(kStepsInFlight, ctx.size - 1); }

// The schedule.
Status pairwise_exchange(const Context& ctx, const CollArgs& args, const Exchange& x) {
  const int rank = ctx.rank;
  const int in_flight = steps_in_flight(ctx);
  RequestSet requests(ctx, args, 2 * static_cast<size_t>(in_flight));
  COLLX_RETURN_IF_ERROR(requests.init_status());
  auto from_of = [&](int step) { return ring_mod(int64_t{rank} - step, ctx.size); };
  auto slot_of = [&](int step) { return static_cast<size_t>((step - 1) % in_flight); };
  // Waits for the receive of `step` and hands it on.
  auto finish_recv = [&](int step) -> Status {
    COLLX_RETURN_IF_ERROR(requests.wait(2 * slot_of(step)));
    if (x.received) x.received(from_of(step), slot_of(step));
    return Status::Ok();
  };
  for (int step = 1; step < ctx.size; ++step) {
    const size_t recv_slot = 2 * slot_of(step);
    const size_t send_slot = recv_slot + 1;
    // Reusing the slots of step - in_flight: that exchange must be over.
    if (step > in_flight) COLLX_RETURN_IF_ERROR(finish_recv(step - in_flight));
    COLLX_RETURN_IF_ERROR(requests.wait(send_slot));
    const int from = from_of(step);
    const int to = ring_mod(int64_t{rank} + step, ctx.size);
    const Block in = x.recv_block(from, slot_of(step)), out = x.send_block(to);
    COLLX_RETURN_IF_ERROR(requests.post_recv(recv_slot, from, static_cast<uint64_t>(step), in.data, in.bytes));
    COLLX_RETURN_IF_ERROR(requests.post_send(send_slot, to, static_cast<uint64_t>(step), out.data, out.bytes));
  }
  for (int step = std::max(1, ctx.size - in_flight); step < ctx.size; ++step) {
    COLLX_RETURN_IF_ERROR(finish_recv(step));
  }
  return requests.wait_all();
}

char* bytes_of(const void* buf) { return static_cast<char*>(const_cast<void*>(buf)); }  // sendbuf: only read

Status need_layout(const CollArgs& args, bool send_side) {
  if (args.counts == nullptr || args.displs == nullptr || (send_side && (!args.send_counts || !args.send_displs))) {
    return make_status(COLLX_ERR_INTERNAL, "v-collective without its counts and displacements");
  }
  return Status::Ok();
}

}  // namespace

Status alltoall_pairwise(const Context& ctx, const CollArgs& args) {
  if (args.count == 0) return Status::Ok();
  size_t elem_size;
  COLLX_RETURN_IF_ERROR(get_elem_size(args, &elem_size));
  const size_t block_bytes = args.count * elem_size;
  char* sendbuf = bytes_of(args.sendbuf);
  char* recvbuf = static_cast<char*>(args.recvbuf);
  const size_t rank = static_cast<size_t>(ctx.rank);
  std::memcpy(recvbuf + rank * block_bytes, sendbuf + rank * block_bytes, block_bytes);
  if (ctx.size == 1) return Status::Ok();
  Exchange x;
  x.send_block = [&](int to) { return Block{sendbuf + static_cast<size_t>(to) * block_bytes, block_bytes}; };
  x.recv_block = [&](int from, size_t) { return Block{recvbuf + static_cast<size_t>(from) * block_bytes, block_bytes}; };
  return pairwise_exchange(ctx, args, x);
}

Status allgatherv_pairwise(const Context& ctx, const CollArgs& args) {
  size_t elem_size;
  COLLX_RETURN_IF_ERROR(get_elem_size(args, &elem_size));
  COLLX_RETURN_IF_ERROR(need_layout(args, false));
  char* recvbuf = static_cast<char*>(args.recvbuf);
  const Block mine{bytes_of(args.sendbuf), args.counts[ctx.rank] * elem_size};
  copy_if_distinct(recvbuf + args.displs[ctx.rank] * elem_size, mine.data, mine.bytes);  // none in place
  if (ctx.size == 1) return Status::Ok();
  Exchange x;
  x.send_block = [&](int) { return mine; };
  x.recv_block = [&](int from, size_t) {
    return Block{recvbuf + args.displs[from] * elem_size, args.counts[from] * elem_size};
  };
  return pairwise_exchange(ctx, args, x);
}

Status alltoallv_pairwise(const Context& ctx, const CollArgs& args) {
  size_t elem_size;
  COLLX_RETURN_IF_ERROR(get_elem_size(args, &elem_size));
  COLLX_RETURN_IF_ERROR(need_layout(args, true));
  char* sendbuf = bytes_of(args.sendbuf);
  char* recvbuf = static_cast<char*>(args.recvbuf);
  auto send_block = [&](int to) {
    return Block{sendbuf + args.send_displs[to] * elem_size, args.send_counts[to] * elem_size};
  };
  auto recv_block = [&](int from, size_t) {
    return Block{recvbuf + args.displs[from] * elem_size, args.counts[from] * elem_size};
  };
  const Block own_out = send_block(ctx.rank), own_in = recv_block(ctx.rank, 0);
  if (own_out.bytes != own_in.bytes) {  // validate_v checks this; never past a wrong size
    return make_status(COLLX_ERR_INTERNAL, "alltoallv: own block of %zu bytes into %zu", own_out.bytes, own_in.bytes);
  }
  copy_if_distinct(own_in.data, own_out.data, own_in.bytes);
  if (ctx.size == 1) return Status::Ok();
  return pairwise_exchange(ctx, args, Exchange{send_block, recv_block, nullptr});
}

Status reduce_scatterv_pairwise(const Context& ctx, const CollArgs& args) {
  size_t elem_size;
  COLLX_RETURN_IF_ERROR(get_elem_size(args, &elem_size));
  COLLX_RETURN_IF_ERROR(need_layout(args, false));
  Reducer reducer;
  COLLX_RETURN_IF_ERROR(get_reducer(args, &reducer));
  char* sendbuf = bytes_of(args.sendbuf);
  char* recvbuf = static_cast<char*>(args.recvbuf);
  const size_t own_count = args.counts[ctx.rank];
  // In place recvbuf is this block of sendbuf: nothing to copy, and it is never sent.
  copy_if_distinct(recvbuf, sendbuf + args.displs[ctx.rank] * elem_size, own_count * elem_size);
  if (ctx.size == 1) return Status::Ok();
  const size_t stride = slot_stride(own_count, elem_size);
  char* incoming = nullptr;
  if (own_count > 0) {
    COLLX_RETURN_IF_ERROR(get_scratch(ctx, kScratchIncoming, stride * static_cast<size_t>(steps_in_flight(ctx)),
                                      &incoming));
  }
  Exchange x;
  x.send_block = [&](int to) {
    return Block{sendbuf + args.displs[to] * elem_size, args.counts[to] * elem_size};
  };
  x.recv_block = [&](int, size_t slot) { return Block{incoming + slot * stride, own_count * elem_size}; };
  x.received = [&](int, size_t slot) {
    if (own_count > 0) reducer.reduce(recvbuf, incoming + slot * stride, own_count);
  };
  return pairwise_exchange(ctx, args, x);
}

}  // namespace algo
}  // namespace collx
