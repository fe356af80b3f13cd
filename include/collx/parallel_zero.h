/* collx parallel layer: ZeRO stages 1, 2 and 3 (DeepSpeed ZeRO, Megatron's distributed
 * optimizer, FSDP full-shard). Included by collx/parallel.h; do not include directly.
 *
 * Each dp rank owns a shard of the model: the float32 master copy of its share of the
 * parameters, the reduced gradients of that share, and the optimizer state (built-in SGD
 * or AdamW, or the engine's own optimizer on collx_zero_shard).
 *  - stage 0 (COLLX_PART_FLAT layout): no sharding, DDP with the built-in optimizer: every
 *    rank keeps everything; gradients are all-reduced at the accumulation boundary;
 *  - stage 1 (COLLX_PART_FLAT layout): full parameters and a full bucketed gradient
 *    buffer; gradients accumulate locally and are reduce-scattered into the shard at the
 *    accumulation boundary only;
 *  - stage 2 (FLAT): full parameters, but no full gradient buffer: a bucket gets a slot
 *    from a small pool while it is filled, is reduce-scattered as soon as its tensors are
 *    marked (every micro-step; no_sync does not exist here), its owned range is added into
 *    the float32 gradient shard and the slot is reused;
 *  - stage 3 (COLLX_PART_PER_TENSOR layout): only shards are kept; full tensors are
 *    gathered on demand (collx_zero3_fetch / _prefetch / _release) under a live-element
 *    limit, ahead of use by a prefetch plan recorded on the first step (prefetch_depth),
 *    tensors of at most persist_elems elements stay gathered; each full gradient
 *    is reduce-scattered into the shard with collx_zero3_reduce_grad.
 * A step: gradients in; collx_zero_finish_grads; (norm, clip, overflow: collx_zero_grad_
 * norm_sq and parallel_mp.h); collx_zero_step; collx_zero_publish (all-gather of the
 * updated parameters).
 *
 * One thread at a time per handle. Messages: collx_zero_last_error(z), and
 * collx_last_error(NULL) of the calling thread (the only place for a failed
 * collx_zero_create). Every collective call is collective over dp_comm. */
#ifndef COLLX_PARALLEL_ZERO_H_
#define COLLX_PARALLEL_ZERO_H_

