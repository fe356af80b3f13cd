// Pairwise exchange: at step s (1..p-1) rank r sends a block to rank r+s and receives one
// from rank r-s, so every step is a permutation and no rank is flooded. A few steps are
// kept in flight at once so consecutive exchanges overlap. All-to-all sends each peer its
// own block; all-gatherv sends every peer this rank's block, whatever its size (empty
// blocks only carry the call's OpDesc).
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

// The schedule; send_block(to) and recv_block(from) place the blocks.
Status pairwise_exchange(const Context& ctx, const CollArgs& args, const std::function<Block(int)>& send_block,
                         const std::function<Block(int)>& recv_block) {
  const int rank = ctx.rank;
  const int in_flight = std::min(kStepsInFlight, ctx.size - 1);
  RequestSet requests(ctx, args, 2 * static_cast<size_t>(in_flight));
  COLLX_RETURN_IF_ERROR(requests.init_status());
  for (int step = 1; step < ctx.size; ++step) {
    const size_t recv_slot = 2 * static_cast<size_t>((step - 1) % in_flight);
    const size_t send_slot = recv_slot + 1;
    // Reusing the slots of step - in_flight: that exchange must be over.
    COLLX_RETURN_IF_ERROR(requests.wait(recv_slot));
    COLLX_RETURN_IF_ERROR(requests.wait(send_slot));
    const int from = ring_mod(int64_t{rank} - step, ctx.size);
    const int to = ring_mod(int64_t{rank} + step, ctx.size);
    const Block in = recv_block(from), out = send_block(to);
    COLLX_RETURN_IF_ERROR(requests.post_recv(recv_slot, from, static_cast<uint64_t>(step), in.data, in.bytes));
    COLLX_RETURN_IF_ERROR(requests.post_send(send_slot, to, static_cast<uint64_t>(step), out.data, out.bytes));
  }
  return requests.wait_all();
}

}  // namespace

Status alltoall_pairwise(const Context& ctx, const CollArgs& args) {
  if (args.count == 0) return Status::Ok();
  size_t elem_size;
  COLLX_RETURN_IF_ERROR(get_elem_size(args, &elem_size));
  const size_t block_bytes = args.count * elem_size;
  char* sendbuf = static_cast<char*>(const_cast<void*>(args.sendbuf));  // only read
  char* recvbuf = static_cast<char*>(args.recvbuf);
  const size_t rank = static_cast<size_t>(ctx.rank);
  std::memcpy(recvbuf + rank * block_bytes, sendbuf + rank * block_bytes, block_bytes);
  if (ctx.size == 1) return Status::Ok();
  return pairwise_exchange(
      ctx, args, [&](int to) { return Block{sendbuf + static_cast<size_t>(to) * block_bytes, block_bytes}; },
      [&](int from) { return Block{recvbuf + static_cast<size_t>(from) * block_bytes, block_bytes}; });
}

Status allgatherv_pairwise(const Context& ctx, const CollArgs& args) {
  size_t elem_size;
  COLLX_RETURN_IF_ERROR(get_elem_size(args, &elem_size));
  if (args.counts == nullptr || args.displs == nullptr) {
    return make_status(COLLX_ERR_INTERNAL, "allgatherv without its counts and displacements");
  }
  char* recvbuf = static_cast<char*>(args.recvbuf);
  const Block mine{static_cast<char*>(const_cast<void*>(args.sendbuf)), args.counts[ctx.rank] * elem_size};  // only read
  copy_if_distinct(recvbuf + args.displs[ctx.rank] * elem_size, mine.data, mine.bytes);  // none in place
  if (ctx.size == 1) return Status::Ok();
  return pairwise_exchange(
      ctx, args, [&](int) { return mine; },
      [&](int from) { return Block{recvbuf + args.displs[from] * elem_size, args.counts[from] * elem_size}; });
}

}  // namespace algo
}  // namespace collx
