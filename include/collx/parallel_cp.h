/* collx parallel layer: context parallelism — the ring exchange of K/V blocks that ring
 * attention computes over (each rank holds one slice of the sequence; its queries meet
 * every rank's keys and values, one block at a time, while the next block travels).
 * Included by collx/parallel.h; do not include directly. Guide: docs/parallel-cp.md.
 *
 * The loop on every rank of cp_comm (cp_comm = collx_grid_comm(grid, COLLX_AXIS_CP)):
 *
 *   collx_cp_ring_t ring;
 *   collx_cp_ring_start(cp_comm, my_kv, work, count, COLLX_FLOAT32, tag, timeout_ms, &ring);
 *   const void* kv; int32_t src;
 *   while (collx_cp_ring_next(ring, &kv, &src) == COLLX_OK && kv)
 *     attend(q, kv, src);          // the block after kv is in flight meanwhile
 *   collx_cp_ring_finish(ring);    // check its status too
 *
 * Errors: the status, and the message in collx_last_error(NULL) (this thread). */
#ifndef COLLX_PARALLEL_CP_H_
#define COLLX_PARALLEL_CP_H_

#ifdef __cplusplus
extern "C" {
#endif

/* A rotation of blocks around a communicator: rank r sends to r+1 and receives from r-1
 * (modulo the size), so after size-1 transfers every rank has seen every block. */
typedef struct collx_cp_ring_s* collx_cp_ring_t;

/* Start a rotation on cp_comm. Collective in effect: every rank of cp_comm starts one with
 * the same count, datatype and tag (a different count: COLLX_ERR_MISMATCH on the receiver).
 *  block: this rank's block, `count` > 0 elements (K and V packed in one buffer as the caller
 *         likes). Only read. Owned by the caller; it must stay valid and unchanged until
 *         the second collx_cp_ring_next (or collx_cp_ring_finish) returns: it is being sent.
 *  work:  2 * count elements owned by the caller (the double buffer: one half holds the
 *         block being used while the other receives the next). It must not overlap block,
 *         and must stay valid until collx_cp_ring_finish returns (after a failure, until
 *         the transfers still running end or cp_comm is destroyed). May be NULL when
 *         cp_comm has one rank.
 *  tag:   >= 0; the rotation's point-to-point messages use it: keep it apart from other
 *         point to point on cp_comm while the ring runs.
 *  timeout_ms: the limit of each wait inside the calls below (< 0: the communicator's own
 *         deadlines); a wait that runs out gives COLLX_ERR_TIMEOUT naming the transfer.
 * Posts the first send (block to r+1) and receive (from r-1 into work) and returns.
 * *ring is NULL on failure (COLLX_ERR_INVALID_ARG naming the argument). */
COLLX_API collx_status_t collx_cp_ring_start(collx_comm_t cp_comm, const void* block, void* work, size_t count,
                                             collx_datatype_t datatype, int32_t tag, int64_t timeout_ms,
                                             collx_cp_ring_t* ring);

/* The next block: call i (from 0) gives the block of rank (r - i) mod size in *block and
 * that rank in *source; call 0 gives the caller's own block. Before returning block i > 0
 * it waits for transfer i-1 (deadline), then posts transfer i (block i to r+1, block i+1
 * from r-1 into the other half of work) unless i is the last; so while the caller computes
 * on *block, the following block is on its way. *block is read-only and valid until the
 * next call on the ring. After all `size` blocks: *block = NULL, *source = -1, COLLX_OK.
 * After a failure the ring only answers COLLX_ERR_INVALID_USAGE; finish it. */
COLLX_API collx_status_t collx_cp_ring_next(collx_cp_ring_t ring, const void** block, int32_t* source);

/* Never blocks: *arrived = 1 when the transfer in flight has completed (the following block
 * is in work and the current one has left), so the next collx_cp_ring_next will not wait;
 * 1 also when nothing is in flight. Testing also progresses the transfer: on transports
 * that move data only while a thread is inside collx, call it between pieces of compute to
 * get the overlap. A failed transfer returns its error (the ring is then broken). */
COLLX_API collx_status_t collx_cp_ring_test(collx_cp_ring_t ring, int* arrived);

/* End the rotation and release the ring (always, even when it returns an error). Blocks not
 * taken yet are still passed on, because the neighbours wait for them: finishing early
 * costs the remaining transfers but no hang. Returns the first error of the ring, or of
 * those last transfers. NULL is ignored. */
COLLX_API collx_status_t collx_cp_ring_finish(collx_cp_ring_t ring);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* COLLX_PARALLEL_CP_H_ */