#ifdef __cplusplus
extern "C" {
#endif

typedef struct collx_zero_s* collx_zero_t;

typedef enum collx_optimizer {
  COLLX_OPT_NONE = 0,  /* the engine updates collx_zero_shard itself */
  COLLX_OPT_SGD = 1,   /* torch.optim.SGD: g += wd*p; buf = momentum*buf + g; p -= lr*buf */
  COLLX_OPT_ADAMW = 2  /* torch.optim.AdamW (decoupled weight decay, bias correction) */
} collx_optimizer_t;

typedef struct collx_zero_config {
  size_t size;            /* sizeof(collx_zero_config_t) as compiled by the caller */
  int32_t stage;          /* 0 (DDP), 1, 2 or 3 (no default: init sets -1) */
  int32_t comm_dtype;     /* gradient wire type: COLLX_FLOAT32 (default), COLLX_BFLOAT16 or
                             COLLX_FLOAT16 (accumulation stays float32); stages 1 and 2 */
  int32_t optimizer;      /* collx_optimizer_t; default COLLX_OPT_ADAMW */
  double lr;              /* default 1e-3 */
  double beta1, beta2;    /* AdamW; default 0.9, 0.999 */
  double eps;             /* AdamW; default 1e-8 */
  double weight_decay;    /* default 0 */
  double momentum;        /* SGD; default 0 */
  size_t max_live_elems;  /* stage 3: gathered elements allowed at once; 0 = no limit */
  size_t persist_elems;   /* stage 3: tensors with numel <= this stay gathered; default 0 */
  int64_t timeout_ms;     /* deadline of the waits; default 60000 */
  /* Stage 3 prefetch plan (fields added later: a caller compiled without them gets the
   * defaults). The fetch order of the first step is recorded; on later steps each
   * collx_zero3_fetch also starts the gathers of the next prefetch_depth tensors of that
   * order. 0 = no plan. 0..1024; default 2. */
  int32_t prefetch_depth;
  /* Stage 3: bytes (float32, padded) of plan prefetches gathered or in flight but not
   * fetched yet, at most; 0 = no budget but max_live_elems. Default 64 MiB. */
  size_t prefetch_bytes;
  /* Stage 2: 1 = reduce each bucket in a fixed order that does not depend on the dp size:
   * an all-to-all of the owned ranges, then the owner adds the W contributions as a
   * pairwise tree in rank order ((r0 + r1) + (r2 + r3)) and divides by W after the sum.
   * A run at dp W/2 whose ranks each hold the sum of two dp-W ranks' gradients then
   * reduces bit-identically (exact resume across dp sizes; W a power of two). Costs one
   * more bucket of memory per slot in flight. 0 (default) = collx_ireduce_scatter. */
  int32_t deterministic;
  /* Device buffers (fields added later: a caller compiled without them gets the defaults,
   * host buffers; docs/parallel-zero.md "Device buffers"). */
  int32_t mem_kind;    /* COLLX_MEM_HOST (default) or COLLX_MEM_CUDA, every stage: the full
                          parameter view and the gradient buffer (stages 0, 1), the bucket
                          slots (stage 2) or the gathered tensors (stage 3) are device memory
                          on the current device (collx_zero_param_ptr / _grad_ptr return
                          device pointers; collx_zero3_reduce_grad takes one). Needs a CUDA
                          build with a usable device (or the emulated test device): else
                          COLLX_ERR_UNSUPPORTED naming why. With offload = 0 the master
                          shard, gradient shard and optimizer state are device memory too
                          (collx_zero_shard and collx_zero_state_shard return device
                          pointers; the step runs device kernels; the checkpoint calls go
                          through a host copy of the shard and wait for the stream).
                          docs/parallel-zero.md "Device buffers". */
  int32_t offload;     /* 1 = ZeRO-Offload (device buffers only): the float32 master shard,
                          the gradient shard and the optimizer state stay in host memory and
                          collx_zero_step runs the host optimizer; finish_grads copies the
                          reduced gradient shard device -> host and waits for the stream
                          (stage 3: collx_zero3_reduce_grad does), publish copies the updated shard
                          host -> device before the device all-gather. Default 0. */
  int32_t param_dtype; /* collx_datatype_t of the parameter view: COLLX_FLOAT32 (default),
                          or COLLX_BFLOAT16 / COLLX_FLOAT16 with device buffers: the master
                          stays float32, publish (stage 3: each gather) rounds it to nearest
                          even and all-gathers the 16-bit parameters; read the view with
                          collx_zero_param_view. Host buffers: COLLX_ERR_UNSUPPORTED. */
  int32_t grad_dtype;  /* collx_datatype_t of the gradient views: COLLX_FLOAT32 (default),
                          or COLLX_BFLOAT16 / COLLX_FLOAT16 with device buffers
                          (collx_zero_grad_view, collx_zero3_reduce_grad_view; accumulation
                          stays float32: the views are widened into float32 when their bucket
                          is launched). Host buffers: COLLX_ERR_UNSUPPORTED. */
  void* stream;        /* device buffers: the caller's cudaStream_t (NULL = the legacy default
                          stream); every device operation of the handle is ordered on it. */
} collx_zero_config_t;

/* One owned piece of one tensor, padding excluded: elements [tensor_offset,
 * tensor_offset + count) of tensor `tensor_id` are at shard_offset in this rank's shard.
 * A checkpoint stores these with the shards; a run at another dp size feeds the pieces
 * back through collx_zero_load. */
typedef struct collx_zero_piece {
  uint64_t tensor_id;
  size_t tensor_offset;
  size_t shard_offset;
  size_t count;
} collx_zero_piece_t;

COLLX_API collx_status_t collx_zero_config_init(collx_zero_config_t* config, size_t size);

/* A ZeRO handle over `layout` (finalized, dp_size = size of dp_comm, float32 tensors;
 * FLAT for stages 0, 1 and 2, PER_TENSOR for stage 3). Borrows layout and dp_comm; owns every
 * buffer. Parameters start at zero: load them with collx_zero_load, then publish. Local. */
COLLX_API collx_status_t collx_zero_create(collx_comm_t dp_comm, collx_layout_t layout,
                                           const collx_zero_config_t* config, collx_zero_t* z);
/* Waits for gathers in flight, then frees everything. NULL is ignored. */
COLLX_API collx_status_t collx_zero_destroy(collx_zero_t z);

/* Write elements [tensor_offset, tensor_offset + count) of a tensor's parameters: this
 * rank keeps the part it owns in its master shard (stages 1, 2: the full parameter view
 * too). Initial weights (offset 0, whole tensor, same values on every rank) or the pieces
 * of a checkpoint saved at any dp size. Call collx_zero_publish afterwards. Local. */
COLLX_API collx_status_t collx_zero_load(collx_zero_t z, uint64_t tensor_id, size_t tensor_offset,
                                         size_t count, const float* values);

/* The full parameter view of a tensor (numel float32). Stages 1, 2: always valid, current
 * after publish. Stage 3: valid from collx_zero3_fetch until collx_zero3_release;
 * otherwise COLLX_ERR_INVALID_USAGE naming the tensor. Local. */
COLLX_API collx_status_t collx_zero_param_ptr(collx_zero_t z, uint64_t tensor_id, float** param);
/* The same view whatever config.param_dtype is: *param points at numel elements of *dtype
 * (dtype may be NULL). collx_zero_param_ptr is for float32 parameters only
 * (COLLX_ERR_INVALID_USAGE naming this call otherwise). Device buffers: a device pointer. */
COLLX_API collx_status_t collx_zero_param_view(collx_zero_t z, uint64_t tensor_id, void** param, int32_t* dtype);

/* This rank's shard: master parameters and reduced gradients (float32, count elements
 * each, padding included and kept at zero). For COLLX_OPT_NONE the engine updates master
 * from grad, then zeroes grad. Local. */
COLLX_API collx_status_t collx_zero_shard(collx_zero_t z, float** master, float** grad, size_t* count);
/* The owned pieces (padding excluded), in layout order: *n pieces written when cap
 * allows; *n is always the number needed. Local. */
COLLX_API collx_status_t collx_zero_pieces(collx_zero_t z, collx_zero_piece_t* pieces, size_t cap,
                                           size_t* n);

/* Stages 0, 1, 2: the gradient view of a tensor, and its mark (as collx_dp_grad_ptr /
 * collx_dp_mark_ready; marking twice is an error). Stages 0, 1: the view is in the full
 * bucketed buffer and stays valid. Stage 2: the view is in its bucket's slot, zeroed when
 * the bucket's first view or mark of the micro-step takes the slot, and valid until the
 * tensor is marked (after it: COLLX_ERR_INVALID_USAGE). Write (or add) the micro-step's
 * gradient, then mark; accumulation over micro-steps happens in the shard. Mark in bucket
 * order (the layout's order should follow backward's) to keep few slots: a bucket waits,
 * holding its slot, for every earlier bucket to be launched. At most 2 reduce-scatters are
 * in flight; a slot needed beyond that waits (config.timeout_ms) for the oldest:
 * COLLX_ERR_TIMEOUT at the deadline (grad_ptr: no view, call again; mark_ready: the mark
 * counts, the bucket is launched by the next mark or collx_zero_finish_grads). */
COLLX_API collx_status_t collx_zero_grad_ptr(collx_zero_t z, uint64_t tensor_id, float** grad);
/* The same view whatever config.grad_dtype is (*dtype; may be NULL); collx_zero_grad_ptr is
 * for float32 views only (COLLX_ERR_INVALID_USAGE naming this call otherwise). */
COLLX_API collx_status_t collx_zero_grad_view(collx_zero_t z, uint64_t tensor_id, void** grad, int32_t* dtype);
COLLX_API collx_status_t collx_zero_mark_ready(collx_zero_t z, uint64_t tensor_id);
/* 1 = the current micro-step is the last of the accumulation window. Stage 1 reduces
 * only then; stages 2 and 3 reduce every micro-step. Default 1. Local. */
COLLX_API collx_status_t collx_zero_set_boundary(collx_zero_t z, int32_t is_last_microbatch);
/* Stages 0, 1, 2: end the micro-step: launch what is left, wait for the reductions and
 * add the owned ranges (averaged over dp) into the gradient shard. A tensor never marked
 * is reported (COLLX_ERR_INVALID_USAGE naming the first rank and tensor) on every rank.
 * Stage 3: no-op. */
COLLX_API collx_status_t collx_zero_finish_grads(collx_zero_t z, int64_t timeout_ms);

/* Stage 3: reduce-scatter the full gradient of a tensor (numel float32, read only) and add
 * this rank's averaged chunk into the gradient shard. Blocking; collective. */
COLLX_API collx_status_t collx_zero3_reduce_grad(collx_zero_t z, uint64_t tensor_id,
                                                 const float* full_grad);
/* The same for any config.grad_dtype: full_grad holds numel elements of it (device memory
 * with device buffers). collx_zero3_reduce_grad is for float32 gradients only. */
COLLX_API collx_status_t collx_zero3_reduce_grad_view(collx_zero_t z, uint64_t tensor_id, const void* full_grad);
/* Stage 3 gather on demand. The ids are sorted internally, so every rank issues the same
 * gathers whatever order it lists them in (the ranks must list the same set).
 * prefetch: launch one coalesced all-gather for the ids not gathered yet, unless that
 * would pass max_live_elems (then it does nothing). fetch: the same (first dropping unused
 * plan prefetches if room is needed), then the plan's prefetch (collx_zero3_plan_stats),
 * then wait for the requested ids only; exceeding max_live_elems is
 * COLLX_ERR_INVALID_USAGE naming the numbers. release: drop the full copies (persistent
 * tensors stay). Collective (fetch, prefetch); release is local. */
COLLX_API collx_status_t collx_zero3_prefetch(collx_zero_t z, const uint64_t* ids, size_t n);
COLLX_API collx_status_t collx_zero3_fetch(collx_zero_t z, const uint64_t* ids, size_t n);
COLLX_API collx_status_t collx_zero3_release(collx_zero_t z, const uint64_t* ids, size_t n);
/* Stage 3: elements gathered now (persistent included), and the peak since creation. */
COLLX_API collx_status_t collx_zero3_live(collx_zero_t z, size_t* live, size_t* peak);

/* Stage 3 prefetch plan (DeepSpeed's trace). From creation, or from collx_zero3_plan_record,
 * the ids of every collx_zero3_fetch are recorded (each call's ids sorted) until the next
 * collx_zero_publish, which ends the step: from then on each fetch that follows the
 * recorded order also launches one coalesced all-gather of the next prefetch_depth tensors
 * of the order not gathered yet, within prefetch_bytes and max_live_elems. A prefetch that
 * does not fit is put off to a later fetch (after releases made room), never waited for.
 * A fetch out of the recorded order, or a step that ends before the order does, drops the
 * plan and records again. A fetch that needs room drops unused plan prefetches first; so
 * does publish. The plan depends only on the fetch and release calls, so the ranks must
 * make the same ones (as fetch already needs). */
typedef struct collx_zero3_plan_stats {
  size_t size;         /* sizeof(collx_zero3_plan_stats_t), set by the caller */
  int32_t state;       /* 0 = no plan (prefetch_depth 0), 1 = recording, 2 = in use */
  size_t length;       /* ids in the recorded order */
  uint64_t hits;       /* fetched ids a plan prefetch had already gathered or started */
  uint64_t misses;     /* fetched ids gathered by the fetch itself while the plan was in use */
  uint64_t prefetched; /* ids gathered by plan prefetches */
  uint64_t deferred;   /* prefetches put off: max_live_elems or prefetch_bytes was reached */
  uint64_t evicted;    /* plan prefetches dropped unused (room needed, or the step ended) */
  uint64_t rerecords;  /* plans dropped by a fetch out of order or a step ending early */
} collx_zero3_plan_stats_t;

/* Counters since creation. stats->size must be at least sizeof(collx_zero3_plan_stats_t)
 * (COLLX_ERR_INVALID_ARG otherwise). Local. */
COLLX_API collx_status_t collx_zero3_plan_stats(collx_zero_t z, collx_zero3_plan_stats_t* stats);
/* Drop the plan (and unused plan prefetches, waiting for their gathers) and record again
 * from the next fetch, e.g. when the model's use changes. Call it on every rank at the
 * same point. Stage 3 with prefetch_depth > 0; local. */
COLLX_API collx_status_t collx_zero3_plan_record(collx_zero_t z);

/* Sum of squares (double) of the shard gradients, data only, with the counting rules of
 * collx_norm_sq_local (tp_rank, count_shared); sum it over DP x TP x PP with
 * collx_global_norm. Local. */
COLLX_API collx_status_t collx_zero_grad_norm_sq(collx_zero_t z, int32_t tp_rank, int32_t count_shared,
                                                 double* sumsq);

/* Built-in optimizer step on the shard: gradients multiplied by grad_scale first (clip
 * coefficient / loss scale; 1 = none), then SGD or AdamW, then the gradient shard is
 * zeroed. COLLX_OPT_NONE: COLLX_ERR_INVALID_USAGE. Local. */
COLLX_API collx_status_t collx_zero_step(collx_zero_t z, double grad_scale);

/* Make the parameters current on every rank: stages 1, 2: copy the master shard into the
 * owned slice of the parameters and all-gather each bucket; stage 3: re-gather the
 * persistent tensors (other tensors must be released first: COLLX_ERR_INVALID_USAGE); it
 * also ends the step of the prefetch plan. Collective. On COLLX_ERR_TIMEOUT (stages 1, 2)
 * the all-gathers still running go on in the background, into the parameters: keep z
 * until a later blocking collective on dp_comm has returned. */
COLLX_API collx_status_t collx_zero_publish(collx_zero_t z);

/* Consolidate the full float32 master of one tensor into out (numel elements) on every
 * rank, for checkpoint export. Collective. */
COLLX_API collx_status_t collx_zero_full_tensor(collx_zero_t z, uint64_t tensor_id, float* out);

/* Exact resume. The optimizer state is per element, sharded like the master: read a
 * rank's shard of each kind with collx_zero_state_shard (aligned with collx_zero_pieces)
 * and save it with the pieces, or consolidate whole tensors with collx_zero_full_state.
 * A run at any dp size (any stage) writes every saved piece or whole tensor back with
 * collx_zero_load_state (COLLX_ZERO_MASTER is collx_zero_load), restores the step count
 * with collx_zero_set_step, then calls collx_zero_publish. The learning rate is not state:
 * the engine's schedule sets it with collx_zero_set_lr before each step. Kinds the
 * optimizer does not keep (SGD without momentum: EXP_AVG, SGD: EXP_AVG_SQ, NONE: both)
 * are COLLX_ERR_INVALID_ARG. */
typedef enum collx_zero_state_kind {
  COLLX_ZERO_MASTER = 0,     /* float32 master parameters */
  COLLX_ZERO_EXP_AVG = 1,    /* AdamW first moment m; SGD momentum buffer */
  COLLX_ZERO_EXP_AVG_SQ = 2  /* AdamW second moment v */
} collx_zero_state_kind_t;

/* This rank's shard of one kind (count elements, padding included; the handle owns it,
 * valid until destroy; write it only between steps). Local. */
COLLX_API collx_status_t collx_zero_state_shard(collx_zero_t z, int32_t kind, float** data, size_t* count);
/* Elements [tensor_offset, tensor_offset + count) of one kind of a tensor: this rank keeps
 * what it owns (for COLLX_ZERO_MASTER, stages 0-2 also write the parameter view). Local. */
COLLX_API collx_status_t collx_zero_load_state(collx_zero_t z, int32_t kind, uint64_t tensor_id,
                                               size_t tensor_offset, size_t count, const float* values);
/* One kind of one tensor, whole (numel elements), into out on every rank. Collective. */
COLLX_API collx_status_t collx_zero_full_state(collx_zero_t z, int32_t kind, uint64_t tensor_id, float* out);
/* Optimizer steps taken (AdamW's bias correction t; SGD's first-step rule). Local. */
COLLX_API collx_status_t collx_zero_get_step(collx_zero_t z, int64_t* step);
COLLX_API collx_status_t collx_zero_set_step(collx_zero_t z, int64_t step);
/* The learning rate of the next collx_zero_step (finite, >= 0), e.g. from a schedule;
 * set the same value on every rank. Local. */
COLLX_API collx_status_t collx_zero_set_lr(collx_zero_t z, double lr);
COLLX_API collx_status_t collx_zero_get_lr(collx_zero_t z, double* lr);

/* Bytes of element buffers this handle has allocated (counted at allocation and free, so
 * the figures are what is held, not an estimate), now and at the high-water mark since
 * creation. params: the full parameter view (stages 0-2) or the gathered copies (stage 3);
 * grads: the float32 gradient shard plus the full bucketed buffer (stages 0, 1), the bucket
 * slots with their deterministic receive buffers (stage 2) or the padded copy made by
 * collx_zero3_reduce_grad (stage 3, transient); optimizer: the float32 master and the
 * moments; comm: wire copies (16-bit staging, stage 3 gather buffers). Bookkeeping (ids,
 * maps) is not counted, nor the engine's own buffers. */
typedef struct collx_zero_memory {
  size_t size; /* sizeof(collx_zero_memory_t), set by the caller */
  size_t params, grads, optimizer, comm, total;
  size_t peak_params, peak_grads, peak_optimizer, peak_comm, peak_total;
} collx_zero_memory_t;

/* Local. memory->size must be at least sizeof(collx_zero_memory_t). */
COLLX_API collx_status_t collx_zero_memory(collx_zero_t z, collx_zero_memory_t* memory);

/* Message of the last failed call on `z` (NULL: collx_last_error(NULL)); "" when none.
 * Valid until the next failed call on the same handle. */
COLLX_API const char* collx_zero_last_error(collx_zero_t z);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* COLLX_PARALLEL_ZERO_H_ */
