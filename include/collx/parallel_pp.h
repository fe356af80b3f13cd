/* collx parallel layer: pipeline parallelism — the batched neighbour exchange, the
 * 1F1B (one-forward-one-backward) schedule of Megatron-Core, and its interleaved form
 * with virtual pipeline stages (model chunks; see collx_pp_schedule_interleaved).
 * Included by collx/parallel.h; do not include directly.
 *
 * Running a schedule on stage r of p (pp_comm = collx_grid_comm(grid, COLLX_AXIS_PP)):
 *   before FORWARD(m): receive its input activation from stage r-1 (r > 0);
 *   after  FORWARD(m): send its output activation to stage r+1 (r < p-1);
 *   before BACKWARD(m): receive the output gradient from stage r+1 (r < p-1);
 *   after  BACKWARD(m): send the input gradient to stage r-1 (r > 0).
 * Post the "after" transfers of one action together with the "before" transfers of the
 * next in ONE collx_pp_exchange (Megatron's send_forward_recv_backward and
 * send_backward_recv_forward): posted one by one, two neighbours that both send first
 * can wait for each other forever. Errors: collx_last_error(NULL). */
#ifndef COLLX_PARALLEL_PP_H_
#define COLLX_PARALLEL_PP_H_

#ifdef __cplusplus
extern "C" {
#endif

/* Post up to four transfers of `count` elements with the neighbours in pp_comm and wait
 * for all of them: send_next to rank+1, recv_prev from rank-1, send_prev to rank-1,
 * recv_next from rank+1. NULL skips an entry; an entry toward a neighbour that does not
 * exist (rank 0 has no prev, the last rank no next) must be NULL (COLLX_ERR_INVALID_ARG).
 * tag >= 0 tells independent pipelines apart. Ends by timeout_ms (< 0: the
 * communicator's own deadlines): COLLX_ERR_TIMEOUT naming the transfer still pending.
 * The transfers still pending then go on in the background (their handles are released,
 * as by collx_request_free): their buffers must stay valid until they complete or pp_comm
 * is destroyed. Point to point with the neighbours; buffers are the caller's. */
COLLX_API collx_status_t collx_pp_exchange(const void* send_next, void* recv_prev, const void* send_prev,
                                           void* recv_next, size_t count, collx_datatype_t datatype, int32_t tag,
                                           collx_comm_t pp_comm, int64_t timeout_ms);

typedef enum collx_pp_kind {
  COLLX_PP_FORWARD = 0,
  COLLX_PP_BACKWARD = 1,
  COLLX_PP_EXCHANGE_ONLY = 2 /* collx_pp_step_t only: the step's exchange, no compute */
} collx_pp_kind_t;

typedef struct collx_pp_action {
  int32_t kind;          /* collx_pp_kind_t */
  int32_t microbatch;    /* 0 .. microbatches-1 */
  int32_t last_backward; /* 1 on the stage's final backward: turn DP gradient sync on
                            (collx_dp_set_sync(dp, 1)) before it, off before the others */
} collx_pp_action_t;

/* The 1F1B actions of stage pp_rank: warmup = min(pp_size - pp_rank - 1, microbatches)
 * forwards, then pairs of one forward and one backward, then the remaining backwards.
 * 2 * microbatches actions; written to `actions` when cap allows, *n set always. Pure,
 * identical on every call. */
COLLX_API collx_status_t collx_pp_schedule_1f1b(int32_t pp_size, int32_t pp_rank, int32_t microbatches,
                                                collx_pp_action_t* actions, size_t cap, size_t* n);

/* ---------------------------------------------------------------------------------------
 * Interleaved 1F1B (Megatron-Core forward_backward_pipelining_with_interleaving)
 *
 * Each stage holds `virtual_stages` (v) model chunks; chunk c of stage r is virtual stage
 * c * pp_size + r of the model, so activations run stage 0..pp-1 through chunk 0, then
 * from the last stage's chunk c to the first stage's chunk c + 1, and so on: the pipeline
 * is a ring (collx_pp_exchange_ring). Gradients run the other way.
 * ------------------------------------------------------------------------------------- */

/* One tensor of a transfer: the activation or gradient of (microbatch, chunk) on THIS
 * stage. microbatch < 0: no transfer (chunk is then -1 too). */
typedef struct collx_pp_ref {
  int32_t microbatch;
  int32_t chunk;
} collx_pp_ref_t;

/* One step of an interleaved schedule: first ONE collx_pp_exchange_ring with the four
 * transfers below (skip it when all four are empty), then the compute.
 *   send_next: the OUTPUT activation of (microbatch, chunk), to the next stage;
 *   recv_prev: the INPUT activation of (microbatch, chunk), from the previous stage;
 *   send_prev: the INPUT gradient of (microbatch, chunk), to the previous stage;
 *   recv_next: the OUTPUT gradient of (microbatch, chunk), from the next stage.
 * A transfer may concern another micro-batch or chunk than the step's compute: as in
 * Megatron, an exchange carries what the last computes produced and receives what a later
 * compute needs, which the engine keeps until then (keyed by microbatch and chunk). */
typedef struct collx_pp_step {
  int32_t kind;          /* collx_pp_kind_t; COLLX_PP_EXCHANGE_ONLY: no compute */
  int32_t microbatch;    /* 0 .. microbatches-1 (-1 for EXCHANGE_ONLY) */
  int32_t chunk;         /* model chunk on this stage, 0 .. virtual_stages-1 (-1 likewise) */
  int32_t last_backward; /* 1 on the final backward of this CHUNK (micro-batch
                            microbatches-1): turn DP gradient sync of the chunk's gradients on
                            before it (Megatron's per-chunk enable_grad_sync) */
  collx_pp_ref_t send_next;
  collx_pp_ref_t recv_prev;
  collx_pp_ref_t send_prev;
  collx_pp_ref_t recv_next;
} collx_pp_step_t;

/* The interleaved 1F1B steps of stage pp_rank, as Megatron runs them:
 *   total = microbatches * virtual_stages forwards (and as many backwards); forward k runs
 *   chunk (k mod (pp_size * v)) / pp_size on micro-batch (k / (pp_size * v)) * pp_size +
 *   k mod pp_size; backward k runs chunk v - 1 - that, on the same micro-batch;
 *   warmup = min((pp_size - pp_rank - 1) * 2 + (v - 1) * pp_size, total) forwards, or all
 *   of them when microbatches == pp_size; then one forward and one backward each until
 *   the forwards run out; then the remaining backwards.
 * Transfers are Megatron's (send_forward_recv_forward, send_backward_recv_backward,
 * send_forward_backward_recv_forward_backward), each batch in the exchange of the step
 * that follows it; a final EXCHANGE_ONLY step carries the last batch. The lists of all
 * stages together form a deadlock-free exchange on a ring of pp_size stages, sends and
 * receives matching in order (checked by simulation for pp_size 2-5 and 8, v 1-4 and 6,
 * microbatches 1-4 times pp_size, and run for real: ParallelPpInterleaved tests).
 * Needs pp_size >= 2, 0 <= pp_rank < pp_size, virtual_stages >= 1, microbatches >= 1 and a
 * multiple of pp_size (Megatron's requirement: micro-batches run in groups of pp_size);
 * otherwise COLLX_ERR_INVALID_ARG naming the value, message in collx_last_error(NULL).
 * Written to `steps` when cap allows (at most cap), *n set always. Pure, local,
 * thread-safe; the arrays are the caller's. */
COLLX_API collx_status_t collx_pp_schedule_interleaved(int32_t pp_size, int32_t pp_rank, int32_t virtual_stages,
                                                       int32_t microbatches, collx_pp_step_t* steps, size_t cap,
                                                       size_t* n);

/* collx_pp_exchange on a ring: stage pp-1's next is stage 0, stage 0's previous is stage
 * pp-1 (pp_comm of size >= 2). Activations (send_next/recv_prev) travel with tag 2*tag and
 * gradients (send_prev/recv_next) with 2*tag+1, so with pp = 2, where the next and the
 * previous stage are one rank, the two streams cannot be confused; do not use those tags
 * for other point to point on pp_comm. 0 <= tag < 2^30. Otherwise as collx_pp_exchange
 * (posts everything, then waits, ends by timeout_ms; buffers are the caller's and must
 * stay valid until the transfers complete or pp_comm is destroyed). */
COLLX_API collx_status_t collx_pp_exchange_ring(const void* send_next, void* recv_prev, const void* send_prev,
                                                void* recv_next, size_t count, collx_datatype_t datatype, int32_t tag,
                                                collx_comm_t pp_comm, int64_t timeout_ms);

/* A communicator of chosen pipeline stages inside this rank's PP group, e.g. {0, pp-1}
 * for the all-reduce of a word embedding tied between the first and the last stage
 * (Megatron's embedding group). Collective over the grid's world communicator: every rank
 * calls it with the same stages. A rank whose stage is not listed gets *comm = NULL. The
 * new communicator is owned by the caller (collx_comm_destroy), ordered by stage, and
 * independent of the grid. stages: n distinct values in [0, pp); otherwise
 * COLLX_ERR_INVALID_ARG on the calling rank only, before any communication, in
 * collx_grid_last_error(grid). */
COLLX_API collx_status_t collx_grid_stage_comm(collx_grid_t grid, const int32_t* stages, size_t n,
                                               collx_comm_t* comm);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* COLLX_PARALLEL_PP_H_ */
