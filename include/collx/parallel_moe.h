/* collx parallel layer: mixture-of-experts token dispatch and combine over the expert-
 * parallel communicator (Megatron-Core's all-to-all token dispatcher, on raw host buffers).
 * Included by collx/parallel.h; do not include directly. Guide: docs/parallel-moe.md.
 *
 * Layout. ep_comm = collx_grid_comm(grid, COLLX_AXIS_EP), size EP, holds num_experts = E
 * experts, E a multiple of EP: EP rank r holds the L = E / EP local experts
 * [r*L, (r+1)*L). Every rank routes its own tokens: token t chose top_k experts
 * topk_idx[t*top_k + j] (j = 0..top_k-1) with gate weights gates[t*top_k + j]; each
 * (token, slot) pair is a "copy" sent to its expert's rank.
 *
 * Step protocol (one MoE layer, forward and backward), all collective over ep_comm:
 *   collx_moe_plan_create(ep_comm, &cfg, topk_idx, T, &plan);  counts, exchanged once
 *   collx_moe_plan_recv(plan, &R, expert_counts);              R rows arrive, per expert
 *   collx_moe_dispatch(plan, x, NULL, expert_in, H, dtype);    x [T*H] -> expert_in [R*H]
 *   ... run local expert e on its expert_counts[e] consecutive rows of expert_in ...
 *   collx_moe_combine(plan, expert_out, gates, y, copies, H, dtype);  -> y [T*H]
 *   backward: dL/dexpert_out = collx_moe_dispatch(plan, dL/dy, gates, ...)
 *             dL/dgate[t*k+j] = <dL/dy[t], copies[t*k+j]>        (the caller's dot products)
 *             dL/dx           = collx_moe_combine(plan, dL/dexpert_in, NULL, ...)
 *   collx_moe_plan_destroy(plan);
 * With the same weights, dispatch and combine are adjoint linear maps (one is the other's
 * backward). The plan is reusable for any number of dispatch/combine calls and any hidden
 * size while the routing stays the same.
 *
 * Row order of expert_in / expert_out (R rows): grouped by local expert (expert r*L first),
 * within an expert by source EP rank, within a source by token index, then slot j
 * (Megatron's sort_chunks_by_idxs). Nothing is dropped: there is no capacity, R is
 * exactly the number of copies routed to this rank (it may be 0; experts may get 0 rows).
 *
 * Datatypes: COLLX_FLOAT32 or COLLX_FLOAT64 rows of `hidden` elements; gate weights and
 * scales are float (float32) whatever the row type. hidden and the datatype must be the
 * same on every EP rank (a difference fails the all-to-allv with COLLX_ERR_MISMATCH). Data moves with collx_alltoallv on
 * ep_comm, the counts with collx_allgather and collx_alltoall.
 *
 * Errors: every call returns collx_status_t; the message is in collx_moe_last_error(plan)
 * and in collx_last_error(NULL) of the calling thread (the only place for a failed
 * collx_moe_plan_create). Routing that is
 * invalid on any rank (an expert id outside [0, E)) or configs that differ between ranks
 * fail collx_moe_plan_create on EVERY rank (COLLX_ERR_INVALID_ARG / COLLX_ERR_MISMATCH)
 * naming the rank, so no rank is left waiting. Threads: a plan is used by one thread at a
 * time, and calls on it are collectives on ep_comm (the one-thread-at-a-time rule of
 * collx.h applies to ep_comm). */
#ifndef COLLX_PARALLEL_MOE_H_
#define COLLX_PARALLEL_MOE_H_

#ifdef __cplusplus
extern "C" {
#endif

typedef struct collx_moe_plan_s* collx_moe_plan_t;

typedef struct collx_moe_config {
  size_t size;          /* sizeof(collx_moe_config_t) as compiled by the caller */
  int32_t num_experts;  /* E >= 1, a multiple of the size of ep_comm (no default: init sets 0) */
  int32_t top_k;        /* experts per token, 1 <= top_k <= E (default 1) */
  int64_t timeout_ms;   /* deadline of each collective of the plan; -1 = the communicator's
                           timeout (default -1) */
} collx_moe_config_t;

/* Fill *config with the defaults above and config->size = size. Local; thread-safe. */
COLLX_API collx_status_t collx_moe_config_init(collx_moe_config_t* config, size_t size);

/* The routing plan of one batch. Collective over ep_comm (every rank calls it with the same
 * config; num_tokens may differ between ranks and be 0): an allgather of the configs, then
 * an all-to-all of the per-expert copy counts. topk_idx holds num_tokens * top_k expert ids
 * in [0, E) (a token may name the same expert twice: two copies); it is copied, the caller
 * keeps ownership. The plan borrows ep_comm, which must outlive it. */
COLLX_API collx_status_t collx_moe_plan_create(collx_comm_t ep_comm, const collx_moe_config_t* config,
                                               const int32_t* topk_idx, size_t num_tokens,
                                               collx_moe_plan_t* plan);

/* Release the plan. Local; NULL is ignored. */
COLLX_API collx_status_t collx_moe_plan_destroy(collx_moe_plan_t plan);

/* Rows this rank receives (*num_recv = R, may be NULL) and, when expert_counts is not NULL,
 * the rows of each local expert (L = E / EP entries, in local expert order; they sum to R).
 * Local; no communication. */
COLLX_API collx_status_t collx_moe_plan_recv(collx_moe_plan_t plan, size_t* num_recv, size_t* expert_counts);

/* Rows this rank sends to each EP rank (send_counts[EP], may be NULL) and receives from each
 * (recv_counts[EP], may be NULL): the split sizes of the all-to-all. Local. */
COLLX_API collx_status_t collx_moe_plan_splits(collx_moe_plan_t plan, size_t* send_counts, size_t* recv_counts);

/* Dispatch: copy (t, j) of tokens[t] (row of `hidden` elements), multiplied by
 * scale[t*top_k + j] when scale is not NULL, becomes a row of expert_in (R * hidden
 * elements, order above). tokens is read, expert_in written; they must not overlap. NULL
 * buffers are allowed only where their size is 0. Collective over ep_comm (all-to-allv). */
COLLX_API collx_status_t collx_moe_dispatch(collx_moe_plan_t plan, const void* tokens, const float* scale,
                                            void* expert_in, size_t hidden, collx_datatype_t datatype);

/* Combine: row i of expert_out (R * hidden elements, order above) goes back to the copy
 * (t, j) it came from; out[t] = sum over j = 0..top_k-1 (in that order) of
 * weights[t*top_k + j] * copy (t, j) (weights NULL: weight 1). copies, when not NULL,
 * receives every copy unweighted (num_tokens * top_k * hidden elements, copy (t, j) at
 * row t*top_k + j), for the gate gradient. out and copies are written, expert_out read;
 * no overlap. Collective over ep_comm (all-to-allv). */
COLLX_API collx_status_t collx_moe_combine(collx_moe_plan_t plan, const void* expert_out, const float* weights,
                                           void* out, void* copies, size_t hidden, collx_datatype_t datatype);

/* Message of the last failed call on `plan` ("" when none); plan == NULL:
 * collx_last_error(NULL). Valid until the next failed call on the same plan. */
COLLX_API const char* collx_moe_last_error(collx_moe_plan_t plan);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* COLLX_PARALLEL_MOE_H_ */
