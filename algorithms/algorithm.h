// Algorithms: schedules of sends, receives and reductions over the transport interface
// only. Each function runs one collective to completion on the calling thread.
//
// Shared conventions:
//  - args.count is the count of the collective as the user called it (per-rank count for
//    reduce-scatter, all-gather, gather and scatter, per-peer count for all-to-all).
//  - args.op is SUM, PROD, MIN or MAX: the core turns AVG and PREMUL_SUM into SUM plus a
//    scale before calling an algorithm.
//  - In-place layouts are those of the public API (collx.h); out-of-place buffers do not
//    overlap. sendbuf is never written.
//  - Every message uses transport::coll_tag(args.desc.seq, step) with steps unique within
//    the collective, and carries args.desc.
//  - On any error, every request still pending is cancelled before returning, so no
//    transport touches the caller's buffers afterwards.
//  - World size 1, count 0 and any world size (primes, non-powers of two) work.
#pragma once

#include <cstddef>

#include "collx/collx.h"
#include "lib/common/deadline.h"
#include "lib/common/scratch.h"
#include "lib/common/status.h"
#include "transports/transport.h"

namespace collx {
namespace algo {

struct Context {
  transport::Transport* transport = nullptr;
  int rank = 0;
  int size = 1;
  size_t chunk_bytes = 512 * 1024;  // pipeline chunk (COLLX_CHUNK_SIZE)
  ScratchPool* scratch = nullptr;   // reusable temporary buffers of the communicator
  // When set, `rank` is a position in a reordered ring (ranks grouped by host, so a ring
  // crosses each host boundary once) and rank_at[v] is the transport rank at position v.
  // Only for collectives whose result does not depend on rank order (all-reduce, barrier).
  const int* rank_at = nullptr;
};

struct CollArgs {
  const void* sendbuf = nullptr;
  void* recvbuf = nullptr;
  size_t count = 0;
  collx_datatype_t datatype = COLLX_FLOAT32;
  collx_op_t op = COLLX_SUM;
  int root = 0;
  // v-collectives, one entry per rank. All-gatherv, reduce-scatterv (count is then the
  // total of counts): rank r's block has counts[r] elements at element offset displs[r] of
  // recvbuf (all-gatherv) or sendbuf (reduce-scatterv, packed). All-to-allv: the block from
  // rank r lands at displs[r] of recvbuf (counts[r] elements) and the block for rank r is
  // send_counts[r] elements at send_displs[r] of sendbuf. Gatherv and scatterv (count is
  // this rank's own block): on the root, rank r's block of the root's buffer (recvbuf of
  // gatherv, sendbuf of scatterv); null on the other ranks.
  const size_t* counts = nullptr;
  const size_t* displs = nullptr;
  const size_t* send_counts = nullptr;
  const size_t* send_displs = nullptr;
  transport::OpDesc desc;
  Deadline deadline = Deadline::never();
};

Status allreduce_ring(const Context& ctx, const CollArgs& args);
Status allreduce_recursive_doubling(const Context& ctx, const CollArgs& args);
// Rabenseifner: recursive-halving reduce-scatter then recursive-doubling all-gather
// (2 log2 p steps instead of ring's 2(p-1)); non-powers of two fold the extra ranks first.
Status allreduce_rabenseifner(const Context& ctx, const CollArgs& args);
// Double binary tree (NCCL's): each half of the vector reduced up and broadcast down one of
// two binary trees in which no rank is interior twice, pipelined in chunks.
Status allreduce_double_tree(const Context& ctx, const CollArgs& args);
// Shared memory (shm transport only, algorithms/shared_memory.cc): every rank reads its
// peers' data in their boards instead of receiving messages; COLLX_ERR_INVALID_ARG on a
// transport without shared boards.
// All-reduces up to this size take the one-meeting shape (every rank reduces the whole
// vector from every board); beyond it, reading p whole vectors costs more than a meeting.
constexpr size_t kSharedMemorySmallAllreduceBytes = 8u << 10;
// From this many bytes per peer (slice of an all-reduce, block of a reduce-scatter or
// all-gather), and where the transport can read peers' memory in place, ranks read each
// other's user buffers with one copy instead of copying through the boards.
constexpr size_t kSharedMemoryDirectReadBytes = 64u << 10;
// Pieces in which peers' data is read and reduced (stays in cache between the two).
constexpr size_t kSharedMemoryPieceBytes = 256u << 10;
Status allreduce_shared_memory(const Context& ctx, const CollArgs& args);
Status reduce_scatter_shared_memory(const Context& ctx, const CollArgs& args);
Status allgather_shared_memory(const Context& ctx, const CollArgs& args);
Status reduce_scatter_ring(const Context& ctx, const CollArgs& args);
Status allgather_ring(const Context& ctx, const CollArgs& args);
Status broadcast_binomial(const Context& ctx, const CollArgs& args);
Status reduce_binomial(const Context& ctx, const CollArgs& args);
Status alltoall_pairwise(const Context& ctx, const CollArgs& args);
// Gather and scatter (algorithms/rooted_direct.cc): the root exchanges one block with every
// other rank directly, a few messages in flight at once; the others send or receive one.
Status gather_direct(const Context& ctx, const CollArgs& args);
Status scatter_direct(const Context& ctx, const CollArgs& args);
// Gatherv and scatterv: the same with blocks placed by args.counts and args.displs on the root.
Status gatherv_direct(const Context& ctx, const CollArgs& args);
Status scatterv_direct(const Context& ctx, const CollArgs& args);
// All-gatherv (algorithms/pairwise.cc): at step s rank r sends its block to r+s and receives
// the block of r-s, the schedule of the pairwise all-to-all.
Status allgatherv_pairwise(const Context& ctx, const CollArgs& args);
// All-to-allv (algorithms/pairwise.cc): the all-to-all's schedule with one block per peer of
// its own size; every pair exchanges one message, empty blocks included, so a receiver whose
// count differs from its sender's fails with a mismatch.
Status alltoallv_pairwise(const Context& ctx, const CollArgs& args);
// Reduce-scatterv (algorithms/pairwise.cc): at step s rank r sends block r+s of its input to
// rank r+s and receives rank r-s's contribution to block r, reduced into recvbuf as it
// arrives (a few steps in flight, each through a scratch slot of one block).
Status reduce_scatterv_pairwise(const Context& ctx, const CollArgs& args);
Status barrier_dissemination(const Context& ctx, const CollArgs& args);

}  // namespace algo
}  // namespace collx
