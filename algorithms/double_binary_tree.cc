// Double binary tree all-reduce, pipelined in chunks (NCCL's double binary tree).
//
// Shape (double_tree_shape.h): two in-order binary trees over positions 1..p whose interior
// nodes are even positions only; tree 0 puts rank r at position r + 1, tree 1 at position
// (r + 1) % p + 1. Interior ranks are odd in tree 0 and even (never p - 1) in tree 1, so no
// rank is interior in both: each rank forwards at most one tree's traffic, and per rank and
// direction about 2n bytes move (n/2 up and n down as an interior node, n/2 as a leaf of the
// other tree) in 2 floor(log2 p) hops of latency instead of the ring's 2(p-1).
//
// Data: the vector is cut in two halves; half t is reduced up tree t to its root and sent
// back down the same tree. Each half is cut into chunks (chunk_plan.h, ctx.chunk_bytes) and
// chunk k of half t uses tag steps 4k + 2t (up) and 4k + 2t + 1 (down), so every message
// of the collective has its own tag.
//
// Reduction order: every rank combines own data, then its smaller-position child, then the
// other child, in that order, into recvbuf (combine() gives the same bits in place and out
// of place); the root's sum is what every rank receives, so all ranks agree bit for bit.
// A non-root rank keeps its partial sum in recvbuf: the final chunk that later lands there
// can only have been sent after the parent received (and so copied) that partial sum.
//
// Schedule: iteration i runs UP(0, i), UP(1, i) (wait for the children's chunk i, reduce,
// send to the parent; the root sends the result straight down) and then DOWN(0, i - L),
// DOWN(1, i - L) (wait for the final chunk from the parent, forward it to the children),
// with L = 2 * depth + 1 so that a chunk has had time to climb and come back before a rank
// waits for it; meanwhile the next chunks are already being reduced. At the start of
// iteration i a rank posts the down receive of chunk i and the up receives of chunk
// i + kUpDepth - 1 (into scratch).
//
// Why it cannot deadlock, even with sends that complete only when matched (rendezvous):
// order operations by (iteration, phase, tree, depth-in-that-direction). An UP waits only
// for the children's UP of the same iteration and tree, which sit deeper (earlier in the
// order); a DOWN waits only for its parent's DOWN (or the root's UP, L iterations before),
// which is shallower. Each rank runs its operations in increasing order. A send slot is
// only waited for (before reuse, or at the end) once the peer has posted the matching
// receive: up receives of chunk k are posted by iteration k, down receives of chunk k at
// the start of iteration k, and every send of chunk k happens in iteration k or later.
// By induction on that order every wait finishes.
#include "algorithms/double_binary_tree.h"

#include <algorithm>

#include "algorithms/chunk_plan.h"
#include "algorithms/local_ops.h"
#include "algorithms/request_set.h"

namespace collx {
namespace algo {
namespace {

constexpr size_t kUpDepth = 4;     // chunks received ahead from each child
constexpr size_t kSendRounds = 4;  // sends in flight per peer before a slot is reused
constexpr int kPhases = 2;         // up, down
constexpr int kTrees = 2;

uint64_t tag_step(size_t chunk, int tree, int phase) {
  return (static_cast<uint64_t>(chunk) * kTrees + static_cast<uint64_t>(tree)) * kPhases +
         static_cast<uint64_t>(phase);
}

class DoubleTree {
 public:
  DoubleTree(const Context& ctx, const CollArgs& args) : ctx_(ctx), args_(args) {}
  Status run();

