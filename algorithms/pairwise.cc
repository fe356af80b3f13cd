// Pairwise-exchange all-to-all: at step s (1..p-1) rank r sends its block for rank r+s and
// receives the block of rank r-s, so every step is a permutation and no rank is flooded.
// A few steps are kept in flight at once so consecutive exchanges overlap.
#include <algorithm>

#include "algorithms/algorithm.h"
#include "algorithms/local_ops.h"
#include "algorithms/request_set.h"
#include "algorithms/ring_pattern.h"

namespace collx {
namespace algo {
namespace {
constexpr int kStepsInFlight = 4;
}  // namespace

Status alltoall_pairwise(const Context& ctx, const CollArgs& args) {
  if (args.count == 0) return Status::Ok();
  size_t elem_size;
  COLLX_RETURN_IF_ERROR(get_elem_size(args, &elem_size));
  const size_t block_bytes = args.count * elem_size;
  const char* sendbuf = static_cast<const char*>(args.sendbuf);
  char* recvbuf = static_cast<char*>(args.recvbuf);
  const int rank = ctx.rank;
  std::memcpy(recvbuf + static_cast<size_t>(rank) * block_bytes,
              sendbuf + static_cast<size_t>(rank) * block_bytes, block_bytes);
  if (ctx.size == 1) return Status::Ok();

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
    COLLX_RETURN_IF_ERROR(requests.post_recv(recv_slot, from, static_cast<uint64_t>(step),
                                             recvbuf + static_cast<size_t>(from) * block_bytes, block_bytes));
    COLLX_RETURN_IF_ERROR(requests.post_send(send_slot, to, static_cast<uint64_t>(step),
                                             sendbuf + static_cast<size_t>(to) * block_bytes, block_bytes));
  }
  return requests.wait_all();
}

}  // namespace algo
}  // namespace collx
