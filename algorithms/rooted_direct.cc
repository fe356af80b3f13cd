// Gather and scatter (and their v forms), direct: the root exchanges one block with every other rank and the
// others exchange one block with the root. Every byte crosses the network once, which is
// all a rooted data movement can do (a tree would only relay the same bytes through
// intermediate ranks); the root keeps a few peers in flight at once so their transfers
// overlap, but not all of them, so p - 1 simultaneous arrivals do not flood it.
//
// In both, every other rank sends the root one message first (its block when gathering, an
// empty one when scattering), at the same step: the root compares each one's OpDesc with its
// own, so a rank that called scatter (or another count, datatype or algorithm) where the
// root called gather fails with a mismatch instead of both sides waiting to receive.
#include <algorithm>

#include "algorithms/algorithm.h"
#include "algorithms/local_ops.h"
#include "algorithms/request_set.h"
#include "algorithms/ring_pattern.h"

namespace collx {
namespace algo {
namespace {

constexpr int kPeersInFlight = 8;
// One message each way per (peer, collective); the peer tells them apart.
constexpr uint64_t kToRootStep = 0;
constexpr uint64_t kFromRootStep = 1;

enum class Direction { kToRoot, kFromRoot };

// Where rank r's block sits in the root's buffer, in elements: block r of `count` elements
// (gather, scatter) or counts[r] elements at displs[r] (gatherv, scatterv).
struct RootedLayout {
  size_t count;
  const size_t* counts;
  const size_t* displs;
  size_t offset(int r) const { return counts ? displs[r] : static_cast<size_t>(r) * count; }
  size_t length(int r) const { return counts ? counts[r] : count; }
};

// `rooted_buf` is the root's buffer of every block (recvbuf of a gather, sendbuf of a
// scatter); `own_buf` is each rank's block of args.count elements (sendbuf of a gather,
// recvbuf of a scatter). The v forms run even when this rank's block is empty: other ranks'
// blocks are not, and every rank must still exchange its one message with the root.
Status exchange_with_root(const Context& ctx, const CollArgs& args, Direction direction, bool v) {
  if (!v && args.count == 0) return Status::Ok();
  size_t elem_size;
  COLLX_RETURN_IF_ERROR(get_elem_size(args, &elem_size));
  const size_t block_bytes = args.count * elem_size;
  const RootedLayout layout{args.count, v ? args.counts : nullptr, v ? args.displs : nullptr};
  if (v && ctx.rank == args.root && (args.counts == nullptr || args.displs == nullptr)) {
    return make_status(COLLX_ERR_INTERNAL, "gatherv/scatterv root without its counts and displacements");
  }
  const bool to_root = direction == Direction::kToRoot;
  char* rooted_buf = to_root ? static_cast<char*>(args.recvbuf)
                             : static_cast<char*>(const_cast<void*>(args.sendbuf));  // read only when scattering
  void* own_buf = to_root ? const_cast<void*>(args.sendbuf) : args.recvbuf;

  if (ctx.rank != args.root) {
    RequestSet requests(ctx, args, 2);
    COLLX_RETURN_IF_ERROR(requests.init_status());
    if (!to_root) COLLX_RETURN_IF_ERROR(requests.post_recv(1, args.root, kFromRootStep, own_buf, block_bytes));
    COLLX_RETURN_IF_ERROR(requests.post_send(0, args.root, kToRootStep, to_root ? own_buf : nullptr,
                                             to_root ? block_bytes : 0));
    return requests.wait_all();
  }

  // The root's own block: a local copy, none in place.
  char* own_block = rooted_buf + layout.offset(args.root) * elem_size;  // length(root) == count (validated)
  if (to_root) {
    copy_if_distinct(own_block, own_buf, block_bytes);
  } else {
    copy_if_distinct(own_buf, own_block, block_bytes);
  }
  if (ctx.size == 1) return Status::Ok();

  // Peers in the order root+1, root+2, ...: with several roots in turn, no rank is every
  // root's first peer.
  // Two slots per peer in flight: its message to the root, and the block sent to it.
  const int in_flight = std::min(kPeersInFlight, ctx.size - 1);
  RequestSet requests(ctx, args, 2 * static_cast<size_t>(in_flight));
  COLLX_RETURN_IF_ERROR(requests.init_status());
  for (int step = 1; step < ctx.size; ++step) {
    const size_t slot = 2 * static_cast<size_t>((step - 1) % in_flight);
    // The peer of step - in_flight must be done with these slots.
    COLLX_RETURN_IF_ERROR(requests.wait(slot));
    COLLX_RETURN_IF_ERROR(requests.wait(slot + 1));
    const int peer = ring_mod(int64_t{args.root} + step, ctx.size);
    char* block = rooted_buf + layout.offset(peer) * elem_size;
    const size_t bytes = layout.length(peer) * elem_size;
    COLLX_RETURN_IF_ERROR(requests.post_recv(slot, peer, kToRootStep, to_root ? block : nullptr, to_root ? bytes : 0));
    if (!to_root) COLLX_RETURN_IF_ERROR(requests.post_send(slot + 1, peer, kFromRootStep, block, bytes));
  }
  return requests.wait_all();
}

}  // namespace

Status gather_direct(const Context& ctx, const CollArgs& args) {
  return exchange_with_root(ctx, args, Direction::kToRoot, /*v=*/false);
}

Status scatter_direct(const Context& ctx, const CollArgs& args) {
  return exchange_with_root(ctx, args, Direction::kFromRoot, /*v=*/false);
}

Status gatherv_direct(const Context& ctx, const CollArgs& args) {
  return exchange_with_root(ctx, args, Direction::kToRoot, /*v=*/true);
}

Status scatterv_direct(const Context& ctx, const CollArgs& args) {
  return exchange_with_root(ctx, args, Direction::kFromRoot, /*v=*/true);
}

}  // namespace algo
}  // namespace collx