 private:
  size_t elems(int t, size_t k) const { return plan_.length(half_len_[t], k); }
  size_t byte_offset(int t, size_t k) const { return (half_off_[t] + plan_.begin(k)) * elem_size_; }
  char* incoming(int t, int c, size_t k) const {
    return incoming_ + (static_cast<size_t>(scratch_index_[t][c]) * up_depth_ + k % up_depth_) * stride_;
  }
  // Request slots: up receives [tree][child][up_depth], down receives [tree][down_depth],
  // up sends [tree][kSendRounds], down sends [tree][child][kSendRounds].
  size_t up_recv_slot(int t, int c, size_t k) const { return static_cast<size_t>(t * 2 + c) * up_depth_ + k % up_depth_; }
  size_t down_recv_slot(int t, size_t k) const {
    return 4 * up_depth_ + static_cast<size_t>(t) * down_depth_ + k % down_depth_;
  }
  size_t up_send_slot(int t, size_t k) const {
    return 4 * up_depth_ + 2 * down_depth_ + static_cast<size_t>(t) * kSendRounds + k % kSendRounds;
  }
  size_t down_send_slot(int t, int c, size_t k) const {
    return 4 * up_depth_ + 2 * down_depth_ + 2 * kSendRounds + static_cast<size_t>(t * 2 + c) * kSendRounds +
           k % kSendRounds;
  }
  size_t slot_count() const { return 4 * up_depth_ + 2 * down_depth_ + 6 * kSendRounds; }

  Status post_up_recvs(size_t k);
  Status post_down_recvs(size_t k);
  Status send_down(int t, size_t k);
  Status up(int t, size_t k);
  Status down(int t, size_t k);

