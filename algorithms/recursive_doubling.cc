// Recursive-doubling all-reduce, for small messages: log2(p) rounds, each exchanging the
// whole vector with one partner.
//
// Non-powers of two as MPICH: with pof2 the largest power of two <= p and rem = p - pof2,
// ranks below 2*rem pair up (2i, 2i+1); the even one hands its vector to the odd one and
// sits out, the remaining pof2 ranks (new ranks 0..pof2-1, in rank order) run recursive
// doubling, and the odd ones finally send the result back to their even partner.
//
// Every partial result covers a contiguous range of ranks, and the lower range is always
// the left operand, so each element is reduced in the same order on every rank and all
// ranks end with bit-identical results (even for MIN/MAX of signed zeros).
#include <utility>

#include "algorithms/algorithm.h"
#include "algorithms/fold_pattern.h"
#include "algorithms/local_ops.h"
#include "algorithms/request_set.h"

namespace collx {
namespace algo {
namespace {

// Tag steps: 0 the fold, 1..log2(pof2) the rounds, then the unfold.
constexpr uint64_t kFoldStep = 0;
constexpr uint64_t kFirstRoundStep = 1;

Status exchange(RequestSet& requests, int peer, uint64_t step, const void* send, void* recv, size_t bytes) {
  COLLX_RETURN_IF_ERROR(requests.post_recv(0, peer, step, recv, bytes));
  COLLX_RETURN_IF_ERROR(requests.post_send(1, peer, step, send, bytes));
  return requests.wait_all();
}

}  // namespace

Status allreduce_recursive_doubling(const Context& ctx, const CollArgs& args) {
  if (args.count == 0) return Status::Ok();
  size_t elem_size;
  COLLX_RETURN_IF_ERROR(get_elem_size(args, &elem_size));
  const size_t bytes = args.count * elem_size;
  char* recvbuf = static_cast<char*>(args.recvbuf);
  copy_if_distinct(recvbuf, args.sendbuf, bytes);
  if (ctx.size == 1) return Status::Ok();

  Reducer reducer;
  COLLX_RETURN_IF_ERROR(get_reducer(args, &reducer));
  char* scratch;
  COLLX_RETURN_IF_ERROR(get_scratch(ctx, kScratchIncoming, bytes, &scratch));
  RequestSet requests(ctx, args, 2);
  COLLX_RETURN_IF_ERROR(requests.init_status());

  const int rank = ctx.rank;
  const int pof2 = largest_power_of_two_at_most(ctx.size);
  const int rem = ctx.size - pof2;
  // `acc` holds this rank's partial result, `other` receives the partner's; they swap when
  // the result lands in `other`, so no round copies the vector.
  char* acc = recvbuf;
  char* other = scratch;

  const int new_rank = fold_new_rank(rank, rem);
  if (rank < 2 * rem) {
    if (new_rank < 0) {
      COLLX_RETURN_IF_ERROR(requests.post_send(1, rank + 1, kFoldStep, acc, bytes));
      COLLX_RETURN_IF_ERROR(requests.wait_all());
    } else {
      COLLX_RETURN_IF_ERROR(requests.post_recv(0, rank - 1, kFoldStep, other, bytes));
      COLLX_RETURN_IF_ERROR(requests.wait_all());
      reducer.reduce(other, acc, args.count);  // rank-1's vector on the left
      std::swap(acc, other);
    }
  }

  uint64_t step = kFirstRoundStep;
  if (new_rank >= 0) {
    for (int mask = 1; mask < pof2; mask <<= 1, ++step) {
      const int new_peer = new_rank ^ mask;
      COLLX_RETURN_IF_ERROR(exchange(requests, fold_real_rank(new_peer, rem), step, acc, other, bytes));
      if (new_peer > new_rank) {
        reducer.reduce(acc, other, args.count);
      } else {
        reducer.reduce(other, acc, args.count);
        std::swap(acc, other);
      }
    }
  } else {
    for (int mask = 1; mask < pof2; mask <<= 1) ++step;  // keep the unfold step number shared
  }

  if (rank < 2 * rem) {
    if (new_rank < 0) {
      COLLX_RETURN_IF_ERROR(requests.post_recv(0, rank + 1, step, recvbuf, bytes));
    } else {
      COLLX_RETURN_IF_ERROR(requests.post_send(1, rank - 1, step, acc, bytes));
    }
    COLLX_RETURN_IF_ERROR(requests.wait_all());
  }
  copy_if_distinct(recvbuf, acc, bytes);
  return Status::Ok();
}

}  // namespace algo
}  // namespace collx
