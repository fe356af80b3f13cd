// Binomial-tree reduce, pipelined by chunks: for chunk k a rank reduces its own data with
// chunk k of each child's subtree result and sends the sum to its parent at once, while the
// children's next chunks are already arriving into scratch. Only the root writes recvbuf
// (elsewhere it may be NULL); inner ranks keep partial sums in scratch until sent.
//
// Children are combined in ascending vrank order, each child's subtree being the vrank
// range right after what has been combined so far, so every element is reduced in the
// same (rotated rank) order whatever the timing.
#include <algorithm>

#include "algorithms/algorithm.h"
#include "algorithms/binomial_tree.h"
#include "algorithms/chunk_plan.h"
#include "algorithms/local_ops.h"
#include "algorithms/request_set.h"

namespace collx {
namespace algo {
namespace {
constexpr size_t kRecvDepth = 4;  // chunks received ahead from each child
}  // namespace

Status reduce_binomial(const Context& ctx, const CollArgs& args) {
  if (args.count == 0) return Status::Ok();
  size_t elem_size;
  COLLX_RETURN_IF_ERROR(get_elem_size(args, &elem_size));
  const bool is_root = ctx.rank == args.root;
  const char* sendbuf = static_cast<const char*>(args.sendbuf);
  char* recvbuf = static_cast<char*>(args.recvbuf);
  if (ctx.size == 1) {
    copy_if_distinct(recvbuf, sendbuf, args.count * elem_size);
    return Status::Ok();
  }
  Reducer reducer;
  COLLX_RETURN_IF_ERROR(get_reducer(args, &reducer));

  const BinomialTree tree = BinomialTree::build(ctx.rank, ctx.size, args.root);
  ChunkPlan plan;
  COLLX_RETURN_IF_ERROR(plan_chunks(args.count, elem_size, ctx.chunk_bytes, 1, &plan));
  const size_t depth = std::min(kRecvDepth, plan.chunks);
  const size_t children = static_cast<size_t>(tree.num_children);
  // Sends to the parent may lag 2*depth chunks before a slot (and its partial sum buffer)
  // is waited for; the parent has posted those receives long ago.
  const size_t send_slots = is_root ? 0 : std::min(plan.chunks, 2 * depth);
  const size_t stride = slot_stride(plan.chunk_elems, elem_size);

  char* incoming = nullptr;
  char* partial = nullptr;
  if (children > 0) {
    COLLX_RETURN_IF_ERROR(get_scratch(ctx, kScratchIncoming, children * depth * stride, &incoming));
    if (!is_root) COLLX_RETURN_IF_ERROR(get_scratch(ctx, kScratchPartial, send_slots * stride, &partial));
  }
  RequestSet requests(ctx, args, children * depth + send_slots);
  COLLX_RETURN_IF_ERROR(requests.init_status());

  // Receive slot of (chunk, i), where i counts children in combine order (smallest first).
  auto recv_slot = [&](size_t chunk, size_t i) { return (chunk % depth) * children + i; };
  auto post_recv = [&](size_t chunk, size_t i) {
    const size_t slot = recv_slot(chunk, i);
    return requests.post_recv(slot, tree.children[children - 1 - i], chunk, incoming + slot * stride,
                              plan.length(args.count, chunk) * elem_size);
  };
  for (size_t k = 0; k < depth; ++k) {
    for (size_t i = 0; i < children; ++i) COLLX_RETURN_IF_ERROR(post_recv(k, i));
  }

  for (size_t k = 0; k < plan.chunks; ++k) {
    const size_t elems = plan.length(args.count, k);
    const char* mine = sendbuf + plan.begin(k) * elem_size;
    size_t send_slot = 0;
    if (!is_root) {
      send_slot = children * depth + k % send_slots;
      COLLX_RETURN_IF_ERROR(requests.wait(send_slot));  // frees its partial sum buffer too
    }
    const char* result = mine;  // a leaf sends its own data
    if (children > 0) {
      char* dst = is_root ? recvbuf + plan.begin(k) * elem_size : partial + (k % send_slots) * stride;
      for (size_t i = 0; i < children; ++i) {
        COLLX_RETURN_IF_ERROR(requests.wait(recv_slot(k, i)));
        reducer.combine(dst, i == 0 ? mine : dst, incoming + recv_slot(k, i) * stride, elems);
        if (k + depth < plan.chunks) COLLX_RETURN_IF_ERROR(post_recv(k + depth, i));
      }
      result = dst;
    }
    if (!is_root) {
      COLLX_RETURN_IF_ERROR(requests.post_send(send_slot, tree.parent, k, result, elems * elem_size));
    }
  }
  return requests.wait_all();
}

}  // namespace algo
}  // namespace collx