  const Context& ctx_;
  const CollArgs& args_;
  const char* sendbuf_ = nullptr;
  char* recvbuf_ = nullptr;
  size_t elem_size_ = 0;
  Reducer reducer_;
  ChunkPlan plan_;
  TreeNode nodes_[kTrees];
  size_t half_off_[kTrees] = {0, 0};
  size_t half_len_[kTrees] = {0, 0};
  int scratch_index_[kTrees][2] = {{0, 0}, {0, 0}};
  size_t up_depth_ = 1;
  size_t down_depth_ = 1;
  size_t lag_ = 0;
  size_t stride_ = 0;
  char* incoming_ = nullptr;
  RequestSet* requests_ = nullptr;
};

Status DoubleTree::post_up_recvs(size_t k) {
  for (int t = 0; t < kTrees; ++t) {
    const size_t n = elems(t, k);
    if (n == 0) continue;  // the child sends nothing either
    for (int c = 0; c < nodes_[t].num_children; ++c) {
      COLLX_RETURN_IF_ERROR(requests_->post_recv(up_recv_slot(t, c, k), nodes_[t].children[c], tag_step(k, t, 0),
                                                 incoming(t, c, k), n * elem_size_));
    }
  }
  return Status::Ok();
}

Status DoubleTree::post_down_recvs(size_t k) {
  for (int t = 0; t < kTrees; ++t) {
    const size_t n = elems(t, k);
    if (n == 0 || nodes_[t].parent < 0) continue;
    COLLX_RETURN_IF_ERROR(requests_->post_recv(down_recv_slot(t, k), nodes_[t].parent, tag_step(k, t, 1),
                                               recvbuf_ + byte_offset(t, k), n * elem_size_));
  }
  return Status::Ok();
}

Status DoubleTree::send_down(int t, size_t k) {
  for (int c = 0; c < nodes_[t].num_children; ++c) {
    const size_t slot = down_send_slot(t, c, k);
    COLLX_RETURN_IF_ERROR(requests_->wait(slot));
    COLLX_RETURN_IF_ERROR(requests_->post_send(slot, nodes_[t].children[c], tag_step(k, t, 1),
                                               recvbuf_ + byte_offset(t, k), elems(t, k) * elem_size_));
  }
  return Status::Ok();
}

Status DoubleTree::up(int t, size_t k) {
  const size_t n = elems(t, k);
  if (n == 0) return Status::Ok();
  const TreeNode& node = nodes_[t];
  const char* result = sendbuf_ + byte_offset(t, k);  // a leaf sends its own data
  if (node.num_children > 0) {
    char* dst = recvbuf_ + byte_offset(t, k);
    for (int c = 0; c < node.num_children; ++c) {
      COLLX_RETURN_IF_ERROR(requests_->wait(up_recv_slot(t, c, k)));
      reducer_.combine(dst, c == 0 ? result : dst, incoming(t, c, k), n);
    }
    result = dst;
  }
  if (node.parent < 0) return send_down(t, k);  // the root's sum is final
  const size_t slot = up_send_slot(t, k);
  COLLX_RETURN_IF_ERROR(requests_->wait(slot));
  return requests_->post_send(slot, node.parent, tag_step(k, t, 0), result, n * elem_size_);
}

Status DoubleTree::down(int t, size_t k) {
  if (elems(t, k) == 0 || nodes_[t].parent < 0) return Status::Ok();
  COLLX_RETURN_IF_ERROR(requests_->wait(down_recv_slot(t, k)));
  return send_down(t, k);
}

Status DoubleTree::run() {
  sendbuf_ = static_cast<const char*>(args_.sendbuf);
  recvbuf_ = static_cast<char*>(args_.recvbuf);
  COLLX_RETURN_IF_ERROR(get_elem_size(args_, &elem_size_));
  if (ctx_.size == 1) {
    copy_if_distinct(recvbuf_, sendbuf_, args_.count * elem_size_);
    return Status::Ok();
  }
  COLLX_RETURN_IF_ERROR(get_reducer(args_, &reducer_));
  half_len_[0] = args_.count - args_.count / 2;
  half_len_[1] = args_.count / 2;
  half_off_[1] = half_len_[0];
  COLLX_RETURN_IF_ERROR(plan_chunks(half_len_[0], elem_size_, ctx_.chunk_bytes, kTrees * kPhases, &plan_));
  if (plan_.chunks == 0) return Status::Ok();

  int children = 0;
  for (int t = 0; t < kTrees; ++t) {
    nodes_[t] = double_tree_node(t, ctx_.rank, ctx_.size);
    for (int c = 0; c < nodes_[t].num_children; ++c) scratch_index_[t][c] = children++;
  }
  // Every rank derives the same lag from (size, count), which the schedule's order needs.
  lag_ = std::min(double_tree_lag(ctx_.size), plan_.chunks);
  up_depth_ = std::min(kUpDepth, plan_.chunks);
  down_depth_ = std::min(lag_ + 1, plan_.chunks);  // chunk k posted at iteration k, waited at k + lag
  stride_ = slot_stride(plan_.chunk_elems, elem_size_);
  if (children > 0) {
    COLLX_RETURN_IF_ERROR(get_scratch(ctx_, kScratchIncoming, static_cast<size_t>(children) * up_depth_ * stride_,
                                      &incoming_));
  }

  RequestSet requests(ctx_, args_, slot_count());
  COLLX_RETURN_IF_ERROR(requests.init_status());
  requests_ = &requests;

  const size_t chunks = plan_.chunks;
  for (size_t k = 0; k + 1 < up_depth_; ++k) COLLX_RETURN_IF_ERROR(post_up_recvs(k));
  for (size_t i = 0; i < chunks + lag_; ++i) {
    if (i < chunks) {
      COLLX_RETURN_IF_ERROR(post_down_recvs(i));
      if (i + up_depth_ - 1 < chunks) COLLX_RETURN_IF_ERROR(post_up_recvs(i + up_depth_ - 1));
      for (int t = 0; t < kTrees; ++t) COLLX_RETURN_IF_ERROR(up(t, i));
    }
    if (i >= lag_) {
      for (int t = 0; t < kTrees; ++t) COLLX_RETURN_IF_ERROR(down(t, i - lag_));
    }
  }
  return requests.wait_all();
}

}  // namespace

Status allreduce_double_tree(const Context& ctx, const CollArgs& args) {
  if (args.count == 0) return Status::Ok();
  DoubleTree tree(ctx, args);
  return tree.run();
}

}  // namespace algo
}  // namespace collx
