/* collx parallel layer: mixed-precision helpers — the dynamic loss scaler, the collective
 * overflow flag, the global gradient norm counting each element once, and the clip
 * coefficient. Included by collx/parallel.h; do not include directly.
 *
 * A step with fp16 gradients (DeepSpeed / Megatron order):
 *   collx_found_nonfinite(shard or buffer, n, &inf);      local scan
 *   collx_flag_any(&inf, group);                          group: EVERY rank whose gradients
 *                                                         differ (the DP x TP x PP instance:
 *                                                         collx_grid_comm(grid, TP|CP|DP|PP))
 *   collx_scaler_update(scaler, inf, &skip);              same decision on every rank
 *   if (!skip) { collx_norm_sq_local(...); collx_global_norm(...); collx_clip_coef(...);
 *                multiply the gradients by coef / scale; step the optimizer }
 */
#ifndef COLLX_PARALLEL_MP_H_
#define COLLX_PARALLEL_MP_H_

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------
 * Dynamic loss scaler (DeepSpeed DynamicLossScaler / Megatron DynamicGradScaler)
 * ------------------------------------------------------------------------------------- */

typedef struct collx_scaler_s* collx_scaler_t;

typedef struct collx_scaler_config {
  size_t size;                    /* sizeof(collx_scaler_config_t) as compiled by the caller */
  double init_scale;              /* default 65536 (DeepSpeed 2^16; Megatron uses 2^32) */
  double growth;                  /* > 1; default 2 */
  double backoff;                 /* in (0, 1); default 0.5 */
  int64_t window;                 /* clean steps between growths, >= 1; default 1000 */
  int32_t hysteresis;             /* overflows tolerated before a backoff, >= 1; default 2 */
  int32_t consecutive_hysteresis; /* 1 = a clean step restores the hysteresis; default 0 */
  double min_scale;               /* > 0; default 1 */
  int32_t error_at_min;           /* 1 = an overflow at min_scale is an error (DeepSpeed's
                                     "Current loss scale already at minimum"); default 1 */
} collx_scaler_config_t;

/* The scaler's whole state, for checkpoints (collx_scaler_get_state / _set_state). */
typedef struct collx_scaler_state {
  size_t size;                 /* sizeof(collx_scaler_state_t) as compiled by the caller */
  double scale;
  int64_t iteration;           /* updates so far */
  int64_t last_overflow;       /* iteration of the last overflow; -1 = none */
  int32_t hysteresis_left;     /* overflows still tolerated before the next backoff */
} collx_scaler_state_t;

/* Fill *config with the defaults above and config->size = size. Local; thread-safe. */
COLLX_API collx_status_t collx_scaler_config_init(collx_scaler_config_t* config, size_t size);
/* A new scaler (config copied). COLLX_ERR_INVALID_ARG naming the bad field, message in
 * collx_last_error(NULL). Local. A scaler is used by one thread at a time. */
COLLX_API collx_status_t collx_scaler_create(const collx_scaler_config_t* config,
                                             collx_scaler_t* scaler);
/* Release it. NULL is ignored. */
COLLX_API collx_status_t collx_scaler_destroy(collx_scaler_t scaler);
/* The current loss scale: multiply the loss by it before backward. */
COLLX_API collx_status_t collx_scaler_scale(collx_scaler_t scaler, double* scale);
/* One step's update. found_inf must be the value agreed by collx_flag_any, so every rank
 * makes the same decision. *skip_step = 1 when the optimizer step must be skipped.
 * On overflow: the hysteresis counter drops, and once it is spent the scale is multiplied
 * by backoff (not below min_scale). Without: after `window` clean steps since the last
 * overflow the scale is multiplied by growth. An overflow with the scale already at
 * min_scale and error_at_min = 1: COLLX_ERR_INVALID_USAGE ("loss scale already at its
 * minimum"), state unchanged otherwise. Local. */
