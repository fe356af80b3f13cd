// Rabenseifner all-reduce: a recursive-halving reduce-scatter followed by a recursive-doubling
// all-gather. It moves the same bytes as ring (2 (p-1)/p of the vector per rank) in
// 2 log2(p) steps instead of 2 (p-1), which matters wherever a step costs a wake-up: more
// ranks than cores, or many ranks.
//
// Non-powers of two fold as recursive doubling does (fold_pattern.h).
//
// The vector is cut into pof2 blocks (BlockLayout). In halving round `mask`, a rank keeps
// the half of its current block range on its side of the partner (lower new rank keeps the
// lower half) and receives the partner's copy of it; after log2(pof2) rounds new rank i
// holds block i fully reduced. The doubling rounds then grow the range back. Each block is
// reduced on one rank only and copied from there, so every rank ends with identical bits.
#include "algorithms/algorithm.h"
#include "algorithms/fold_pattern.h"
#include "algorithms/local_ops.h"
#include "algorithms/request_set.h"
#include "algorithms/ring_pattern.h"

namespace collx {
namespace algo {
namespace {

constexpr uint64_t kFoldStep = 0;

}  // namespace

Status allreduce_rabenseifner(const Context& ctx, const CollArgs& args) {
  size_t elem_size;
  COLLX_RETURN_IF_ERROR(get_elem_size(args, &elem_size));
  const size_t bytes = args.count * elem_size;
  char* recvbuf = static_cast<char*>(args.recvbuf);
  copy_if_distinct(recvbuf, args.sendbuf, bytes);
  if (ctx.size == 1) return Status::Ok();

  Reducer reducer;
  COLLX_RETURN_IF_ERROR(get_reducer(args, &reducer));
  const int rank = ctx.rank;
  const int pof2 = largest_power_of_two_at_most(ctx.size);
  const int rem = ctx.size - pof2;
  const int rounds = log2_of_power_of_two(pof2);
  const uint64_t unfold_step = 2 * static_cast<uint64_t>(rounds) + 1;
  const BlockLayout blocks(args.count, pof2);
  // The fold receives a whole vector; the first halving round at most half of it.
  const size_t scratch_bytes = rank < 2 * rem ? bytes : (blocks.max_length() * static_cast<size_t>(pof2 / 2)) * elem_size;
  char* incoming = nullptr;
  COLLX_RETURN_IF_ERROR(get_scratch(ctx, kScratchIncoming, scratch_bytes > 0 ? scratch_bytes : 1, &incoming));
  RequestSet requests(ctx, args, 2);
  COLLX_RETURN_IF_ERROR(requests.init_status());

  const int new_rank = fold_new_rank(rank, rem);
  if (rank < 2 * rem) {
    if (new_rank < 0) {
      COLLX_RETURN_IF_ERROR(requests.post_send(1, rank + 1, kFoldStep, recvbuf, bytes));
      COLLX_RETURN_IF_ERROR(requests.wait_all());
    } else {
      COLLX_RETURN_IF_ERROR(requests.post_recv(0, rank - 1, kFoldStep, incoming, bytes));
      COLLX_RETURN_IF_ERROR(requests.wait_all());
      if (args.count > 0) reducer.reduce3(recvbuf, incoming, recvbuf, args.count);  // rank-1 on the left
    }
  }

  if (new_rank >= 0) {
    // Reduce-scatter by recursive halving over the block range [lo, hi).
    int lo = 0, hi = pof2;
    uint64_t step = 1;
    for (int mask = pof2 / 2; mask >= 1; mask >>= 1, ++step) {
      const int partner = new_rank ^ mask;
      const int mid = lo + (hi - lo) / 2;
      const bool keep_lower = new_rank < partner;
      const int keep_lo = keep_lower ? lo : mid, keep_hi = keep_lower ? mid : hi;
      const int give_lo = keep_lower ? mid : lo, give_hi = keep_lower ? hi : mid;
      const size_t keep_offset = blocks.offset(keep_lo), keep_count = blocks.offset(keep_hi) - keep_offset;
      const size_t give_offset = blocks.offset(give_lo), give_count = blocks.offset(give_hi) - give_offset;
      COLLX_RETURN_IF_ERROR(requests.post_recv(0, fold_real_rank(partner, rem), step, incoming, keep_count * elem_size));
      COLLX_RETURN_IF_ERROR(requests.post_send(1, fold_real_rank(partner, rem), step, recvbuf + give_offset * elem_size,
                                               give_count * elem_size));
      COLLX_RETURN_IF_ERROR(requests.wait_all());
      if (keep_count > 0) {
        char* mine = recvbuf + keep_offset * elem_size;
        // The lower new rank's partial result is always the left operand.
        if (keep_lower) {
          reducer.reduce(mine, incoming, keep_count);
        } else {
          reducer.reduce3(mine, incoming, mine, keep_count);
        }
      }
      lo = keep_lo;
      hi = keep_hi;
    }
    // All-gather by recursive doubling: exchange the ranges just built, doubling them.
    for (int mask = 1; mask < pof2; mask <<= 1, ++step) {
      const int partner = new_rank ^ mask;
      const int width = hi - lo;
      const int other_lo = new_rank < partner ? hi : lo - width;
      const int other_hi = other_lo + width;
      const size_t mine_offset = blocks.offset(lo), mine_count = blocks.offset(hi) - mine_offset;
      const size_t other_offset = blocks.offset(other_lo), other_count = blocks.offset(other_hi) - other_offset;
      COLLX_RETURN_IF_ERROR(requests.post_recv(0, fold_real_rank(partner, rem), step, recvbuf + other_offset * elem_size,
                                               other_count * elem_size));
      COLLX_RETURN_IF_ERROR(requests.post_send(1, fold_real_rank(partner, rem), step, recvbuf + mine_offset * elem_size,
                                               mine_count * elem_size));
      COLLX_RETURN_IF_ERROR(requests.wait_all());
      lo = lo < other_lo ? lo : other_lo;
      hi = hi > other_hi ? hi : other_hi;
    }
  }

  if (rank < 2 * rem) {
    if (new_rank < 0) {
      COLLX_RETURN_IF_ERROR(requests.post_recv(0, rank + 1, unfold_step, recvbuf, bytes));
    } else {
      COLLX_RETURN_IF_ERROR(requests.post_send(1, rank - 1, unfold_step, recvbuf, bytes));
    }
    COLLX_RETURN_IF_ERROR(requests.wait_all());
  }
  return Status::Ok();
}

}  // namespace algo
}  // namespace collx
