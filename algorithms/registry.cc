#include "algorithms/registry.h"

namespace collx {
namespace algo {

namespace {

const AlgorithmInfo kAlgorithms[COLLX_NUM_ALGORITHMS] = {
    {COLLX_ALGO_AUTO, "auto", "the library chooses by collective and size (COLLX_ALGO rules, then the cost model)",
     kNeedsNothing},
    {COLLX_ALGO_RING, "ring", "ring reduce-scatter and/or all-gather, pipelined in chunks (large messages)",
     kNeedsNothing},
    {COLLX_ALGO_RECURSIVE_DOUBLING, "recursive_doubling",
     "log2 p exchanges of the whole vector (small messages)", kNeedsNothing},
    {COLLX_ALGO_BINOMIAL, "binomial", "binomial tree from or to the root", kNeedsNothing},
    {COLLX_ALGO_PAIRWISE, "pairwise", "at step s rank r sends to r+s and receives from r-s", kNeedsNothing},
    {COLLX_ALGO_DISSEMINATION, "dissemination", "ceil(log2 p) rounds of empty messages", kNeedsNothing},
    {COLLX_ALGO_DIRECT, "direct", "the root (or the peer) exchanges with every rank directly", kNeedsNothing},
    {COLLX_ALGO_RABENSEIFNER, "rabenseifner", "recursive halving then recursive doubling (large messages)",
     kNeedsNothing},
    {COLLX_ALGO_DOUBLE_TREE, "double_tree", "two pipelined binary trees (NCCL's double binary tree)",
     kNeedsNothing},
    {COLLX_ALGO_SHARED_MEMORY, "shared_memory", "every rank reads its peers' data in shared memory",
     kNeedsSharedBoards},
    {COLLX_ALGO_HIERARCHICAL, "hierarchical", "within each host, across hosts, within each host",
     kNeedsSeveralHosts},
};

// Grouped by algorithm in enum order; auto_order ranks a collective's automatic candidates.
// Columns: algorithm, collective, schedule, auto_order, fixed_order_bytes, on_ring_positions.
// Fixed order: recursive doubling combines whole vectors at every step; the shared-memory
// all-reduce reduces the whole vector from every board in rank order up to its small size,
// and per-rank slices (each started from its owner's data) above it.
const Implementation kImplementations[] = {
    {COLLX_ALGO_RING, COLLX_COLL_ALLREDUCE, allreduce_ring, 1, kNotFixedOrder, true},
    {COLLX_ALGO_RING, COLLX_COLL_REDUCE_SCATTER, reduce_scatter_ring, 0, kNotFixedOrder, false},
    {COLLX_ALGO_RING, COLLX_COLL_ALLGATHER, allgather_ring, 0, kNotFixedOrder, false},
    {COLLX_ALGO_RECURSIVE_DOUBLING, COLLX_COLL_ALLREDUCE, allreduce_recursive_doubling, 0, kFixedOrderAnySize, true},
    {COLLX_ALGO_BINOMIAL, COLLX_COLL_BROADCAST, broadcast_binomial, 0, kNotFixedOrder, false},
    {COLLX_ALGO_BINOMIAL, COLLX_COLL_REDUCE, reduce_binomial, 0, kNotFixedOrder, false},
    {COLLX_ALGO_PAIRWISE, COLLX_COLL_ALLTOALL, alltoall_pairwise, 0, kNotFixedOrder, false},
    {COLLX_ALGO_PAIRWISE, COLLX_COLL_ALLGATHERV, allgatherv_pairwise, 0, kNotFixedOrder, false},
    {COLLX_ALGO_PAIRWISE, COLLX_COLL_ALLTOALLV, alltoallv_pairwise, 0, kNotFixedOrder, false},
    {COLLX_ALGO_PAIRWISE, COLLX_COLL_REDUCE_SCATTERV, reduce_scatterv_pairwise, 0, kNotFixedOrder, false},
    {COLLX_ALGO_DISSEMINATION, COLLX_COLL_BARRIER, barrier_dissemination, 0, kNotFixedOrder, false},
    {COLLX_ALGO_DIRECT, COLLX_COLL_SEND, nullptr, 0, kNotFixedOrder, false},
    {COLLX_ALGO_DIRECT, COLLX_COLL_RECV, nullptr, 0, kNotFixedOrder, false},
    {COLLX_ALGO_DIRECT, COLLX_COLL_GATHER, gather_direct, 0, kNotFixedOrder, false},
    {COLLX_ALGO_DIRECT, COLLX_COLL_SCATTER, scatter_direct, 0, kNotFixedOrder, false},
    {COLLX_ALGO_DIRECT, COLLX_COLL_GATHERV, gatherv_direct, 0, kNotFixedOrder, false},
    {COLLX_ALGO_DIRECT, COLLX_COLL_SCATTERV, scatterv_direct, 0, kNotFixedOrder, false},
    {COLLX_ALGO_RABENSEIFNER, COLLX_COLL_ALLREDUCE, allreduce_rabenseifner, 2, kNotFixedOrder, true},
    {COLLX_ALGO_DOUBLE_TREE, COLLX_COLL_ALLREDUCE, allreduce_double_tree, -1, kNotFixedOrder, true},
    {COLLX_ALGO_SHARED_MEMORY, COLLX_COLL_ALLREDUCE, allreduce_shared_memory, -1, kSharedMemorySmallAllreduceBytes, false},
    {COLLX_ALGO_SHARED_MEMORY, COLLX_COLL_REDUCE_SCATTER, reduce_scatter_shared_memory, -1, kNotFixedOrder, false},
    {COLLX_ALGO_SHARED_MEMORY, COLLX_COLL_ALLGATHER, allgather_shared_memory, -1, kNotFixedOrder, false},
    {COLLX_ALGO_HIERARCHICAL, COLLX_COLL_ALLREDUCE, nullptr, -1, kNotFixedOrder, true},
};

constexpr size_t kImplementationCount = sizeof kImplementations / sizeof kImplementations[0];

}  // namespace

const AlgorithmInfo* algorithms() { return kAlgorithms; }

const AlgorithmInfo* algorithm_info(int algorithm) {
  return algorithm >= 0 && algorithm < COLLX_NUM_ALGORITHMS ? &kAlgorithms[algorithm] : nullptr;
}

const Implementation* implementations(size_t* count) {
  *count = kImplementationCount;
  return kImplementations;
}

const Implementation* find_implementation(int algorithm, int coll) {
  for (const Implementation& entry : kImplementations) {
    if (entry.algorithm == algorithm && entry.coll == coll) return &entry;
  }
  return nullptr;
}

}  // namespace algo
}  // namespace collx
