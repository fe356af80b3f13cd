/* collx parallel layer: pipeline parallelism — the batched neighbour exchange and the
 * 1F1B (one-forward-one-backward) schedule of Megatron-Core, non-interleaved.
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
 * can wait for each other forever. Errors: collx_parallel_last_error(). */
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
COLLX_API collx_status_t collx_pp_exchange(collx_comm_t pp_comm, const void* send_next, void* recv_prev,
                                           const void* send_prev, void* recv_next, size_t count,
                                           collx_datatype_t datatype, int32_t tag, int64_t timeout_ms);

typedef enum collx_pp_kind {
  COLLX_PP_FORWARD = 0,
  COLLX_PP_BACKWARD = 1
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
