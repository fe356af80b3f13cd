/* collx parallel layer: data-parallel gradient bucketing (DDP / Megatron DDP / Horovod
 * fusion). Included by collx/parallel.h; do not include directly.
 *
 * The reducer owns (or borrows) one flat float32 gradient buffer shaped by a finalized
 * layout. The engine writes or accumulates each tensor's gradient into its view
 * (collx_dp_grad_ptr), then marks it ready. A bucket whose tensors are all ready is
 * launched asynchronously (collx_iallreduce or collx_ireduce_scatter on the dp
 * communicator), strictly in bucket-index order, so every rank issues the same collectives
 * in the same order whatever order its gradients arrive in. collx_dp_finish waits.
 *
 * Step protocol (one accumulation window):
 *   collx_dp_zero(dp);                      zero the buffer (padding included)
 *   for each micro-step:
 *     collx_dp_set_sync(dp, last ? 1 : 0);  0 = no_sync: accumulate, do not communicate
 *     backward: write/add into views, collx_dp_mark_ready (or _mark_unused) per tensor
 *     collx_dp_finish(dp, timeout);         waits (sync) or only closes the micro-step
 *   optimizer reads the reduced (averaged) gradients from the views
 *
 * Threads: one thread at a time per reducer (the engine's backward thread); the collective
 * itself progresses on the communicator's progress thread. With a 16-bit comm_dtype the
 * reducer owns one more thread, which rounds, launches (still in bucket order) and writes
 * back the buckets, so marking stays cheap: between the first mark of a micro-step and
 * collx_dp_finish, do not call other collectives on dp_comm (that thread is using it). Messages:
 * collx_dp_last_error(dp), and collx_last_error(NULL) of the calling thread (the only place
 * for a failed collx_dp_create). */
#ifndef COLLX_PARALLEL_DP_H_
#define COLLX_PARALLEL_DP_H_

