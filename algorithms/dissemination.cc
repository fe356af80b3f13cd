// Dissemination barrier: in round k every rank signals rank r + 2^k and waits for rank
// r - 2^k. After ceil(log2 p) rounds each rank has (transitively) heard from every other,
// so none leaves before all have entered.
#include "algorithms/algorithm.h"
#include "algorithms/request_set.h"
#include "algorithms/ring_pattern.h"

namespace collx {
namespace algo {

Status barrier_dissemination(const Context& ctx, const CollArgs& args) {
  if (ctx.size == 1) return Status::Ok();
  RequestSet requests(ctx, args, 2);
  COLLX_RETURN_IF_ERROR(requests.init_status());
  uint64_t round = 0;
  for (int distance = 1; distance < ctx.size; distance *= 2, ++round) {
    const int from = ring_mod(int64_t{ctx.rank} - distance, ctx.size);
    const int to = ring_mod(int64_t{ctx.rank} + distance, ctx.size);
    COLLX_RETURN_IF_ERROR(requests.post_recv(0, from, round, nullptr, 0));
    COLLX_RETURN_IF_ERROR(requests.post_send(1, to, round, nullptr, 0));
    COLLX_RETURN_IF_ERROR(requests.wait_all());
  }
  return Status::Ok();
}

}  // namespace algo
}  // namespace collx
