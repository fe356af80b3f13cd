/* collx parallel layer: CUDA device buffers in the handle-less calls. Included by
 * collx/parallel.h; do not include directly.
 *
 * The tp/sp ops, the vocab-parallel cross-entropy, collx_found_nonfinite,
 * collx_norm_sq_local, the pipeline exchanges and the context-parallel ring accept device
 * buffers as well as host ones (the memory kind is detected per call, as for collectives;
 * every buffer of one call must be of one kind, and every rank must pass the same kind).
 * On device buffers their work is queued on the calling thread's current parallel stream
 * (below), like work on torch.cuda.current_stream(): later work on that stream sees the
 * results. What runs on the device, what stages through pinned host memory and which calls
 * wait on the host is listed in docs/cuda.md, "parallel/ on device buffers". */
#ifndef COLLX_PARALLEL_DEVICE_H_
#define COLLX_PARALLEL_DEVICE_H_

#ifdef __cplusplus
extern "C" {
#endif

/* Sets the calling thread's current parallel stream (a cudaStream_t; NULL, the default:
 * the legacy default stream). Thread-local: each thread that calls parallel ops on device
 * buffers sets its own. The stream must stay valid while calls use it. Never fails. */
COLLX_API collx_status_t collx_parallel_set_stream(void* stream);
/* *stream = the calling thread's current parallel stream. COLLX_ERR_INVALID_ARG when
 * stream is NULL. */
COLLX_API collx_status_t collx_parallel_get_stream(void** stream);

#ifdef __cplusplus
}
#endif

#endif /* COLLX_PARALLEL_DEVICE_H_ */