#ifdef __cplusplus
extern "C" {
#endif

typedef struct collx_dp_s* collx_dp_t;

/* What each bucket's collective leaves in the buffer. */
typedef enum collx_dp_mode {
  /* Every rank gets the whole reduced bucket (DDP, Megatron without distributed optimizer). */
  COLLX_DP_ALLREDUCE = 0,
  /* Rank r gets only its owner range of each bucket (collx_layout_owned); the rest of the
   * buffer holds unreduced data after finish. FLAT layouts only (ZeRO-2, Megatron's
   * distributed optimizer). */
  COLLX_DP_REDUCE_SCATTER = 1
} collx_dp_mode_t;

typedef struct collx_dp_config {
  size_t size;         /* sizeof(collx_dp_config_t) as compiled by the caller */
  int32_t mode;        /* collx_dp_mode_t; default COLLX_DP_ALLREDUCE */
  int32_t average;     /* 1 = the result is the mean over the dp ranks, 0 = the sum.
                          Default 1. */
  double predivide;    /* Where the 1/W of the mean is applied: gradients are multiplied by
                          1/predivide before the collective and by predivide/W after it
                          (average = 0: by predivide after). 0 = W: all before, as DDP and
                          Megatron (default); 1 = all after (DeepSpeed postscale); about
                          sqrt(W) keeps fp16 sums in range (FSDP). Must be >= 0. */
  int32_t comm_dtype;  /* collx_datatype_t on the wire: COLLX_FLOAT32 (default) or the
                          compression hook COLLX_BFLOAT16 / COLLX_FLOAT16: each bucket is
                          rounded into a staging buffer after the pre-divide, reduced in
                          that type, and written back into the float32 buffer before finish
                          returns (accumulation across micro-steps stays float32). Rounding
                          and write-back run on the reducer's own thread (host buffers) or
                          as kernels queued on config.stream (device buffers). */
  int32_t allow_unused; /* 1 = tensors never marked by finish count as unused (their view
                           is reduced as it is). 0 = finish fails on every rank, naming the
                           first rank and tensor never marked. Default 0. */
  int32_t check_marks; /* 1 = finish runs one small allgather over the dp communicator so
                          that a tensor never marked on ANY rank fails the step on EVERY
                          rank with the same message. 0 = only the rank that missed a mark
                          reports it. Default 1. */
  int64_t timeout_ms;  /* deadline of collx_dp_finish when its argument is < 0; default
                          60000 */
  /* Device buffers (fields added later: a caller compiled without them gets the defaults,
   * host buffers). */
  int32_t mem_kind;    /* collx_mem_kind_t of the gradient buffer: COLLX_MEM_HOST (default),
                          COLLX_MEM_CUDA (an owned buffer is allocated on the current device;
                          a borrowed one must be device memory), or COLLX_MEM_AUTO (detected
                          from grad_buffer; host when the reducer owns it). COLLX_MEM_CUDA
                          needs a CUDA build with a usable device (or the emulated test
                          device): else COLLX_ERR_UNSUPPORTED naming why. */
  int32_t grad_dtype;  /* collx_datatype_t of the gradient views the engine writes:
                          COLLX_FLOAT32 (default), or COLLX_BFLOAT16 / COLLX_FLOAT16 on device
                          buffers (host: COLLX_ERR_UNSUPPORTED): the views are then a separate
                          16-bit buffer (collx_dp_grad_view); when a bucket is launched (or
                          at a no_sync finish) its views are added into the float32 buffer
                          and zeroed, on the stream, so accumulation and the reduced result
                          (collx_dp_buffer) stay float32. */
  void* stream;        /* device buffers: the caller's cudaStream_t (NULL = the legacy default
                          stream). Zeroing, scaling and every bucket collective are ordered on
                          it: gradients written by work queued on it before a mark are what
                          the bucket reduces, and work queued on it after collx_dp_finish sees
                          the reduced result. Ignored for host buffers. */
} collx_dp_config_t;

/* Fill *config with the defaults above and config->size = size. Local; thread-safe. */
COLLX_API collx_status_t collx_dp_config_init(collx_dp_config_t* config, size_t size);

/* A reducer over `layout` (finalized; its dp_size must equal the size of `dp_comm`) on the
 * communicator `dp_comm` (e.g. collx_grid_comm(grid, COLLX_AXIS_DP | COLLX_AXIS_CP)).
 * Every tensor of the layout must be COLLX_FLOAT32 (the gradient buffer's type).
 * `grad_buffer`: NULL = the reducer allocates and owns a zeroed buffer of
 * collx_layout_total elements; otherwise it borrows the caller's float32 buffer of that
 * size, which must outlive the reducer. The reducer borrows `layout` and `dp_comm` too.
 * Local (no communication): call collx_layout_verify first to catch layouts that differ
 * across ranks. Errors: COLLX_ERR_INVALID_ARG naming the bad argument, message in
 * collx_last_error(NULL). */
COLLX_API collx_status_t collx_dp_create(collx_comm_t dp_comm, collx_layout_t layout,
                                         const collx_dp_config_t* config, void* grad_buffer,
                                         collx_dp_t* dp);

/* Wait for collectives still in flight (each ends by its own deadline), then release the
 * reducer and its owned buffers. NULL is ignored. */
COLLX_API collx_status_t collx_dp_destroy(collx_dp_t dp);

/* Device buffers (mem_kind COLLX_MEM_CUDA): the views and the buffer are device pointers;
 * host code must not touch them. Everything the reducer does to the buffer runs on the
 * device, ordered on config.stream: collx_dp_zero queues a memset; the pre-scale of a bucket
 * is a kernel queued when the bucket is launched (on the marking thread, which never waits
 * for the device), followed by the bucket's collective on the stream; collx_dp_finish waits
 * for the collectives as on host buffers (the staged and IPC routes return once their last
 * copy is queued on the stream; NCCL once the operation is queued), queues the post-scale
 * kernels and returns WITHOUT waiting for the stream: read the views with work queued on
 * config.stream (or after synchronizing it). A 16-bit comm_dtype rounds each bucket into a
 * device wire buffer (one 16-bit copy of the whole buffer) and widens the result back, both
 * kernels on the stream; no helper thread is started.
 *
 * The float32 view of tensor `tensor_id`'s gradient (numel elements at its layout offset)
 * and the whole buffer. Pointers stay valid for the reducer's life. The engine may write
 * a view until it marks the tensor ready, and read it after collx_dp_finish. Local. */
COLLX_API collx_status_t collx_dp_grad_ptr(collx_dp_t dp, uint64_t tensor_id, float** grad);
/* The view whatever config.grad_dtype is: *grad points at numel elements of *dtype (dtype may
 * be NULL). collx_dp_grad_ptr is for float32 views only (COLLX_ERR_INVALID_USAGE naming this
 * call otherwise). With 16-bit views, read the reduced float32 result from collx_dp_buffer. */
COLLX_API collx_status_t collx_dp_grad_view(collx_dp_t dp, uint64_t tensor_id, void** grad, int32_t* dtype);
COLLX_API collx_status_t collx_dp_buffer(collx_dp_t dp, float** buffer, size_t* count);

/* 0 = no_sync: the next micro-steps only accumulate (marks are still checked, nothing is
 * communicated); 1 = the next micro-step reduces. Default 1. COLLX_ERR_INVALID_USAGE
 * inside a micro-step (after a mark, before finish). Local. */
COLLX_API collx_status_t collx_dp_set_sync(collx_dp_t dp, int32_t enabled);

/* "This gradient is final for this micro-step." When the bucket holding it has every
 * tensor ready and every earlier bucket was launched, that bucket and every following
 * complete bucket are launched (asynchronous; do not touch their views until finish).
 * Marking the same tensor twice in one micro-step: COLLX_ERR_INVALID_USAGE naming it (the
 * micro-step goes on; the second mark is ignored). A failed launch returns the
 * communicator's status with collx_last_error(dp_comm) in the message (16-bit comm_dtype:
 * the launch happens on the reducer's thread, and collx_dp_finish reports it). */
COLLX_API collx_status_t collx_dp_mark_ready(collx_dp_t dp, uint64_t tensor_id);

/* The tensor took no part in this micro-step: mark it ready without touching its view
 * (which holds zero after collx_dp_zero, or what earlier micro-steps accumulated). The
 * `find_unused_parameters` of DDP. Same rules as collx_dp_mark_ready. */
COLLX_API collx_status_t collx_dp_mark_unused(collx_dp_t dp, uint64_t tensor_id);

/* End the micro-step. With sync on: launch the buckets not launched yet (tensors never
 * marked: an error unless allow_unused), wait for every bucket until timeout_ms (< 0:
 * config.timeout_ms), write compressed results back into the float32 buffer, apply the
 * post-scale, then (check_marks) agree over dp_comm on whether every rank marked every
 * tensor. With sync off: only checks and resets the marks. Returns COLLX_ERR_TIMEOUT (or
 * the communicator's error) naming the bucket that did not finish; COLLX_ERR_INVALID_USAGE
 * naming the first rank and tensor never marked. Collective over dp_comm when sync is on. */
COLLX_API collx_status_t collx_dp_finish(collx_dp_t dp, int64_t timeout_ms);

/* Zero the whole buffer, padding included (start of an accumulation window).
 * COLLX_ERR_INVALID_USAGE while a bucket is in flight or inside a micro-step. Local. */
COLLX_API collx_status_t collx_dp_zero(collx_dp_t dp);

/* Debug and timeline aid: bucket b's tensors still to be marked in this micro-step, and
 * whether it was launched. Local. */
COLLX_API collx_status_t collx_dp_bucket_state(collx_dp_t dp, size_t bucket, size_t* pending,
                                               int32_t* launched);

/* Message of the last failed call on `dp` (NULL: collx_last_error(NULL)); "" when none.
 * Valid until the next failed call on the same handle. */
COLLX_API const char* collx_dp_last_error(collx_dp_t dp);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* COLLX_PARALLEL_DP_H_ */
