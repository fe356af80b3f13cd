// Binomial-tree broadcast, pipelined by chunks: a rank forwards chunk k to its children as
// soon as it arrives, while chunks k+1.. are still arriving from its parent, so a large
// message streams down the tree instead of waiting at each level for the whole vector.
#include <algorithm>

#include "algorithms/algorithm.h"
#include "algorithms/binomial_tree.h"
#include "algorithms/chunk_plan.h"
#include "algorithms/local_ops.h"
#include "algorithms/request_set.h"

namespace collx {
namespace algo {
namespace {
constexpr size_t kRecvDepth = 4;  // chunks received ahead of the one being forwarded
}  // namespace

Status broadcast_binomial(const Context& ctx, const CollArgs& args) {
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

  const BinomialTree tree = BinomialTree::build(ctx.rank, ctx.size, args.root);
  ChunkPlan plan;
  COLLX_RETURN_IF_ERROR(plan_chunks(args.count, elem_size, ctx.chunk_bytes, 1, &plan));
  const size_t depth = std::min(kRecvDepth, plan.chunks);
  // Sends to each child may lag up to 2*depth chunks behind before a slot is waited for;
  // the child has long posted those receives, so the wait cannot deadlock.
  const size_t send_rounds = std::min(plan.chunks, 2 * depth);
  const size_t children = static_cast<size_t>(tree.num_children);
  RequestSet requests(ctx, args, depth + send_rounds * children);
  COLLX_RETURN_IF_ERROR(requests.init_status());

  // The root sends from sendbuf; every other rank forwards from where the data landed.
  const char* source = is_root ? sendbuf : recvbuf;
  auto post_recv = [&](size_t chunk) {
    return requests.post_recv(chunk % depth, tree.parent, chunk, recvbuf + plan.begin(chunk) * elem_size,
                              plan.length(args.count, chunk) * elem_size);
  };
  if (!is_root) {
    for (size_t k = 0; k < depth; ++k) COLLX_RETURN_IF_ERROR(post_recv(k));
  }
  for (size_t k = 0; k < plan.chunks; ++k) {
    if (!is_root) {
      COLLX_RETURN_IF_ERROR(requests.wait(k % depth));
      if (k + depth < plan.chunks) COLLX_RETURN_IF_ERROR(post_recv(k + depth));
    }
    const size_t bytes = plan.length(args.count, k) * elem_size;
    for (size_t child = 0; child < children; ++child) {
      const size_t slot = depth + (k % send_rounds) * children + child;
      COLLX_RETURN_IF_ERROR(requests.wait(slot));
      COLLX_RETURN_IF_ERROR(requests.post_send(slot, tree.children[child], k,
                                               source + plan.begin(k) * elem_size, bytes));
    }
  }
  if (is_root) copy_if_distinct(recvbuf, sendbuf, args.count * elem_size);  // while sends drain
  return requests.wait_all();
}

}  // namespace algo
}  // namespace collx