COLLX_API collx_status_t collx_scaler_update(collx_scaler_t scaler, int32_t found_inf,
                                             int32_t* skip_step);
COLLX_API collx_status_t collx_scaler_get_state(collx_scaler_t scaler, collx_scaler_state_t* state);
COLLX_API collx_status_t collx_scaler_set_state(collx_scaler_t scaler, const collx_scaler_state_t* state);
/* Message of the last failed call on `scaler` (NULL: collx_last_error(NULL)); "" when
 * none. */
COLLX_API const char* collx_scaler_last_error(collx_scaler_t scaler);

/* ---------------------------------------------------------------------------------------
 * Overflow flag, global norm, clipping
 * ------------------------------------------------------------------------------------- */

/* *found = 1 when one of the n float32 values is inf or NaN, else 0. When inv_scale is
 * not 1, the values are also multiplied by it (unscaled) in place, in the same pass.
 * Device values (collx/parallel_device.h): found may be device memory (queued on the
 * current parallel stream, nothing waits) or host memory (the call waits for the result).
 * Local; the buffer is the caller's. */
COLLX_API collx_status_t collx_found_nonfinite(float* values, size_t n, float inv_scale,
                                               int32_t* found);

/* *flag = 1 on every rank of `comm` when it was non-zero on any rank (all-reduce MAX of
 * one int32). A flag in device memory is read back on the thread's parallel stream (the
 * call waits) and the result written back to it. Use the union of every group whose ranks hold different gradients, or some
 * ranks skip a step the others take and the replicas diverge silently. Collective. */
COLLX_API collx_status_t collx_flag_any(int32_t* flag, collx_comm_t comm);

/* Sum of squares, accumulated in double, of the gradients in `buffer` laid out by
 * `layout`, counting each element of the model once:
 *  - only tensor data: alignment gaps and bucket padding are never counted;
 *  - owner_rank < 0: every tensor whole (gradients already all-reduced: do NOT sum the
 *    result over DP); owner_rank >= 0: only the part of each tensor that rank owns
 *    (collx_layout_tensor_shard; sharded gradients: sum the results over DP);
 *  - tensors flagged COLLX_TENSOR_TP_REPLICATED or COLLX_TENSOR_SP_NORM exist on every
 *    TP rank and count only when tp_rank == 0 (pass 0 without tensor parallelism);
 *    tensors flagged COLLX_TENSOR_SHARED count only when count_shared = 1 (tied weights:
 *    pass 1 on the one stage that owns the copy).
 * Local; reads `buffer` (float32, collx_layout_total elements). A device buffer
 * (collx/parallel_device.h) is summed on the device: sumsq in device memory is queued
 * only, in host memory the call waits; a GPU sums in another order than the host (relative
 * difference below 1e-12, docs/cuda.md). */
COLLX_API collx_status_t collx_norm_sq_local(collx_layout_t layout, const float* buffer,
                                             int32_t owner_rank, int32_t tp_rank,
                                             int32_t count_shared, double* sumsq);

/* *norm = sqrt(sum over the ranks of `comm` of local_sumsq) (all-reduce SUM of one
 * double). comm = NULL: no reduction. `comm` is the group over which the local parts
 * differ: TP (and PP) for replicated DP gradients, DP x TP x PP for sharded ones. A
 * non-finite result is returned as is (status COLLX_OK): treat it as an overflow.
 * Collective over comm. */
COLLX_API collx_status_t collx_global_norm(double local_sumsq, double* norm, collx_comm_t comm);

/* *coef = min(1, max_norm / (norm + 1e-6)) (Megatron and torch clip_grad_norm_); 1 when
 * max_norm <= 0 (clipping off). Multiply the gradients by coef (times 1/scale to unscale
 * in the same pass, as DeepSpeed's combined_scale). Local; pure. */
COLLX_API collx_status_t collx_clip_coef(double norm, double max_norm, double* coef);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* COLLX_PARALLEL_MP_H_ */
